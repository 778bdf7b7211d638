/* test_gpu.c - the `gpu` suite: numerics on a real GPU, the cache across processes, and
 * the host-side timings of the compile/cache/dispatch path. Exits 77 (skipped) when no
 * CUDA driver can be loaded.
 *
 * Oracles: a CPU float64 reference (tests/cpu_ref.c) for cases small enough to compute on
 * the host, and the GPU reference kernel (itself checked against float64 on the small
 * cases) for the large ones. A fast kernel passes when its max error against float64 is at
 * most 2x that of a same-precision reference (probabilities rounded to the input dtype
 * before P@V, output rounded) plus one output rounding at the largest |O| plus 1e-6; the
 * reference kernel passes when its error is within one output rounding. (The output rounding
 * term: a kernel whose probabilities are not rounded exactly as the reference's, e.g. relative
 * to a stale row maximum (the sm90 kernel's lazy rescaling), rounds O to the other neighbour
 * now and then where the reference was lucky; emulated in dev/fa3/lazy_emu.py: 2x alone
 * failed 0-0.75% of such cases, with the term none of 9600, a quarter of the term at worst.)
 * Inputs are fresh random numbers per case, outputs are poisoned (NaN) before every run.
 *
 * Environment: FAJIT_TEST_SEED (default: time), FAJIT_TEST_CASES (default 320).
 * Usage: test_gpu [--second-process DIR]
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/api/oracle.h"
#include "../src/families/fa3.h"
#include "cpu_ref.h"
#include "gpu_harness.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t g_rng;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static int pick(const int *v, int n) { return v[rnd() % (unsigned)n]; }
static float frand(void) { return (float)(rnd() % 2000001) / 1000000.f - 1.f; }

static fajit_ctx *new_ctx(const char *dir)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    ck_assert_msg(st == FAJIT_OK, "ctx: %s", fajit_errmsg(ctx));
    return ctx;
}

/*------ one randomized case ------*/

typedef struct tc {
    int batch, hq, hkv, sq, sk, d, dtype, mask, wl, wr, varlen, pad, totals;
    int lens_q[8], lens_k[8];
    char text[200];
} tc;

static void make_case(tc *c, int max_len)
{
    static const int lens[] = {1, 7, 16, 63, 127, 128, 129, 200, 1000, 4097};
    static const int ratios[] = {1, 2, 4, 8};
    memset(c, 0, sizeof *c);
    c->d = 8 * (1 + (int)(rnd() % 32));
    if (rnd() % 2) { /* favour the head dims models use */
        static const int common[] = {32, 64, 80, 96, 128, 160, 192, 256};
        c->d = pick(common, 8);
    }
    c->dtype = (int)(rnd() % 2);
    c->mask = (int)(rnd() % 3);
    c->wl = (int)(rnd() % 300), c->wr = (int)(rnd() % 100);
    c->hkv = 1 + (int)(rnd() % 3);
    c->hq = c->hkv * (rnd() % 5 == 0 ? 1 : pick(ratios, 4));
    if (rnd() % 8 == 0) /* MQA */
        c->hkv = 1, c->hq = pick(ratios, 4) * 2;
    c->batch = 1 + (int)(rnd() % 3);
    c->varlen = rnd() % 4 == 0;
    c->pad = rnd() % 3 == 0 ? 8 * (1 + (int)(rnd() % 2)) : 0;
    do {
        c->sq = pick(lens, 10);
        c->sk = rnd() % 2 ? c->sq : pick(lens, 10);
    } while (c->sq > max_len || c->sk > max_len);
    if (c->varlen) {
        c->batch = 1 + (int)(rnd() % 5);
        int mq = 0, mk = 0;
        for (int b = 0; b < c->batch; b++) {
            c->lens_q[b] = rnd() % 5 == 0 ? 0 : 1 + (int)(rnd() % (unsigned)c->sq);
            c->lens_k[b] = rnd() % 5 == 0 ? 0 : 1 + (int)(rnd() % (unsigned)c->sk);
            mq = c->lens_q[b] > mq ? c->lens_q[b] : mq;
            mk = c->lens_k[b] > mk ? c->lens_k[b] : mk;
        }
        c->sq = mq, c->sk = mk;
        c->totals = rnd() % 2;
    }
    snprintf(c->text, sizeof c->text, "b%d hq%d hkv%d sq%d sk%d d%d %s %s%s%s pad%d",
             c->batch, c->hq, c->hkv, c->sq, c->sk, c->d, c->dtype ? "bf16" : "f16",
             c->mask == 0 ? "none" : c->mask == 1 ? "causal" : "window",
             c->varlen ? (c->totals ? " varlen+totals" : " varlen") : "", "", c->pad);
    if (c->mask == 2) {
        size_t n = strlen(c->text);
        snprintf(c->text + n, sizeof c->text - n, " wl%d wr%d", c->wl, c->wr);
    }
}

typedef struct bufs {
    int64_t rows_q, rows_k, row_q, row_k;   /* rows per tensor, elements per row */
    uint16_t *hq, *hk, *hv, *ho;
    float *hlse;
    CUdeviceptr q, k, v, o, lse, cuq, cuk;
    int32_t cq[9], ck[9];
    fajit_attn_desc desc;
} bufs;

static void setup(const tc *c, bufs *B)
{
    memset(B, 0, sizeof *B);
    int dp = c->d + c->pad;   /* head stride with padding */
    B->row_q = (int64_t)c->hq * dp;
    B->row_k = (int64_t)c->hkv * dp;
    if (c->varlen) {
        for (int b = 0; b < c->batch; b++) {
            B->cq[b + 1] = B->cq[b] + c->lens_q[b];
            B->ck[b + 1] = B->ck[b] + c->lens_k[b];
        }
        B->rows_q = B->cq[c->batch], B->rows_k = B->ck[c->batch];
    } else {
        B->rows_q = (int64_t)c->batch * c->sq, B->rows_k = (int64_t)c->batch * c->sk;
    }
    size_t nq = (size_t)(B->rows_q * B->row_q) + 8, nk = (size_t)(B->rows_k * B->row_k) + 8;
    B->hq = malloc(nq * 2), B->hk = malloc(nk * 2), B->hv = malloc(nk * 2);
    B->ho = malloc(nq * 2);
    for (size_t i = 0; i < nq; i++)
        B->hq[i] = fj_f32_to_half(frand() * 2.f, c->dtype);
    for (size_t i = 0; i < nk; i++) {
        B->hk[i] = fj_f32_to_half(frand() * 2.f, c->dtype);
        B->hv[i] = fj_f32_to_half(frand(), c->dtype);
    }
    size_t nlse = (size_t)c->hq * (size_t)(c->varlen ? B->rows_q : c->batch * c->sq) + 1;
    B->hlse = malloc(nlse * sizeof(float));
    CU(cu->cuMemAlloc(&B->q, nq * 2));
    CU(cu->cuMemAlloc(&B->k, nk * 2));
    CU(cu->cuMemAlloc(&B->v, nk * 2));
    CU(cu->cuMemAlloc(&B->o, nq * 2));
    CU(cu->cuMemAlloc(&B->lse, nlse * sizeof(float)));
    CU(cu->cuMemcpyHtoD(B->q, B->hq, nq * 2));
    CU(cu->cuMemcpyHtoD(B->k, B->hk, nk * 2));
    CU(cu->cuMemcpyHtoD(B->v, B->hv, nk * 2));
    fajit_attn_desc *d = &B->desc;
    fajit_attn_desc_init(d, (void *)B->q, (void *)B->k, (void *)B->v, (void *)B->o, c->batch,
                         c->hq, c->hkv, c->sq, c->sk, c->d, (fajit_dtype)c->dtype);
    d->q_head_stride = d->o_head_stride = d->k_head_stride = d->v_head_stride = dp;
    d->q_row_stride = d->o_row_stride = B->row_q;
    d->k_row_stride = d->v_row_stride = B->row_k;
    d->q_batch_stride = d->o_batch_stride = B->row_q * c->sq;
    d->k_batch_stride = d->v_batch_stride = B->row_k * c->sk;
    d->mask = (fajit_mask)c->mask;
    if (c->mask == FAJIT_MASK_WINDOW)
        d->window_left = c->wl, d->window_right = c->wr;
    d->lse = (float *)B->lse;
    if (c->varlen) {
        CU(cu->cuMemAlloc(&B->cuq, sizeof B->cq));
        CU(cu->cuMemAlloc(&B->cuk, sizeof B->ck));
        CU(cu->cuMemcpyHtoD(B->cuq, B->cq, sizeof B->cq));
        CU(cu->cuMemcpyHtoD(B->cuk, B->ck, sizeof B->ck));
        d->cu_seqlens_q = (const int32_t *)B->cuq;
        d->cu_seqlens_k = (const int32_t *)B->cuk;
        if (c->totals) {   /* lets the Hopper kernel take varlen too */
            d->total_q = B->cq[c->batch];
            d->total_k = B->ck[c->batch];
        }
    }
}

