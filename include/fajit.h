/* fajit.h - FlashAttention kernels compiled at run time for the exact GPU.
 *
 * fajit compiles embedded attention kernel sources with NVRTC for the GPU it runs on,
 * picks a kernel configuration per GPU generation, and keeps compiled kernels in an
 * SQLite cache shared by every process on a machine. The CUDA driver and NVRTC are loaded
 * at run time: a program linked with fajit starts on a machine without either. Without
 * NVRTC, kernels already in the cache (for instance a bundle warmed on another machine)
 * are still served; only a kernel the cache lacks fails, with FAJIT_NO_NVRTC.
 *
 * Sections, from simple to advanced:
 *   1. Version and status codes
 *   2. Context (one per device)
 *   3. Attention forward
 *   4. Observability: errors, counters, logging, progress
 *   5. Offline work: compiling for named targets, cache maintenance, system info
 *
 * Thread safety: every function taking a context may be called from many threads at once
 * on the same context, except fajit_ctx_destroy.
 *
 * Context pointers: every function taking a context returns FAJIT_INVALID_ARGUMENT for a
 * pointer that is not a live context (destroyed, or never returned by fajit_ctx_create)
 * without reading through it (a lock-free registry of live contexts, ~2 ns a call);
 * fajit_errmsg and fajit_compile_log return a fixed message for it, fajit_counters_get
 * zeros, fajit_ctx_destroy nothing. An address that a later fajit_ctx_create happens to
 * reuse names that new context. Strings returned by the library are owned
 * by it; each function says how long they stay valid.
 */
#ifndef FAJIT_H
#define FAJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FAJIT_BUILDING) && defined(__GNUC__)
#define FAJIT_API __attribute__((visibility("default")))
#else
#define FAJIT_API
#endif

/*======  1. Version and status codes  ======*/

#define FAJIT_VERSION_MAJOR 0
#define FAJIT_VERSION_MINOR 1
#define FAJIT_VERSION_PATCH 0
#define FAJIT_VERSION_STRING "0.1.0"
#define FAJIT_VERSION_NUMBER \
    (FAJIT_VERSION_MAJOR * 10000 + FAJIT_VERSION_MINOR * 100 + FAJIT_VERSION_PATCH)

FAJIT_API unsigned fajit_version_number(void);   /* FAJIT_VERSION_NUMBER of the library */
FAJIT_API const char *fajit_version_string(void);

/* X(name, value, message). Values are stable: never renumbered, never reused. */
#define FAJIT_STATUS_MAP(X)                                                             \
    X(OK, 0, "success")                                                                 \
    X(INVALID_ARGUMENT, 1, "invalid argument")                                          \
    X(UNSUPPORTED, 2, "unsupported problem or configuration")                           \
    X(NO_DRIVER, 3, "no CUDA driver (libcuda.so.1) could be loaded")                    \
    X(NO_DEVICE, 4, "no such CUDA device")                                              \
    X(NO_NVRTC, 5, "NVRTC (libnvrtc.so.13 or .12) could not be loaded")                 \
    X(COMPILE_FAILED, 6, "kernel compilation failed")                                   \
    X(CUDA_ERROR, 7, "a CUDA driver call failed")                                       \
    X(OUT_OF_MEMORY, 8, "out of host memory")                                           \
    X(CACHE_MISS, 9, "kernel not in cache and compiling is not allowed (STRICT policy)") \
    X(CACHE_ERROR, 10, "kernel cache error")                                            \
    X(IO_ERROR, 11, "file input/output error")                                          \
    X(VALIDATION_FAILED, 12, "a kernel family failed validation on this GPU (quarantined)")

typedef enum fajit_status {
#define FAJIT_X_ENUM(name, value, msg) FAJIT_##name = value,
    FAJIT_STATUS_MAP(FAJIT_X_ENUM)
#undef FAJIT_X_ENUM
} fajit_status;

/* "FAJIT_INVALID_ARGUMENT"; "FAJIT_UNKNOWN_STATUS" for a value not in the table. */
FAJIT_API const char *fajit_status_name(fajit_status s);
/* A static one-line description of the code ("invalid argument"). */
FAJIT_API const char *fajit_strerror(fajit_status s);

/*======  2. Context  ======*/

typedef struct fajit_ctx fajit_ctx;

/* What a cache miss may do on the calling thread. */
typedef enum fajit_policy {
    FAJIT_POLICY_BLOCKING = 0, /* compile before launching (default) */
    FAJIT_POLICY_FALLBACK = 1, /* a miss of the exact (tuned or default) kernel launches a
                                  cached stand-in at once (the default configuration, the
                                  default of another sequence-length class, or the
                                  portable kernel's default) and compiles the exact one on
                                  a background thread, then swaps it in; only when none of
                                  them is cached does the call wait for a compile */
    FAJIT_POLICY_STRICT = 2    /* a miss returns FAJIT_CACHE_MISS; nothing compiles */
} fajit_policy;

typedef enum fajit_log_level {
    FAJIT_LOG_ERROR = 0,
    FAJIT_LOG_WARN = 1,
    FAJIT_LOG_INFO = 2,
    FAJIT_LOG_DEBUG = 3
} fajit_log_level;

/* Called from any thread, possibly while the library holds internal locks: do not call
 * back into fajit from it. `msg` is valid for the call only. */
typedef void (*fajit_log_fn)(void *user, fajit_log_level level, const char *msg);

/* Progress of long work (compiling many kernels). done of total finished, eta in seconds
 * (negative when unknown), what = the item just finished. */
typedef void (*fajit_progress_fn)(void *user, int done, int total, double eta_s,
                                  const char *what);

#define FAJIT_DEVICE_NONE (-1) /* a context with no GPU: compile for named targets only */

/* Which kernel family serves fajit_attn_fwd. AUTO: on compute capability 9.0, paged prefill
 * of 64 query rows or more whose page size fits its tiles on the Hopper kernel (a varlen
 * paged batch: the mixed plan of it and the decode kernel; FAJIT_PAGED_PREFILL=decode: not);
 * other paged K/V and decode steps (few query rows per KV head) on the decode kernel; else
 * the Blackwell kernel (FA4 design) on compute capability 10.0 / 10.3 where it applies, else
 * the Hopper kernel (FA3 design) on compute capability 9.0 where it applies, else the
 * portable one (FA2 design). Forcing a family
 * that does not apply to a problem falls back to the AUTO choice (for benchmarks and
 * triage). */
typedef enum fajit_family {
    FAJIT_FAMILY_AUTO = 0,
    FAJIT_FAMILY_REF = 1,    /* the naive reference kernel (AUTO: only where nothing else applies) */
    FAJIT_FAMILY_FA2 = 2,
    FAJIT_FAMILY_FA3 = 3,
    FAJIT_FAMILY_DECODE = 4, /* paged / split-KV decode and chunked prefill, every target */
    FAJIT_FAMILY_FA4 = 5,    /* Blackwell (FA4 design), compute capability 10.0 / 10.3: compiled
                                and checked but not run on hardware (no Blackwell GPU was
                                available); validated on first use on each GPU class */
    FAJIT_FAMILY_MIXED = 6   /* a varlen batch over paged K/V mixing prefill and decode rows,
                                compute capability 9.0: the Hopper kernel for the sequences of
                                more than 16 query rows, then the decode kernel for the rest
                                (one plan, one workspace, CUDA-graph capturable) */
} fajit_family;
/* "auto", "ref", "fa2", "fa3"; NULL for a value that names no family. */
FAJIT_API const char *fajit_family_name(fajit_family f);
/* A sentence on the family's standing, or NULL when there is nothing to say (also for a
 * value that names no family): e.g. FA4's "compiled and checked ... but not run on
 * hardware". Static storage; `fajit-tune info` and `plan` show it. */
