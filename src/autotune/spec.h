/* spec.h - what a model needs tuned: the attention problems of a model, read from a small
 * line-based text format (docs/spec-format.md) or taken from a built-in preset, and the
 * two names under which tuning results are stored in the cache: the problem signature
 * and the shape bucket. Plain C11; no CUDA, no SQLite.
 */
#ifndef FJ_SPEC_H
#define FJ_SPEC_H

#include <stddef.h>

#include "fajit.h"

#define FJ_SPEC_MAX_SEQLEN (1 << 24)  /* seqlen and window limit */
#define FJ_SPEC_MAX_BATCH 65536
#define FJ_SPEC_MAX_HEADS 1024
#define FJ_SPEC_MAX_SHAPES 4096       /* per problem, after batch expansion */
#define FJ_SPEC_MAX_BYTES (1 << 20)   /* largest spec file read */
#define FJ_SPEC_MAX_PAGE 65536        /* page_size limit */

/* One launch shape of a problem. Decode is seqlen_q == 1. */
typedef struct fj_shape {
    int seqlen_q, seqlen_k, batch;
} fj_shape;

/* Operations (fajit_op values), by name: one table in spec.c. fj_op_name: "fwd" for
 * FAJIT_OP_FWD, NULL for a value that names none. fj_op_parse: the value of a name (exact
 * case), -1 if unknown. */
const char *fj_op_name(int op);
int fj_op_parse(const char *s);

/* One attention problem: a [model NAME] section. */
/* fj_problem.features: the model features a problem turns on (values are the kernels'
 * runtime arguments, so a spec names only whether each is on). */
enum { FJ_PROBLEM_SOFTCAP = 1, FJ_PROBLEM_SINKS = 2, FJ_PROBLEM_ALIBI = 4 };

typedef struct fj_problem {
    char name[64];
    int line;                        /* line of the section header in its text */
    int op;                          /* fajit_op; key `op`, default FAJIT_OP_FWD */
    fajit_dtype dtype;
    int head_dim, heads_q, heads_kv;
    fajit_mask mask;
    int window_left, window_right;   /* mask WINDOW: window, 0; otherwise -1, -1 */
    int page_size;                   /* key `page_size`: K/V in a paged cache of pages of
                                        this many keys (block_table); 0 = contiguous */
    unsigned features;               /* keys softcap, sinks, alibi = yes: FJ_PROBLEM_* */
    int head_dim_v;                  /* key head_dim_v; 0 = head_dim */
    int kv_dtype;                    /* key kv_dtype: fajit_kv_dtype, default AS_Q */
    fj_shape *shapes;                /* in spec order (prefill, decode, shapes), each
                                        length with every batch; duplicates dropped */
    size_t n_shapes;
} fj_problem;

typedef struct fj_spec {
    fj_problem *problems;
    size_t n_problems;
} fj_spec;

/* Parses `len` bytes of spec text. `origin` names it in errors ("spec.txt"). Returns 0
 * with *out filled (free with fj_spec_free), or -1 with *out empty and the first error in
 * `err` (may be NULL): "spec.txt:7: heads_q (30) must be a multiple of heads_kv (8)". */
int fj_spec_parse(const char *text, size_t len, const char *origin, fj_spec *out,
                  char *err, size_t err_len);

/* Reads and parses a file (at most FJ_SPEC_MAX_BYTES). Errors as fj_spec_parse, named by
 * the path; an unreadable file is "PATH: cannot read: REASON". */
int fj_spec_parse_file(const char *path, fj_spec *out, char *err, size_t err_len);

/* A built-in preset, by name, case-insensitive ("llama-3-8b"). An unknown name is an
 * error listing the known ones. */
int fj_spec_preset(const char *name, fj_spec *out, char *err, size_t err_len);

/* Preset names in order, NULL past the end; the spec text of a preset, NULL if unknown
 * (src/autotune/presets.c). */
const char *fj_spec_preset_name(int i);
const char *fj_spec_preset_text(const char *name);

void fj_spec_free(fj_spec *s);   /* frees the contents, not s; accepts NULL */

/* The shape bucket of a tuning row: few buckets per model, by powers of two.
 *   seqlen_q == 1 (decode), by seqlen_k:  "sq=1,sk<=512" "sq=1,sk<=1k" ... "sq=1,sk<=16k"
 *                                          "sq=1,sk>16k"
 *   seqlen_q >= 2 (prefill), by seqlen_q: "sq<=512" "sq<=1k" "sq<=2k" ... "sq<=16k" "sq>16k"
 * A bucket "<=N" holds the lengths above the previous step up to N; the first one holds
 * everything from 1 (or 2). Writes at most FJ_BUCKET_LEN bytes; returns 0, or -1 when a
 * length is < 1 or n is too small. */
#define FJ_BUCKET_LEN 16
int fj_shape_bucket(int seqlen_q, int seqlen_k, char *buf, size_t n);

/* The problem signature of a tuning row: what selects a kernel apart from the target and
 * the lengths. "fwd.bf16.hd128.causal.gqa4": the operation (fj_op_name), dtype, head_dim,
 * mask ("none", "causal", "win<left>-<right>"), heads_q / heads_kv, then ".paged" for a
 * paged K/V cache (a paged prefill runs another family than a contiguous one; the page
 * size itself is not part of it). Returns 0, or -1 when
 * n is too small or p->op names no operation. */
int fj_tune_signature(const fj_problem *p, char *buf, size_t n);

#endif /* FJ_SPEC_H */