static void teardown(bufs *B)
{
    CUdeviceptr ps[] = {B->q, B->k, B->v, B->o, B->lse, B->cuq, B->cuk};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            cu->cuMemFree(ps[i]);
    free(B->hq), free(B->hk), free(B->hv), free(B->ho), free(B->hlse);
}

/* Runs `fwd` on poisoned outputs; copies O (as float) and LSE back. */
typedef fajit_status (*fwd_fn)(fajit_ctx *, const fajit_attn_desc *, void *);
static void run_kernel(fajit_ctx *ctx, fwd_fn fwd, bufs *B, const tc *c, float *o, float *lse)
{
    size_t nq = (size_t)(B->rows_q * B->row_q) + 8;
    size_t nlse = (size_t)c->hq * (size_t)(c->varlen ? B->rows_q : c->batch * c->sq) + 1;
    CU(cu->cuMemsetD8(B->o, 0xff, nq * 2));   /* NaN in f16 and bf16 */
    CU(cu->cuMemsetD8(B->lse, 0xff, nlse * 4));
    fajit_status st = fwd(ctx, &B->desc, NULL);
    ck_assert_msg(st == FAJIT_OK, "%s: %s", c->text, fajit_errmsg(ctx));
    CU(cu->cuCtxSynchronize());
    CU(cu->cuMemcpyDtoH(B->ho, B->o, nq * 2));
    CU(cu->cuMemcpyDtoH(lse, B->lse, nlse * 4));
    for (size_t i = 0; i < nq; i++)
        o[i] = fj_half_to_f32(B->ho[i], c->dtype);
}

typedef struct errs {
    double max_abs, max_ref, lse;
} errs;

/* Max |x - ref| over every valid element of O (NaN counts as infinite), and LSE. */
static errs compare(const tc *c, const bufs *B, const float *o, const float *lse,
                    const double *ref, const double *ref_lse)
{
    errs e = {0, 0, 0};
    for (int64_t r = 0; r < B->rows_q; r++)
        for (int h = 0; h < c->hq; h++)
            for (int k = 0; k < c->d; k++) {
                int64_t i = r * B->row_q + h * (c->d + c->pad) + k;
                double diff = fabs((double)o[i] - ref[i]);
                if (isnan(diff))
                    diff = INFINITY;
                e.max_abs = diff > e.max_abs ? diff : e.max_abs;
                e.max_ref = fabs(ref[i]) > e.max_ref ? fabs(ref[i]) : e.max_ref;
            }
    int64_t nlse = (int64_t)c->hq * (c->varlen ? B->rows_q : (int64_t)c->batch * c->sq);
    for (int64_t i = 0; i < nlse; i++) {
        double diff = isinf(ref_lse[i]) && isinf(lse[i]) && lse[i] < 0 ? 0 : fabs(lse[i] - ref_lse[i]);
        if (isnan(diff))
            diff = INFINITY;
        e.lse = diff > e.lse ? diff : e.lse;
    }
    return e;
}

/* A same-precision reference: probabilities rounded to the dtype before P@V (as any
 * 16-bit tensor-core kernel does), output rounded. Built from the float64 result by
 * recomputing with rounding: cheaper to emulate here than to thread through cpu_ref. */
static void same_precision(const tc *c, const bufs *B, const fj_attn_params *hp, double *out)
{
    const int d = c->d, group = c->hq / c->hkv;
    double *s = malloc(sizeof(double) * (size_t)(c->sk + 1));
    double *acc = malloc(sizeof(double) * (size_t)d);
    for (int b = 0; b < c->batch; b++) {
        int sq = c->varlen ? c->lens_q[b] : c->sq, sk = c->varlen ? c->lens_k[b] : c->sk;
        int64_t q0 = c->varlen ? B->cq[b] : (int64_t)b * c->sq;
        int64_t k0 = c->varlen ? B->ck[b] : (int64_t)b * c->sk;
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < sq; i++) {
                const uint16_t *q = B->hq + (q0 + i) * B->row_q + h * (d + c->pad);
                double m = -INFINITY;
                for (int j = 0; j < sk; j++) {
                    int shift = i + sk - sq;
                    if ((hp->window_left >= 0 && j < shift - hp->window_left) ||
                        (hp->window_right >= 0 && j > shift + hp->window_right)) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    const uint16_t *k = B->hk + (k0 + j) * B->row_k + (h / group) * (d + c->pad);
                    float dot = 0;  /* fp32 accumulation, as the tensor cores */
                    for (int x = 0; x < d; x++)
                        dot += fj_half_to_f32(q[x], c->dtype) * fj_half_to_f32(k[x], c->dtype);
                    s[j] = (double)dot * hp->scale;
                    m = s[j] > m ? s[j] : m;
                }
                double l = 0;
                memset(acc, 0, sizeof(double) * (size_t)d);
                for (int j = 0; m > -INFINITY && j < sk; j++) {
                    if (s[j] == -INFINITY)
                        continue;
                    float pj = (float)exp(s[j] - m);
                    l += pj;
                    double pr = fj_half_to_f32(fj_f32_to_half(pj, c->dtype), c->dtype);
                    const uint16_t *v = B->hv + (k0 + j) * B->row_k + (h / group) * (d + c->pad);
                    for (int x = 0; x < d; x++)
                        acc[x] += pr * fj_half_to_f32(v[x], c->dtype);
                }
                double *o = out + (q0 + i) * B->row_q + h * (d + c->pad);
                for (int x = 0; x < d; x++)
                    o[x] = fj_half_to_f32(fj_f32_to_half(l > 0 ? (float)(acc[x] / l) : 0.f,
                                                         c->dtype), c->dtype);
            }
    }
    free(s);
    free(acc);
}

/* Failures of a sweep are collected, not fatal, so one run reports them all. */
typedef struct tally {
    int ref_bad, fast_bad, n_cpu;
    char first[4][400];
    int n_first;
} tally;

#define CASE_FAIL(t, bad, ...)                                                      \
    do {                                                                            \
        (t)->bad++;                                                                 \
        if ((t)->n_first < 4)                                                       \
            snprintf((t)->first[(t)->n_first++], sizeof (t)->first[0], __VA_ARGS__); \
    } while (0)

/* Runs one case through the reference kernel and the dispatched kernel; numeric failures
 * go to `t`. */
