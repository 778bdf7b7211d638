/* family.h - a kernel family is one table of functions (fj_family); the registry
 * (registry.c) lists them. Everything outside src/families reaches a family through this
 * table only: dispatch, warm, tune, plan, explain and describe iterate the registry.
 *
 * A family owns: whether it applies to a (problem, target); its default configuration and
 * tuning candidates; the resource check of a configuration; its name in tuning rows; the
 * kernels of a configuration (source, entry, preamble and launch shape of each launch of the
 * plan: a main kernel and, e.g., a combine kernel); the workspace a call needs; and the
 * grid and kernel arguments of each launch. A new family is one .cu file and one host file
 * here, plus a line in registry.c.
 */
#ifndef FJ_FAMILY_H
#define FJ_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "fajit.h"
#include "../jit/jit.h"

/* A compile target: compute capability (major*10 + minor) and whether it is an "a" target
 * (sm_90a: wgmma, setmaxnreg). sm_count is 0 when not known (compiling for a named target). */
typedef struct fj_target {
    int sm, arch_a, sm_count;
    int checked;   /* the context runs checked (fajit_ctx_opts.checked): kernels that read
                      device-side indices test them and report the first bad one */
    int paged_hopper; /* the Hopper kernel (and the mixed plan) may take paged prefill (the
                         default; FAJIT_PAGED_PREFILL=decode: 0, the decode family keeps it) */
    const struct fj_fopts *fopts;   /* the families' own options (fj_family.options); NULL:
                                       every family's defaults */
} fj_target;

/* The families' own options, read from the environment at context creation (fj_family.
 * options): FJ_FOPTS_BYTES per family id, all zero for a family's defaults. */
#define FJ_FOPTS_BYTES 16
#define FJ_FOPTS_IDS 8
typedef struct fj_fopts {
    _Alignas(8) unsigned char b[FJ_FOPTS_IDS][FJ_FOPTS_BYTES];
} fj_fopts;
/* Family `id`'s bytes of o (its defaults, all zero, where o is NULL). */
const void *fj_fopts_of(const fj_fopts *o, int id);

/* One configuration of some family: the family and its own bytes (a family casts them to
 * its configuration struct, checked by a static assert in its file). */
#define FJ_CFG_BYTES 64
typedef struct fj_kcfg {
    const struct fj_family *fam;
    _Alignas(8) unsigned char b[FJ_CFG_BYTES];
} fj_kcfg;

/* One kernel variant: which source, which entry point, which compile-time defines. */
typedef struct fj_variant {
    int op;                 /* fajit_op: a part of the kernel key */
    const char *source;     /* embedded file name, "attn_ref.cu" */
    const char *function;   /* extern "C" entry point */
    char preamble[512];     /* "#define FJ_DTYPE 1\n..." */
    char name[96];          /* human readable, stored with the cache entry */
} fj_variant;

/* The kernels of a configuration: at most FJ_MAX_LAUNCHES, launched in order on one stream. */
#define FJ_MAX_LAUNCHES 4
typedef struct fj_kernels {
    int n;
    fj_variant v[FJ_MAX_LAUNCHES];
    int threads[FJ_MAX_LAUNCHES];     /* block size */
    int dyn_smem[FJ_MAX_LAUNCHES];    /* dynamic shared memory, bytes */
    int pdl[FJ_MAX_LAUNCHES];         /* 1: the kernel starts with fj_pdl_wait (fj_common.cuh),
                                         so on sm_90+ it is launched as a programmatic
                                         dependent launch (fj_launch) */
    int cluster[FJ_MAX_LAUNCHES];     /* the largest thread-block cluster (along x) the family
                                         may launch the kernel in on sm_90+ (0: never); the
                                         device's answer reaches launch_args as
                                         fj_launch_env.cluster_max */
} fj_kernels;

