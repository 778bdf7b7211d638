/* test_gpu_decode_features.c - the `gpu` suite's tests of the decode family's features over
 * paged caches: FP8 K/V (fajit_attn_desc.kv_dtype: e4m3 / e5m2 pages with bf16 or f16
 * queries, descale factors per tensor or per (sequence, KV head)), softcap, attention sinks
 * and ALiBi, alone and combined, in paged decode, speculative decode and chunked prefill,
 * through the public call. Exits 77 (skipped) when no CUDA driver can be loaded.
 *
 * Oracle: float64 on the host from the same bytes: each FP8 value decoded exactly
 * (fp8_value), times its descale factor; s = scale * q.k, then cap * tanh(s / cap), then
 * - slope * |i + len - q_len - j|, the mask, the sink in the denominator; O and the LSE.
 * Inputs: Q in [-1, 1) (exact in the dtype); K/V bytes drawn over exponents that give
 * magnitudes 2^-3 .. 2^2 (e4m3) with one value in 16 a subnormal or zero, never NaN/Inf;
 * descale factors in [1/32, 32] (far from 1, not powers of two). O and LSE are poisoned
 * (0xFF bytes) before the call; every row must be written.
 *
 * Tolerances: |o - ref| <= tol * max(1, vd * max|V|) with tol 1/64 (bf16) or 1/256 (f16),
 * as the 16-bit decode tests (the kernel widens FP8 to Q's type exactly, so the error is
 * the 16-bit path's: P rounded to the dtype before P@V, O rounded at the store), and LSE
 * within 2e-3 * max(1, |ref|).
 *
 * Speed (CK_RUN_CASE=fp8_decode_speed; no check of a goal, a report): the paged decode's
 * time with FP8 pages against the same call with bf16 pages, CUDA events over 50 calls.
 *
 * Environment: FAJIT_TEST_SEED, FAJIT_TEST_CACHE_DIR, FAJIT_TEST_FEATURE_CASES (default 80),
 * FAJIT_TEST_SPEED_SHAPES (the speed report's first N shapes, default all 4),
 * FAJIT_TEST_FEATURE_VERBOSE=1 (a line per case).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ref.h"
#include "gpu_harness.h"

static uint64_t g_rng;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static int urange(int lo, int hi) { return lo + (int)(rnd() % (unsigned)(hi - lo + 1)); }
static double unit(void) { return (rnd() & 0xffffff) / 16777216.0; }

/* The exact value of FP8 byte x (kind 1: e4m3fn, 2: e5m2). */
static double fp8_value(uint8_t x, int kind)
{
    const int s = x >> 7;
    double v;
    if (kind == 1) {
        const int e = (x >> 3) & 15, m = x & 7;
        v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    } else {
        const int e = (x >> 2) & 31, m = x & 3;
        v = e ? ldexp(1.0 + m / 4.0, e - 15) : ldexp(m / 4.0, -14);
    }
    return s ? -v : v;
}

/* A random FP8 byte: magnitudes 2^-3 .. 2^2, one in 16 subnormal or zero. */
static uint8_t fp8_draw(int kind)
{
    const uint8_t s = (uint8_t)((rnd() & 1) << 7);
    if (rnd() % 16 == 0)
        return (uint8_t)(s | (rnd() & (kind == 1 ? 7 : 3)));   /* exponent 0 */
    if (kind == 1)
        return (uint8_t)(s | urange(4, 9) << 3 | (rnd() & 7));
    return (uint8_t)(s | urange(12, 17) << 2 | (rnd() & 3));
}

typedef struct fcase {
    int dtype, kind;          /* FAJIT_BF16/F16; K/V 0 as Q, 1 e4m3, 2 e5m2 */
    int batch, hkv, group, hd, page_size, max_q, max_k, mask, window, splits;
    int per_head;             /* descales [batch][heads_kv] (else one value) */
    float softcap;            /* 0: off */
    int sinks, alibi;         /* alibi 2: slopes [batch][heads_q] */
} fcase;

