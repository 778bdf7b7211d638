/* internal.h - what the files of src/api share: the context, error recording, logging,
 * and the kernel store (memory -> SQLite -> NVRTC). Internal names are fj_*. */
#ifndef FJ_INTERNAL_H
#define FJ_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fajit.h"
#include "../cache/cache.h"
#include "../jit/jit.h"
#include "../kernels_src/fajit_params.h"
#include "../families/family.h"
#include "../families/params.h"

/* A loaded kernel, kept in the context's memory map for its whole life. */
typedef struct fj_kernel {
    fj_key key;
    CUmodule module;
    CUfunction fn;
    int regs, smem_static, spill_bytes, local_bytes;
    char warning[8];        /* first ptxas warning that means serialization ("C7510"), or "" */
    struct fj_kernel *next; /* hash chain */
} fj_kernel;

/* A configuration made ready to launch: its kernels (fj_family.kernels) loaded. */
typedef struct fj_kplan {
    fj_kcfg cfg;
    fj_kernels ks;
    fj_kernel *k[FJ_MAX_LAUNCHES];
    /* where ks.cluster[i] asks: fj_cluster_probe of k[i] (its largest size, and how many
     * clusters of each size run at once) */
    int cluster_max[FJ_MAX_LAUNCHES];
    int cluster_active[FJ_MAX_LAUNCHES][FJ_CLUSTER_MAX + 1];
    int cluster_smem[FJ_MAX_LAUNCHES];     /* the dynamic shared memory of a cluster launch */
} fj_kplan;

/* A launch plan for one problem signature (op, dtype, head_dim, mask, shape bucket).
 * The fast path of fajit_attn_fwd is one plan lookup and one atomic load. Under FALLBACK a
 * plan starts on `first` (a kernel that was at hand) and a background compile swaps
 * `launch` to `better` (the exact kernel) when it is ready. */
/* What a plan depends on: everything in the tuning signature and bucket, and what picks
 * the variant (reference or not, varlen and its totals). */
typedef struct fj_plan_key {
    uint64_t bits;                 /* ref, varlen, totals, dtype, mask, head_dim, bucket, op */
    int gqa, window_left, window_right;
    int page_size;                 /* 0 without a block table: tuned rows and the decode
                                      loader (TMA or cp.async) depend on it */
    int split_class, other;        /* the plan class (fj_family_plan_class): what the
                                      families' tiles and tuning rows depend on besides */
    int feat;                      /* the model features (fj_features), kv_dtype and
                                      head_dim_v: what the kernels compile in */
} fj_plan_key;

typedef struct fj_plan {
    fj_plan_key key;
    fj_kplan *_Atomic launch;
    fj_kplan first, better;
    int pending;            /* a background compile of `better` was started */
    struct fj_plan *next;
} fj_plan;

/* A family's verdict on the context's GPU class for one model-feature set, read from the
 * cache once (src/api/validate.c). */
enum { FJ_VS_NONE = 0, FJ_VS_PASS = 1, FJ_VS_FAIL = 2 };
typedef struct fj_verdict_slot {
    const fj_family *fam;
    unsigned fset;          /* the feature set (fj_feature_set) */
    int state;              /* FJ_VS_* */
    int warned;             /* the quarantine warning was logged */
    int lazy_tried;         /* LAZY: a first-use validation was attempted (or refused) */
    fj_verdict v;           /* FAIL: the case and the error */
} fj_verdict_slot;
#define FJ_MAX_VERDICTS 64

#define FJ_KMAP_BUCKETS 256
#define FJ_PLAN_BUCKETS 64
#define FJ_ERRMSG_LEN 2048