FAJIT_API const char *fajit_family_status_note(fajit_family f);

/* What a kernel computes. One axis of every kernel key, tuning row and spec problem.
 * Values are stable; later operations (paged decode, backward) take the next numbers. */
typedef enum fajit_op {
    FAJIT_OP_FWD = 0         /* attention forward (prefill; any seqlen_q) */
} fajit_op;
/* "fwd"; NULL for a value that names no operation. */
FAJIT_API const char *fajit_op_name(fajit_op op);

/* When the first-use validation gate (section 5, "Validation") runs. Whatever the policy,
 * dispatch never picks a family whose verdict for this GPU class is FAIL (quarantined). */
typedef enum fajit_validate_policy {
    FAJIT_VALIDATE_WARM = 0, /* default: `fajit-tune warm` and `tune` (fajit_validate) validate
                                on a GPU machine; serving only reads verdicts, and dispatches
                                a family without one as if validated -- except a family with
                                a status note (fajit_family_status_note: FA4, never run on
                                hardware), which is validated on first use as under LAZY */
    FAJIT_VALIDATE_OFF = 1,  /* no validation at dispatch (verdicts still read) */
    FAJIT_VALIDATE_LAZY = 2  /* the first dispatch that would pick a family without a verdict
                                validates it first, on the calling thread (a few hundred ms;
                                a fail: the next family serves) -- except while the stream
                                is being captured into a CUDA graph: then it dispatches the
                                family unvalidated and logs it */
} fajit_validate_policy;

/*------ Growing structs ------
 * fajit_ctx_opts, fajit_attn_desc, fajit_tune_opts, fajit_verdict_info,
 * fajit_validation_report and fajit_bundle_report start with `struct_size`: the
 * sizeof of the struct in the header the caller was compiled against, set by the
 * header's *_init (static inline: it passes the caller's sizeof to the library's
 * *_init_sized, which an FFI calls directly with its own struct size). A library newer
 * than the caller's header reads only struct_size bytes and gives the fields after them
 * their defaults; one older than the caller's header accepts the larger struct when every
 * byte past its own size is zero (a field it does not know is unset: defaults are zero
 * for every appended field), else FAJIT_INVALID_ARGUMENT naming the offset. A
 * struct_size below the first sized layout (FAJIT_*_SIZE_V1) is FAJIT_INVALID_ARGUMENT.
 * So: fill these structs with their *_init, never by hand; new fields are appended. */

typedef struct fajit_ctx_opts {
    size_t struct_size;      /* set by fajit_ctx_opts_init: see "Growing structs" */
    int device;              /* CUDA device ordinal, or FAJIT_DEVICE_NONE. Default 0. */
    const char *cache_dir;   /* cache directory; NULL: FAJIT_CACHE_DIR, then
                                $XDG_CACHE_HOME/fajit, then $HOME/.cache/fajit, then
                                memory only (with a warning). "" = memory only. Copied. */
    fajit_policy policy;     /* default BLOCKING; FAJIT_POLICY=blocking|fallback|strict */
    fajit_log_fn log;        /* default NULL: messages dropped */
    void *log_user;
    fajit_log_level log_level; /* most verbose level delivered; default WARN;
                                  FAJIT_LOG_LEVEL=error|warn|info|debug overrides */
    fajit_progress_fn progress; /* default NULL */
    void *progress_user;
    fajit_family family;     /* kernel family; default AUTO (the fastest that applies);
                                FAJIT_FAMILY=auto|fa2|fa3 overrides. REF is refused: the
                                reference kernel is fajit_attn_fwd_reference's, not a
                                dispatch choice */
    int64_t cache_max_bytes; /* cap on the cached kernels' bytes: after each new kernel, the
                                least recently loaded ones go (fajit_cache_prune); tuning
                                rows stay. 0 = no cap (default). FAJIT_CACHE_MAX_MB=N
                                overrides (MiB) */
    /* Appended after the first sized layout. */
    int checked;             /* 1: kernels that read device-side indices (page ids, used
                                lengths) test each one and the call reports the first bad
                                one as FAJIT_INVALID_ARGUMENT (it synchronizes the stream);
                                0 (default): out-of-range values are undefined behaviour.
                                FAJIT_CHECKED=0|1 overrides */
    fajit_validate_policy validate; /* when the validation gate runs; default WARM;
                                FAJIT_VALIDATE=warm|off|lazy overrides */
} fajit_ctx_opts;
/* The first sized layout: the smallest struct_size fajit_ctx_create accepts. */
#define FAJIT_CTX_OPTS_SIZE_V1 (offsetof(fajit_ctx_opts, cache_max_bytes) + sizeof(int64_t))

/* Fills the first `struct_size` bytes of `opts` with the defaults above and sets
 * opts->struct_size. NULL: does nothing. For FFIs; C and C++ call fajit_ctx_opts_init. */
FAJIT_API void fajit_ctx_opts_init_sized(fajit_ctx_opts *opts, size_t struct_size);
static inline void fajit_ctx_opts_init(fajit_ctx_opts *opts)
{
    fajit_ctx_opts_init_sized(opts, sizeof *opts);
}

/* Creates a context for opts->device (opts may be NULL: defaults). Loads the CUDA driver
 * (unless device is FAJIT_DEVICE_NONE) and opens the cache; NVRTC is loaded on first
 * need. On failure returns the status and, when a context could be allocated, still
 * sets *out so fajit_errmsg(*out) explains the failure; destroy it either way. On a
 * Hopper (9.0) device it allocates a small device buffer (the dynamic tile scheduler's
 * counters, ~520 KB) and synchronizes the context once, so that no launch has to.
 * opts->struct_size is checked as "Growing structs" says. At most 2048 contexts live at
 * once (OUT_OF_MEMORY beyond, with *out NULL).
 * Errors: NO_DRIVER, NO_DEVICE, CUDA_ERROR, INVALID_ARGUMENT, OUT_OF_MEMORY. */
FAJIT_API fajit_status fajit_ctx_create(fajit_ctx **out, const fajit_ctx_opts *opts);

/* Releases everything the context owns. Accepts NULL; a pointer that is not a live
 * context (destroyed already) is ignored. Not concurrently with other calls on the same
 * context. */
FAJIT_API void fajit_ctx_destroy(fajit_ctx *ctx);

/*======  3. Attention forward  ======*/

typedef enum fajit_dtype { FAJIT_F16 = 0, FAJIT_BF16 = 1 } fajit_dtype;

