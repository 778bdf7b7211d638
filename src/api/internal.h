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
#include "../autotune/fa2_config.h"
#include "../autotune/fa3_config.h"

/* One kernel variant: which source, which entry point, which compile-time defines. */
typedef struct fj_variant {
    const char *source;     /* embedded file name, "attn_ref.cu" */
    const char *function;   /* extern "C" entry point */
    char preamble[512];     /* "#define FJ_DTYPE 1\n..." */
    char name[96];          /* human readable, stored with the cache entry */
} fj_variant;

/* A loaded kernel, kept in the context's memory map for its whole life. */
typedef struct fj_kernel {
    fj_key key;
    CUmodule module;
    CUfunction fn;
    int regs, smem_static, spill_bytes, local_bytes;
    char warning[8];        /* first ptxas warning that means serialization ("C7510"), or "" */
    struct fj_kernel *next; /* hash chain */
} fj_kernel;

/* Kernel families and one configuration of any of them (src/api/family.c). */
enum { FJ_FAM_REF = 1, FJ_FAM_FA2 = 2, FJ_FAM_FA3 = 3 };
typedef struct fj_kcfg {
    int family;
    fj_fa2_config fa2;
    fj_fa3_config fa3;
} fj_kcfg;

/* How to launch one kernel. */
typedef struct fj_launch {
    fj_kernel *k;
    int family;
    int block_m, threads, dyn_smem;
    fj_fa3_config fa3;      /* FA3: launch shape and TMA boxes */
} fj_launch;

/* A launch plan for one problem signature (family, dtype, head_dim, mask, shape bucket).
 * The fast path of fajit_attn_fwd is one plan lookup and one atomic load. Under FALLBACK a
 * plan starts on `first` (a kernel that was at hand) and a background compile swaps
 * `launch` to `better` (the exact kernel) when it is ready. */
/* What a plan depends on: everything in the tuning signature and bucket, and what picks
 * the variant (reference or not, varlen and its totals). */
typedef struct fj_plan_key {
    uint64_t bits;                 /* ref, varlen, totals, dtype, mask, head_dim, bucket */
    int gqa, window_left, window_right;
} fj_plan_key;

typedef struct fj_plan {
    fj_plan_key key;
    fj_launch *_Atomic launch;
    fj_launch first, better;
    int pending;            /* a background compile of `better` was started */
    struct fj_plan *next;
} fj_plan;

#define FJ_KMAP_BUCKETS 256
#define FJ_PLAN_BUCKETS 64
#define FJ_ERRMSG_LEN 2048

struct fajit_ctx {
    fajit_ctx_opts opts;
    char *cache_dir;            /* resolved; NULL = memory only */
    const fj_cuda *cu;          /* NULL: no driver (FAJIT_DEVICE_NONE or none found) */
    CUdevice dev;
    CUcontext cuctx;
    char arch[16];              /* exact target of the device: "sm_90a" */
    int sm_count, smem_optin, cc;   /* cc = major*10 + minor */
    fj_cache *cache;

    uint64_t id;                /* never reused: keys this context's per-thread errors */
    pthread_mutex_t lock;       /* kernel map */
    pthread_mutex_t compile_lock; /* one compile at a time per context */
    fj_kernel *kmap[FJ_KMAP_BUCKETS];
    fj_plan *plans[FJ_PLAN_BUCKETS];

    _Atomic uint64_t calls, hits_memory, hits_disk, misses, compiles, serving_compiles,
        background_compiles, lease_waits, fallback_launches;
    char gpu_name[128];

    /* FALLBACK's background compiles: destroy waits for them */
    pthread_mutex_t bg_lock;
    pthread_cond_t bg_done;
    int bg_running;
    _Atomic uint64_t compile_us;

    /* Tile counters of the sm_90a kernel's dynamic schedule (fj_fa3_config.persistent 2):
     * FJ_SCHED_SLOTS + FJ_SCHED_GRAPH_SLOTS zeroed ints 128 bytes apart, allocated by
     * fajit_ctx_create on a 9.0 device (else at the first such launch, under `lock`), freed by
     * fajit_ctx_destroy; each launch takes the next slot of its part (fj_sched_counter). */
    _Atomic CUdeviceptr sched_ctr;
    _Atomic unsigned sched_next, sched_graph_next;
};
#define FJ_SCHED_SLOTS 64          /* a ring for plain launches */
#define FJ_SCHED_GRAPH_SLOTS 4096  /* one each for launches captured into CUDA graphs */

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
fajit_status fj_kernel_get(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_kernel **out);
/* Compiles `v` for `arch` into the cache unless present; *compiled says which. */
fajit_status fj_kernel_warm(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                            int *compiled);
void fj_kernel_map_free(fajit_ctx *ctx);   /* kernels and plans */
/* The key of `v` for `arch`, its parts, and the cache's verdict on it, as text. */
fajit_status fj_kernel_explain(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                               char *buf, size_t len);

