/* test_gpu_features.c - the `gpu` suite's tests of the model features of fajit_attn_desc:
 * softcap, attention sinks and ALiBi, alone and combined, with every mask, GQA, varlen and
 * head_dim 64/128/256 in f16 and bf16, and head_dim_v != head_dim (a quarter of the cases:
 * mostly DeepSeek's 192 / 128, also 128 / 64 and 64 / 128, with or without the other
 * features): through the reference kernel (fajit_attn_fwd_reference), fajit_attn_fwd with the
 * context forced to fa2 (which falls back to the reference kernel for dv > d), and with
 * AUTO (fa3 on Hopper for dv <= d, a multiple of 16; varlen head_dim_v cases give total_q and
 * total_k so that fa3 takes them). Exits 77 (skipped) when no CUDA driver can be loaded.
 *
 * Oracle: float64 on the host (fj_cpu_attention_feat, tests/cpu_ref.c). Inputs are fresh
 * random numbers per case (Q, K in [-2, 2], V in [-1, 1], sinks in [-3, 8], ALiBi slopes
 * 2^(-8k/heads) as flash-attn's, per head or per (sequence, head) with a padded row
 * stride); O and LSE are poisoned (0xFF bytes: NaN) before every call. With head_dim_v, O's
 * head stride is dv + 8: the 8 columns past dv must still hold the poison after the call.
 *
 * Tolerances, those of tests/test_gpu.c: the reference kernel within one output rounding
 * of float64 (LSE 1e-3); a fast kernel within 2x the error of a same-precision reference
 * (probabilities rounded to the dtype before P@V, O rounded) plus one output rounding plus
 * 1e-6 (LSE 2e-3). With a softcap, a fast kernel's tanh is tanh.approx.f32 (relative error
 * at most 2^-10.99, as flash-attn's): a logit s is then off by up to |s| 2^-10.99, which
 * moves O by at most twice that times max|V|; the bound of a fast kernel adds that term.
 *
 * features_off_same: the same problem with the feature fields set to off (softcap 0, NULL
 * pointers) gives bit-identical O and LSE to a call whose descriptor predates the fields
 * (struct_size FAJIT_ATTN_DESC_SIZE_V1). features_paged: the cases through paged K/V (the
 * decode family), where dispatch serves them; skipped with a note where it does not.
 *
 * Environment: FAJIT_TEST_SEED (default: time), FAJIT_TEST_CACHE_DIR,
 * FAJIT_TEST_FEATURES_CASES (default 60), FAJIT_TEST_FEATURES_VERBOSE (a line per case).
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
static int pick(const int *v, int n) { return v[rnd() % (unsigned)n]; }
static float frand(void) { return (float)(rnd() % 2000001) / 1000000.f - 1.f; }

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(cu->cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

static fajit_ctx *new_ctx(fajit_family fam)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = g_cache_dir;
    o.family = fam;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    ck_assert_msg(st == FAJIT_OK, "ctx: %s", fajit_errmsg(ctx));
    return ctx;
}

/*------ one randomized case ------*/

typedef struct fc {
    int batch, hq, hkv, sq, sk, d, dtype, mask, wl, wr, varlen;
    int dv;          /* head_dim_v: 0 = d */
    int opad;        /* O's head stride is dv + opad (8 with head_dim_v, else 0) */
    int lens_q[8], lens_k[8];
    float softcap;   /* 0: off */
    int sinks;       /* 1: on */
    int alibi;       /* 0 off, 1 [heads_q], 2 [batch][heads_q + 3] */
    char text[240];
} fc;

static void case_text(fc *c)
{
    snprintf(c->text, sizeof c->text,
             "b%d hq%d hkv%d sq%d sk%d d%d %s %s%s softcap %g%s%s", c->batch, c->hq, c->hkv,
             c->sq, c->sk, c->d, c->dtype ? "bf16" : "f16",
             c->mask == 0 ? "none" : c->mask == 1 ? "causal" : "window",
             c->varlen ? " varlen" : "", (double)c->softcap, c->sinks ? " sinks" : "",
             c->alibi == 1 ? " alibi[h]" : c->alibi == 2 ? " alibi[b][h]" : "");
    size_t n = strlen(c->text);
    if (c->mask == 2)
        snprintf(c->text + n, sizeof c->text - n, " wl%d wr%d", c->wl, c->wr);
    n = strlen(c->text);
    if (c->dv)
        snprintf(c->text + n, sizeof c->text - n, " dv%d", c->dv);
}