static void check_case(fajit_ctx *ctx, const tc *c, int fast_too, tally *t)
{
    bufs B;
    setup(c, &B);
    size_t nq = (size_t)(B.rows_q * B.row_q) + 8;
    size_t nlse = (size_t)c->hq * (size_t)(c->varlen ? B.rows_q : c->batch * c->sq) + 1;
    float *o_ref = malloc(nq * 4), *lse_ref = malloc(nlse * 4);
    float *o_fast = malloc(nq * 4), *lse_fast = malloc(nlse * 4);
    run_kernel(ctx, fajit_attn_fwd_reference, &B, c, o_ref, lse_ref);
    if (fast_too)
        run_kernel(ctx, fajit_attn_fwd, &B, c, o_fast, lse_fast);

    double work = 0;
    for (int b = 0; b < c->batch; b++)
        work += (double)(c->varlen ? c->lens_q[b] : c->sq) * (c->varlen ? c->lens_k[b] : c->sk);
    work *= (double)c->hq * c->d;
    int use_cpu = work <= 6e7;
    const double out_ulp = c->dtype == FJ_DT_BF16 ? 1.0 / 256 : 1.0 / 2048;

    if (use_cpu) {
        fj_attn_params hp;
        fj_params_from_desc(&B.desc, &hp);
        hp.q = (uintptr_t)B.hq, hp.k = (uintptr_t)B.hk, hp.v = (uintptr_t)B.hv;
        hp.cu_seqlens_q = c->varlen ? (uintptr_t)B.cq : 0;
        hp.cu_seqlens_k = c->varlen ? (uintptr_t)B.ck : 0;
        double *f = calloc(nq, sizeof(double)), *flse = calloc(nlse, sizeof(double));
        double *sp = calloc(nq, sizeof(double));
        fj_cpu_attention(&hp, c->dtype, f, flse);
        errs er = compare(c, &B, o_ref, lse_ref, f, flse);
        if (!(er.max_abs <= out_ulp * fmax(er.max_ref, 1e-3) + 1e-6))
            CASE_FAIL(t, ref_bad, "reference kernel vs float64: max error %g (max |o| %g) on %s",
                      er.max_abs, er.max_ref, c->text);
        if (!(er.lse <= 1e-3))
            CASE_FAIL(t, ref_bad, "reference LSE error %g on %s", er.lse, c->text);
        if (fast_too) {
            same_precision(c, &B, &hp, sp);
            float *spf = malloc(nq * 4);
            for (size_t i = 0; i < nq; i++)
                spf[i] = (float)sp[i];
            errs es = compare(c, &B, spf, lse_ref, f, flse);
            errs ef = compare(c, &B, o_fast, lse_fast, f, flse);
            double bound =
                2 * fmax(es.max_abs, er.max_abs) + out_ulp * fmax(es.max_ref, 1e-3) + 1e-6;
            if (!(ef.max_abs <= bound))
                CASE_FAIL(t, fast_bad,
                          "fast kernel vs float64: max error %g > %g (2 x same-precision %g + "
                          "an output rounding) on %s",
                          ef.max_abs, bound, fmax(es.max_abs, er.max_abs), c->text);
            if (!(ef.lse <= 2e-3))
                CASE_FAIL(t, fast_bad, "fast kernel LSE error %g on %s", ef.lse, c->text);
            free(spf);
        }
        free(f), free(flse), free(sp);
    } else if (fast_too) {
        double *r = malloc(nq * sizeof(double)), *rl = malloc(nlse * sizeof(double));
        for (size_t i = 0; i < nq; i++)
            r[i] = o_ref[i];
        for (size_t i = 0; i < nlse; i++)
            rl[i] = lse_ref[i];
        errs ef = compare(c, &B, o_fast, lse_fast, r, rl);
        if (!(ef.max_abs <= 2 * out_ulp * fmax(ef.max_ref, 1e-3) + 1e-6))
            CASE_FAIL(t, fast_bad, "fast kernel vs reference kernel: max error %g (max |o| %g) on %s",
                      ef.max_abs, ef.max_ref, c->text);
        if (!(ef.lse <= 2e-3))
            CASE_FAIL(t, fast_bad, "fast kernel LSE error %g on %s", ef.lse, c->text);
        free(r), free(rl);
    }
    free(o_ref), free(lse_ref), free(o_fast), free(lse_fast);
    teardown(&B);
    t->n_cpu += use_cpu;
}

/*------ tests ------*/

START_TEST(sweep)
{
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    int n = env_int("FAJIT_TEST_CASES", 320);
    tally t = {0};
    g_rng = g_seed;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        tc c;
        make_case(&c, 4097);
        check_case(ctx, &c, 1, &t);
    }
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    printf("sweep: %d cases (%d against float64, %d against the reference kernel), seed %u, "
           "%.1f s, %llu compiles\n", n, t.n_cpu, n - t.n_cpu, g_seed, now_s() - t0,
           (unsigned long long)cnt.compiles);
    printf("sweep: reference kernel %d/%d passed against float64; fast kernel %d/%d passed\n",
           t.n_cpu - t.ref_bad, t.n_cpu, n - t.fast_bad, n);
    for (int i = 0; i < t.n_first; i++)
        printf("sweep failure: %s\n", t.first[i]);
    fajit_ctx_destroy(ctx);
    ck_assert_int_eq(t.ref_bad, 0);
    ck_assert_int_eq(t.fast_bad, 0);
}
END_TEST

/*------ the launches compute-sanitizer checks (tests/gpu_sanitize.sh) ------*/

/* Small problems over every mask, GQA/MQA, odd lengths, padding, varlen with and without
 * totals and empty sequences, head dims 64..256: each launched with every tuning candidate
 * of the Hopper family (grid, static and dynamic persistent orders, O copy, ping-pong) and
 * the first four of the portable one, each against the reference kernel. Alone: CK_RUN_CASE=san (gpu_sanitize.sh runs it under memcheck,
 * racecheck and synccheck). */
