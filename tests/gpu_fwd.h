/* gpu_fwd.h - the harness of the `gpu` suite's forward tests (gpu_fwd.c), shared by
 * test_gpu.c (the sweep against float64 and the reference kernel, the edges, the launches
 * compute-sanitizer checks), test_gpu_serving.c (graph capture, a second process on the
 * cache, timings), test_gpu_tune.c (bench specs, tuning, the STRICT and FALLBACK policies)
 * and test_gpu_gate.c (the validation gate): one problem's buffers (tc, bufs), a launch on
 * poisoned outputs, the comparison of two results, and the check of a kernel against the
 * reference kernel. The oracles and tolerances are described in test_gpu.c. */
#ifndef FJ_TEST_GPU_FWD_H
#define FJ_TEST_GPU_FWD_H

#include <stdint.h>

#include "gpu_harness.h"

double now_s(void);

/* One generator: test_gpu.c's sweep and the graph test seed it from g_seed. */
extern uint64_t g_rng;
uint32_t rnd(void);
int pick(const int *v, int n);
float frand(void);

fajit_ctx *new_ctx(const char *dir);
/* A new temporary directory /tmp/fajit-gpu-<tag>-XXXXXX; rm_dir removes it. */
void tmp_dir(char *dir, size_t n, const char *tag);
void rm_dir(const char *dir);

/*------ one problem ------*/

typedef struct tc {
    int batch, hq, hkv, sq, sk, d, dtype, mask, wl, wr, varlen, pad, totals;
    int lens_q[8], lens_k[8];
    char text[200];
} tc;

typedef struct bufs {
    int64_t rows_q, rows_k, row_q, row_k;   /* rows per tensor, elements per row */
    uint16_t *hq, *hk, *hv, *ho;
    float *hlse;
    CUdeviceptr q, k, v, o, lse, cuq, cuk;
    int32_t cq[9], ck[9];
    fajit_attn_desc desc;
} bufs;

/* Fresh random inputs on the device and the descriptor of `c`; teardown frees them. */
void setup(const tc *c, bufs *B);
void teardown(bufs *B);

/* Runs `fwd` on poisoned outputs; copies O (as float) and LSE back. */
typedef fajit_status (*fwd_fn)(fajit_ctx *, const fajit_attn_desc *, void *);
void run_kernel(fajit_ctx *ctx, fwd_fn fwd, bufs *B, const tc *c, float *o, float *lse);

typedef struct errs {
    double max_abs, max_ref, lse;
} errs;

/* Max |x - ref| over every valid element of O (NaN counts as infinite), and LSE. */
errs compare(const tc *c, const bufs *B, const float *o, const float *lse, const double *ref,
             const double *ref_lse);
/* The same against another kernel's result (run_kernel's floats). */
errs compare_kernels(const tc *c, const bufs *B, const float *o, const float *lse,
                     const float *ref, const float *ref_lse);

/* The tuning problem of the tuning, policy and gate tests. */
void tune_case(tc *c);
/* Runs `fwd` of ctx and the reference kernel on fresh inputs; max error must be within two
 * output roundings. */
void check_against_reference(fajit_ctx *ctx, const tc *c);

/*------ the tests of each file, for test_gpu.c's runner ------*/

void gpu_serving_tests(TCase *tc);   /* cache_across_processes, timings */
void gpu_graph_case(Suite *s);       /* TCase graph */
int gpu_second_process(const char *dir);   /* test_gpu --second-process DIR */
void gpu_tune_tests(TCase *tc);      /* bench_spec, strict_miss, tune_then_new_process,
                                        fallback_never_blocks */
int gpu_use_tuned(const char *dir, const char *winner);   /* test_gpu --use-tuned DIR CFG */
void gpu_gate_case(Suite *s);        /* TCase gate */

#endif