static void make_case(fc *c)
{
    static const int lens[] = {1, 7, 16, 63, 128, 129, 200, 333};
    static const int dims[] = {64, 128, 256}, groups[] = {1, 2, 4};
    static const int caps[] = {0, 5, 30, 50};
    memset(c, 0, sizeof *c);
    c->d = pick(dims, 3);
    c->dtype = (int)(rnd() % 2);
    c->mask = (int)(rnd() % 3);
    c->wl = (int)(rnd() % 200), c->wr = (int)(rnd() % 60);
    c->hkv = 1 + (int)(rnd() % 3);
    c->hq = c->hkv * pick(groups, 3);
    c->batch = 1 + (int)(rnd() % 3);
    c->varlen = rnd() % 3 == 0;
    c->sq = pick(lens, 8);
    c->sk = rnd() % 2 ? c->sq : pick(lens, 8);
    if (c->varlen) {
        c->batch = 1 + (int)(rnd() % 4);
        int mq = 0, mk = 0;
        for (int b = 0; b < c->batch; b++) {
            c->lens_q[b] = rnd() % 6 == 0 ? 0 : 1 + (int)(rnd() % (unsigned)c->sq);
            c->lens_k[b] = rnd() % 6 == 0 ? 0 : 1 + (int)(rnd() % (unsigned)c->sk);
            mq = c->lens_q[b] > mq ? c->lens_q[b] : mq;
            mk = c->lens_k[b] > mk ? c->lens_k[b] : mk;
        }
        c->sq = mq ? mq : 1, c->sk = mk ? mk : 1;
    } else {
        for (int b = 0; b < c->batch; b++)
            c->lens_q[b] = c->sq, c->lens_k[b] = c->sk;
    }
    c->softcap = (float)pick(caps, 4);
    c->sinks = (int)(rnd() % 2);
    c->alibi = (int)(rnd() % 3);
    /* head_dim_v in a quarter of the cases: DeepSeek's 192 / 128 mostly (fa3 on Hopper), and
     * 128 / 64 (fa3) and 64 / 128 (dv > d: the reference kernel everywhere) */
    static const int dvs[][2] = {{192, 128}, {192, 128}, {192, 128}, {128, 64}, {64, 128}};
    if (rnd() % 4 == 0) {
        const int i = (int)(rnd() % 5);
        c->d = dvs[i][0], c->dv = dvs[i][1], c->opad = 8;
        if (rnd() % 3 == 0)   /* head_dim_v alone */
            c->softcap = 0.f, c->sinks = 0, c->alibi = 0;
    }
    if (c->softcap == 0.f && !c->sinks && !c->alibi && !c->dv)   /* at least one feature */
        c->sinks = 1;
    case_text(c);
}

static int dv_of(const fc *c) { return c->dv ? c->dv : c->d; }

/* Q rows packed [rows][hq][d], K [rows][hkv][d], V [rows][hkv][dv], O [rows][hq][dv + opad]
 * (oh: O's head stride); without varlen sequence b's rows start at b * sq (b * sk). */
typedef struct bufs {
    int64_t rows_q, rows_k, row_q, row_k, row_v, row_o, oh;
    int pad;   /* O's columns past dv in each head (c->opad) */
    int32_t cq[9], ck[9];
    uint16_t *hq, *hk, *hv, *ho;
    float *sinks, *slopes;
    int n_slopes;
    CUdeviceptr q, k, v, o, lse, cuq, cuk, d_sinks, d_slopes;
    size_t nq, no, nlse;   /* Q's and O's elements (+ 8) */
} bufs;