START_TEST(sanitizer_launches)
{
#define SAN(b, hq_, hkv_, sq_, sk_, d_, dt, m, wl_, wr_, pad_) \
    {.batch = b, .hq = hq_, .hkv = hkv_, .sq = sq_, .sk = sk_, .d = d_, .dtype = dt, .mask = m, \
     .wl = wl_, .wr = wr_, .pad = pad_}
#define SAN_VARLEN(b, hq_, hkv_, d_, dt, m, wl_, wr_, tot, ...) \
    {.batch = b, .hq = hq_, .hkv = hkv_, .d = d_, .dtype = dt, .mask = m, .wl = wl_, \
     .wr = wr_, .varlen = 1, .totals = tot, __VA_ARGS__}
    static const tc k_cases[] = {
        /* batch heads_q heads_kv seqlen_q seqlen_k head_dim bf16 mask wl wr pad */
        SAN(1, 4, 4, 129, 129, 64, 0, 0, 0, 0, 0),
        SAN(2, 8, 2, 63, 200, 128, 1, 1, 0, 0, 0),
        SAN(1, 4, 1, 200, 63, 128, 0, 1, 0, 0, 0),
        SAN(2, 6, 3, 129, 129, 96, 1, 2, 37, 5, 0),
        SAN(1, 2, 2, 7, 300, 256, 0, 0, 0, 0, 0),
        SAN(2, 16, 2, 1, 257, 128, 1, 0, 0, 0, 0),
        SAN(1, 4, 2, 256, 256, 64, 1, 2, 100, 0, 0),
        SAN(2, 3, 1, 65, 65, 192, 0, 1, 0, 0, 0),
        SAN(1, 8, 8, 300, 300, 128, 0, 0, 0, 0, 8),
        /* varlen: batch heads_q heads_kv head_dim bf16 mask wl wr totals, lengths */
        SAN_VARLEN(3, 4, 2, 128, 1, 1, 0, 0, 1, .lens_q = {65, 1, 130}, .lens_k = {200, 0, 131}),
        SAN_VARLEN(3, 4, 4, 64, 0, 0, 0, 0, 0, .lens_q = {17, 129, 0}, .lens_k = {33, 256, 5}),
        SAN_VARLEN(2, 2, 1, 96, 1, 2, 20, 3, 1, .lens_q = {0, 77}, .lens_k = {0, 90}),
    };
#undef SAN
#undef SAN_VARLEN
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    const fj_target t = fj_target_of(ctx, NULL);
    const fj_family *fams[] = {&fj_family_fa2, &fj_family_fa3};
    int launches[2] = {0, 0}, bad = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        tc c = k_cases[i];
        for (int b = 0; c.varlen && b < c.batch; b++) {
            c.sq = c.lens_q[b] > c.sq ? c.lens_q[b] : c.sq;
            c.sk = c.lens_k[b] > c.sk ? c.lens_k[b] : c.sk;
        }
        snprintf(c.text, sizeof c.text, "case %zu: b%d hq%d hkv%d sq%d sk%d d%d %s mask %d%s",
                 i, c.batch, c.hq, c.hkv, c.sq, c.sk, c.d, c.dtype ? "bf16" : "f16", c.mask,
                 c.varlen ? (c.totals ? " varlen+totals" : " varlen") : "");
        bufs B;
        setup(&c, &B);
        fj_oracle orc;
        ck_assert_int_eq(fj_oracle_init(ctx, &orc, &B.desc), FAJIT_OK);
        ck_assert_msg(fj_oracle_reference(ctx, &orc, &B.desc, 0, 0) == FAJIT_OK, "%s: %s", c.text,
                      fajit_errmsg(ctx));
        for (int fi = 0; fi < 2; fi++) {
            const fj_family *f = fams[fi];
            if (!f->applies(&B.desc, &t))
                continue;
            fj_kcfg cfg[32];
            int n = f->candidates(&B.desc, &t, cfg, 32);
            if (f == &fj_family_fa2 && n > 4)   /* (its variants differ in tiles only) */
                n = 4;
            for (int k = 0; k < n; k++) {
                char name[32], why[512];
                fj_kcfg_name(&cfg[k], name);
                if (f->check(&cfg[k], &B.desc, &t, why, sizeof why) != 0)
                    continue;
                fj_kplan kp;
                memset(&kp, 0, sizeof kp);
                kp.cfg = cfg[k];
                ck_assert_msg(fj_kplan_load(ctx, &kp, &B.desc, 0) == FAJIT_OK, "%s %s: %s",
                              c.text, name, fajit_errmsg(ctx));
                if (fj_oracle_check(ctx, &orc, &kp, &B.desc, why, sizeof why) != 0) {
                    printf("san: %s %s: %s\n", c.text, name, why);
                    bad++;
                }
                launches[fi]++;
            }
        }
        fj_oracle_free(&orc);
        teardown(&B);
    }
    printf("san: %d launches (fa2 %d, fa3 %d), %d wrong\n", launches[0] + launches[1],
           launches[0], launches[1], bad);
    fajit_ctx_destroy(ctx);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_gt(launches[1], 12);   /* on the H200: the Hopper family ran */
}
END_TEST

/*------ CUDA graphs ------*/

static void check_against_reference(fajit_ctx *ctx, const tc *c);

/* Graph entry points the library does not use, looked up for this test. */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
static struct {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*begin)(CUstream, int);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream);
} G;

static int graph_api(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 0;
    static const char *const names[] = {
        "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamBeginCapture_v2",
        "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy",
        "cuGraphDestroy", "cuMemsetD8Async"};
    void **f = (void **)&G;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(f[i] = dlsym(h, names[i])))
            return 0;
    return 1;
}

/* A launch inside CUDA-graph capture (global mode, the strictest), as a server captures its
 * decode step: the kernel's first use is inside the capture (its module load must not break
 * it), and it is the dynamically scheduled Hopper kernel (hd128 causal: its default at every
 * length), whose tile counters must exist before (no synchronize at a launch) and whose last
 * claim resets the counter so that every replay computes the whole output. Three captured
 * launches (three counter slots), three replays; each replay's O and LSE equal a plain
 * launch's bit for bit (a tile's result does not depend on which CTA claimed it). */
