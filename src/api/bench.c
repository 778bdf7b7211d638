/* bench.c - fajit_bench_spec: fajit_attn_fwd timed on every shape of a spec, on random
 * inputs, with CUDA events through the driver table, the L2 flushed before every
 * repetition (the tuner's discipline, src/api/tune.c, applied to the public call); and
 * that flush, fj_l2_flush, which both use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oracle.h"
#include "../autotune/spec.h"

#define BENCH_MAX_REPS 1000
#define WARM_MS 200.0f   /* sustained calls before the samples */

typedef struct bench {
    fajit_ctx *ctx;
    CUdeviceptr flush;
    CUevent *ev;           /* 2 * reps */
    double *samples, *sorted;
    int reps, n_ev;
} bench;

void fj_l2_flush_variant(fj_variant *v)
{
    memset(v, 0, sizeof *v);
    v->op = FAJIT_OP_FWD;
    v->source = "l2_flush.cu";
    v->function = "fj_l2_flush";
    snprintf(v->name, sizeof v->name, "l2 flush");
}

fajit_status fj_l2_flush(fajit_ctx *ctx, CUdeviceptr buf, size_t bytes)
{
    fj_variant v;
    fj_l2_flush_variant(&v);
    fj_kernel *k = NULL;
    FJ_CHECK(fj_kernel_get(ctx, &v, 0, &k));
    unsigned long long n16 = bytes / 16;
    unsigned *sink = NULL;
    void *args[] = {&buf, &n16, &sink};
    const int sms = ctx->sm_count > 0 ? ctx->sm_count : 132;
    const unsigned grid[3] = {(unsigned)sms * 8, 1, 1};
    char err[64];
    CUresult r = fj_launch(ctx->cu, k->fn, grid, 256, 0, NULL, args, 0, 0);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel(l2 flush): %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    return FAJIT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of n sorted values. */
static double pct(const double *s, int n, double p)
{
    int i = (int)(p * n + 0.999999) - 1;
    return s[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static fajit_status time_one(bench *b, const fajit_attn_desc *d, fajit_bench_result *res)
{
    fajit_ctx *ctx = b->ctx;
    const fj_cuda *cu = ctx->cu;
    char err[64];
    CUresult r;
    for (int w = 0; w < 4; w++)   /* first use (load or compile), then warm-up */
        FJ_CHECK(fajit_attn_fwd(ctx, d, NULL));
    /* Then WARM_MS of back-to-back calls, so that the samples see the clocks of sustained
     * work (as a server, and triton's do_bench in bench_attn.py, do) rather than those of a
     * GPU that has just been idle: on the H200, 4 calls alone read 3-16% faster than
     * bench_attn.py at 4k-16k tokens; with this warm-up, 0-2% (2026-12-01). */
    r = cu->cuEventRecord(b->ev[0], NULL);
    for (int w = 0, more = 1; more && !r; w++) {
        FJ_CHECK(fajit_attn_fwd(ctx, d, NULL));
        if (w % 8 == 7) {
            float ms = 0;
            r = cu->cuEventRecord(b->ev[1], NULL);
            if (!r)
                r = cu->cuEventSynchronize(b->ev[1]);
            if (!r)
                r = cu->cuEventElapsedTime(&ms, b->ev[0], b->ev[1]);
            more = ms < WARM_MS && w < 100000;
        }
    }
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "benchmark warm-up failed: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    for (int k = 0; k < b->reps; k++) {
        FJ_CHECK(fj_l2_flush(ctx, b->flush, FJ_L2_FLUSH_BYTES));   /* evict L2, leave it clean */
        cu->cuEventRecord(b->ev[2 * k], NULL);
        FJ_CHECK(fajit_attn_fwd(ctx, d, NULL));
        cu->cuEventRecord(b->ev[2 * k + 1], NULL);
    }
    r = cu->cuCtxSynchronize();
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "benchmark run failed: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    for (int k = 0; k < b->reps; k++) {
        float ms = 0;
        r = cu->cuEventElapsedTime(&ms, b->ev[2 * k], b->ev[2 * k + 1]);
        FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuEventElapsedTime: %s",
                     fj_cuda_errname(cu, r, err, sizeof err));
        b->samples[k] = b->sorted[k] = ms;
    }
    qsort(b->sorted, (size_t)b->reps, sizeof(double), cmp_double);
    int n = b->reps;
    res->reps = n;
    res->samples_ms = b->samples;
    res->median_ms = n % 2 ? b->sorted[n / 2] : (b->sorted[n / 2 - 1] + b->sorted[n / 2]) / 2;
    res->min_ms = b->sorted[0];
    res->max_ms = b->sorted[n - 1];
    res->p10_ms = pct(b->sorted, n, 0.10);
    res->p90_ms = pct(b->sorted, n, 0.90);
    return FAJIT_OK;
}