/* Variants of the reference kernel, of the FA2 kernel, and the kernels `warm` compiles. */
void fj_variant_ref(fj_variant *v, int dtype);
void fj_variant_fa2(fj_variant *v, const fj_fa2_config *c, int dtype, int hdim, int mask);
/* Fills up to `max` variants compiled by `fajit-tune warm` for target `arch`. */
int fj_warm_variants(const char *arch, fj_variant *out, int max);

/* Families: the default and the tuning candidates for d on a target (sm, and whether the
 * target is an "a" one), validity of a (tuned) configuration, its variant and launch
 * shape, and its name in tuning rows. */
int fj_arch_is_a(const char *arch);
void fj_kcfg_default(int sm, int arch_a, const fajit_attn_desc *d, fj_kcfg *out);
int fj_kcfg_candidates(int sm, int arch_a, const fajit_attn_desc *d, fj_kcfg *out, int max);
int fj_kcfg_valid(const fj_kcfg *c, int sm, int arch_a, const fajit_attn_desc *d);
void fj_kcfg_variant(const fj_kcfg *c, const fajit_attn_desc *d, fj_variant *v, fj_launch *l);
void fj_kcfg_name(const fj_kcfg *c, char out[32]);
int fj_kcfg_parse(const char *s, fj_kcfg *c);

/* FA2 tile configuration names in tuning rows: "128x64w4s1". parse returns 0 or -1. */
void fj_config_name(const fj_fa2_config *c, char out[32]);
int fj_config_parse(const char *s, fj_fa2_config *c);

int fj_bucket_index(int seqlen_q, int seqlen_k);
/* Tuning-row names of a problem: signature ("fwd.bf16.hd128.causal.gqa4") and bucket. */
void fj_desc_signature(const fajit_attn_desc *d, char *sig, size_t n);
void fj_desc_bucket(const fajit_attn_desc *d, char *bucket, size_t n);
/* Compiles variants for `arch` on `jobs` threads with progress (src/api/warm.c). */
fajit_status fj_warm_list(fajit_ctx *ctx, const char *arch, const fj_variant *vs, int n,
                          int jobs, int *n_compiled, int *n_cached);

/* A spec by preset name or file path (src/autotune/spec.h); free with fj_spec_free. */
struct fj_spec;
fajit_status fj_spec_load(fajit_ctx *ctx, const char *spec, struct fj_spec *out);

/* A loaded kernel with its launch shape (l's shape fields set by the caller), and the
 * launch of a validated descriptor with it (src/api/dispatch.c). */
fajit_status fj_get_launch(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_launch *l);
fajit_status fj_launch_desc(fajit_ctx *ctx, const fj_launch *l, const fajit_attn_desc *d,
                            void *stream);

/* A zeroed device int for one launch on `stream` of a dynamically scheduled kernel
 * (src/api/ctx.c). The kernel's last claim zeroes it again. Two launches that share a counter
 * must never run at the same time. A plain launch takes the next slot of a ring of
 * FJ_SCHED_SLOTS: at most that many plain launches of one context may run concurrently (on
 * different streams). A launch captured into a CUDA graph keeps its counter for every replay,
 * so it gets a slot of its own, never given to a plain launch: replays of different graphs
 * and plain launches may overlap. After FJ_SCHED_GRAPH_SLOTS captured launches those slots
 * are reused (logged once). The ring is allocated with the context on a 9.0 device, so no
 * launch synchronizes. */
fajit_status fj_sched_counter(fajit_ctx *ctx, void *stream, CUdeviceptr *out);

/* Host copy of the parameter block from a validated descriptor. */
void fj_params_from_desc(const fajit_attn_desc *d, fj_attn_params *p);
/* Parses "sm_90a" -> 90; -1 if not a target name. */
int fj_arch_sm(const char *arch);

#endif /* FJ_INTERNAL_H */