/* The element type of K and V where it is not Q's: an FP8 KV cache (fajit_attn_desc.kv_dtype). */
typedef enum fajit_kv_dtype {
    FAJIT_KV_AS_Q = 0,   /* K and V have Q's dtype */
    FAJIT_KV_E4M3 = 1,   /* FP8 e4m3fn (OCP; torch.float8_e4m3fn, vLLM's "fp8"/"fp8_e4m3") */
    FAJIT_KV_E5M2 = 2    /* FP8 e5m2 (torch.float8_e5m2, vLLM's "fp8_e5m2") */
} fajit_kv_dtype;

typedef enum fajit_mask {
    FAJIT_MASK_NONE = 0,
    FAJIT_MASK_CAUSAL = 1, /* bottom-right aligned when seqlen_q != seqlen_k */
    FAJIT_MASK_WINDOW = 2  /* sliding window: window_left / window_right */
} fajit_mask;

/* One attention forward problem. Fill with fajit_attn_desc_init, then set the optional
 * fields. Strides are in elements; the last dimension (head_dim) must be contiguous.
 *   Q, O   [batch][seqlen_q][heads_q ][head_dim]
 *   K, V   [batch][seqlen_k][heads_kv][head_dim]
 * Key j is visible to query i (0-based within their sequence) when
 *   j >= i + (seqlen_k - seqlen_q) - window_left  (no bound if window_left < 0)
 *   j <= i + (seqlen_k - seqlen_q) + window_right (no bound if window_right < 0).
 * A query row that sees no key gets O = 0 and LSE = -inf.
 * All pointers are device pointers, 16-byte aligned; all strides multiples of 8. */
typedef struct fajit_attn_desc {
    size_t struct_size;            /* set by fajit_attn_desc_init: see "Growing structs" */
    const void *q, *k, *v;         /* k and v may be NULL when no sequence has a key
                                      (varlen, seqlen_k 0, no block table): O = 0, LSE = -inf */
    void *o;
    int64_t q_batch_stride, q_row_stride, q_head_stride;
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    int64_t o_batch_stride, o_row_stride, o_head_stride;
    int batch, heads_q, heads_kv; /* heads_q % heads_kv == 0 (GQA; MQA: heads_kv = 1);
                                     batch, heads_q <= 65535 (FAJIT_MAX_BATCH/_HEADS) */
    int seqlen_q, seqlen_k;       /* for varlen: the maxima over the batch; at most
                                     FAJIT_MAX_SEQLEN (2^29), and batch x heads_q x
                                     ceil(seqlen_q / 64) below 2^31 */
    int head_dim;                 /* multiple of 8, 8..256 */
    fajit_dtype dtype;
    fajit_mask mask;
    int window_left, window_right; /* WINDOW only, each >= 0 */
    float softmax_scale;           /* default 1/sqrt(head_dim) */
    /* Optional. */
    const int32_t *cu_seqlens_q;   /* varlen: device int32[batch+1], prefix sums of the
                                      lengths; rows packed, batch strides ignored */
    const int32_t *cu_seqlens_k;   /* required with cu_seqlens_q */
    int total_q, total_k;          /* varlen, optional: the packed row counts
                                      (cu_seqlens_q[batch], cu_seqlens_k[batch]); the
                                      Hopper kernel needs them for its TMA descriptors,
                                      without them (0) the portable kernel serves */
    float *lse;                    /* natural-log LSE, fp32: [batch][heads_q][seqlen_q];
                                      varlen: [heads_q][total_q] */
    /* Appended after the first sized layout (a caller built against it gets the defaults). */
    fajit_op op;                   /* what to compute; default FAJIT_OP_FWD */
    void *workspace;               /* optional caller-owned device scratch, 256-byte
                                      aligned, for launches captured into CUDA graphs (the
                                      graph then owns no fajit memory); NULL (default): the
                                      context owns the workspace. Given with
                                      workspace_bytes, or neither. FAJIT_INVALID_ARGUMENT at
                                      launch if smaller than the plan needs */
    size_t workspace_bytes;        /* its size; 0 with workspace NULL */
    /* Paged K/V (optional): a KV cache in pages addressed through a block table, as vLLM,
     * SGLang and FlashInfer keep it. K and V are then [num_pages][page_size][heads_kv]
     * [head_dim] each (any strides: one combined [2][num_pages]... tensor works), k/v point
     * at page 0, and key j of sequence b is row j % page_size of page
     * block_table[b * block_table_stride + j / page_size]. Page ids are device values: one
     * out of [0, num_pages) is undefined behaviour, unless the context runs checked
     * (fajit_ctx_opts.checked, FAJIT_CHECKED=1), which tests every page id and length in the
     * kernel and returns FAJIT_INVALID_ARGUMENT naming the first bad one. seqlen_k is then
     * the longest sequence's key count, at most block_table_stride * page_size. */
    const int32_t *block_table;    /* device int32 [batch][block_table_stride] */
    int64_t block_table_stride;    /* elements between rows (max pages per sequence) */
    int page_size;                 /* keys per page, 1..FAJIT_MAX_PAGE_SIZE */
    int num_pages;                 /* pages in the K and V caches, >= 1 */
    int64_t k_page_stride, v_page_stride; /* elements between pages; 0 = page_size times
                                      the row stride (dense pages) */
    const int32_t *seqused_k;      /* device int32 [batch], optional with a block_table:
                                      keys in use per sequence, each <= block_table_stride *
                                      page_size (and at most seqlen_k for the launch shape
                                      to fit: longer ones are right, only slower); default:
                                      seqlen_k for every sequence */
    int num_splits;                /* split-KV of the decode kernels: 0 = chosen by fajit,
                                      1 = none, up to FAJIT_MAX_SPLITS (forced) */
    int num_splits_max;            /* an upper bound on the split count instead of a forced
                                      one (vLLM's num_splits, sized for its CUDA-graph
                                      buffers): fajit chooses its own count as for
                                      num_splits 0 and takes at most this many (a tuned
                                      count too); fajit_attn_workspace_size sizes for the
                                      count so chosen. 0 (default) = no bound, else 1..
                                      FAJIT_MAX_SPLITS. With num_splits > 0 as well, the
                                      forced count must be within the bound
                                      (FAJIT_INVALID_ARGUMENT otherwise). (It took the
                                      struct's tail padding, so its sizeof did not grow:
                                      a caller built before it must have zeroed that, as
                                      fajit_attn_desc_init does.) */
    /* Model features (appended; all zero: off, and then not compiled into any kernel).
     * A family that cannot serve a feature that is on does not apply; where none does,
     * the call is FAJIT_UNSUPPORTED naming the feature (docs/usage.md lists which
     * family serves what). Logits below are s = softmax_scale * q.k. */
    float softcap;                 /* > 0: each logit becomes softcap * tanh(s / softcap)
                                      before the softmax (Gemma 2: 50, Grok-1: 30); 0: off */
    const float *sinks;            /* device fp32 [heads_q]: one logit per query head that
                                      joins every row's softmax denominator and adds no value
                                      (attention sinks, GPT-OSS; vLLM's s_aux, FA3's
                                      learnable_sink). The LSE includes it; a row that sees no
                                      key gets O = 0 and LSE = its sink. NULL: none */
    const float *alibi_slopes;     /* device fp32 [heads_q], or [batch][heads_q] rows
                                      alibi_batch_stride apart: adds -slope * |i + seqlen_k -
                                      seqlen_q - j| to logit (i, j) (after the softcap, as
                                      flash-attn does; i, j and the lengths per sequence).
                                      NULL: none */
    int64_t alibi_batch_stride;    /* elements between batches' slopes; 0: one row for all */
    int head_dim_v;                /* head_dim of V and O where it differs from Q's and K's
                                      (DeepSeek prefill: 192 / 128); 0: head_dim. V's and O's
                                      strides count these columns; O's columns past it are
                                      not written. Served by the Hopper family (a multiple
                                      of 16, at most head_dim; contiguous, varlen, paged
                                      prefill), fa2 (at most head_dim) and the reference
                                      kernel (unpaged), not by the decode family */
    fajit_kv_dtype kv_dtype;       /* the K/V element type: FAJIT_KV_AS_Q (default) or FP8,
                                      dequantized in the kernel as k_descale[.] * K, v_descale
                                      [.] * V (vLLM's fp8 KV cache). FP8 K/V strides are in
                                      1-byte elements, multiples of 16; head_dim a multiple
                                      of 16 */
    const float *k_descale, *v_descale; /* device fp32, required with an FP8 kv_dtype:
                                      [batch][heads_kv] rows descale_batch_stride and
                                      columns descale_head_stride apart (both 0: one value for
                                      the tensor, vLLM's k_scale/v_scale) */
    int64_t descale_batch_stride, descale_head_stride;
} fajit_attn_desc;
#define FAJIT_MAX_SPLITS 128
/* Size limits of the kernels (launch grids, int index arithmetic): FAJIT_UNSUPPORTED beyond. */
#define FAJIT_MAX_BATCH 65535
#define FAJIT_MAX_HEADS 65535
#define FAJIT_MAX_SEQLEN (1 << 29)
/* The largest page_size a block table may use (as the spec format's): INVALID_ARGUMENT beyond. */
#define FAJIT_MAX_PAGE_SIZE 65536
/* The first sized layout (up to lse): the smallest struct_size accepted. */
#define FAJIT_ATTN_DESC_SIZE_V1 (offsetof(fajit_attn_desc, lse) + sizeof(float *))