START_TEST(graph_capture)
{
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    if (strcmp(ctx->arch, "sm_90a") != 0) {
        printf("graph capture: skipped on %s (the dynamic schedule is sm_90a's)\n", ctx->arch);
        fajit_ctx_destroy(ctx);
        return;
    }
    ck_assert_msg(atomic_load(&ctx->counters) != 0, "no tile counters after context creation");
    ck_assert_msg(graph_api(), "libcuda lacks a graph entry point");
    tc c = {.batch = 2, .hq = 8, .hkv = 2, .sq = 1000, .sk = 1000, .d = 128,
            .dtype = FJ_DT_BF16, .mask = FAJIT_MASK_CAUSAL};
    snprintf(c.text, sizeof c.text, "graph b2 hq8 hkv2 sq1000 d128 bf16 causal");
    g_rng = g_seed ^ 0x9e3779b9u;
    bufs B;
    setup(&c, &B);
    fj_kcfg cfg;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg_default(&B.desc, &h200, FAJIT_FAMILY_AUTO, &cfg);
    ck_assert_msg(fj_fa3_of(&cfg) && fj_fa3_of(&cfg)->persistent == 2,
                  "the case no longer takes the dynamic schedule: pick another");
    size_t nq = (size_t)(B.rows_q * B.row_q) + 8, nl = (size_t)c.hq * c.batch * c.sq + 1;
    uint16_t *want = malloc(nq * 2), *got = malloc(nq * 2);
    float *want_l = malloc(nl * 4), *got_l = malloc(nl * 4);

    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = FAJIT_OK;
    for (int i = 0; i < 3 && st == FAJIT_OK; i++)
        st = fajit_attn_fwd(ctx, &B.desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "launch inside capture: %s", fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec;
    CU(G.instantiate(&exec, graph, 0));

    /* the plain launch: the expected output */
    CU(cu->cuMemsetD8(B.o, 0xff, nq * 2));
    CU(cu->cuMemsetD8(B.lse, 0xff, nl * 4));
    ck_assert_msg(fajit_attn_fwd(ctx, &B.desc, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    CU(G.stream_sync(s));
    CU(cu->cuMemcpyDtoH(want, B.o, nq * 2));
    CU(cu->cuMemcpyDtoH(want_l, B.lse, nl * 4));
    for (int rep = 0; rep < 3; rep++) {
        CU(G.memset_async(B.o, 0xff, nq * 2, s));   /* NaN: a tile left out shows */
        CU(G.memset_async(B.lse, 0xff, nl * 4, s));
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        CU(cu->cuMemcpyDtoH(got, B.o, nq * 2));
        CU(cu->cuMemcpyDtoH(got_l, B.lse, nl * 4));
        ck_assert_msg(memcmp(got, want, nq * 2) == 0 && memcmp(got_l, want_l, nl * 4) == 0,
                      "replay %d differs from a plain launch", rep);
    }
    /* and the plain launch itself is right (the reference kernel as the oracle) */
    check_against_reference(ctx, &c);
    printf("graph capture: 3 launches captured, 3 replays equal to a plain launch\n");
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
    CU(G.stream_destroy(s));
    free(want), free(got), free(want_l), free(got_l);
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* A second process with the same cache directory finds every kernel without compiling;
 * so does a third without NVRTC (it cannot know the NVRTC version in the keys). */
START_TEST(cache_across_processes)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --second-process %s", (int)getpid(), g_cache_dir);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "second process failed (%d)", rc);
    snprintf(cmd, sizeof cmd, "FAJIT_NVRTC_PATH=none /proc/%d/exe --second-process %s",
             (int)getpid(), g_cache_dir);
    rc = system(cmd);
    ck_assert_msg(rc == 0, "second process without NVRTC failed (%d)", rc);
}
END_TEST

static int second_process(const char *dir)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.policy = FAJIT_POLICY_STRICT;  /* a miss would be an error, not a compile */
    fajit_ctx *ctx = NULL;
    if (fajit_ctx_create(&ctx, &o) != FAJIT_OK) {
        fprintf(stderr, "second process: %s\n", fajit_errmsg(ctx));
        return 1;
    }
    CUdeviceptr buf;
    cu->cuMemAlloc(&buf, 1 << 20);
    int bad = 0;
    for (int dt = 0; dt < 2; dt++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, (void *)buf, (void *)buf, (void *)buf, (void *)(buf + 4096), 1,
                             1, 1, 16, 16, 128, (fajit_dtype)dt);
        cu->cuMemsetD8(buf, 0, 4096);
        fajit_status st = fajit_attn_fwd_reference(ctx, &d, NULL);
        if (st != FAJIT_OK) {
            fprintf(stderr, "second process: %s\n", fajit_errmsg(ctx));
            bad = 1;
        }
    }
    cu->cuCtxSynchronize();
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    const char *nv = getenv("FAJIT_NVRTC_PATH");
    printf("second process%s: %llu disk hits, %llu compiles, %llu misses\n",
           nv && strcmp(nv, "none") == 0 ? " (no NVRTC)" : "", (unsigned long long)c.hits_disk,
           (unsigned long long)c.compiles, (unsigned long long)c.misses);
    cu->cuMemFree(buf);
    fajit_ctx_destroy(ctx);
    return bad || c.compiles != 0 || c.hits_disk < 2;
}

/* Host-side costs of the three ways to get a kernel, printed for the closing note. */
static void time_path(const char *label, fwd_fn fwd)
{
    char dir[] = "/tmp/fajit-gpu-timing-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    CUdeviceptr buf;
    CU(cu->cuMemAlloc(&buf, 1 << 20));
    CU(cu->cuMemsetD8(buf, 0, 1 << 20));
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, (void *)buf, (void *)buf, (void *)buf, (void *)(buf + 65536), 1, 1,
                         1, 64, 64, 128, FAJIT_BF16);

    fajit_ctx *ctx = new_ctx(dir);
    double t0 = now_s();
    ck_assert_int_eq(fwd(ctx, &d, NULL), FAJIT_OK);
    double cold = now_s() - t0;
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 1);
    double nvrtc_s = c.compile_seconds;
    CU(cu->cuCtxSynchronize());
    fajit_ctx_destroy(ctx);

    ctx = new_ctx(dir);
    t0 = now_s();
    ck_assert_int_eq(fwd(ctx, &d, NULL), FAJIT_OK);
    double disk = now_s() - t0;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.hits_disk, 1);
    CU(cu->cuCtxSynchronize());

    /* Host time of the calls only: batches small enough that the launch queue never
     * fills (a full queue makes launches wait for the GPU), synchronized between. */
    enum { BATCH = 100, BATCHES = 100, N = BATCH * BATCHES };
    double in_calls = 0;
    for (int r = 0; r < BATCHES; r++) {
        t0 = now_s();
        for (int i = 0; i < BATCH; i++)
            fwd(ctx, &d, NULL);
        in_calls += now_s() - t0;
        CU(cu->cuCtxSynchronize());
    }
    double per_call = in_calls / N;
    /* The launch of the same kernel without dispatch (plan lookup, validation), for
     * comparison; for the sm_90a kernel it includes encoding the TMA descriptors. */
    fj_plan *pl = NULL;
    for (int b = 0; b < FJ_PLAN_BUCKETS && !pl; b++)
        pl = ctx->plans[b];
    ck_assert_ptr_nonnull(pl);
    const fj_kplan *p = atomic_load(&pl->launch);
    double in_launch = 0;
    for (int r = 0; r < BATCHES; r++) {
        t0 = now_s();
        for (int i = 0; i < BATCH; i++)
            fj_kplan_launch(ctx, p, &d, NULL);
        in_launch += now_s() - t0;
        CU(cu->cuCtxSynchronize());
    }
    double bare = in_launch / N;
    printf("timing %-9s cold compile+load+launch %7.1f ms (NVRTC %6.1f ms) | "
           "SQLite hit+load+launch %6.2f ms | warm call %5.2f us (launch alone %5.2f us)\n",
           label, cold * 1e3, nvrtc_s * 1e3, disk * 1e3, per_call * 1e6, bare * 1e6);
    fajit_ctx_destroy(ctx);
    cu->cuMemFree(buf);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(timings)
{
    time_path("reference", fajit_attn_fwd_reference);
    time_path("fast", fajit_attn_fwd);
}
END_TEST


/*------ tuning, policies ------*/

static void tmp_dir(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/fajit-gpu-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void rm_dir(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static fajit_ctx *policy_ctx(const char *dir, fajit_policy policy)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.policy = policy;
    fajit_ctx *ctx = NULL;
    ck_assert_msg(fajit_ctx_create(&ctx, &o) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    return ctx;
}

/* fajit_bench_spec: one result per shape of the spec, in spec order, with ordered
 * statistics of positive samples and the dispatch line of the kernel timed. */
typedef struct bench_seen {
    int n, sq[4], sk[4], page[4], bad;
} bench_seen;

static void on_bench(void *user, const fajit_bench_result *r)
{
    bench_seen *s = user;
    int ok = r->reps == 7 && r->min_ms > 0 && r->min_ms <= r->p10_ms &&
             r->p10_ms <= r->median_ms && r->median_ms <= r->p90_ms && r->p90_ms <= r->max_ms &&
             r->kernel[0] && strcmp(r->problem, s->n < 2 ? "b" : "p") == 0 &&
             r->desc->heads_q == 8 && !r->desc->block_table == !r->desc->page_size;
    for (int k = 0; k < r->reps; k++)
        ok = ok && r->samples_ms[k] >= r->min_ms && r->samples_ms[k] <= r->max_ms;
    s->bad += !ok;
    if (s->n < 4)
        s->sq[s->n] = r->desc->seqlen_q, s->sk[s->n] = r->desc->seqlen_k,
        s->page[s->n] = r->desc->page_size;
    s->n++;
}

START_TEST(bench_spec)
{
    char dir[64], spec[96];
    tmp_dir(dir, sizeof dir, "bench");
    snprintf(spec, sizeof spec, "%s/b.spec", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model b]\ndtype = bf16\nhead_dim = 64\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\nprefill = 256\ndecode = 1k\n"
          "[model p]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\npage_size = 16\ndecode = 1000\n", f);
    fclose(f);
    fajit_ctx *ctx = new_ctx(dir);
    bench_seen s = {0};
    ck_assert_msg(fajit_bench_spec(ctx, spec, 7, on_bench, &s) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    ck_assert_int_eq(s.n, 3);
    ck_assert_int_eq(s.bad, 0);
    ck_assert(s.sq[0] == 256 && s.sk[0] == 256 && s.sq[1] == 1 && s.sk[1] == 1024);
    ck_assert(s.page[0] == 0 && s.page[1] == 0 && s.page[2] == 16 && s.sk[2] == 1000);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/* The tuning problem of these tests. */
static void tune_case(tc *c)
{
    memset(c, 0, sizeof *c);
    c->batch = 2, c->hq = 8, c->hkv = 2, c->sq = c->sk = 1024, c->d = 128;
    c->dtype = FJ_DT_BF16, c->mask = FJ_MASK_CAUSAL;
    snprintf(c->text, sizeof c->text, "tune case b2 h8/2 s1024 d128 bf16 causal");
}

/* Runs `fwd` of ctx and the reference kernel on fresh inputs; max error must be within two
 * output roundings. */
static void check_against_reference(fajit_ctx *ctx, const tc *c)
{
    bufs B;
    setup(c, &B);
    size_t nq = (size_t)(B.rows_q * B.row_q) + 8;
    size_t nl = (size_t)c->hq * (size_t)(c->batch * c->sq) + 1;
    float *o = malloc(nq * 4), *l = malloc(nl * 4), *ro = malloc(nq * 4), *rl = malloc(nl * 4);
    run_kernel(ctx, fajit_attn_fwd, &B, c, o, l);
    run_kernel(ctx, fajit_attn_fwd_reference, &B, c, ro, rl);
    double *r = malloc(nq * sizeof(double)), *rld = malloc(nl * sizeof(double));
    for (size_t i = 0; i < nq; i++)
        r[i] = ro[i];
    for (size_t i = 0; i < nl; i++)
        rld[i] = rl[i];
    errs e = compare(c, &B, o, l, r, rld);
    ck_assert_msg(e.max_abs <= 2.0 / 256 * fmax(e.max_ref, 1e-3) + 1e-6,
                  "%s: max error %g against the reference kernel", c->text, e.max_abs);
    free(o), free(l), free(ro), free(rl), free(r), free(rld);
    teardown(&B);
}

/* Tune, then a new process uses the winner under STRICT without measuring or compiling. */
START_TEST(tune_then_new_process)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "tune");
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_BLOCKING);
    fajit_tune_opts o;
    fajit_tune_opts_init(&o);
    o.reps = 10;
    fajit_tune_result r;
    double t0 = now_s();
    fajit_status st = fajit_tune(ctx, &B.desc, &o, &r);
    ck_assert_msg(st == FAJIT_OK, "tune: %s", fajit_errmsg(ctx));
    printf("tune: %s %s: %d candidates, %d pruned, default %s %.4f ms, winner %s %.4f ms "
           "(%.1f s)\n", r.signature, r.bucket, r.candidates, r.pruned, r.default_config,
           r.default_ms, r.winner, r.winner_ms, now_s() - t0);
    ck_assert_int_ge(r.candidates, 2);
    ck_assert_int_eq(r.from_cache, 0);
    /* asked again: the stored row is kept, nothing measured */
    fajit_tune_result again;
    ck_assert_int_eq(fajit_tune(ctx, &B.desc, &o, &again), FAJIT_OK);
    ck_assert_int_eq(again.from_cache, 1);
    ck_assert_str_eq(again.winner, r.winner);
    teardown(&B);
    fajit_ctx_destroy(ctx);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --use-tuned %s %s", (int)getpid(), dir, r.winner);
    ck_assert_msg(system(cmd) == 0, "the new process did not use the winner");
    rm_dir(dir);
}
END_TEST