static void setup(const fc *c, bufs *B)
{
    memset(B, 0, sizeof *B);
    for (int b = 0; b < c->batch; b++) {
        B->cq[b + 1] = B->cq[b] + c->lens_q[b];
        B->ck[b + 1] = B->ck[b] + c->lens_k[b];
    }
    B->rows_q = B->cq[c->batch], B->rows_k = B->ck[c->batch];
    B->row_q = (int64_t)c->hq * c->d, B->row_k = (int64_t)c->hkv * c->d;
    B->row_v = (int64_t)c->hkv * dv_of(c);
    B->oh = dv_of(c) + c->opad, B->row_o = (int64_t)c->hq * B->oh, B->pad = c->opad;
    B->nq = (size_t)(B->rows_q * B->row_q) + 8;
    B->no = (size_t)(B->rows_q * B->row_o) + 8;
    const size_t nk = (size_t)(B->rows_k * B->row_k) + 8;
    const size_t nv = (size_t)(B->rows_k * B->row_v) + 8;
    B->nlse = (size_t)c->hq * (size_t)B->rows_q + 1;
    B->hq = malloc(B->nq * 2), B->ho = malloc(B->no * 2);
    B->hk = malloc(nk * 2), B->hv = malloc(nv * 2);
    for (size_t i = 0; i < B->nq; i++)
        B->hq[i] = fj_f32_to_half(frand() * 2.f, c->dtype);
    for (size_t i = 0; i < nk; i++)
        B->hk[i] = fj_f32_to_half(frand() * 2.f, c->dtype);
    for (size_t i = 0; i < nv; i++)
        B->hv[i] = fj_f32_to_half(frand(), c->dtype);
    B->sinks = malloc(sizeof(float) * (size_t)c->hq);
    for (int h = 0; h < c->hq; h++)
        B->sinks[h] = -3.f + 11.f * (frand() + 1.f) / 2.f;   /* [-3, 8] */
    /* flash-attn's slopes 2^(-8k/heads), k = 1..heads; per sequence scaled apart */
    const int stride = c->alibi == 2 ? c->hq + 3 : 0;
    B->n_slopes = c->alibi == 2 ? c->batch * stride : c->hq;
    B->slopes = malloc(sizeof(float) * (size_t)B->n_slopes);
    for (int i = 0; i < B->n_slopes; i++)
        B->slopes[i] = 0.f;
    for (int b = 0; b < (c->alibi == 2 ? c->batch : 1); b++)
        for (int h = 0; h < c->hq; h++)
            B->slopes[b * stride + h] =
                (float)(exp2(-8.0 * (h + 1) / c->hq) * (c->alibi == 2 ? 1.0 + 0.5 * b : 1.0));
    B->q = dalloc(B->nq * 2), B->o = dalloc(B->no * 2);
    B->k = dalloc(nk * 2), B->v = dalloc(nv * 2);
    B->lse = dalloc(B->nlse * 4);
    B->cuq = dalloc(sizeof B->cq), B->cuk = dalloc(sizeof B->ck);
    B->d_sinks = dalloc(sizeof(float) * (size_t)c->hq);
    B->d_slopes = dalloc(sizeof(float) * (size_t)B->n_slopes);
    CU(cu->cuMemcpyHtoD(B->q, B->hq, B->nq * 2));
    CU(cu->cuMemcpyHtoD(B->k, B->hk, nk * 2));
    CU(cu->cuMemcpyHtoD(B->v, B->hv, nv * 2));
    CU(cu->cuMemcpyHtoD(B->cuq, B->cq, sizeof B->cq));
    CU(cu->cuMemcpyHtoD(B->cuk, B->ck, sizeof B->ck));
    CU(cu->cuMemcpyHtoD(B->d_sinks, B->sinks, sizeof(float) * (size_t)c->hq));
    CU(cu->cuMemcpyHtoD(B->d_slopes, B->slopes, sizeof(float) * (size_t)B->n_slopes));
}

static void teardown(bufs *B)
{
    const CUdeviceptr ps[] = {B->q, B->k, B->v, B->o, B->lse, B->cuq, B->cuk, B->d_sinks,
                              B->d_slopes};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        cu->cuMemFree(ps[i]);
    free(B->hq), free(B->hk), free(B->hv), free(B->ho), free(B->sinks), free(B->slopes);
}

/* The descriptor of c over B, features per `feat` (0: none set). */
static void desc_of(const fc *c, const bufs *B, int feat, fajit_attn_desc *d)
{
    fajit_attn_desc_init(d, (void *)B->q, (void *)B->k, (void *)B->v, (void *)B->o,
                         c->batch, c->hq, c->hkv, c->sq, c->sk, c->d, (fajit_dtype)c->dtype);
    d->mask = (fajit_mask)c->mask;
    if (c->mask == FAJIT_MASK_WINDOW)
        d->window_left = c->wl, d->window_right = c->wr;
    d->lse = (float *)B->lse;
    if (c->varlen) {
        d->cu_seqlens_q = (const int32_t *)B->cuq;
        d->cu_seqlens_k = (const int32_t *)B->cuk;
        if (c->dv)   /* (the packed row counts: the Hopper kernel's varlen needs them) */
            d->total_q = (int)B->rows_q, d->total_k = (int)B->rows_k;
    }
    /* V and O of dv columns, O's heads dv + opad apart */
    d->v_head_stride = dv_of(c), d->v_row_stride = B->row_v;
    d->v_batch_stride = B->row_v * c->sk;
    d->o_head_stride = B->oh, d->o_row_stride = B->row_o;
    d->o_batch_stride = B->row_o * c->sq;
    if (!feat)
        return;
    d->head_dim_v = c->dv;
    d->softcap = c->softcap;
    d->sinks = c->sinks ? (const float *)B->d_sinks : NULL;
    d->alibi_slopes = c->alibi ? (const float *)B->d_slopes : NULL;
    d->alibi_batch_stride = c->alibi == 2 ? c->hq + 3 : 0;
}