/* Sets the required fields and defaults for contiguous tensors ([batch, seq, heads, dim],
 * strides derived), mask NONE, scale 1/sqrt(head_dim), no varlen, no LSE, op FWD, no
 * workspace, and struct_size. Validates nothing; fajit_attn_fwd does. NULL: does nothing.
 * _sized fills the first `struct_size` bytes, for FFIs; C and C++ call the inline one. */
FAJIT_API void fajit_attn_desc_init_sized(fajit_attn_desc *d, size_t struct_size,
                                          const void *q, const void *k, const void *v, void *o,
                                          int batch, int heads_q, int heads_kv, int seqlen_q,
                                          int seqlen_k, int head_dim, fajit_dtype dtype);
static inline void fajit_attn_desc_init(fajit_attn_desc *d, const void *q, const void *k,
                                        const void *v, void *o, int batch, int heads_q,
                                        int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                                        fajit_dtype dtype)
{
    fajit_attn_desc_init_sized(d, sizeof *d, q, k, v, o, batch, heads_q, heads_kv, seqlen_q,
                               seqlen_k, head_dim, dtype);
}

/* Checks `d` (its struct_size first) against every rule without touching the GPU: also
 * op (a known fajit_op) and workspace (both or neither, 256-byte aligned; its size is
 * checked at launch). FAJIT_INVALID_ARGUMENT or
 * FAJIT_UNSUPPORTED with a message naming the rule and the value in fajit_errmsg(ctx)
 * (ctx may be NULL: then only the status is reported). */
FAJIT_API fajit_status fajit_attn_check(fajit_ctx *ctx, const fajit_attn_desc *d);

/* O = softmax(Q K^T * scale + mask) V on `stream` (a CUstream; NULL = default stream).
 * Validates first (nothing is launched on bad input), then finds the kernel: in memory,
 * in the cache, or compiled now (per policy). Asynchronous: returns after the launch.
 * The context's device must be current-able: fajit makes its primary context current on
 * the calling thread. May be called while `stream` is captured into a CUDA graph (any
 * capture mode), including a kernel's first use; the graph may be replayed any number of
 * times (the gpu suite's graph_capture test). Under BLOCKING a first use still compiles or
 * reads the cache during the capture, and a graph keeps the kernel it captured (under FALLBACK
 * possibly a stand-in, for good): warm first. */
FAJIT_API fajit_status fajit_attn_fwd(fajit_ctx *ctx, const fajit_attn_desc *d,
                                      void *stream);

/* Same problem through the naive reference kernel (the test oracle): always correct,
 * slow. */
FAJIT_API fajit_status fajit_attn_fwd_reference(fajit_ctx *ctx, const fajit_attn_desc *d,
                                                void *stream);

/* Describes, in one line, the kernel fajit_attn_fwd would run for `d` on target `arch`
 * ("sm_90a"; NULL = the context's device): family, tile configuration, launch shape.
 * Compiles nothing; runs no validation. On the context's device (or its target named) a
 * family passed over as quarantined is named at the end, with its failing case and error.
 * Errors as fajit_attn_check, plus UNSUPPORTED for targets before sm_80. */
FAJIT_API fajit_status fajit_dispatch_describe(fajit_ctx *ctx, const char *arch,
                                               const fajit_attn_desc *d, char *buf,
                                               size_t len);

/* The device workspace one call of `d` needs on the context's device (the plan fajit_attn_fwd
 * would run: tile counters, split-KV partial results), in bytes; 0 for most problems. A
 * caller that captures launches into CUDA graphs may pass that much as d->workspace
 * (256-byte aligned, zeroed once before its first use: fajit's kernels leave it as they found
 * it) instead of the context's own; a smaller one is FAJIT_INVALID_ARGUMENT at launch.
 * Compiles nothing. Errors as fajit_attn_check, plus NO_DEVICE. */
FAJIT_API fajit_status fajit_attn_workspace_size(fajit_ctx *ctx, const fajit_attn_desc *d,
                                                 size_t *bytes);

/* Merging two partial results (cascade / shared-prefix attention): the same queries
 * attended over two disjoint sets of keys (e.g. a prefix shared by many sequences, then each
 * sequence's own keys), each with its LSE, give the result over the union:
 *   M = max(lse_a, lse_b), w_x = exp(lse_x - M),
 *   O = (w_a O_a + w_b O_b) / (w_a + w_b), LSE = M + log(w_a + w_b)
 * (both -inf: O = 0, LSE = -inf; a side of weight 0 contributes nothing, not even a NaN).
 * O_a, O_b, O: [batch][seqlen][heads][head_dim] of `dtype`, each with its own strides
 * (elements; 4-element multiples, 8-byte aligned); the three LSEs fp32, natural log, one
 * layout: element (b, i, h) at b*lse_batch_stride + h*lse_head_stride + i*lse_row_stride —
 * by default fajit's own (fajit_attn_desc.lse: [batch][heads][seqlen]; for a varlen
 * result pass batch 1 and seqlen = total_q). o may be o_a or o_b and lse may be lse_a or
 * lse_b (in place); lse NULL: not written. */