/* Allocates one shape's inputs (oracle.c: random values; paged problems on shuffled pages),
 * times it, frees them. */
static fajit_status bench_shape(bench *b, const fj_problem *p, const fj_shape *sh,
                                fajit_bench_fn fn, void *user)
{
    fajit_ctx *ctx = b->ctx;
    fj_inputs in;
    FJ_CHECK(fj_inputs_make(ctx, p, sh, 1, NULL, NULL, 0, &in));
    const fajit_attn_desc *d = &in.d[0];
    fajit_bench_result res;
    memset(&res, 0, sizeof res);
    res.problem = p->name;
    res.desc = d;
    fajit_status st = fajit_dispatch_describe(ctx, NULL, d, res.kernel, sizeof res.kernel);
    if (st == FAJIT_OK)
        st = time_one(b, d, &res);
    if (st == FAJIT_OK && fn)
        fn(user, &res);
    fj_inputs_free(ctx->cu, &in);
    return st;
}

fajit_status fajit_bench_spec(fajit_ctx *ctx, const char *spec, int reps, fajit_bench_fn fn,
                              void *user)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(reps < 1 || reps > BENCH_MAX_REPS, ctx, FAJIT_INVALID_ARGUMENT,
                 "reps must be in [1, %d], got %d", BENCH_MAX_REPS, reps);
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "benchmarking needs a device (this context is compile-only)");
    fj_spec sp;
    FJ_CHECK(fj_spec_load(ctx, spec, &sp));
    char err[64];
    bench b = {.ctx = ctx, .reps = reps};
    fajit_status st = FAJIT_OK;
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    b.ev = calloc(2 * (size_t)reps, sizeof *b.ev);
    b.samples = calloc((size_t)reps, sizeof(double));
    b.sorted = calloc((size_t)reps, sizeof(double));
    if (!b.ev || !b.samples || !b.sorted) {
        st = fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "allocating the benchmark's tables");
        goto done;
    }
    while (!r && b.n_ev < 2 * reps && !(r = ctx->cu->cuEventCreate(&b.ev[b.n_ev], 0)))
        b.n_ev++;
    if (!r)
        r = ctx->cu->cuMemAlloc(&b.flush, FJ_L2_FLUSH_BYTES);
    if (r) {
        st = fj_fail(ctx, FAJIT_CUDA_ERROR, "setting up the benchmark (events, L2 flush "
                     "buffer): %s", fj_cuda_errname(ctx->cu, r, err, sizeof err));
        goto done;
    }
    int total = 0, done = 0;
    for (size_t i = 0; i < sp.n_problems; i++)
        total += (int)sp.problems[i].n_shapes;
    const double t0 = fj_mono_s();
    for (size_t i = 0; i < sp.n_problems && !st; i++) {
        const fj_problem *p = &sp.problems[i];
        for (size_t s = 0; s < p->n_shapes && !st; s++) {
            const fj_shape *sh = &p->shapes[s];
            st = bench_shape(&b, p, sh, fn, user);
            done++;
            if (!st)
                fj_spec_progress(ctx, t0, done, total, p, sh);
        }
    }
done:
    if (b.flush)
        ctx->cu->cuMemFree(b.flush);
    for (int k = 0; k < b.n_ev; k++)
        ctx->cu->cuEventDestroy(b.ev[k]);
    free(b.ev), free(b.samples), free(b.sorted);
    fj_spec_free(&sp);
    return st;
}