/* The host parameter blocks of d over B's host copies. */
static void host_params(const fc *c, const bufs *B, const fajit_attn_desc *d,
                        fj_attn_params *hp, fj_feat_params *hf)
{
    fj_params_from_desc(d, hp);
    hp->q = (uintptr_t)B->hq, hp->k = (uintptr_t)B->hk, hp->v = (uintptr_t)B->hv;
    hp->cu_seqlens_q = d->cu_seqlens_q ? (uintptr_t)B->cq : 0;
    hp->cu_seqlens_k = d->cu_seqlens_q ? (uintptr_t)B->ck : 0;
    memset(hf, 0, sizeof *hf);
    hf->softcap = c->softcap;
    hf->softcap_inv = c->softcap > 0.f ? 1.f / c->softcap : 0.f;
    hf->sinks = c->sinks ? (uintptr_t)B->sinks : 0;
    hf->alibi = c->alibi ? (uintptr_t)B->slopes : 0;
    hf->alibi_batch_stride = d->alibi_batch_stride;
}

/* Runs d through fwd on poisoned outputs; O as float, LSE back. Returns the call's
 * status. */
typedef fajit_status (*fwd_fn)(fajit_ctx *, const fajit_attn_desc *, void *);
static fajit_status run_with(fajit_ctx *ctx, fwd_fn fwd, const fajit_attn_desc *d, bufs *B,
                             const fc *c, float *o, float *lse)
{
    CU(cu->cuMemsetD8(B->o, 0xff, B->no * 2));
    CU(cu->cuMemsetD8(B->lse, 0xff, B->nlse * 4));
    fajit_status st = fwd(ctx, d, NULL);
    if (st != FAJIT_OK)
        return st;
    CU(cu->cuCtxSynchronize());
    CU(cu->cuMemcpyDtoH(B->ho, B->o, B->no * 2));
    CU(cu->cuMemcpyDtoH(lse, B->lse, B->nlse * 4));
    for (size_t i = 0; i < B->no; i++)
        o[i] = fj_half_to_f32(B->ho[i], c->dtype);
    return st;
}
static fajit_status run(fajit_ctx *ctx, const fajit_attn_desc *d, bufs *B, const fc *c,
                        float *o, float *lse)
{
    return run_with(ctx, fajit_attn_fwd, d, B, c, o, lse);
}

typedef struct errs {
    double max_abs, max_ref, lse;
} errs;

/* Max |x - ref| over every element of O (its dv columns of every head; NaN counts as
 * infinite), and of the LSE. */
static errs compare(const bufs *B, const float *o, const float *lse, const double *ref,
                    const double *ref_lse)
{
    errs e = {0, 0, 0};
    const size_t n = (size_t)(B->rows_q * B->row_o);
    for (size_t i = 0; i < n; i++) {
        if ((int64_t)(i % (size_t)B->oh) >= B->oh - B->pad)
            continue;   /* (O's stride padding: checked to stay poisoned, pad_written) */
        double diff = fabs((double)o[i] - ref[i]);
        if (isnan(diff))
            diff = INFINITY;
        e.max_abs = diff > e.max_abs ? diff : e.max_abs;
        e.max_ref = fabs(ref[i]) > e.max_ref ? fabs(ref[i]) : e.max_ref;
    }
    for (size_t i = 0; i + 1 < B->nlse; i++) {
        double diff = isinf(ref_lse[i]) && isinf(lse[i]) && lse[i] < 0 && ref_lse[i] < 0
                          ? 0
                          : fabs(lse[i] - ref_lse[i]);
        if (isnan(diff))
            diff = INFINITY;
        e.lse = diff > e.lse ? diff : e.lse;
    }
    return e;
}

/* A same-precision reference with the features: fp32 q.k, probabilities against the
 * row's maximum rounded to the dtype before P@V, the sink in the sum, O rounded. Also the
 * largest |logit| (*smax) for the softcap's tanh term. */