typedef struct fajit_merge_desc {
    size_t struct_size;          /* set by fajit_merge_desc_init */
    const void *o_a, *o_b;
    const float *lse_a, *lse_b;
    void *o;
    float *lse;
    int64_t a_batch_stride, a_row_stride, a_head_stride;
    int64_t b_batch_stride, b_row_stride, b_head_stride;
    int64_t o_batch_stride, o_row_stride, o_head_stride;
    int64_t lse_batch_stride, lse_row_stride, lse_head_stride;
    int batch, seqlen, heads, head_dim;   /* head_dim: a multiple of 4 */
    fajit_dtype dtype;
} fajit_merge_desc;

/* Dense strides for all three O and fajit's LSE layout. NULL: does nothing. */
FAJIT_API void fajit_merge_desc_init_sized(fajit_merge_desc *m, size_t struct_size,
                                           const void *o_a, const float *lse_a,
                                           const void *o_b, const float *lse_b, void *o,
                                           float *lse, int batch, int seqlen, int heads,
                                           int head_dim, fajit_dtype dtype);
static inline void fajit_merge_desc_init(fajit_merge_desc *m, const void *o_a,
                                         const float *lse_a, const void *o_b,
                                         const float *lse_b, void *o, float *lse, int batch,
                                         int seqlen, int heads, int head_dim, fajit_dtype dtype)
{
    fajit_merge_desc_init_sized(m, sizeof *m, o_a, lse_a, o_b, lse_b, o, lse, batch, seqlen,
                                heads, head_dim, dtype);
}

/* The merge on `stream`: one small memory-bound kernel (compiled per dtype, covered by
 * fajit_warm; under the STRICT and FALLBACK policies a kernel not in the cache is
 * FAJIT_CACHE_MISS). Validates first: INVALID_ARGUMENT naming the field; NO_DEVICE
 * without a device. CUDA-graph capturable. */
FAJIT_API fajit_status fajit_attn_merge(fajit_ctx *ctx, const fajit_merge_desc *m, void *stream);

/*======  4. Observability  ======*/

/* Details of the calling thread's last failure on this context (the rule and the value,
 * the driver or NVRTC code name, the first lines of a compile log): threads that share a
 * context each read their own. Never NULL; "" when nothing failed on this thread. Valid
 * until this thread's next call on the context. A thread keeps the messages of its four
 * most recently failing contexts. */
FAJIT_API const char *fajit_errmsg(fajit_ctx *ctx);

/* The full NVRTC log of this thread's last failed (or, if none failed, last) compile on the
 * context (fajit_warm's failure: the log of its first failing compile). Valid as
 * fajit_errmsg. */
FAJIT_API const char *fajit_compile_log(fajit_ctx *ctx);

typedef struct fajit_counters {
    uint64_t calls;            /* fajit_attn_fwd calls that launched */
    uint64_t hits_memory;      /* kernel found in the context's memory */
    uint64_t hits_disk;        /* kernel found in the SQLite cache */
    uint64_t misses;           /* kernel in neither: compiled (or refused under STRICT) */
    uint64_t compiles;         /* NVRTC compiles run by this context */
    double compile_seconds;    /* wall time spent in them */
    uint64_t corrupt_entries;  /* cache entries that failed their checksum */
    uint64_t lease_waits;      /* times another thread/process was compiling a key */
    uint64_t serving_compiles; /* compiles that made a fajit_attn_fwd call wait */
    uint64_t background_compiles; /* FALLBACK: compiles run off the calling thread */
    uint64_t fallback_launches;   /* FALLBACK: launches of a stand-in kernel */
} fajit_counters;

/* Fills `out` (NULL: does nothing); zeros when ctx is NULL or not a live context. */
FAJIT_API void fajit_counters_get(fajit_ctx *ctx, fajit_counters *out);

/*======  5. Offline work and system information  ======*/

typedef struct fajit_sysinfo {
    int driver_loaded;       /* libcuda.so.1 found */
    int driver_version;      /* e.g. 13000; 0 when not loaded */
    int nvrtc_loaded;
    int nvrtc_major, nvrtc_minor;
    int device_count;
    const char *cache_path;  /* NULL when memory only; valid for the context's life */
    int cache_readonly;
} fajit_sysinfo;

/* Fills `out`; loads NVRTC if needed. Never fails for a missing driver or NVRTC: it
 * reports them as not loaded. */
FAJIT_API fajit_status fajit_sysinfo_get(fajit_ctx *ctx, fajit_sysinfo *out);

typedef struct fajit_device_info {
    char name[256];
    int cc_major, cc_minor, sm_count;
    char arch[16];           /* exact compile target: "sm_90a" on an H100/H200 */
    size_t total_mem;
} fajit_device_info;

FAJIT_API fajit_status fajit_device_info_get(fajit_ctx *ctx, int ordinal,
                                             fajit_device_info *out);

/* Compiles every kernel variant fajit ships for target `arch` ("sm_80", "sm_90a",
 * "sm_100a", ...) into the cache, without a GPU, on `jobs` threads (<= 0: one per online
 * CPU). Progress goes to the context's progress callback (from the calling thread).
 * *n_compiled / *n_cached (may be NULL) count what was compiled now and what was already
 * there. On a failure the other variants still finish; the first error is returned.
 * Kernels compiled but not saved (a put failing: disk full, a damaged file) make it return
 * CACHE_ERROR, with their count in fajit_errmsg, once everything else succeeded. */
FAJIT_API fajit_status fajit_warm(fajit_ctx *ctx, const char *arch, int jobs,
                                  int *n_compiled, int *n_cached);

/* Same, for the kernels a spec needs (see "Tuning" below for `spec`): for each of its
 * problems, the reference kernel and every candidate configuration the tuner may time, for
 * each shape at each of the spec's batches (the decode family's tiles depend on the batch). */
FAJIT_API fajit_status fajit_warm_spec(fajit_ctx *ctx, const char *spec, const char *arch,
                                       int jobs, int *n_compiled, int *n_cached);

/*------ Tuning ------
 * The tuner times every candidate tile configuration of a problem on this GPU and stores
 * the winner in the cache, keyed by GPU class (name, target, SM count), problem signature
 * ("fwd.bf16.hd128.causal.gqa4") and shape bucket (sequence lengths by powers of two:
 * "sq<=4k"). fajit_attn_fwd then uses the winner of the matching row; with no row, the
 * per-target default table decides. Candidates are pruned before compiling (shared
 * memory, register budget, divisibility) and after (spills, local memory, ptxas
 * warnings), checked once against the reference kernel, then timed with CUDA events after
 * a warm-up, the L2 flushed before every repetition and inputs rotated; the median is kept
 * with its spread. Winner: the fastest median, except that candidates within noise_band
 * of it are equal and the earliest in candidate order (the default first) wins. The whole
 * timing table is stored with the row. Tuning runs only when asked: never inside
 * fajit_attn_fwd. A `spec` is a file path or a built-in preset name (docs/spec-format.md:
 * llama-3-8b, llama-3-70b, qwen2.5-7b, mistral-7b, llama-3-8b-paged, llama-3.2-1b-paged). */
typedef struct fajit_tune_opts {
    size_t struct_size;   /* set by fajit_tune_opts_init: see "Growing structs" */
    int reps;             /* timed repetitions per candidate; default 20 */
    double noise_band;    /* relative band in which medians tie; default 0.03 */
    int pin;              /* store winners pinned: later unpinned tuning keeps them */
    int force;            /* re-measure even when a row exists (default: keep it) */
} fajit_tune_opts;
/* The first sized layout: the smallest struct_size accepted. */
#define FAJIT_TUNE_OPTS_SIZE_V1 (offsetof(fajit_tune_opts, force) + sizeof(int))