/* What one call needs besides its tensors. counter_bytes: device memory that is zero when
 * the plan starts and that the plan's kernels leave zero (tile counters); scratch_bytes:
 * device memory the plan's launches use among themselves (split-KV partial results), of no
 * value before or after. The context provides both, or the caller's desc->workspace. */
#define FJ_WS_COUNTER_MAX 1024   /* the most counter_bytes one call may ask for */
typedef struct fj_workspace {
    size_t counter_bytes, scratch_bytes;
    size_t report_bytes;   /* checked mode: zeroed device memory the kernels report into;
                              after the launches the call waits for them, reads it back and
                              hands it to fj_family.report */
} fj_workspace;

/* What a launch gets from its surroundings. */
typedef struct fj_launch_env {
    const fj_cuda *cu;       /* the driver (TMA descriptors are encoded per call) */
    int sm_count;
    CUdeviceptr counters;    /* fj_workspace.counter_bytes, or 0 when none were asked for */
    CUdeviceptr scratch;     /* fj_workspace.scratch_bytes, or 0 */
    CUdeviceptr report;      /* fj_workspace.report_bytes, or 0 */
    int sm;                  /* the device's compute capability, major*10 + minor */
    /* per launch: the largest cluster the GPU runs of that kernel (fj_kernels.cluster
     * probed at load, fj_cluster_probe) and how many of each size n run at once
     * ([i][n]); 0 where clusters are off (sm < 90, or the driver) */
    int cluster_max[FJ_MAX_LAUNCHES];
    int cluster_active[FJ_MAX_LAUNCHES][FJ_CLUSTER_MAX + 1];
    const fj_fopts *fopts;   /* the families' own options (fj_target.fopts) */
} fj_launch_env;

/* The arguments of one launch: copies of the kernel's parameters (fj_args_push) and the
 * grid. A grid with a zero dimension launches nothing. */
#define FJ_ARGS_BYTES 1024
#define FJ_ARGS_MAX 8
typedef struct fj_args {
    _Alignas(64) unsigned char store[FJ_ARGS_BYTES];
    size_t used;
    void *ptr[FJ_ARGS_MAX];
    int n;
    unsigned grid[3];
    unsigned cluster;   /* > 1: clusters of cluster x 1 x 1 CTAs (<= env cluster_max) */
} fj_args;
/* Appends a copy of `size` bytes aligned to `align` as the next kernel parameter. 0, or -1
 * when the argument block is full. */
int fj_args_push(fj_args *a, const void *p, size_t size, size_t align);

#define FJ_RANK_ORACLE 1   /* the reference kernel's rank */

/* A family's plan class of a problem (fj_family.plan_class): how it splits the work (its
 * tiles, and its tuning rows through fj_family.bucket_suffix, depend on it) and one more
 * word of what its default depends on; 0, 0 where it tells nothing apart. */
typedef struct fj_plan_class {
    int split_class, other;
} fj_plan_class;

