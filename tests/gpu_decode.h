/* gpu_decode.h - the harness of the `gpu` suite's decode tests (gpu_decode.c), shared by
 * test_gpu_decode.c (the random sweeps, contiguous vs paged, the checked mode),
 * test_gpu_decode_graph.c (graph replay, dependent launches), test_gpu_decode_merge.c (the
 * split merges, fajit_attn_merge) and test_gpu_decode_plans.c (plans, defaults, loaders,
 * HND pages): one problem's buffers (dcase, dbufs), its launch, the float64 oracle and the
 * comparison against it. The oracle and tolerances are described in test_gpu_decode.c. */
#ifndef FJ_TEST_GPU_DECODE_H
#define FJ_TEST_GPU_DECODE_H

#include <stdint.h>

#include "cpu_ref.h"
#include "gpu_harness.h"

extern int g_rowrel;      /* FAJIT_TEST_DECODE_ROWREL: the row-relative bound applies */

/*------ random numbers (one generator, reseeded per test or case) ------*/

void reseed(uint64_t s);
uint32_t rnd(void);
int urange(int lo, int hi);
int pick(const int *v, int n);

/*------ one problem: shape, paging, buffers ------*/

#define MAXB 8
#define O_GUARD 64     /* poisoned elements after O that no launch may write */
#define LSE_GUARD 16
#define POISON16 0xFFFFu   /* NaN in f16 and bf16 */

enum { KV_SEPARATE = 0, KV_STACKED = 1 /* [2][num_pages]... */, KV_INTERLEAVED = 2 /* [num_pages][2]... */ };

typedef struct dcase {
    int batch, hkv, group, hd, dtype, mask, wl;
    int q_len;              /* fixed length: rows per sequence (seqlen_q) */
    int varlen;             /* cu_seqlens_q with qlens[] */
    int qlens[MAXB];
    int give_total_q;       /* desc.total_q = cu_seqlens_q[batch] */
    int paged, page_size;   /* paged 0: contiguous K/V [batch][seqlen_k][heads_kv][hd] */
    int seqlen_k;
    int use_seqused;        /* seqused_k given (paged only), random in [0, seqlen_k] */
    int force_empty, force_full; /* one sequence with 0 / seqlen_k keys */
    int full_table;         /* every block-table entry gets its own page (graph replay) */
    int layout, page_pad;   /* KV_*; page_pad: 64 extra elements between pages */
    int hnd;                /* paged only: pages [heads_kv][page_size][hd] (vLLM's HND), not
                               [page_size][heads_kv][hd] (NHD) */
    int spare;              /* pages in the pool beyond those needed */
    int num_splits, want_lse, poison;
    int preset_used;        /* used[] below instead of random lengths */
    int share;              /* sequences b > 0 share sequence 0's first pages (a prefix) */
    int used[MAXB];
} dcase;

typedef struct dbufs {
    dcase c;
    int hq, seqlen_q;
    int64_t rows;                    /* Q/O rows: batch * q_len, or cu_seqlens_q[batch] */
    int32_t cuq[MAXB + 1], used[MAXB];
    int page_size;                   /* contiguous: seqlen_k (sequence b is "page" b) */
    int64_t bt_stride;
    int num_pages;
    int32_t *bt;                     /* host copy of the block table; NULL when contiguous */
    int64_t row_stride, head_stride, page_stride, off[2];   /* K/V layout, elements; off: K, V */
    size_t n_kv, n_q, n_o, n_lse;    /* elements (n_kv: both K and V) */
    uint16_t *h_q, *h_kv, *h_o;
    float *h_lse;
    CUdeviceptr d_q, d_k, d_v, d_o, d_lse, d_bt, d_cuq, d_used;
    fajit_attn_desc desc;
} dbufs;

void randomize_used(dbufs *B);
void assign_pages(dbufs *B);
void randomize_q(dbufs *B);
void upload_dynamic(dbufs *B);
CUdeviceptr dalloc(size_t bytes);
void setup(dbufs *B, const dcase *c, const dbufs *src);
void teardown(dbufs *B);
void case_text(const dbufs *B, char *t, size_t n);

/*------ launching ------*/

void poison_outputs(dbufs *B);
fajit_status launch(fajit_ctx *ctx, dbufs *B, CUstream stream);
void fetch(dbufs *B);

/*------ the float64 reference, comparing ------*/

void reference(const dbufs *B, double *ro, double *rl);
double tol_of(int dtype);

typedef struct verdict {
    int ok;
    double err;      /* max |o - ref| / max(1, max |ref row|) */
    double rowrel;   /* max |o - ref| / max(1/16, max |ref row|) */
    double lse_err;  /* max |lse - ref| / max(1, |ref|) */
    char why[320];   /* the first violation */
} verdict;

void compare(const dbufs *B, const double *ro, const double *rl, verdict *v);
verdict check_against_reference(const dbufs *B, const char *what);
int ulp_dist(uint16_t a, uint16_t b);
double ulp_at(double x, int dtype);

/*------ contexts ------*/

fajit_ctx *new_ctx(int checked);
fajit_ctx *new_ctx_tma(int checked);
fajit_ctx *new_ctx_paged_hopper(void);
fajit_ctx *new_ctx_nocluster(int checked);

/*------ random cases (test_gpu_decode.c) ------*/

/* Multiply-adds of the reference (both products, visible keys only), with a budget that
 * keeps a case's CPU reference under ~0.5 s: shapes over it are drawn again. */
#define REF_BUDGET 5e8

double ref_cost(const dcase *c);
void preset_lengths(dcase *c);
void draw_case(dcase *c);
void draw_within_budget(dcase *c, void (*draw)(dcase *));
void launch_and_check(fajit_ctx *ctx, dbufs *B, verdict *v);

/*------ the test cases of each file, added to the suite in this order ------*/

void gpu_decode_graph_cases(Suite *s);
void gpu_decode_merge_cases(Suite *s);
void gpu_decode_plans_cases(Suite *s);

#endif