/* Fills `o` with the defaults above (NULL: does nothing); _sized as for fajit_ctx_opts. */
FAJIT_API void fajit_tune_opts_init_sized(fajit_tune_opts *o, size_t struct_size);
static inline void fajit_tune_opts_init(fajit_tune_opts *o)
{
    fajit_tune_opts_init_sized(o, sizeof *o);
}

typedef struct fajit_tune_result {
    char signature[128];
    char bucket[16];          /* "sq=1,sk<=2k,lat": the shape bucket (up to 16 query rows:
                                 and the decode split class, ",bw", ",lat" or ",latf"),
                                 cut to 15 characters where longer (the cache row has
                                 it whole) */
    int seqlen_q, seqlen_k, batch;
    char winner[32];          /* "128x64w4s1": block_m x block_n, warps, stages */
    char default_config[32];
    double winner_ms, default_ms;  /* default_ms 0 when the default was pruned */
    int candidates, pruned;
    int from_cache;           /* 1: a stored row was kept, nothing was measured */
} fajit_tune_result;

/* `o` may be NULL (defaults); its struct_size is checked as "Growing structs" says.
 * Tunes the problem `d` on the caller's buffers (O and LSE are overwritten; Q, K, V are
 * only read) and stores the winner. Blocking; needs a device. */
FAJIT_API fajit_status fajit_tune(fajit_ctx *ctx, const fajit_attn_desc *d,
                                  const fajit_tune_opts *o, fajit_tune_result *out);

/* Tunes every shape of a spec on random inputs it allocates itself; `fn` (may be NULL)
 * receives each shape's result. Progress goes to the context's progress callback. */
typedef void (*fajit_tune_result_fn)(void *user, const fajit_tune_result *r);
FAJIT_API fajit_status fajit_tune_spec(fajit_ctx *ctx, const char *spec,
                                       const fajit_tune_opts *o, fajit_tune_result_fn fn,
                                       void *user);

/*------ Benchmarking ------
 * fajit_bench_spec times fajit_attn_fwd itself (the kernel the context's dispatch picks,
 * tuned rows included) on every shape of a spec (as fajit_tune_spec takes it), on random
 * inputs it allocates: a first call (it may compile, per the context's policy), three
 * warm-up calls, then `reps` timed calls on the default stream, each between two CUDA
 * events with the L2 flushed before it (the tuner's discipline). K and V are contiguous,
 * or pages in random order where the spec sets page_size. `fn` (may be NULL) receives each shape's
 * result; progress goes to the context's progress callback. Blocking; needs a device. */
typedef struct fajit_bench_result {
    const char *problem;       /* the spec section's name; valid during the callback */
    const fajit_attn_desc *desc; /* the problem timed (device pointers freed after) */
    char kernel[256];          /* fajit_dispatch_describe's line for it */
    int reps;
    const double *samples_ms;  /* the reps timings in run order; valid during the callback */
    double median_ms, min_ms, max_ms, p10_ms, p90_ms;  /* nearest-rank percentiles */
} fajit_bench_result;
typedef void (*fajit_bench_fn)(void *user, const fajit_bench_result *r);
/* reps in 1..1000. Errors: INVALID_ARGUMENT (spec, reps), NO_DEVICE (compile-only
 * context), CUDA_ERROR (allocation, launch), those of fajit_attn_fwd. */
FAJIT_API fajit_status fajit_bench_spec(fajit_ctx *ctx, const char *spec, int reps,
                                        fajit_bench_fn fn, void *user);
/*------ Validation ------
 * Before a kernel family is trusted on a GPU class it has not run on (the GPU's name,
 * target, SM count, driver version and fajit's version), fajit runs the family's default
 * kernels on a small fixed set of problems it applies to (head_dim 64 and 128, causal and
 * none, GQA, odd and unequal lengths, varlen, a sliding window, decode and paged K/V: up to
 * 6 per family) on random inputs and compares each with the reference kernel within the
 * tuner's tolerance (one rounding of the dtype at the largest |O|). The verdict (pass, or
 * fail with the first failing case and the error) is stored in the cache for that GPU
 * class; bundles carry verdicts. A family that failed is quarantined for the class:
 * dispatch skips it for the next family that applies (at worst the portable or the
 * reference kernel) and logs a warning naming the family, the case and the error, once per
 * context; fajit_dispatch_describe says so. A context reads a family's verdict once, at its
 * first need. When validation runs is the context's fajit_validate_policy.
 * Model features (softcap, sinks, ALiBi, head_dim_v, FP8 K/V) compile other kernel code,
 * so a verdict is of one feature set: the problems above with exactly those features on
 * (softcap 30, random sinks, ALiBi slopes 2^(-8(h+1)/H); FP8 K/V: random normal codes with
 * a power-of-two descale per tensor), against the reference kernel with the same features
 * (FP8: on K and V widened to Q's dtype and descaled, which is exact). Dispatch of a
 * problem with features reads (and under LAZY makes) the verdict of its family for its
 * feature set; a FAIL quarantines the family for that set only, and a feature-free verdict
 * says nothing of any set. With head_dim_v the problems' V and O have half the head_dim
 * (64 of 128, 32 of 64). */
typedef enum fajit_verdict {
    FAJIT_VERDICT_NONE = 0,  /* not validated on this GPU class */
    FAJIT_VERDICT_PASS = 1,
    FAJIT_VERDICT_FAIL = 2   /* quarantined */
} fajit_verdict;

typedef struct fajit_verdict_info {
    size_t struct_size;      /* set by fajit_verdict_info_init: see "Growing structs" */
    fajit_family family;     /* AUTO when the stored family name is not one of this library's */
    char family_name[16];    /* "fa3" */
    fajit_verdict verdict;
    char failed_case[160];   /* FAIL: the first failing problem, "bf16 hd128 causal b2 ..." */
    char error[256];         /* FAIL: "wrong result: max error 0.31 against the reference ..." */
    int64_t created;         /* unix seconds; 0 with NONE */
    /* The GPU class. */
    char gpu_name[128];
    char arch[16];
    int sm_count;
    int driver_version;      /* as fajit_sysinfo.driver_version */
    char fajit_version[16];
    /* Appended after the first sized layout: the model-feature set of the verdict. In
     * fajit_family_verdict also the question: set features and kv_dtype after
     * fajit_verdict_info_init (zero, as init leaves them: the feature-free verdict). */
    unsigned features;       /* FAJIT_FEATURE_* bits */
    fajit_kv_dtype kv_dtype; /* E4M3 or E5M2 with FAJIT_FEATURE_KV_FP8, else AS_Q */
    char features_name[64];  /* "softcap,sinks", "kv_e4m3"; "" for none (as the cache
                                stores it; a name this library cannot read: features 0
                                and fajit_cache_verify_verdicts calls the row bad) */
} fajit_verdict_info;
#define FAJIT_VERDICT_INFO_SIZE_V1 (offsetof(fajit_verdict_info, fajit_version) + 16)