static const char *g_child_dir, *g_child_winner;

START_TEST(use_tuned_test)
{
    const char *dir = g_child_dir, *winner = g_child_winner;
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_STRICT);
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    char line[512];
    fajit_dispatch_describe(ctx, NULL, &B.desc, line, sizeof line);
    printf("new process: %s\n", line);
    fj_kcfg w;
    char name[32];
    ck_assert_int_eq(fj_kcfg_parse(winner, &w), 0);
    fj_kernels ks;
    w.fam->kernels(&w, &B.desc, &ks);
    const fj_variant v = ks.v[0];
    ck_assert_msg(strncmp(line, v.name, strlen(v.name)) == 0, "dispatch is not the winner %s",
                  winner);
    fj_kcfg_name(&w, name);
    teardown(&B);
    check_against_reference(ctx, &c);   /* STRICT: a miss would fail here */
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    printf("new process: winner %s used, %llu compiles, %llu disk hits\n", name,
           (unsigned long long)cnt.compiles, (unsigned long long)cnt.hits_disk);
    ck_assert_uint_eq(cnt.compiles, 0);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The child side of tune_then_new_process, in its own runner (assertions need one). */
static int use_tuned(const char *dir, const char *winner)
{
    g_child_dir = dir, g_child_winner = winner;
    Suite *s = suite_create("gpu-child");
    gpu_harness_add(s, "use-tuned", use_tuned_test, 300);
    return gpu_harness_run(s);
}

/*------ sizes at the edges (issue 21, items 12-14) ------*/

/* bf16 bits of the value that fills V of sequence b, head h: multiples of 1/8 in (0, 1],
 * exact in bf16, and O = that value for any attention weights (every key row is alike). */
static uint16_t v_bits(int b, int h)
{
    float f = (float)(((b * 31 + h) % 8) + 1) * 0.125f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* batch x heads (all MHA) x seq tokens, hd 64, Q = K = 0, V constant per (b, h): the
 * count of O elements that are not their V value. Exercises the last grid y/z block. */
static long long const_v_run(fajit_ctx *ctx, int batch, int heads, int seq)
{
    const int hd = 64;
    const size_t n = (size_t)batch * seq * heads * hd;
    uint16_t *h = malloc(n * 2);
    ck_assert_ptr_nonnull(h);
    CUdeviceptr q, k, v, o;
    CU(cu->cuMemAlloc(&q, n * 2));
    CU(cu->cuMemAlloc(&k, n * 2));
    CU(cu->cuMemAlloc(&v, n * 2));
    CU(cu->cuMemAlloc(&o, n * 2));
    CU(cu->cuMemsetD8(q, 0, n * 2));
    CU(cu->cuMemsetD8(k, 0, n * 2));
    CU(cu->cuMemsetD8(o, 0xff, n * 2));   /* NaN */
    for (size_t i = 0; i < n; i++)
        h[i] = v_bits((int)(i / ((size_t)seq * heads * hd)), (int)(i / hd % (size_t)heads));
    CU(cu->cuMemcpyHtoD(v, h, n * 2));
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, (void *)q, (void *)k, (void *)v, (void *)o, batch, heads, heads,
                         seq, seq, hd, FAJIT_BF16);
    fajit_status st = fajit_attn_fwd(ctx, &d, NULL);
    ck_assert_msg(st == FAJIT_OK, "b%d h%d s%d: %s", batch, heads, seq, fajit_errmsg(ctx));
    CU(cu->cuCtxSynchronize());
    CU(cu->cuMemcpyDtoH(h, o, n * 2));
    long long bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[i] != v_bits((int)(i / ((size_t)seq * heads * hd)), (int)(i / hd % (size_t)heads));
    cu->cuMemFree(q), cu->cuMemFree(k), cu->cuMemFree(v), cu->cuMemFree(o);
    free(h);
    return bad;
}

/* 65535 sequences and 65535 heads (the grid's z and y limits) run, prefill and decode
 * shapes; one more, or lengths past the kernels' int arithmetic, are refused before any
 * launch (seqlen_k 2^31-1 once returned FAJIT_OK with O all zero). */