struct fajit_ctx {
    uint32_t magic;             /* FJ_CTX_MAGIC while alive (fj_ctx_live's second check) */
    fajit_ctx_opts opts;
    char *cache_dir;            /* resolved; NULL = memory only */
    const fj_cuda *cu;          /* NULL: no driver (FAJIT_DEVICE_NONE or none found) */
    CUdevice dev;
    CUcontext cuctx;
    char arch[16];              /* exact target of the device: "sm_90a" */
    int lineinfo;               /* FAJIT_LINEINFO=1: kernels compile with -lineinfo (their own
                                   cache keys), so compute-sanitizer names source lines */
    int paged_hopper;           /* 1 unless FAJIT_PAGED_PREFILL=decode (fj_target.paged_hopper) */
    int features_on;            /* FAJIT_MODEL_FEATURES=on: a family serves the model
                                   features it has not run with on a GPU too (outside its
                                   fj_family.ran_features: off by default, UNSUPPORTED) */
    fj_fopts fopts;             /* the families' own options (fj_family.options) */
    int sm_count, smem_optin, cc;   /* cc = major*10 + minor */
    fj_cache *cache;

    uint64_t id;                /* never reused: keys this context's per-thread errors */
    pthread_mutex_t lock;       /* kernel map */
    pthread_mutex_t compile_lock; /* one compile at a time per context */
    fj_kernel *kmap[FJ_KMAP_BUCKETS];
    fj_plan *plans[FJ_PLAN_BUCKETS];

    _Atomic uint64_t calls, hits_memory, hits_disk, misses, compiles, serving_compiles,
        background_compiles, fallback_launches;
    _Atomic uint64_t hits_other_nvrtc;   /* of hits_disk: entries another NVRTC made */
    char gpu_name[128];

    /* FALLBACK's background compiles: destroy waits for them */
    pthread_mutex_t bg_lock;
    pthread_cond_t bg_done;
    int bg_running;
    _Atomic uint64_t compile_us;

    /* Counters of the families' workspaces (fj_workspace.counter_bytes, e.g. the tile
     * counter of a dynamic schedule): FJ_COUNTER_SLOTS + FJ_COUNTER_GRAPH_SLOTS zeroed slots
     * of FJ_COUNTER_SLOT_BYTES, allocated by fajit_ctx_create where a family on the device's
     * target needs them (else at the first such launch, under `lock`), freed by
     * fajit_ctx_destroy; each launch takes the next slot of its part (fj_ws_counters). */
    _Atomic CUdeviceptr counters;
    _Atomic unsigned counter_next, counter_graph_next;

    /* The validation gate (validate.c): verdicts under verdict_lock; one validation at a
     * time under validate_lock (taken first). */
    pthread_mutex_t verdict_lock, validate_lock;
    fj_verdict_slot verdicts[FJ_MAX_VERDICTS];
    int n_verdicts;
};
#define FJ_COUNTER_SLOTS 64          /* a ring for plain launches */
#define FJ_COUNTER_GRAPH_SLOTS 4096  /* one each for launches captured into CUDA graphs */
#define FJ_COUNTER_SLOT_BYTES FJ_WS_COUNTER_MAX

/* Records "fmt..." as the calling thread's last error on the context (ctx may be NULL)
 * and returns status. */