/* The bits of a model-feature set (fajit_verdict_info.features,
 * fajit_validation_report.features): which model features of fajit_attn_desc are on. */
enum {
    FAJIT_FEATURE_SOFTCAP = 1,      /* softcap > 0 */
    FAJIT_FEATURE_SINKS = 2,        /* sinks */
    FAJIT_FEATURE_ALIBI = 4,        /* alibi_slopes */
    FAJIT_FEATURE_HEAD_DIM_V = 8,   /* head_dim_v set and != head_dim */
    FAJIT_FEATURE_KV_FP8 = 16       /* an FP8 kv_dtype (which one: the kv_dtype field) */
};

/* Sets struct_size and zeros the rest (NULL: does nothing); _sized as for fajit_ctx_opts.
 * The library writes at most struct_size bytes of an output struct. */
FAJIT_API void fajit_verdict_info_init_sized(fajit_verdict_info *v, size_t struct_size);
static inline void fajit_verdict_info_init(fajit_verdict_info *v)
{
    fajit_verdict_info_init_sized(v, sizeof *v);
}

/* The verdict on `family` (not AUTO, not REF) for the context's GPU class and the feature
 * set out->features / out->kv_dtype (read where out->struct_size holds them; else, and
 * when zero, the feature-free verdict). Errors: INVALID_ARGUMENT (no such family, out NULL
 * or its struct_size, features naming no set: unknown bits, KV_FP8 and kv_dtype not
 * together), NO_DEVICE. */
FAJIT_API fajit_status fajit_family_verdict(fajit_ctx *ctx, fajit_family family,
                                            fajit_verdict_info *out);

/* Every verdict in the context's cache, of every GPU class (a context without a device
 * may list them), ordered by class, family and feature set; fn gets a fajit_verdict_info of this
 * library's size, valid during the call; nonzero from fn stops. Errors: INVALID_ARGUMENT,
 * CACHE_ERROR. */
typedef int (*fajit_verdict_fn)(void *user, const fajit_verdict_info *v);
FAJIT_API fajit_status fajit_verdict_list(fajit_ctx *ctx, fajit_verdict_fn fn, void *user);

/* Checks every verdict row of the context's cache (a bundle can write anything there): its
 * family is one this library validates, its arch a target it knows, its feature set one
 * it names, its status pass or fail, its `created` neither in the future nor before 1970. Bad rows are removed (the
 * family is validated again on its first use on that class); on_bad (may be NULL) gets
 * each first, with why, during the call (it must not call into the context). Counts may
 * be NULL. Errors: INVALID_ARGUMENT, CACHE_ERROR. */
typedef int (*fajit_bad_verdict_fn)(void *user, const fajit_verdict_info *v, const char *why);
FAJIT_API fajit_status fajit_cache_verify_verdicts(fajit_ctx *ctx, fajit_bad_verdict_fn on_bad,
                                                   void *user, int *n_checked, int *n_bad);

typedef struct fajit_validation_report {
    size_t struct_size;      /* set by fajit_validation_report_init */
    int families;            /* families validated */
    int failed;              /* of them, failed (now quarantined) */
    int cases;               /* problems run, over all of them */
    fajit_family first_failed; /* AUTO when none failed */
    char failed_case[160];   /* of first_failed */
    char error[256];
    /* Appended after the first sized layout: the question, as in fajit_verdict_info. Set
     * after fajit_validation_report_init: fajit_validate validates this model-feature set
     * (zero: feature-free problems). */
    unsigned features;       /* FAJIT_FEATURE_* bits */
    fajit_kv_dtype kv_dtype; /* E4M3 or E5M2 with FAJIT_FEATURE_KV_FP8, else AS_Q */
} fajit_validation_report;
#define FAJIT_VALIDATION_REPORT_SIZE_V1 (offsetof(fajit_validation_report, error) + 256)

FAJIT_API void fajit_validation_report_init_sized(fajit_validation_report *r, size_t struct_size);
static inline void fajit_validation_report_init(fajit_validation_report *r)
{
    fajit_validation_report_init_sized(r, sizeof *r);
}

/* Validates `family` (AUTO: every family that serves some validation problem on this
 * device, the reference kernel excepted) for the feature set out->features / kv_dtype
 * (out NULL or too small to hold them: feature-free) on the context's device now,
 * compiling what it needs, and stores each verdict (replacing an older one of the class
 * and set; a read-only or memory-only cache keeps them for the context's life). Blocking;
 * progress per problem goes to the progress callback, one line per verdict to the log
 * (INFO on pass, WARN on fail). Returns OK when every family validated passed;
 * VALIDATION_FAILED when one failed (fajit_errmsg names the family, the case and the
 * error); UNSUPPORTED when a named family applies to no validation problem on this target
 * with those features; NO_DEVICE; INVALID_ARGUMENT (REF, a value naming no family,
 * features naming no set); and the errors that keep a problem from being run at all (COMPILE_FAILED,
 * NO_NVRTC, CUDA_ERROR of an allocation or of the reference kernel, ...), which record no
 * verdict. */
FAJIT_API fajit_status fajit_validate(fajit_ctx *ctx, fajit_family family,
                                      fajit_validation_report *out);

/* One cache entry, for listing. Strings valid during the callback only. */
typedef struct fajit_cache_entry {
    char key_hex[33];
    const char *arch;
    const char *name;
    size_t cubin_bytes;
    double compile_ms;
    int regs, smem, spill_bytes;
    int64_t created, last_used, hits;
} fajit_cache_entry;

typedef int (*fajit_cache_entry_fn)(void *user, const fajit_cache_entry *e);

/* Cache maintenance on the context's cache. list: calls fn per entry (return nonzero to
 * stop). verify: re-reads every entry, removes bad ones, *n_bad counts them; it returns
 * CACHE_ERROR (counts still set) when the context found its cache file corrupt and moved
 * it aside (every entry lost; the warning names where: at open, or later when a statement
 * or verify's SQLite integrity check found damage inside it), or on SQLite errors. clear:
 * removes every entry. stats: entries, bytes of cubins, bytes of the file. */
FAJIT_API fajit_status fajit_cache_list(fajit_ctx *ctx, fajit_cache_entry_fn fn, void *user);
FAJIT_API fajit_status fajit_cache_verify(fajit_ctx *ctx, int *n_checked, int *n_bad);
/* Recompiles, with the local NVRTC and nothing stored, every cached kernel whose key is
 * that of a variant this fajit builds (its shipped configurations and tuning candidates of
 * every dtype, head_dim and mask) compiled by the local NVRTC version, and compares the
 * bytes: a check that the cache serves what its keys say, beyond the checksums (which a
 * bundle from an untrusted source can forge). Rows are chosen by key alone, never by their
 * nvrtc_version column (which neither key nor checksum covers). on_differ (may be NULL) is
 * called for each kernel whose bytes differ. Counts may be NULL; skipped: kernels whose key
 * is that of another NVRTC version, or of no variant enumerated (older sources, other
 * head-count packings, forged keys); nothing vouches for them. One compile per
 * kernel compared (0.3-0.6 s each), on this thread. Errors: NO_NVRTC, CACHE_ERROR,
 * COMPILE_FAILED. */
FAJIT_API fajit_status fajit_cache_verify_recompile(fajit_ctx *ctx,
                                                    fajit_cache_entry_fn on_differ,
                                                    void *user, int *n_same, int *n_differ,
                                                    int *n_skipped);