static void same_precision(const fc *c, const bufs *B, const fj_attn_params *hp,
                           const fj_feat_params *hf, double *out, double *smax)
{
    const int d = c->d, dv = dv_of(c), group = c->hq / c->hkv;
    double *s = malloc(sizeof(double) * (size_t)(c->sk + 1));
    double *acc = malloc(sizeof(double) * (size_t)dv);
    *smax = 0;
    for (int b = 0; b < c->batch; b++) {
        const int sq = c->lens_q[b], sk = c->lens_k[b];
        for (int h = 0; h < c->hq; h++)
            for (int i = 0; i < sq; i++) {
                const uint16_t *q = B->hq + (B->cq[b] + i) * B->row_q + h * d;
                double m = -INFINITY;
                for (int j = 0; j < sk; j++) {
                    const int shift = i + sk - sq;
                    if ((hp->window_left >= 0 && j < shift - hp->window_left) ||
                        (hp->window_right >= 0 && j > shift + hp->window_right)) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    const uint16_t *k = B->hk + (B->ck[b] + j) * B->row_k + (h / group) * d;
                    float dot = 0;
                    for (int x = 0; x < d; x++)
                        dot += fj_half_to_f32(q[x], c->dtype) * fj_half_to_f32(k[x], c->dtype);
                    double v = (double)dot * hp->scale;
                    if (hf->softcap > 0.f)
                        v = hf->softcap * tanh(v / hf->softcap);
                    *smax = fabs(v) > *smax ? fabs(v) : *smax;
                    if (hf->alibi)
                        v -= (double)((const float *)(uintptr_t)hf->alibi)
                                 [(int64_t)b * hf->alibi_batch_stride + h] *
                             fabs((double)(shift - j));
                    s[j] = v;
                    m = v > m ? v : m;
                }
                double l = 0;
                memset(acc, 0, sizeof(double) * (size_t)dv);
                for (int j = 0; m > -INFINITY && j < sk; j++) {
                    if (s[j] == -INFINITY)
                        continue;
                    const float pj = (float)exp(s[j] - m);
                    l += pj;
                    const double pr = fj_half_to_f32(fj_f32_to_half(pj, c->dtype), c->dtype);
                    const uint16_t *v = B->hv + (B->ck[b] + j) * B->row_v + (h / group) * dv;
                    for (int x = 0; x < dv; x++)
                        acc[x] += pr * fj_half_to_f32(v[x], c->dtype);
                }
                if (hf->sinks && m > -INFINITY)
                    l += exp(((const float *)(uintptr_t)hf->sinks)[h] - m);
                double *o = out + (B->cq[b] + i) * B->row_o + h * B->oh;
                for (int x = 0; x < dv; x++)
                    o[x] = fj_half_to_f32(
                        fj_f32_to_half(l > 0 ? (float)(acc[x] / l) : 0.f, c->dtype), c->dtype);
            }
    }
    free(s);
    free(acc);
}

typedef struct tally {
    int runs, bad, unsupported;
    char first[4][480];
    int n_first;
} tally;

#define CASE_FAIL(t, ...)                                                               \
    do {                                                                                \
        (t)->bad++;                                                                     \
        if ((t)->n_first < 4)                                                           \
            snprintf((t)->first[(t)->n_first++], sizeof(t)->first[0], __VA_ARGS__);     \
    } while (0)