fajit_status fj_fail(fajit_ctx *ctx, fajit_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The calling thread's compile log of `ctx` (fajit_compile_log). */
void fj_keep_compile_log(fajit_ctx *ctx, const char *log);
/* Sets the calling thread's error message (and, if not NULL, compile log) of `ctx` to ones
 * another thread produced (warm's workers report through the caller). */
void fj_error_carry(fajit_ctx *ctx, const char *msg, const char *log);
void fj_log(fajit_ctx *ctx, fajit_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Drops the calling thread's message and log of `ctx` (fajit_ctx_destroy). */
void fj_errors_forget(const fajit_ctx *ctx);

/* Options (src/api/options.c): validates ctx->opts and applies the FAJIT_* overrides;
 * resolves the cache directory of `o` (malloc'd, NULL = memory only). */
fajit_status fj_opts_check(fajit_ctx *ctx);
char *fj_resolve_cache_dir(const char *opt_dir);

/* Structs that grow (fajit.h, "Growing structs"; src/api/options.c). export: the first n
 * bytes of `defaults` (`size` bytes) into the caller's struct, zeros past `size`,
 * struct_size = n. import: checks the caller's struct_size against the first sized
 * layout (size_v1) and, when larger than `size`, that the bytes past it are zero; then
 * copies its first min(struct_size, size) bytes into `local` and the rest from
 * `defaults`; local's struct_size becomes `size`. `type` names the struct in messages. */
void fj_struct_export(void *user, size_t n, const void *defaults, size_t size);
fajit_status fj_struct_import(fajit_ctx *ctx, const char *type, const void *user,
                              size_t size_v1, size_t size, const void *defaults, void *local);
/* ctx->opts from the caller's options (NULL: defaults). */
fajit_status fj_opts_import(fajit_ctx *ctx, const fajit_ctx_opts *user);
/* A full-size copy of the caller's tuning options (NULL: defaults). */
fajit_status fj_tune_opts_import(fajit_ctx *ctx, const fajit_tune_opts *user,
                                 fajit_tune_opts *local);
/* The first line of a public entry point taking a descriptor: ctx NULL or live, `user`
 * not NULL and its struct_size valid; `local` becomes its full-size copy, the one the
 * entry point works on (src/api/attn.c). */
/* The rules of fajit_attn_check on an imported (full-size) descriptor. */
fajit_status fj_desc_check(fajit_ctx *ctx, const fajit_attn_desc *d);
fajit_status fj_desc_import(fajit_ctx *ctx, const fajit_attn_desc *user, fajit_attn_desc *local);

/* The device (src/api/info.c): binds ctx to ctx->opts.device (driver, attributes, primary
 * context); the exact target name of a compute capability ("sm_90a"). */
fajit_status fj_bind_device(fajit_ctx *ctx);
void fj_arch_of(int major, int minor, char *out, size_t n);

/* 1 when ctx is a context fajit_ctx_create returned and fajit_ctx_destroy has not yet
 * released: its address is in the registry of live contexts (src/api/live.c; no read
 * through ctx before that), and then its magic word matches. 0 for NULL. Lock-free. */
int fj_ctx_live(const fajit_ctx *ctx);
/* Adds a new context to the registry (sets its magic word): 1, or 0 when the registry is
 * full; removes one (clears it) before it is freed. */
int fj_ctx_register(fajit_ctx *ctx);
void fj_ctx_unregister(fajit_ctx *ctx);
/* First line of a public entry point: return FAJIT_INVALID_ARGUMENT unless ctx is live
 * (FJ_CTX_CHECK) or NULL or live (FJ_CTX_CHECK_NULL_OK). No message can be recorded. */
#define FJ_CTX_CHECK(ctx)                    \
    do {                                     \
        if (!fj_ctx_live(ctx))               \
            return FAJIT_INVALID_ARGUMENT;   \
    } while (0)
#define FJ_CTX_CHECK_NULL_OK(ctx)            \
    do {                                     \
        if ((ctx) && !fj_ctx_live(ctx))      \
            return FAJIT_INVALID_ARGUMENT;   \
    } while (0)

/* Return the status of `expr` when it is not FAJIT_OK. */
#define FJ_CHECK(expr)                       \
    do {                                     \
        fajit_status fj_st_ = (expr);        \
        if (fj_st_ != FAJIT_OK)              \
            return fj_st_;                   \
    } while (0)
/* Record a message and return `st` when `cond` holds. */
#define FJ_RETURN_IF(cond, ctx, st, ...)       \
    do {                                       \
        if (cond)                              \
            return fj_fail(ctx, st, __VA_ARGS__); \
    } while (0)

/* The kernel for `v` on the context's device: memory, then cache, then compile.
 * Flags: FJ_KF_NO_COMPILE (a miss returns FAJIT_CACHE_MISS), FJ_KF_SERVING / _BACKGROUND
 * (which counter a compile goes to). */
enum { FJ_KF_NO_COMPILE = 1, FJ_KF_SERVING = 2, FJ_KF_BACKGROUND = 4 };
/* The timing harnesses' L2 flush (bench.c): a kernel (l2_flush.cu) reading `bytes` of buf
 * on the default stream, compiled on first use; leaves the L2 clean. The buffer the tuner
 * and the benchmark flush with: */
#define FJ_L2_FLUSH_BYTES ((size_t)256 << 20)   /* > 4x the 50-60 MB L2 of an H100/H200 */
fajit_status fj_l2_flush(fajit_ctx *ctx, CUdeviceptr buf, size_t bytes);
void fj_l2_flush_variant(fj_variant *v);   /* its kernel (warm, tests) */
fajit_status fj_kernel_get(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_kernel **out);
/* Compiles `v` for `arch` into the cache unless present; *compiled says which. */
fajit_status fj_kernel_warm(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                            int *compiled);
void fj_kernel_map_free(fajit_ctx *ctx);
void fj_plans_free(fajit_ctx *ctx);
/* The key of `v` for `arch` as NVRTC `nvrtc_version` would make it. */
fajit_status fj_kernel_key(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                           int nvrtc_version, fj_key *key);
/* Compiles `v` for `arch` with the local NVRTC (nothing stored) and compares the CUBIN
 * with the cached entry of `key`: *same 1 or 0. CACHE_MISS when the entry is gone. */
fajit_status fj_kernel_recompile_same(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                                      const fj_key *key, int *same);
/* The embedded kernel headers (.h, .cuh: what any kernel may include) into out[max]: their
 * count, or -1 when there are more than max. */
int fj_kernel_headers(fj_src *out, int max);
/* Orders the NVRTC versions vers[n] (major*1000 + minor*10) in which entries of another
 * NVRTC than `want` (0: none loaded) are tried: those not newer than `want`, newest first,
 * then the newer ones, oldest first; `want` itself and repeats are dropped. Returns how
 * many remain. */
int fj_kernel_serve_order(int want, int *vers, int n);
/* The local NVRTC's version (major*1000 + minor*10), or -1 without one. */
int fj_kernel_nvrtc_version(void);
/* The key of `v` for `arch`, its parts, and the cache's verdict on it, as text. */
fajit_status fj_kernel_explain(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                               char *buf, size_t len);

/* The kernels `fajit-tune warm` compiles for target `arch`: every family's shipped
 * configurations for every dtype, head_dim and mask. Fills up to `max`; returns how many. */
int fj_warm_variants(const char *arch, fj_variant *out, int max);
/* The target of a name ("sm_90a"), or of the context's device (arch NULL). */
fj_target fj_target_of(const fajit_ctx *ctx, const char *arch);

int fj_bucket_index(int seqlen_q, int seqlen_k);
/* Tuning-row names of a problem: signature ("fwd.bf16.hd128.causal.gqa4") and bucket. */
void fj_desc_signature(const fajit_attn_desc *d, char *sig, size_t n);
/* Sets d's model-feature fields as spec problem p turns them on, with stand-in pointers
 * (never read: for compiling, planning and explaining, not for launching). */
struct fj_problem;
void fj_problem_features(const struct fj_problem *p, fajit_attn_desc *d);
/* The bucket of a problem is its shape bucket and the families' suffixes on a GPU of
 * sm_count SMs (fj_family_bucket_suffix: the decode family's split class where up to 16
 * query rows, "sq=1,sk<=2k,latf"): one tuned configuration per class; "" where it does not
 * fit n. At most FJ_DESC_BUCKET_LEN bytes. */
#define FJ_DESC_BUCKET_LEN 24
void fj_desc_bucket(const fajit_attn_desc *d, int sm_count, char *bucket, size_t n);
/* The kernels fajit_attn_fwd would launch for the full-size (imported) `d` on target `arch`
 * (NULL: the context's device), as fajit_cache_explain looks them up; compiles nothing. */
fajit_status fj_dispatch_kernels(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                 fj_kernels *ks);
/* The kernels fajit_warm_spec compiles for `spec` on target `arch`: every family's
 * candidates (the defaults among them) for each shape of each problem at each of its
 * batches, each variant once. *out is malloc'ed (free it); NULL and 0 on failure. */
fajit_status fj_spec_warm_variants(fajit_ctx *ctx, const char *spec, const char *arch,
                                   fj_variant **out, int *n);
/* Compiles variants for `arch` on `jobs` threads with progress (src/api/warm.c). */
fajit_status fj_warm_list(fajit_ctx *ctx, const char *arch, const fj_variant *vs, int n,
                          int jobs, int *n_compiled, int *n_cached);

/* A spec by preset name or file path (src/autotune/spec.h); free with fj_spec_free. */
struct fj_spec;
fajit_status fj_spec_load(fajit_ctx *ctx, const char *spec, struct fj_spec *out);
/* Progress over a spec's shapes (fajit_tune_spec, fajit_bench_spec): `done` of `total`
 * finished, the last one p/sh, `since` the monotonic start (fj_mono_s); the rest of the
 * time extrapolated. Nothing without a progress callback. */
struct fj_problem;
struct fj_shape;
double fj_mono_s(void);
void fj_spec_progress(fajit_ctx *ctx, double since, int done, int total,
                      const struct fj_problem *p, const struct fj_shape *sh);


/* Makes kp ready for kp->cfg on the context's device: its kernels (memory, cache or
 * compile, per `flags`), their shared memory raised. A thread capturing a stream is switched
 * to relaxed capture mode for the loads (the driver refuses module loads otherwise). */
fajit_status fj_kplan_load(fajit_ctx *ctx, fj_kplan *kp, const fajit_attn_desc *d,
                           unsigned flags);
/* The workspace one call of d with c needs on t (the family's workspace hook; none
 * without one), and where a caller's workspace puts the scratch: the counters first, the
 * scratch from the next 256 bytes. */
void fj_kplan_workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                        fj_workspace *ws);
size_t fj_ws_counter_span(const fj_workspace *ws);
/* Launches every kernel of kp for the validated d on `stream`, with its workspace. */
fajit_status fj_kplan_launch(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                             void *stream);

/* fajit_attn_merge's kernel for a dtype (src/api/merge.c; fajit_warm compiles it). */
void fj_merge_variant(int dtype, fj_variant *v);

/* Counters for one launch on `stream` (src/api/workspace.c): `bytes` (at most
 * FJ_COUNTER_SLOT_BYTES) of zeroed device memory that the launch leaves zeroed. Two
 * launches that share counters must never run at the same time. A plain launch takes the
 * next slot of a ring of FJ_COUNTER_SLOTS: at most that many plain launches of one context
 * may run concurrently (on different streams). A launch captured into a CUDA graph keeps its
 * counters for every replay, so it gets a slot of its own, never given to a plain launch:
 * replays of different graphs and plain launches may overlap. After FJ_COUNTER_GRAPH_SLOTS
 * captured launches those slots are reused (logged once). */
fajit_status fj_ws_counters(fajit_ctx *ctx, void *stream, size_t bytes, CUdeviceptr *out);
/* Allocates the counter ring now if a family on the context's target may need it (at
 * creation, so that no launch synchronizes). */
fajit_status fj_ws_counters_early(fajit_ctx *ctx);
void fj_ws_free(fajit_ctx *ctx);

/* The validation gate (src/api/validate.c). A verdict is of one model-feature set: the
 * fj_features bits of a problem with its kv_dtype in bits FJ_FSET_KV_SHIFT.. (an FP8 format
 * is other code), 0 for none; its name ("softcap,sinks", "kv_e4m3"; "" for none) is what
 * the cache stores, and parse reads it back (0, or -1 for a name of no set). */
#define FJ_FSET_KV_SHIFT 8
unsigned fj_feature_set(const fajit_attn_desc *d);
void fj_feature_set_name(unsigned fset, char *out, size_t n);
int fj_feature_set_parse(const char *s, unsigned *fset);
/* Whether family f is quarantined for dispatch on target t of a problem of feature set
 * fset: the target is the context's device and f's verdict there for fset is FAIL (the
 * oracle never is). Logs the warning naming the family, set, case and error, once per
 * context and set. */
int fj_quarantined(fajit_ctx *ctx, const fj_target *t, const fj_family *f, unsigned fset);
/* f's verdict state on the context's GPU class for fset (FJ_VS_*); *v filled (may be NULL). */
int fj_verdict_state(fajit_ctx *ctx, const fj_family *f, unsigned fset, fj_verdict *v);
/* "; verdict: ..." for describe: which verdict dispatch read for f and fset on target t
 * (nothing for the oracle or a target other than the device's). */
void fj_verdict_describe(fajit_ctx *ctx, const fj_target *t, const fj_family *f,
                         unsigned fset, char *out, size_t n);
/* LAZY policy, at the first dispatch that would pick f for a problem of feature set fset:
 * validates f for fset unless it has a verdict or was tried already, or `stream` is being
 * captured (then logs that f runs unvalidated). Errors of the attempt are logged, not
 * returned: dispatch goes on either way. */
void fj_validate_first_use(fajit_ctx *ctx, const fj_family *f, unsigned fset, void *stream);
/* Retires every plan of the context: the next call of each problem chooses again (after a
 * new tuning row or verdict). */
void fj_plans_retire(fajit_ctx *ctx);
/* The plan table (src/api/plans.c): the key of d's plan (`ref`: the reference kernel's),
 * its bucket in ctx->plans, and whether two keys are the same. */
fj_plan_key fj_plan_key_of(const fajit_ctx *ctx, int ref, const fajit_attn_desc *d);
unsigned fj_plan_bucket(const fj_plan_key *k);
int fj_plan_same(const fj_plan_key *a, const fj_plan_key *b);
/* What making a plan asks of its caller: dispatch's choice with the validation gate, or the
 * reference kernel's (fj_reference_chooser, without it). */
typedef struct fj_chooser {
    /* the exact and the default configuration of d on t; `stream`: the call's */
    fajit_status (*choose)(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                           fj_kcfg *exact, fj_kcfg *dflt, void *stream);
    /* FALLBACK: a cached configuration in *kp that serves d while `exact` compiles: 1, or 0
     * (NULL: none is looked for) */
    int (*stand_in)(fajit_ctx *ctx, const fajit_attn_desc *d, const fj_kcfg *exact,
                    fj_kplan *kp);
    /* FALLBACK: compiles p->better off the caller's thread, then swaps it in */
    void (*background)(fajit_ctx *ctx, fj_plan *p, const fajit_attn_desc *d);
} fj_chooser;
extern const fj_chooser fj_reference_chooser;
/* Runs the imported d on `stream`: checks it, finds its plan (`ref`: the reference
 * kernel's) or makes one with `ch` under the context's policies, and launches it. */
fajit_status fj_plan_run(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream, int ref,
                         const fj_chooser *ch);

/* Whether a target name is an "a" one (sm_90a: wgmma, setmaxnreg). */
int fj_arch_is_a(const char *arch);
/* Parses "sm_90a" -> 90; -1 if not a target name. */
int fj_arch_sm(const char *arch);

/* The element offset one past a [batch][rows][heads][head_dim] tensor's last element with
 * these strides (>= 0), saturating near 2^60 (never overflows); FJ_MAX_TENSOR_ELEMS bounds it:
 * a GPU addresses at most 2^48 bytes, i.e. 2^47 two-byte elements. */
#define FJ_MAX_TENSOR_ELEMS ((int64_t)1 << 47)
int64_t fj_tensor_last(int64_t batch, int64_t bs, int64_t rows, int64_t rs, int64_t heads,
                       int64_t hs, int head_dim);

#endif /* FJ_INTERNAL_H */