START_TEST(grid_limits)
{
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    ck_assert_int_eq(const_v_run(ctx, FAJIT_MAX_BATCH, 1, 64), 0);
    ck_assert_int_eq(const_v_run(ctx, FAJIT_MAX_BATCH, 1, 4), 0);   /* the decode family */
    ck_assert_int_eq(const_v_run(ctx, 1, FAJIT_MAX_HEADS, 64), 0);
    ck_assert_int_eq(const_v_run(ctx, 1, FAJIT_MAX_HEADS, 4), 0);

    CUdeviceptr buf;
    CU(cu->cuMemAlloc(&buf, 1 << 20));
    fajit_attn_desc d;
    void *p = (void *)buf;
    fajit_attn_desc_init(&d, p, p, p, p, FAJIT_MAX_BATCH + 1, 1, 1, 64, 64, 64, FAJIT_BF16);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    fajit_attn_desc_init(&d, p, p, p, p, 1, FAJIT_MAX_HEADS + 1, 1, 64, 64, 64, FAJIT_BF16);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    fajit_attn_desc_init(&d, p, p, p, p, 1, 1, 1, 16, 2147483647, 64, FAJIT_BF16);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    fajit_attn_desc_init(&d, p, p, p, p, 1, 1, 1, 2147483647, 16, 64, FAJIT_BF16);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    cu->cuMemFree(buf);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* Varlen where no sequence has a key (total_k 0): K and V are NULL, as zero-element
 * tensors are; O = 0 and LSE = -inf on every query row (FlashAttention's answer), through
 * the fast and the reference kernel, unmasked and causal. */
START_TEST(empty_keys)
{
    enum { B = 3, HQ = 4, HKV = 2, D = 64, TOTAL = 22 };
    const int32_t cq[B + 1] = {0, 5, 5, TOTAL}, ck[B + 1] = {0, 0, 0, 0};
    const size_t no = (size_t)TOTAL * HQ * D, nl = (size_t)TOTAL * HQ;
    uint16_t *ho = malloc(no * 2);
    float *hl = malloc(nl * 4);
    CUdeviceptr q, o, lse, cuq, cuk;
    CU(cu->cuMemAlloc(&q, no * 2));
    CU(cu->cuMemAlloc(&o, no * 2));
    CU(cu->cuMemAlloc(&lse, nl * 4));
    CU(cu->cuMemAlloc(&cuq, sizeof cq));
    CU(cu->cuMemAlloc(&cuk, sizeof ck));
    CU(cu->cuMemsetD8(q, 0x3c, no * 2));
    CU(cu->cuMemcpyHtoD(cuq, cq, sizeof cq));
    CU(cu->cuMemcpyHtoD(cuk, ck, sizeof ck));
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    for (int run = 0; run < 4; run++) {
        CU(cu->cuMemsetD8(o, 0xff, no * 2));    /* NaN */
        CU(cu->cuMemsetD8(lse, 0xff, nl * 4));  /* NaN */
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, (void *)q, NULL, NULL, (void *)o, B, HQ, HKV, 17, 0, D,
                             FAJIT_BF16);
        d.cu_seqlens_q = (const int32_t *)cuq, d.cu_seqlens_k = (const int32_t *)cuk;
        d.total_q = TOTAL, d.total_k = 0;
        d.lse = (float *)lse;
        d.mask = run & 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        fajit_status st = run < 2 ? fajit_attn_fwd(ctx, &d, NULL)
                                  : fajit_attn_fwd_reference(ctx, &d, NULL);
        ck_assert_msg(st == FAJIT_OK, "run %d: %s", run, fajit_errmsg(ctx));
        CU(cu->cuCtxSynchronize());
        CU(cu->cuMemcpyDtoH(ho, o, no * 2));
        CU(cu->cuMemcpyDtoH(hl, lse, nl * 4));
        for (size_t i = 0; i < no; i++)
            ck_assert_msg((ho[i] & 0x7fff) == 0, "run %d: o[%zu] = 0x%04x", run, i, ho[i]);
        for (size_t i = 0; i < nl; i++)
            ck_assert_msg(isinf(hl[i]) && hl[i] < 0, "run %d: lse[%zu] = %g", run, i, hl[i]);
    }
    fajit_ctx_destroy(ctx);
    cu->cuMemFree(q), cu->cuMemFree(o), cu->cuMemFree(lse);
    cu->cuMemFree(cuq), cu->cuMemFree(cuk);
    free(ho);
    free(hl);
}
END_TEST

START_TEST(strict_miss)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "strict");
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_STRICT);
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &B.desc, NULL), FAJIT_CACHE_MISS);
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    ck_assert_uint_eq(cnt.compiles, 0);
    ck_assert_uint_eq(cnt.calls, 0);
    teardown(&B);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/* FALLBACK with a tuned row whose kernel is not compiled: the first call returns without
 * compiling (the default runs), the exact kernel arrives in the background; both right. */
START_TEST(fallback_never_blocks)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "fallback");
    tc c;
    tune_case(&c);
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_BLOCKING);
    check_against_reference(ctx, &c);   /* compiles the default and the reference */
    fajit_ctx_destroy(ctx);

    bufs B;
    setup(&c, &B);
    fj_kcfg dc, cand[48], other;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg_default(&B.desc, &h200, FAJIT_FAMILY_AUTO, &dc);
    int n = fj_kcfg_candidates(&B.desc, &h200, cand, 48);
    ck_assert_int_ge(n, 2);
    other = cand[1];   /* candidate 0 is the default */
    fj_cache *cache;
    fj_cache_open(&cache, dir, NULL, NULL);
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    CUdevice dev;
    cu->cuDeviceGet(&dev, 0);
    cu->cuDeviceGetName(row.gpu_name, sizeof row.gpu_name, dev);
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    cu->cuDeviceGetAttribute(&row.sm_count, FJ_CU_ATTR_SM_COUNT, dev);
    fj_desc_signature(&B.desc, row.signature, sizeof row.signature);
    fj_desc_bucket(&B.desc, row.sm_count, row.bucket, sizeof row.bucket);
    fj_kcfg_name(&other, row.config);
    ck_assert_int_eq(fj_cache_tune_put(cache, &row), 0);
    fj_cache_close(cache);
    teardown(&B);

    ctx = policy_ctx(dir, FAJIT_POLICY_FALLBACK);
    double t0 = now_s();
    check_against_reference(ctx, &c);
    double first = now_s() - t0;
    fajit_counters cnt;
    for (int i = 0; i < 600; i++) {
        fajit_counters_get(ctx, &cnt);
        if (cnt.background_compiles)
            break;
        usleep(50 * 1000);
    }
    double ready = now_s() - t0;
    usleep(10000);
    check_against_reference(ctx, &c);
    fajit_counters_get(ctx, &cnt);
    printf("fallback: first call (and its check) %.1f ms with the default kernel, tuned %s "
           "ready after %.1f ms; %llu serving compiles, %llu background, %llu fallback "
           "launches\n", first * 1e3, row.config, ready * 1e3,
           (unsigned long long)cnt.serving_compiles, (unsigned long long)cnt.background_compiles,
           (unsigned long long)cnt.fallback_launches);
    ck_assert_uint_eq(cnt.serving_compiles, 0);
    ck_assert_uint_eq(cnt.background_compiles, 1);
    ck_assert_uint_ge(cnt.fallback_launches, 1);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/*------ the validation gate ------*/

/* "broken": the portable family's kernels with a softmax scale 1.25x too large in their
 * parameter block, ranked above every shipped family, so that dispatch would pick it for
 * any problem the portable kernel serves. The gate must catch it. */
static const fj_family k_broken;
static fj_kcfg as_fa2(const fj_kcfg *c)
{
    fj_kcfg f = *c;
    f.fam = &fj_family_fa2;   /* the portable family reads only configurations naming it */
    return f;
}
static int br_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return fj_family_fa2.applies(d, t);
}
static void br_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_family_fa2.default_cfg(d, t, out);
    out->fam = &k_broken;
}
static int br_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    br_default(d, t, out);
    return 1;
}
static int br_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *w,
                    size_t n)
{
    fj_kcfg f = as_fa2(c);
    return fj_family_fa2.check(&f, d, t, w, n);
}
static void br_name(const fj_kcfg *c, char *out, size_t n)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.cfg_name(&f, out, n);
}
static int br_parse(const char *s, fj_kcfg *c)
{
    int r = fj_family_fa2.cfg_parse(s, c);
    c->fam = &k_broken;
    return r;
}
static void br_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.kernels(&f, d, out);
    for (int i = 0; i < out->n; i++) {
        char was[96];
        snprintf(was, sizeof was, "%s", out->v[i].name);
        snprintf(out->v[i].name, sizeof out->v[i].name, "broken(%.80s)", was);
    }
}
static void br_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                    size_t n)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.describe_grid(&f, d, t, out, n);
}
static fajit_status br_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                            const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    fj_kcfg f = as_fa2(c);
    fajit_attn_desc wrong = *d;
    wrong.softmax_scale *= 1.25f;   /* the bug */
    return fj_family_fa2.launch_args(&f, i, &wrong, env, a, why, n);
}
#define BROKEN_ID 7
static const fj_family k_broken = {
    .name = "broken", .id = BROKEN_ID, .op = FAJIT_OP_FWD, .rank = 50, .cfg_prefix = "broken:",
    .applies = br_applies, .default_cfg = br_default, .candidates = br_one, .shipped = br_one,
    .check = br_check, .cfg_name = br_name, .cfg_parse = br_parse, .kernels = br_kernels,
    .describe_grid = br_grid, .launch_args = br_args,
};