/* Checks c through ctx (the reference kernel where is_ref) on descriptor d. */
static void check_one(fajit_ctx *ctx, const char *fam, int is_ref, const fc *c, bufs *B,
                      const fajit_attn_desc *d, const double *f, const double *flse,
                      const double *sp, double smax, tally *t)
{
    float *o = malloc(B->no * 4), *lse = malloc(B->nlse * 4);
    fajit_status st =
        run_with(ctx, is_ref ? fajit_attn_fwd_reference : fajit_attn_fwd, d, B, c, o, lse);
    t->runs++;
    if (st != FAJIT_OK) {
        CASE_FAIL(t, "%s: %s on %s", fam, fajit_errmsg(ctx), c->text);
        free(o), free(lse);
        return;
    }
    /* O's stride padding (the columns past dv of each head) still holds the poison */
    long pad_written = 0;
    for (int64_t r = 0; r < B->rows_q; r++)
        for (int h = 0; h < c->hq; h++)
            for (int x = 0; x < B->pad; x++)
                pad_written += B->ho[r * B->row_o + h * B->oh + (B->oh - B->pad) + x] != 0xffff;
    if (pad_written)
        CASE_FAIL(t, "%s wrote %ld elements of O's stride padding (columns past head_dim_v) "
                  "on %s", fam, pad_written, c->text);
    const double out_ulp = c->dtype == FJ_DT_BF16 ? 1.0 / 256 : 1.0 / 2048;
    errs e = compare(B, o, lse, f, flse);
    float *spf = malloc(B->no * 4);
    for (size_t i = 0; i < B->no; i++)
        spf[i] = (float)sp[i];
    errs es = compare(B, spf, lse, f, flse);
    free(spf);
    double bound;
    if (is_ref) {
        bound = out_ulp * fmax(e.max_ref, 1e-3) + 1e-6;
    } else {
        /* |V| <= 1; tanh.approx's relative error 2^-10.99 on each capped logit */
        const double tanh_term = c->softcap > 0.f ? 2 * smax * exp2(-10.99) : 0;
        bound = 2 * es.max_abs + out_ulp * fmax(e.max_ref, 1e-3) + tanh_term + 1e-6;
    }
    const double lse_tol = is_ref ? 1e-3 : 2e-3;
    if (!(e.max_abs <= bound))
        CASE_FAIL(t, "%s vs float64: max error %g > %g (same-precision %g, max |o| %g) on %s",
                  fam, e.max_abs, bound, es.max_abs, e.max_ref, c->text);
    if (!(e.lse <= lse_tol))
        CASE_FAIL(t, "%s LSE error %g > %g on %s", fam, e.lse, lse_tol, c->text);
    if (getenv("FAJIT_TEST_FEATURES_VERBOSE"))
        printf("  %-8s %.3f of the bound (err %.2e), lse err %.2e: %s\n", fam,
               e.max_abs / bound, e.max_abs, e.lse, c->text);
    free(o), free(lse);
}

/*------ tests ------*/

START_TEST(features_sweep)
{
    /* the reference kernel (fajit_attn_fwd_reference: a context takes no REF), fa2 forced,
     * and dispatch's choice */
    static const struct { fajit_family fam; const char *name; int is_ref; } fams[] = {
        {FAJIT_FAMILY_AUTO, "ref", 1}, {FAJIT_FAMILY_FA2, "fa2", 0},
        {FAJIT_FAMILY_AUTO, "auto", 0}};
    fajit_ctx *ctx[3];
    for (int i = 0; i < 3; i++)
        ctx[i] = new_ctx(fams[i].fam);
    const int n = env_int("FAJIT_TEST_FEATURES_CASES", 60);
    tally t = {0};
    g_rng = g_seed;
    char took[8][16] = {{0}};   /* the families dispatch took (first word of its plan) */
    int took_n[8] = {0}, n_took = 0;
    for (int k = 0; k < n; k++) {
        fc c;
        make_case(&c);
        bufs B;
        setup(&c, &B);
        fajit_attn_desc d;
        desc_of(&c, &B, 1, &d);
        char line[512] = "", name[16] = "?";
        if (fajit_dispatch_describe(ctx[2], NULL, &d, line, sizeof line) == FAJIT_OK)
            sscanf(line, "%15s", name);
        int w = 0;
        while (w < n_took && strcmp(took[w], name))
            w++;
        if (w == n_took && n_took < 8)
            snprintf(took[n_took++], sizeof took[0], "%s", name);
        if (w < n_took)
            took_n[w]++;
        fj_attn_params hp;
        fj_feat_params hf;
        host_params(&c, &B, &d, &hp, &hf);
        double *f = calloc(B.no, sizeof(double)), *flse = calloc(B.nlse, sizeof(double));
        double *sp = calloc(B.no, sizeof(double)), smax = 0;
        fj_cpu_attention_feat(&hp, c.dtype, &hf, c.dv, f, flse);
        same_precision(&c, &B, &hp, &hf, sp, &smax);
        char auto_name[32];   /* "auto:fa3": which family dispatch's run was */
        snprintf(auto_name, sizeof auto_name, "auto:%s", name);
        for (int i = 0; i < 3; i++)
            check_one(ctx[i], i == 2 ? auto_name : fams[i].name, fams[i].is_ref, &c, &B, &d,
                      f, flse, sp, smax, &t);
        free(f), free(flse), free(sp);
        teardown(&B);
    }
    printf("features_sweep: %d cases x 3 families, seed %u: %d/%d runs passed; dispatch took",
           n, g_seed, t.runs - t.bad, t.runs);
    for (int w = 0; w < n_took; w++)
        printf("%s %s %d", w ? "," : "", took[w], took_n[w]);
    printf("\n");
    for (int i = 0; i < t.n_first; i++)
        printf("features_sweep failure: %s\n", t.first[i]);
    for (int i = 0; i < 3; i++)
        fajit_ctx_destroy(ctx[i]);
    ck_assert_int_eq(t.bad, 0);
}
END_TEST