FAJIT_API fajit_status fajit_cache_clear(fajit_ctx *ctx);
FAJIT_API fajit_status fajit_cache_stats(fajit_ctx *ctx, int64_t *entries, int64_t *bytes,
                                         int64_t *file_bytes);
/* Removes the least recently loaded kernels (then the least hit, then the oldest) until the
 * cached kernels total at most max_bytes (0 empties it). Tuning rows stay. The file keeps
 * its pages for reuse. Counts may be NULL. Errors: INVALID_ARGUMENT, CACHE_ERROR
 * (read-only cache, SQLite). */
FAJIT_API fajit_status fajit_cache_prune(fajit_ctx *ctx, int64_t max_bytes, int64_t *n_removed,
                                         int64_t *bytes_freed);

/* Bundles for fleets. export writes the kernels (of target `arch`, NULL = all) and the
 * tuning rows of the context's cache to one self-contained SQLite file, verified and
 * checkpointed, that can be shipped and opened read-only. import copies a bundle (or any
 * cache file) into the context's cache in one transaction: blobs verified, bad ones
 * skipped; a pinned tuning row beats an unpinned one, else the newer wins; the result
 * does not depend on the order of imports, so several imports into an empty cache and one
 * export merge bundles. Counts may be NULL. export with `arch` fails (nothing written)
 * for a name that is no target (INVALID_ARGUMENT) and for a target of which the cache
 * holds no good kernel (CACHE_ERROR); export refuses (CACHE_ERROR) to replace an existing
 * file that is not a fajit bundle (an empty regular file excepted), and anything but a
 * regular file. import takes no PASS verdict for a family with a status note (FA4): that
 * family is validated on first use on each GPU class whatever a bundle says. */
FAJIT_API fajit_status fajit_cache_export(fajit_ctx *ctx, const char *path, const char *arch,
                                          int *n_kernels, int *n_rows);
FAJIT_API fajit_status fajit_cache_import(fajit_ctx *ctx, const char *path, int *n_kernels,
                                          int *n_rows, int *n_corrupt);

/* What an export or import did, for fajit_cache_export_bundle and fajit_cache_import_bundle. */
typedef struct fajit_bundle_report {
    size_t struct_size;      /* set by fajit_bundle_report_init: see "Growing structs" */
    int kernels;             /* export: written; import: added */
    int kernels_present;     /* import: already in the cache (same key), left as they were */
    int rows;                /* tuning rows written (export), added or replaced (import) */
    int rows_kept;           /* import: rows where the cache's row won */
    int corrupt;             /* kernels whose blob failed its checksum: skipped */
    int verdicts;            /* export: written; import: added (none of the class and
                                family was there) */
    int verdicts_replaced;   /* import: the bundle's verdict won over the cache's */
    int verdicts_kept;       /* import: the cache's verdict won (newer, or FAIL of one time) */
    int verdicts_refused;    /* import: PASS verdicts not taken, for a family with a status
                                note (fajit_family_status_note: FA4, never run on hardware),
                                which passes only by being validated on the GPU class itself */
} fajit_bundle_report;
#define FAJIT_BUNDLE_REPORT_SIZE_V1 (offsetof(fajit_bundle_report, verdicts_refused) + sizeof(int))

/* Sets struct_size and zeros the rest (NULL: does nothing); _sized as for fajit_ctx_opts. */
FAJIT_API void fajit_bundle_report_init_sized(fajit_bundle_report *r, size_t struct_size);
static inline void fajit_bundle_report_init(fajit_bundle_report *r)
{
    fajit_bundle_report_init_sized(r, sizeof *r);
}

/* fajit_cache_export's flags. */
enum { FAJIT_EXPORT_FORCE = 1 };   /* replace an existing regular file that is not a bundle */

/* fajit_cache_export and fajit_cache_import with flags and every count (rep may be NULL;
 * the library writes at most rep->struct_size bytes). export opens an existing `path`
 * without blocking and never replaces anything but a regular file, nor the context's own
 * cache file or any live cache; a regular file that is neither empty nor a fajit bundle
 * only with FAJIT_EXPORT_FORCE. import reads only a regular file (a FIFO or a device is
 * refused, never blocked on). Errors as fajit_cache_export and fajit_cache_import, and
 * INVALID_ARGUMENT for rep's struct_size or unknown flags. */
FAJIT_API fajit_status fajit_cache_export_bundle(fajit_ctx *ctx, const char *path,
                                                 const char *arch, unsigned flags,
                                                 fajit_bundle_report *rep);
FAJIT_API fajit_status fajit_cache_import_bundle(fajit_ctx *ctx, const char *path,
                                                 fajit_bundle_report *rep);

/* Why the kernel fajit_attn_fwd would use for `d` on target `arch` (NULL = the context's
 * device) is or is not in the cache: the parts of its key and, for a miss, the nearest
 * cached entry and which parts differ. One or more lines of text into buf. */
FAJIT_API fajit_status fajit_cache_explain(fajit_ctx *ctx, const char *arch,
                                           const fajit_attn_desc *d, char *buf, size_t len);

/*------ Kernels of another NVRTC ------
 * A kernel's cache key holds the version of the NVRTC that compiled it, and the version
 * of the loaded NVRTC is looked up first. When that misses, an entry of the same kernel
 * (every other part of the key equal) made by another NVRTC version serves, nearest version
 * first (not newer than the loaded one, newest first; then newer, oldest first; without
 * NVRTC, newest first): a CUBIN is machine code for one exact target, and the CUDA driver,
 * not NVRTC, decides whether it runs. An entry the driver refuses to load is skipped (a
 * warning; it stays in the cache) and the next is tried; when none loads, the kernel is
 * compiled or missed as the policy says. So a cache warmed with one NVRTC serves under
 * STRICT, with no compile, a process that loaded another (a PyTorch process whose wheel
 * brought its own NVRTC), wherever the driver takes the CUBINs. */

/* Kernels this context took from the cache as another NVRTC version made them than the
 * loaded one (or, without NVRTC, any); each is counted in fajit_counters.hits_disk too.
 * 0 when ctx is NULL or not a live context. Thread-safe. */
FAJIT_API uint64_t fajit_hits_other_nvrtc(fajit_ctx *ctx);

/* Which NVRTC this process uses, as one line: "13.0 from /usr/local/cuda/lib64/libnvrtc.so.13
 * (/usr/local/cuda/lib64)": version, the file as the loader resolved it, and the rule that
 * chose it, or "not loaded: <reason and paths tried>". The search order, first that loads:
 * FAJIT_NVRTC_PATH (that file and nothing else; "none": no NVRTC); an NVRTC already loaded
 * in the process (libnvrtc.so.13, else .12); libnvrtc.so.13, then .12, by the dynamic
 * loader's search (LD_LIBRARY_PATH, RUNPATH, ld.so.cache), $CUDA_HOME/lib64,
 * /usr/local/cuda/lib64. Loads NVRTC on first use, once per process. Never NULL; the
 * string is the calling thread's, valid until its next call of this function. */
FAJIT_API const char *fajit_nvrtc_describe(void);

#ifdef __cplusplus
}
#endif
#endif /* FAJIT_H */