typedef struct gate_log {
    int quarantine_warns;
    char quarantine[1024];
} gate_log;

static void gate_sink(void *user, fajit_log_level level, const char *msg)
{
    gate_log *g = user;
    if (level == FAJIT_LOG_WARN && strstr(msg, "is quarantined")) {
        g->quarantine_warns++;
        snprintf(g->quarantine, sizeof g->quarantine, "%s", msg);
    }
}

static fajit_ctx *gate_ctx(const char *dir, fajit_validate_policy v, gate_log *g)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.validate = v;
    o.log = gate_sink, o.log_user = g;
    fajit_ctx *ctx = NULL;
    ck_assert_msg(fajit_ctx_create(&ctx, &o) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    return ctx;
}

static fajit_verdict family_verdict(fajit_ctx *ctx, int family, fajit_verdict_info *vi)
{
    fajit_verdict_info_init(vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)family, vi), FAJIT_OK);
    return vi->verdict;
}

/* Every shipped family passes on this GPU; the broken one is caught, quarantined (in this
 * context, in a new one on the same cache, and lazily in one that never ran fajit_validate),
 * and dispatch falls back to a correct kernel, warning once with its name. */
START_TEST(validation_gate)
{
    char dir[64], lazy_dir[64], line[2048];
    tmp_dir(dir, sizeof dir, "gate");
    tmp_dir(lazy_dir, sizeof lazy_dir, "gate-lazy");
    gate_log g = {0};
    fajit_validation_report rep;
    fajit_verdict_info vi;
    tc c;
    tune_case(&c);
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, c.batch, c.hq, c.hkv, c.sq, c.sk, c.d, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;

    fajit_ctx *ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    fajit_validation_report_init(&rep);
    double t0 = now_s();
    fajit_status st = fajit_validate(ctx, FAJIT_FAMILY_AUTO, &rep);
    printf("gate: shipped families on %s: %d validated, %d failed, %d cases, %.1f s (%s)\n",
           ctx->arch, rep.families, rep.failed, rep.cases, now_s() - t0,
           st ? fajit_errmsg(ctx) : "ok");
    ck_assert_msg(st == FAJIT_OK && rep.failed == 0, "%s", fajit_errmsg(ctx));
    static const int shipped[] = {FAJIT_FAMILY_FA2, FAJIT_FAMILY_FA3, FAJIT_FAMILY_DECODE};
    for (int i = 0; i < 3; i++) {
        int want = shipped[i] != FAJIT_FAMILY_FA3 || ctx->cc == 90;
        fajit_verdict v = family_verdict(ctx, shipped[i], &vi);
        printf("gate: %-6s %s\n", fajit_family_name((fajit_family)shipped[i]),
               v == FAJIT_VERDICT_PASS ? "PASS" : v == FAJIT_VERDICT_FAIL ? "FAIL" : "none");
        ck_assert_int_eq(v, want ? FAJIT_VERDICT_PASS : FAJIT_VERDICT_NONE);
    }
    ck_assert_int_eq(rep.families, ctx->cc == 90 ? 3 : 2);
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(&k_broken);
    ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "broken(fa2"), "before validation: %s", line);
    fajit_validation_report_init(&rep);
    st = fajit_validate(ctx, (fajit_family)BROKEN_ID, &rep);
    printf("gate: broken family: %s; case %s: %s\n", fajit_status_name(st), rep.failed_case,
           rep.error);
    ck_assert_int_eq(st, FAJIT_VALIDATION_FAILED);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_int_eq(rep.first_failed, BROKEN_ID);
    ck_assert_ptr_nonnull(strstr(rep.error, "wrong result"));
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "broken"));
    ck_assert_int_eq(family_verdict(ctx, BROKEN_ID, &vi), FAJIT_VERDICT_FAIL);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    printf("gate: plan now: %s\n", line);
    ck_assert_msg(!strstr(line, "broken(") && strstr(line, "family broken is QUARANTINED"),
                  "%s", line);
    check_against_reference(ctx, &c);   /* the fallback computes the right thing */
    printf("gate: warning: %s\n", g.quarantine);
    ck_assert_int_eq(g.quarantine_warns, 1);
    ck_assert_msg(strstr(g.quarantine, "family broken is quarantined") &&
                  strstr(g.quarantine, rep.failed_case) && strstr(g.quarantine, "wrong result"),
                  "%s", g.quarantine);
    fajit_ctx_destroy(ctx);

    /* the verdict persists: a new context on the cache never dispatches it */
    g.quarantine_warns = 0;
    ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    check_against_reference(ctx, &c);
    ck_assert_int_eq(g.quarantine_warns, 1);
    fajit_ctx_destroy(ctx);

    /* LAZY on a cache without broken's verdict: the first call validates it, catches it, falls
     * back. (The shipped families' verdicts are copied over so that only broken is validated
     * here: their kernels would all compile again in this cache.) */
    g.quarantine_warns = 0;
    ctx = gate_ctx(lazy_dir, FAJIT_VALIDATE_LAZY, &g);
    for (int i = 0; i < 3; i++) {
        fj_verdict v;
        memset(&v, 0, sizeof v);
        snprintf(v.gpu_name, sizeof v.gpu_name, "%s", ctx->gpu_name);
        snprintf(v.arch, sizeof v.arch, "%s", ctx->arch);
        v.sm_count = ctx->sm_count;
        v.driver_version = ctx->cu->version;
        snprintf(v.fajit_version, sizeof v.fajit_version, "%s", FAJIT_VERSION_STRING);
        snprintf(v.family, sizeof v.family, "%s", fajit_family_name((fajit_family)shipped[i]));
        v.pass = 1;
        ck_assert_int_eq(fj_cache_verdict_put(ctx->cache, &v), 0);
    }
    t0 = now_s();
    check_against_reference(ctx, &c);
    printf("gate: lazy: first call validated broken in %.1f s\n", now_s() - t0);
    ck_assert_int_eq(family_verdict(ctx, BROKEN_ID, &vi), FAJIT_VERDICT_FAIL);
    printf("gate: lazy: broken %s at %s\n", vi.verdict == FAJIT_VERDICT_FAIL ? "FAIL" : "?",
           vi.failed_case);
    ck_assert_int_eq(g.quarantine_warns, 1);
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(NULL);
    rm_dir(dir);
    rm_dir(lazy_dir);
}
END_TEST

int main(int argc, char **argv)
{
    int rc = gpu_harness_open("gpu");
    if (rc)
        return rc;
    if (argc == 3 && strcmp(argv[1], "--second-process") == 0)
        return second_process(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--use-tuned") == 0)
        return use_tuned(argv[2], argv[3]);
    if (gpu_harness_setup("gpu", NULL))
        return 1;
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, sweep);
    tcase_add_test(tc, cache_across_processes);
    tcase_add_test(tc, timings);
    tcase_add_test(tc, bench_spec);
    tcase_add_test(tc, strict_miss);
    tcase_add_test(tc, tune_then_new_process);
    tcase_add_test(tc, fallback_never_blocks);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("edges");   /* alone: CK_RUN_CASE=edges */
    tcase_set_timeout(te, 600);
    tcase_add_test(te, grid_limits);
    tcase_add_test(te, empty_keys);
    suite_add_tcase(s, te);
    gpu_harness_add(s, "graph", graph_capture, 600);   /* alone: CK_RUN_CASE=graph */
    if (getenv("CK_RUN_CASE"))   /* alone only: CK_RUN_CASE=san (gpu_sanitize.sh); not part
                                    of a plain run: the sweep covers it */
        gpu_harness_add(s, "san", sanitizer_launches, 1800);
    gpu_harness_add(s, "gate", validation_gate, 900);   /* alone: CK_RUN_CASE=gate */
    return gpu_harness_run(s);
}