/* Features off (fields zeroed) vs a descriptor that predates them: the same bits. */
START_TEST(features_off_same)
{
    fajit_ctx *ctx = new_ctx(FAJIT_FAMILY_AUTO), *c2 = new_ctx(FAJIT_FAMILY_FA2);
    g_rng = g_seed + 17;
    for (int k = 0; k < 12; k++) {
        fc c;
        make_case(&c);
        c.softcap = 0.f, c.sinks = 0, c.alibi = 0, c.dv = 0, c.opad = 0;
        case_text(&c);
        bufs B;
        setup(&c, &B);
        fajit_attn_desc d_new, d_old;
        desc_of(&c, &B, 1, &d_new);   /* every feature field written, all off */
        desc_of(&c, &B, 0, &d_old);
        d_old.struct_size = FAJIT_ATTN_DESC_SIZE_V1;   /* the fields do not exist */
        memset((char *)&d_old + FAJIT_ATTN_DESC_SIZE_V1, 0x5a,
               sizeof d_old - FAJIT_ATTN_DESC_SIZE_V1);   /* and are never read */
        for (int w = 0; w < 2; w++) {
            fajit_ctx *x = w ? c2 : ctx;
            float *o1 = malloc(B.no * 4), *l1 = malloc(B.nlse * 4);
            float *o2 = malloc(B.no * 4), *l2 = malloc(B.nlse * 4);
            ck_assert_msg(run(x, &d_new, &B, &c, o1, l1) == FAJIT_OK, "%s", fajit_errmsg(x));
            ck_assert_msg(run(x, &d_old, &B, &c, o2, l2) == FAJIT_OK, "%s", fajit_errmsg(x));
            const size_t no = (size_t)(B.rows_q * B.row_o), nl = B.nlse - 1;
            ck_assert_msg(memcmp(o1, o2, no * 4) == 0 && memcmp(l1, l2, nl * 4) == 0,
                          "%s: features off differs from a descriptor without them: %s",
                          w ? "fa2" : "auto", c.text);
            free(o1), free(l1), free(o2), free(l2);
        }
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
    fajit_ctx_destroy(c2);
}
END_TEST

/* The case list through paged K/V (page_size 16, pages in random order): the decode
 * family, where it serves the features. */
START_TEST(features_paged)
{
    fajit_ctx *ctx = new_ctx(FAJIT_FAMILY_AUTO);
    const int n = env_int("FAJIT_TEST_FEATURES_CASES", 60);
    const int ps = 16;
    tally t = {0};
    g_rng = g_seed + 29;
    int skipped = 0;
    for (int k = 0; k < n; k++) {
        fc c;
        make_case(&c);
        c.varlen = 1;   /* paged K/V: packed queries, seqused_k */
        int mq = 0;
        for (int b = 0; b < c.batch; b++) {
            if (c.lens_q[b] > c.lens_k[b])   /* the decode family's rows see keys */
                c.lens_q[b] = c.lens_k[b];
            mq = c.lens_q[b] > mq ? c.lens_q[b] : mq;
        }
        if (!mq)   /* every sequence emptied: one query over one key */
            c.lens_q[0] = c.lens_k[0] = mq = 1;
        c.sq = mq;   /* seqlen_q: the longest sequence left */
        snprintf(c.text + strlen(c.text), sizeof c.text - strlen(c.text), " paged");
        bufs B;
        setup(&c, &B);
        fajit_attn_desc d;
        desc_of(&c, &B, 1, &d);
        /* pages: key j of sequence b at page bt[b][j / ps], row j % ps */
        const int bt_stride = (c.sk + ps - 1) / ps, num_pages = c.batch * bt_stride + 2;
        int32_t *bt = malloc(sizeof(int32_t) * (size_t)(c.batch * bt_stride));
        int32_t used[8];
        for (int i = 0; i < c.batch * bt_stride; i++)
            bt[i] = i;
        for (int i = c.batch * bt_stride - 1; i > 0; i--) {
            const int j = (int)(rnd() % (unsigned)(i + 1));
            const int32_t x = bt[i];
            bt[i] = bt[j], bt[j] = x;
        }
        /* (V's pages of dv columns) */
        const size_t page_elems = (size_t)ps * B.row_k, pool = page_elems * num_pages;
        const size_t page_v = (size_t)ps * B.row_v, pool_v = page_v * num_pages;
        uint16_t *pk = calloc(pool, 2), *pv = calloc(pool_v, 2);
        for (int b = 0; b < c.batch; b++) {
            used[b] = c.lens_k[b];
            for (int j = 0; j < c.lens_k[b]; j++) {
                const size_t pg = (size_t)bt[b * bt_stride + j / ps];
                memcpy(pk + pg * page_elems + (size_t)(j % ps) * B.row_k,
                       B.hk + (B.ck[b] + j) * B.row_k, B.row_k * 2);
                memcpy(pv + pg * page_v + (size_t)(j % ps) * B.row_v,
                       B.hv + (B.ck[b] + j) * B.row_v, B.row_v * 2);
            }
        }
        CUdeviceptr dk = dalloc(pool * 2), dv = dalloc(pool_v * 2), dbt, dused;
        dbt = dalloc(sizeof(int32_t) * (size_t)(c.batch * bt_stride));
        dused = dalloc(sizeof used);
        CU(cu->cuMemcpyHtoD(dk, pk, pool * 2));
        CU(cu->cuMemcpyHtoD(dv, pv, pool_v * 2));
        CU(cu->cuMemcpyHtoD(dbt, bt, sizeof(int32_t) * (size_t)(c.batch * bt_stride)));
        CU(cu->cuMemcpyHtoD(dused, used, sizeof used));
        d.k = (const void *)dk, d.v = (const void *)dv;
        d.cu_seqlens_k = NULL;
        d.seqused_k = (const int32_t *)dused;
        d.total_q = B.cq[c.batch];
        d.block_table = (const int32_t *)dbt;
        d.block_table_stride = bt_stride;
        d.page_size = ps;
        d.num_pages = num_pages;
        d.k_row_stride = B.row_k, d.v_row_stride = B.row_v;
        d.k_head_stride = c.d, d.v_head_stride = dv_of(&c);
        d.k_batch_stride = d.v_batch_stride = 0;
        d.total_k = 0;
        char line[512];
        const fajit_status st = fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line);
        if (st == FAJIT_UNSUPPORTED) {
            skipped++;
        } else {
            fajit_attn_desc dc;   /* the oracle over the contiguous copy */
            desc_of(&c, &B, 1, &dc);
            fj_attn_params hp;
            fj_feat_params hf;
            host_params(&c, &B, &dc, &hp, &hf);
            double *f = calloc(B.no, sizeof(double)), *flse = calloc(B.nlse, sizeof(double));
            double *sp = calloc(B.no, sizeof(double)), smax = 0;
            fj_cpu_attention_feat(&hp, c.dtype, &hf, c.dv, f, flse);
            same_precision(&c, &B, &hp, &hf, sp, &smax);
            check_one(ctx, "paged", 0, &c, &B, &d, f, flse, sp, smax, &t);
            free(f), free(flse), free(sp);
        }
        cu->cuMemFree(dk), cu->cuMemFree(dv), cu->cuMemFree(dbt), cu->cuMemFree(dused);
        free(bt), free(pk), free(pv);
        teardown(&B);
    }
    if (skipped)
        printf("features_paged: %d of %d cases skipped: dispatch has no family for their "
               "features over paged K/V (UNSUPPORTED)\n", skipped, n);
    printf("features_paged: %d/%d runs passed\n", t.runs - t.bad, t.runs);
    for (int i = 0; i < t.n_first; i++)
        printf("features_paged failure: %s\n", t.first[i]);
    fajit_ctx_destroy(ctx);
    ck_assert_int_eq(t.bad, 0);
}
END_TEST

int main(void)
{
    setenv("FAJIT_MODEL_FEATURES", "on", 0);   /* the kernels under test (docs/usage.md) */
    int rc = gpu_harness_start("gpu-features", NULL);
    if (rc)
        return rc;
    Suite *s = suite_create("gpu-features");   /* one case alone: CK_RUN_CASE=<name> */
    gpu_harness_add(s, "features_sweep", features_sweep, 1800);
    gpu_harness_add(s, "features_off_same", features_off_same, 600);
    gpu_harness_add(s, "features_paged", features_paged, 1800);
    return gpu_harness_run(s);
}