typedef struct fj_family {
    const char *name;        /* "fa3": FAJIT_FAMILY name, in plan output */
    int id;                  /* fajit_family value (stable) */
    int op;                  /* fajit_op it computes */
    /* Dispatch under AUTO takes the highest rank that applies; rank 0 families are never
     * chosen by AUTO (only when forced), FJ_RANK_ORACLE only where nothing else applies and
     * never as a FALLBACK stand-in. */
    int rank;
    /* Optional (NULL: rank): the rank for one problem, where a family outranks another only
     * for some problems (the Hopper family over the decode family for paged prefill). */
    int (*rank_for)(const fajit_attn_desc *d, const fj_target *t);
    /* Tuning-row names are "<cfg_prefix><family's own text>"; "" for the portable family,
     * whose rows predate prefixes. */
    const char *cfg_prefix;
    /* Whether the family serves `d` on target `t`. */
    int (*applies)(const fajit_attn_desc *d, const fj_target *t);
    /* The default configuration for d on t (applies() holds). */
    void (*default_cfg)(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out);
    /* Up to `max` configurations worth timing, the default first; returns how many. */
    int (*candidates)(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max);
    /* The configurations dispatch may pick without tuning for problems like `d` at any
     * length (warm compiles them); returns how many. */
    int (*shipped)(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max);
    /* Resource and rule check of a (tuned) configuration: 0, or -1 with a reason. */
    int (*check)(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n);
    /* The family's text of c (after cfg_prefix), and its parse: 0 or -1. */
    void (*cfg_name)(const fj_kcfg *c, char *out, size_t n);
    int (*cfg_parse)(const char *s, fj_kcfg *c);
    /* The kernels (variants and launch shapes) of c for problems like d. */
    void (*kernels)(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out);
    /* The grid, in words, for fajit_dispatch_describe ("grid (ceil(seqlen_q/128), ...)"). */
    void (*describe_grid)(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n);
    /* The workspace one call of d with c needs on t (NULL: none). */
    void (*workspace)(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                      fj_workspace *out);
    /* What of `ws` (workspace()'s) one launch of d with c uses in `env` (the cluster probe's
     * answers), trimmed in place: the context takes no more than that; a caller's
     * desc->workspace is still held to workspace()'s size. NULL: all of it. */
    void (*launch_workspace)(const fj_kcfg *c, const fajit_attn_desc *d,
                             const fj_launch_env *env, fj_workspace *ws);
    /* Checked mode: FAJIT_OK, or the status and the reason of what the kernels reported
     * in `report` (fj_workspace.report_bytes of it). NULL when report_bytes is always 0. */
    fajit_status (*report)(const fj_kcfg *c, const fajit_attn_desc *d, const void *report,
                           char *why, size_t n);
    /* Grid and arguments of launch `i` of c for d: FAJIT_OK, or a status with a reason. */
    fajit_status (*launch_args)(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n);
    /* Whether any problem on `t` may need counters: the context then allocates them at
     * creation, so that no launch synchronizes (NULL: never). */
    int (*needs_counters)(const fj_target *t);
    /* NULL, or a sentence on the family's standing that plan and info show (e.g. a kernel
     * compiled and checked but never run on hardware). A family with a note is validated
     * on first use under the default FAJIT_VALIDATE=warm too (src/api/dispatch.c). */
    const char *status_note;
    /* The model features (FJ_FEAT_*) whose kernels of this family have passed their GPU
     * tests on a GPU; a problem with any other feature is served only with
     * FAJIT_MODEL_FEATURES=on (src/api/dispatch.c). */
    unsigned ran_features;
    /* Reads the family's own environment variables into its FJ_FOPTS_BYTES of options (all
     * zero: its defaults) at context creation: FAJIT_OK, or a status and the message that
     * names the variable and the value (NULL: the family has none). */
    fajit_status (*options)(void *opts, char *why, size_t n);
    /* Optional (NULL: 0, 0): what the family's choices for d on t depend on beyond the plan
     * key's other fields (fj_plan_class): problems of different classes get different plans.
     * Only the families that may serve d need tell it apart. */
    void (*plan_class)(const fajit_attn_desc *d, const fj_target *t, struct fj_plan_class *out);
    /* Optional (NULL: none): text appended to the shape bucket of d's tuning rows, on a GPU
     * of sm_count SMs (0: unknown), "" for none. Every family's rows of d share it. */
    const char *(*bucket_suffix)(const fajit_attn_desc *d, int sm_count);
} fj_family;

/*------ model features ------*/

/* The model features a problem turns on (fajit_attn_desc's softcap to descale fields), as
 * bits: what its kernels must compile in. A family serves a problem only where it serves
 * every feature that is on: each applies() tests fj_features(d) against its own set. */