typedef struct fbufs {
    fcase c;
    int hq, num_pages, bt_stride, total_q;
    int32_t *cuq, *used, *bt;
    uint16_t *q;
    uint8_t *k, *v;
    float *kd, *vd;           /* host descales, batch * hkv (or 1) */
    float *sinks, *slopes;    /* [heads_q]; [batch][heads_q] (alibi 2) or [heads_q] */
    CUdeviceptr d_q, d_k, d_v, d_o, d_lse, d_cuq, d_used, d_bt, d_kd, d_vd, d_sinks, d_slopes;
    size_t n_q, n_kv, eb;     /* eb: bytes per K/V element */
} fbufs;

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(cu->cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

static uint16_t qval(int dtype)
{
    /* multiples of 2^-7 in [-1, 1): exact in f16 and bf16 */
    return fj_f32_to_half((float)((int)(rnd() % 256) - 128) / 128.f, dtype == FAJIT_BF16);
}

/* fill 0: random K/V bytes (fp8_draw); 1: every byte 0x38 (1.0 in e4m3: a timing run) */
static void setup(fbufs *B, const fcase *c, int fill)
{
    memset(B, 0, sizeof *B);
    B->c = *c;
    B->hq = c->hkv * c->group;
    B->cuq = calloc((size_t)c->batch + 1, sizeof *B->cuq);
    B->used = calloc((size_t)c->batch, sizeof *B->used);
    for (int b = 0; b < c->batch; b++) {
        const int ql = b == 0 ? c->max_q : urange(1, c->max_q);
        B->used[b] = b == 0 ? c->max_k : urange(ql, c->max_k);   /* at least its queries */
        B->cuq[b + 1] = B->cuq[b] + ql;
    }
    B->total_q = B->cuq[c->batch];
    B->bt_stride = (c->max_k + c->page_size - 1) / c->page_size;
    B->num_pages = c->batch * B->bt_stride + 3;   /* spare pages, never pointed at */
    B->bt = malloc(sizeof *B->bt * (size_t)(c->batch * B->bt_stride));
    int *perm = malloc(sizeof *perm * (size_t)B->num_pages);
    for (int i = 0; i < B->num_pages; i++)
        perm[i] = i;
    for (int i = B->num_pages - 1; i > 0; i--) {   /* pages in random order */
        const int j = (int)(rnd() % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int i = 0; i < c->batch * B->bt_stride; i++)
        B->bt[i] = perm[i];
    free(perm);
    B->n_q = (size_t)B->total_q * B->hq * c->hd;
    B->n_kv = (size_t)B->num_pages * c->page_size * c->hkv * c->hd;
    B->eb = c->kind ? 1 : 2;
    B->q = malloc(B->n_q * 2);
    B->k = malloc(B->n_kv * B->eb);
    B->v = malloc(B->n_kv * B->eb);
    for (size_t i = 0; i < B->n_q; i++)
        B->q[i] = qval(c->dtype);
    if (fill) {
        memset(B->k, 0x38, B->n_kv * B->eb);
        memset(B->v, 0x38, B->n_kv * B->eb);
    } else if (c->kind) {
        for (size_t i = 0; i < B->n_kv; i++)
            B->k[i] = fp8_draw(c->kind), B->v[i] = fp8_draw(c->kind);
    } else {
        for (size_t i = 0; i < B->n_kv; i++)
            ((uint16_t *)B->k)[i] = qval(c->dtype), ((uint16_t *)B->v)[i] = qval(c->dtype);
    }
    const int ns = c->alibi == 2 ? c->batch * B->hq : B->hq;
    B->sinks = malloc(sizeof(float) * (size_t)B->hq);
    B->slopes = malloc(sizeof(float) * (size_t)ns);
    for (int h = 0; h < B->hq; h++)
        B->sinks[h] = (float)(unit() * 11 - 3);   /* -3 .. 8 */
    for (int i = 0; i < ns; i++)   /* flash-attn's geometric slopes, a batch row apart */
        B->slopes[i] = (float)exp2(-8.0 * (i % B->hq + 1) / B->hq) * (float)(1 + i / B->hq);
    B->d_sinks = dalloc(sizeof(float) * (size_t)B->hq);
    B->d_slopes = dalloc(sizeof(float) * (size_t)ns);
    CU(cu->cuMemcpyHtoD(B->d_sinks, B->sinks, sizeof(float) * (size_t)B->hq));
    CU(cu->cuMemcpyHtoD(B->d_slopes, B->slopes, sizeof(float) * (size_t)ns));
    const int nd = c->per_head ? c->batch * c->hkv : 1;
    B->kd = malloc(sizeof(float) * (size_t)nd);
    B->vd = malloc(sizeof(float) * (size_t)nd);
    for (int i = 0; i < nd; i++) {
        B->kd[i] = (float)exp2(unit() * 10 - 5);   /* 1/32 .. 32 */
        B->vd[i] = (float)exp2(unit() * 10 - 5);
    }
    B->d_q = dalloc(B->n_q * 2);
    B->d_k = dalloc(B->n_kv * B->eb);
    B->d_v = dalloc(B->n_kv * B->eb);
    B->d_o = dalloc(B->n_q * 2);
    B->d_lse = dalloc(sizeof(float) * (size_t)B->total_q * B->hq);
    B->d_cuq = dalloc(sizeof(int32_t) * ((size_t)c->batch + 1));
    B->d_used = dalloc(sizeof(int32_t) * (size_t)c->batch);
    B->d_bt = dalloc(sizeof(int32_t) * (size_t)(c->batch * B->bt_stride));
    B->d_kd = dalloc(sizeof(float) * (size_t)nd);
    B->d_vd = dalloc(sizeof(float) * (size_t)nd);
    CU(cu->cuMemcpyHtoD(B->d_q, B->q, B->n_q * 2));
    CU(cu->cuMemcpyHtoD(B->d_k, B->k, B->n_kv * B->eb));
    CU(cu->cuMemcpyHtoD(B->d_v, B->v, B->n_kv * B->eb));
    CU(cu->cuMemcpyHtoD(B->d_cuq, B->cuq, sizeof(int32_t) * ((size_t)c->batch + 1)));
    CU(cu->cuMemcpyHtoD(B->d_used, B->used, sizeof(int32_t) * (size_t)c->batch));
    CU(cu->cuMemcpyHtoD(B->d_bt, B->bt, sizeof(int32_t) * (size_t)(c->batch * B->bt_stride)));
    CU(cu->cuMemcpyHtoD(B->d_kd, B->kd, sizeof(float) * (size_t)nd));
    CU(cu->cuMemcpyHtoD(B->d_vd, B->vd, sizeof(float) * (size_t)nd));
}

static void teardown(fbufs *B)
{
    const CUdeviceptr d[] = {B->d_q, B->d_k, B->d_v, B->d_o, B->d_lse, B->d_cuq,
                             B->d_used, B->d_bt, B->d_kd, B->d_vd, B->d_sinks, B->d_slopes};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        cu->cuMemFree(d[i]);
    free(B->cuq), free(B->used), free(B->bt), free(B->q), free(B->k), free(B->v);
    free(B->kd), free(B->vd), free(B->sinks), free(B->slopes);
}

/* vLLM's layout: K/V [num_pages][page_size][heads_kv][head_dim] bytes, Q/O packed rows. */
static void desc_of(const fbufs *B, fajit_attn_desc *d)
{
    const fcase *c = &B->c;
    fajit_attn_desc_init(d, (void *)B->d_q, (void *)B->d_k, (void *)B->d_v, (void *)B->d_o,
                         c->batch, B->hq, c->hkv, c->max_q, c->max_k, c->hd,
                         (fajit_dtype)c->dtype);
    d->cu_seqlens_q = (const int32_t *)B->d_cuq;
    d->total_q = B->total_q;
    d->seqused_k = (const int32_t *)B->d_used;
    d->block_table = (const int32_t *)B->d_bt;
    d->block_table_stride = B->bt_stride;
    d->page_size = c->page_size;
    d->num_pages = B->num_pages;
    d->k_row_stride = d->v_row_stride = (int64_t)c->hkv * c->hd;
    d->k_head_stride = d->v_head_stride = c->hd;
    d->k_batch_stride = d->v_batch_stride = 0;
    d->mask = (fajit_mask)c->mask;
    if (c->mask == FAJIT_MASK_WINDOW)
        d->window_left = c->window, d->window_right = 0;
    d->lse = (float *)B->d_lse;
    d->num_splits = c->splits;
    if (c->kind) {
        d->kv_dtype = c->kind == 1 ? FAJIT_KV_E4M3 : FAJIT_KV_E5M2;
        d->k_descale = (const float *)B->d_kd, d->v_descale = (const float *)B->d_vd;
        if (c->per_head)
            d->descale_batch_stride = c->hkv, d->descale_head_stride = 1;
    }
    d->softcap = c->softcap;
    if (c->sinks)
        d->sinks = (const float *)B->d_sinks;
    if (c->alibi)
        d->alibi_slopes = (const float *)B->d_slopes;
    if (c->alibi == 2)
        d->alibi_batch_stride = B->hq;
}

static void case_text(const fcase *c, char *t, size_t n)
{
    snprintf(t, n, "%s kv %s b%d hkv%d g%d d%d ps%d q<=%d k<=%d %s%d splits %d%s softcap %g "
             "sinks %d alibi %d", c->dtype == FAJIT_BF16 ? "bf16" : "f16",
             c->kind == 1 ? "e4m3" : c->kind == 2 ? "e5m2" : "as-q", c->batch, c->hkv, c->group,
             c->hd, c->page_size, c->max_q, c->max_k,
             c->mask == 0 ? "none" : c->mask == 1 ? "causal" : "window", c->window, c->splits,
             !c->kind ? "" : c->per_head ? " per-head descale" : " one descale",
             (double)c->softcap, c->sinks, c->alibi);
}

/* Runs the call on poisoned outputs and checks every row against the float64 oracle. */
static void run_and_check(fajit_ctx *ctx, fbufs *B)
{
    const fcase *c = &B->c;
    char what[200];
    case_text(c, what, sizeof what);
    CU(cu->cuMemsetD8(B->d_o, 0xFF, B->n_q * 2));
    CU(cu->cuMemsetD8(B->d_lse, 0xFF, sizeof(float) * (size_t)B->total_q * B->hq));
    fajit_attn_desc d;
    desc_of(B, &d);
    fajit_status st = fajit_attn_fwd(ctx, &d, NULL);
    ck_assert_msg(st == FAJIT_OK, "%s: %s", what, fajit_errmsg(ctx));
    CU(cu->cuCtxSynchronize());
    uint16_t *o = malloc(B->n_q * 2);
    float *lse = malloc(sizeof(float) * (size_t)B->total_q * B->hq);
    CU(cu->cuMemcpyDtoH(o, B->d_o, B->n_q * 2));
    CU(cu->cuMemcpyDtoH(lse, B->d_lse, sizeof(float) * (size_t)B->total_q * B->hq));
    const double tol = c->dtype == FAJIT_BF16 ? 1.0 / 64 : 1.0 / 256;
    const int hd = c->hd, hq = B->hq;
    double *s = malloc(sizeof(double) * (size_t)c->max_k), *acc = malloc(sizeof(double) * hd);
    double tab[256];   /* every byte's value */
    for (int x = 0; x < 256 && c->kind; x++)
        tab[x] = fp8_value((uint8_t)x, c->kind);
    const int bf = c->dtype == FAJIT_BF16;
#define KV(buf, at) (c->kind ? tab[(buf)[at]] : (double)fj_half_to_f32(((const uint16_t *)(buf))[at], bf))
    double worst = 0, worst_lse = 0;
    for (int b = 0; b < c->batch; b++) {
        const int ql = B->cuq[b + 1] - B->cuq[b], len = B->used[b];
        for (int hk = 0; hk < c->hkv; hk++) {
            const int di = c->per_head ? b * c->hkv + hk : 0;
            const double kd = c->kind ? B->kd[di] : 1, vd = c->kind ? B->vd[di] : 1;
            for (int g = 0; g < c->group; g++) {
                const int h = hk * c->group + g;
                for (int i = 0; i < ql; i++) {
                    const int64_t row = B->cuq[b] + i;
                    const uint16_t *qr = B->q + (row * hq + h) * hd;
                    const int shift = i + len - ql;
                    double m = -INFINITY, vmax = 0;
                    for (int j = 0; j < len; j++) {
                        const int vis = (c->mask == FAJIT_MASK_NONE || j <= shift) &&
                                        (c->mask != FAJIT_MASK_WINDOW || j >= shift - c->window);
                        s[j] = -INFINITY;
                        if (!vis)
                            continue;
                        const int64_t at = ((int64_t)B->bt[b * B->bt_stride + j / c->page_size] *
                                                c->page_size + j % c->page_size) * c->hkv * hd +
                                           (int64_t)hk * hd;
                        double dot = 0;
                        for (int x = 0; x < hd; x++)
                            dot += fj_half_to_f32(qr[x], bf) * KV(B->k, at + x);
                        s[j] = dot * kd / sqrt((double)hd);
                        if (c->softcap > 0)
                            s[j] = c->softcap * tanh(s[j] / c->softcap);
                        if (c->alibi)
                            s[j] -= B->slopes[(c->alibi == 2 ? b * hq : 0) + h] *
                                    fabs((double)(shift - j));
                        m = s[j] > m ? s[j] : m;
                    }
                    const double sink = c->sinks ? B->sinks[h] : -INFINITY;
                    if (sink > m)
                        m = sink;
                    double l = c->sinks ? exp(sink - m) : 0;
                    memset(acc, 0, sizeof(double) * hd);
                    for (int j = 0; j < len && m > -INFINITY; j++) {
                        if (s[j] == -INFINITY)
                            continue;
                        const double p = exp(s[j] - m);
                        const int64_t at = ((int64_t)B->bt[b * B->bt_stride + j / c->page_size] *
                                                c->page_size + j % c->page_size) * c->hkv * hd +
                                           (int64_t)hk * hd;
                        l += p;
                        for (int x = 0; x < hd; x++) {
                            const double v = KV(B->v, at + x) * vd;
                            acc[x] += p * v;
                            vmax = fabs(v) > vmax ? fabs(v) : vmax;
                        }
                    }
                    if (l == 0 || (c->sinks && !(vmax > 0)))   /* no key: every V bound 1 */
                        vmax = 1;
                    const double bound = tol * (vmax > 1 ? vmax : 1);
                    for (int x = 0; x < hd; x++) {
                        const double ref = l > 0 ? acc[x] / l : 0;
                        const double got = fj_half_to_f32(o[(row * hq + h) * hd + x],
                                                          c->dtype == FAJIT_BF16);
                        const double err = fabs(got - ref);
                        ck_assert_msg(isfinite(got) && err <= bound,
                                      "%s: b %d h %d row %d col %d: got %g, want %g (bound %g)",
                                      what, b, h, i, x, got, ref, bound);
                        worst = err / bound > worst ? err / bound : worst;
                    }
                    const double rl = l > 0 ? m + log(l) : -INFINITY;   /* (sink alone: sink) */
                    const double gl = lse[(int64_t)h * B->total_q + row];
                    if (l > 0) {
                        const double e = fabs(gl - rl);
                        ck_assert_msg(e <= 2e-3 * (fabs(rl) > 1 ? fabs(rl) : 1),
                                      "%s: lse b %d h %d row %d: got %g, want %g", what, b, h, i,
                                      gl, rl);
                        worst_lse = e > worst_lse ? e : worst_lse;
                    } else {
                        ck_assert_msg(gl == -INFINITY, "%s: lse of an empty row %g", what, gl);
                    }
                }
            }
        }
    }
#undef KV
    if (getenv("FAJIT_TEST_FEATURE_VERBOSE"))
        printf("  ok %s: worst %.3f of the bound, lse err %.2e\n", what, worst, worst_lse);
    free(s), free(acc), free(o), free(lse);
}

static fajit_ctx *new_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = g_cache_dir;
    fajit_ctx *ctx = NULL;
    ck_assert_msg(fajit_ctx_create(&ctx, &o) == FAJIT_OK, "ctx: %s", fajit_errmsg(ctx));
    return ctx;
}

static void draw(fcase *c)
{
    static const int hds[] = {64, 128, 256, 96}, pss[] = {16, 16, 32, 64, 1, 5}, gs[] = {1, 4, 8};
    memset(c, 0, sizeof *c);
    c->dtype = rnd() % 2 ? FAJIT_BF16 : FAJIT_F16;
    c->kind = rnd() % 3 ? 1 : 2;
    c->hd = hds[rnd() % 4];
    c->hkv = urange(1, 4);
    c->group = gs[rnd() % 3];
    c->page_size = pss[rnd() % 6];
    const int shape = (int)(rnd() % 3);   /* decode, speculative decode, chunked prefill */
    c->max_q = shape == 0 ? 1 : shape == 1 ? urange(2, 16) : urange(17, 200);
    c->batch = shape == 2 ? urange(1, 3) : urange(1, 8);
    c->max_k = urange(c->max_q, shape == 2 ? 700 : 2500);
    c->mask = (int)(rnd() % 3);
    c->window = urange(0, 300);
    c->splits = rnd() % 3 == 0 ? urange(1, 6) : 0;
    c->per_head = (int)(rnd() % 2);
    c->kind = (int)(rnd() % 3);   /* as Q, e4m3, e5m2 */
    static const float caps[] = {0, 0, 5, 30, 50};
    c->softcap = caps[rnd() % 5];
    c->sinks = rnd() % 2 == 0;
    c->alibi = (int)(rnd() % 4) < 2 ? 0 : urange(1, 2);
    if (c->kind == 0 && !c->softcap && !c->sinks && !c->alibi)
        c->sinks = 1;   /* (every case has a feature) */
}

/* The oracle's work (multiply-adds), bounded per case. */
static double cost(const fcase *c)
{
    return (double)c->batch * c->max_q * c->max_k * c->hkv * c->group * c->hd * 2;
}

START_TEST(feature_sweep)
{
    fajit_ctx *ctx = new_ctx();
    const int n = env_int("FAJIT_TEST_FEATURE_CASES", 80);
    for (int k = 0; k < n; k++) {
        g_rng = (uint64_t)g_seed * 1000003u + (uint64_t)k;
        fcase c;
        do
            draw(&c);
        while (cost(&c) > 4e8);
        fbufs B;
        setup(&B, &c, 0);
        run_and_check(ctx, &B);
        teardown(&B);
    }
    printf("feature_sweep: %d cases passed (seed %u)\n", n, g_seed);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* Bad input that only the call can see: FP8 where no family serves it (contiguous K/V:
 * the decode family serves paged caches and short contiguous queries only). */
START_TEST(fp8_unserved)
{
    fajit_ctx *ctx = new_ctx();
    fcase c = {FAJIT_BF16, 1, 1, 2, 4, 128, 16, 1, 64, 0, 0, 0, 0, 0.f, 0, 0};
    g_rng = g_seed;
    fbufs B;
    setup(&B, &c, 0);
    fajit_attn_desc d;
    desc_of(&B, &d);
    d.block_table = NULL, d.block_table_stride = 0, d.page_size = 0, d.num_pages = 0;
    d.seqused_k = NULL, d.cu_seqlens_q = NULL, d.total_q = 0;
    d.seqlen_q = 512, d.seqlen_k = 512;   /* (inside the buffers' bytes: never launched) */
    d.k_batch_stride = d.v_batch_stride = 512LL * c.hkv * c.hd;
    d.q_batch_stride = d.o_batch_stride = 0;
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "an FP8 kv_dtype"), "%s", fajit_errmsg(ctx));
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* Time per call of paged decode, FP8 pages against bf16 pages of the same shape. */
static double time_call(fajit_ctx *ctx, const fajit_attn_desc *d, int reps)
{
    CUevent e0, e1;
    CU(cu->cuEventCreate(&e0, 0));
    CU(cu->cuEventCreate(&e1, 0));
    for (int i = 0; i < 5; i++)
        ck_assert_msg(fajit_attn_fwd(ctx, d, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    CU(cu->cuEventRecord(e0, NULL));
    for (int i = 0; i < reps; i++)
        fajit_attn_fwd(ctx, d, NULL);
    CU(cu->cuEventRecord(e1, NULL));
    CU(cu->cuEventSynchronize(e1));
    float ms = 0;
    CU(cu->cuEventElapsedTime(&ms, e0, e1));
    cu->cuEventDestroy(e0), cu->cuEventDestroy(e1);
    return ms * 1000.0 / reps;
}

START_TEST(feature_decode_speed)
{
    fajit_ctx *ctx = new_ctx();
    static const int shapes[][2] = {{128, 2048}, {16, 8192}, {64, 16384}, {1, 32768}};
    const int ns = env_int("FAJIT_TEST_SPEED_SHAPES", 4);   /* the first ns of them */
    printf("feature_decode_speed: paged decode, q_len 1, 32/8 heads, head_dim 128, pages of 16 "
           "in random order, bf16 queries; us per call (CUDA events, 50 calls)\n");
    for (int i = 0; i < 4 && i < ns; i++) {
        fcase c = {FAJIT_BF16, 1, shapes[i][0], 8, 4, 128, 16, 1, shapes[i][1],
                   FAJIT_MASK_CAUSAL, 0, 0, 1, 0.f, 0, 0};
        g_rng = g_seed + (uint64_t)i;
        fbufs B;
        setup(&B, &c, 1);
        for (int b = 0; b < c.batch; b++)
            B.used[b] = c.max_k;
        CU(cu->cuMemcpyHtoD(B.d_used, B.used, sizeof(int32_t) * (size_t)c.batch));
        fajit_attn_desc d;
        desc_of(&B, &d);
        d.lse = NULL;
        const double t8 = time_call(ctx, &d, 50);
        /* the same call over bf16 pages (twice the bytes; contents irrelevant to the time) */
        CUdeviceptr k16 = dalloc(B.n_kv * 2), v16 = dalloc(B.n_kv * 2);
        CU(cu->cuMemsetD8(k16, 0, B.n_kv * 2));
        CU(cu->cuMemsetD8(v16, 0, B.n_kv * 2));
        fajit_attn_desc d16 = d;
        d16.k = (const void *)k16, d16.v = (const void *)v16;
        d16.kv_dtype = FAJIT_KV_AS_Q, d16.k_descale = d16.v_descale = NULL;
        d16.descale_batch_stride = d16.descale_head_stride = 0;
        const double t16 = time_call(ctx, &d16, 50);
        const double bytes8 = 2.0 * c.batch * c.max_k * c.hkv * c.hd;
        printf("  %3d x %5d: fp8 %8.1f us (%5.2f TB/s of FP8 K+V), bf16 %8.1f us, "
               "bf16/fp8 time %.2fx\n", c.batch, c.max_k, t8, bytes8 / t8 / 1e6, t16,
               t16 / t8);
        /* each feature on the bf16 call, and the three together */
        fajit_attn_desc f = d16;
        f.softcap = 30.f;
        const double tc = time_call(ctx, &f, 50);
        f = d16, f.sinks = (const float *)B.d_sinks;
        const double ts = time_call(ctx, &f, 50);
        f = d16, f.alibi_slopes = (const float *)B.d_slopes;
        const double ta = time_call(ctx, &f, 50);
        f.softcap = 30.f, f.sinks = (const float *)B.d_sinks;
        const double tall = time_call(ctx, &f, 50);
        const double t16b = time_call(ctx, &d16, 50);   /* again: the noise */
        printf("             bf16 again %8.1f us; softcap %+.1f%%, sinks %+.1f%%, alibi %+.1f%%, "
               "all three %+.1f%% (against the mean of both plain runs)\n", t16b,
               100 * (tc / (0.5 * (t16 + t16b)) - 1), 100 * (ts / (0.5 * (t16 + t16b)) - 1),
               100 * (ta / (0.5 * (t16 + t16b)) - 1), 100 * (tall / (0.5 * (t16 + t16b)) - 1));
        cu->cuMemFree(k16), cu->cuMemFree(v16);
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    setenv("FAJIT_MODEL_FEATURES", "on", 0);   /* the kernels under test (docs/usage.md) */
    int rc = gpu_harness_start("gpu-fp8", NULL);
    if (rc)
        return rc;
    Suite *s = suite_create("gpu-fp8");   /* one case alone: CK_RUN_CASE=<name> */
    gpu_harness_add(s, "feature_sweep", feature_sweep, 1800);
    gpu_harness_add(s, "fp8_unserved", fp8_unserved, 300);
    gpu_harness_add(s, "feature_decode_speed", feature_decode_speed, 600);
    return gpu_harness_run(s);
}