enum {
    FJ_FEAT_SOFTCAP = 1 << 0,
    FJ_FEAT_SINKS = 1 << 1,
    FJ_FEAT_ALIBI = 1 << 2,
    FJ_FEAT_HDIM_V = 1 << 3,   /* head_dim_v set and != head_dim */
    FJ_FEAT_KV_FP8 = 1 << 4,   /* kv_dtype E4M3 or E5M2 */
    FJ_FEAT_ALL = (1 << 5) - 1
};
unsigned fj_features(const fajit_attn_desc *d);
/* The names of the features in f, "softcap, sinks" (into out; "" for none). */
void fj_feature_names(unsigned f, char *out, size_t n);
/* V's (and O's) head_dim. */
static inline int fj_head_dim_v(const fajit_attn_desc *d)
{
    return d->head_dim_v ? d->head_dim_v : d->head_dim;
}

/*------ the registry ------*/

int fj_family_count(void);
const fj_family *fj_family_at(int i);
const fj_family *fj_family_by_id(int id);
/* Tests: adds a family to the registry (NULL removes every added one). */
void fj_family_register_for_testing(const fj_family *f);

/* Whether dispatch may be forced to family `id` (AUTO, or a family above the oracle's
 * rank); a name's value for FAJIT_FAMILY (-1 if none); the selectable names, "auto, fa2, fa3". */
int fj_family_selectable(int id);
int fj_family_parse(const char *name);
void fj_family_names(char *out, size_t n);
/* Every family's options hook into o (zeroed first), in registry order: FAJIT_OK, or the
 * first refusal with its message. */
fajit_status fj_family_options(fj_fopts *o, char *why, size_t n);
/* The plan class of d on t: every family's plan_class hook (there is one at most). */
fj_plan_class fj_family_plan_class(const fajit_attn_desc *d, const fj_target *t);
/* The families' suffixes of d's tuning bucket (bucket_suffix hooks), concatenated into out:
 * 0, or -1 when they do not fit n. */
int fj_family_bucket_suffix(const fajit_attn_desc *d, int sm_count, char *out, size_t n);

/* The family dispatch takes for d on t: the forced family `want` (a fajit_family value;
 * AUTO = none) if it applies, else the highest-ranked family of d->op that applies. NULL
 * when none does. */
const fj_family *fj_family_choose(const fajit_attn_desc *d, const fj_target *t, int want);
/* The same, passing over the n families of `skip` (quarantined ones): a skipped forced
 * family falls back to the AUTO choice among the others. */
const fj_family *fj_family_choose_except(const fajit_attn_desc *d, const fj_target *t, int want,
                                         const fj_family *const *skip, int n);

/* The default configuration of the family fj_family_choose picks: 0, or -1 when none. */
int fj_kcfg_default(const fajit_attn_desc *d, const fj_target *t, int want, fj_kcfg *out);
/* What the tuner times for d on t: the chosen family's candidates (its default first),
 * then those of every other fast family that serves d. Returns how many. */
int fj_kcfg_candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max);
/* c's full tuning-row name ("fa3:128x128o1p1s2", "128x64w4s1"), and its parse. */
void fj_kcfg_name(const fj_kcfg *c, char out[32]);
int fj_kcfg_parse(const char *s, fj_kcfg *c);
/* The same configuration (family and bytes). */
int fj_kcfg_same(const fj_kcfg *a, const fj_kcfg *b);
/* Every configuration of every family of `op` that applies on t for problems like d:
 * candidates (tune = 1) or shipped ones (tune = 0), as variants, deduplicated by source and
 * preamble, appended to out[*n..max). 0, or -1 when out is full (nothing is dropped
 * silently: the caller fails). */
int fj_family_variants(const fajit_attn_desc *d, const fj_target *t, int tune,
                        fj_variant *out, int *n, int max);

/* Names of dtypes and masks in variant names. */
const char *fj_dtype_name(int dtype);
const char *fj_mask_name(int mask);

extern const fj_family fj_family_ref, fj_family_fa2, fj_family_fa3, fj_family_decode,
    fj_family_fa4, fj_family_mixed;

#endif /* FJ_FAMILY_H */
