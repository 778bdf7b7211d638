/* gpu_decode.c - the harness of the `gpu` suite's decode tests (gpu_decode.h): random
 * inputs, one problem's paged or contiguous buffers, its launch, the float64 oracle and the
 * comparison against it, contexts with the decode family's environment switches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_decode.h"

/*------ random numbers ------*/

static uint64_t g_rng;
void reseed(uint64_t s)
{
    g_rng = s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}
uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
int urange(int lo, int hi) { return lo + (int)(rnd() % (unsigned)(hi - lo + 1)); }
int pick(const int *v, int n) { return v[rnd() % (unsigned)n]; }
/* A value in [-1, 1) exactly representable in the dtype. */
static uint16_t rval(int dtype)
{
    float u = (float)(rnd() % 2000000u) / 1e6f - 1.f;
    uint16_t h = fj_f32_to_half(u, dtype);
    if (fj_half_to_f32(h, dtype) >= 1.f)
        h--;   /* rounded up to 1.0: the next value below */
    return h;
}

/*------ one problem: shape, paging, buffers ------*/

static int qlen_of(const dbufs *B, int b) { return B->c.varlen ? B->cuq[b + 1] - B->cuq[b] : B->c.q_len; }
static int64_t row_of(const dbufs *B, int b, int i)
{
    return B->c.varlen ? B->cuq[b] + i : (int64_t)b * B->c.q_len + i;
}
/* Index of (b, i, h) in the kernel's LSE layout (fajit_params.h). */
static int64_t lse_at(const dbufs *B, int b, int i, int h)
{
    if (B->c.varlen)
        return (int64_t)h * B->rows + B->cuq[b] + i;
    return ((int64_t)b * B->hq + h) * B->c.q_len + i;
}
/* Element index of the first element of key j of sequence b, KV head kh; w 0 = K, 1 = V. */
static int64_t kv_at(const dbufs *B, int w, int b, int j, int kh)
{
    const int ps = B->page_size;
    const int64_t page = B->bt ? B->bt[b * B->bt_stride + j / ps] : b;
    return B->off[w] + page * B->page_stride + (int64_t)(j % ps) * B->row_stride +
           (int64_t)kh * B->head_stride;
}
static int pages_of(const dbufs *B, int b)
{
    return B->c.full_table ? (int)B->bt_stride : (B->used[b] + B->page_size - 1) / B->page_size;
}

void randomize_used(dbufs *B)
{
    const dcase *c = &B->c;
    if (c->preset_used) {
        memcpy(B->used, c->used, sizeof B->used);
        return;
    }
    for (int b = 0; b < c->batch; b++)
        B->used[b] = c->use_seqused ? urange(0, c->seqlen_k) : c->seqlen_k;
    if (c->use_seqused && c->force_empty)
        B->used[rnd() % (unsigned)c->batch] = 0;
    if (c->use_seqused && c->force_full)
        B->used[rnd() % (unsigned)c->batch] = c->seqlen_k;
}

/* Scatters the pages: a random permutation of the pool; the pages each sequence needs
 * come from its front, the unused block-table entries point at random spare pages. */
void assign_pages(dbufs *B)
{
    const int n = B->num_pages;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (unsigned)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int need = 0;
    for (int b = 0; b < B->c.batch; b++)
        need += pages_of(B, b);
    ck_assert_int_lt(need, n);
    int k = 0;
    for (int b = 0; b < B->c.batch; b++)
        for (int64_t i = 0; i < B->bt_stride; i++)
            B->bt[b * B->bt_stride + i] =
                i < pages_of(B, b) ? perm[k++] : perm[need + (int)(rnd() % (unsigned)(n - need))];
    /* a shared prefix: the first pages of every sequence are sequence 0's (the keys written
     * there last are what every sharer reads, the oracle included) */
    for (int b = 1; B->c.share && b < B->c.batch; b++) {
        const int np = pages_of(B, b) < pages_of(B, 0) ? pages_of(B, b) : pages_of(B, 0);
        for (int i = 0; i < np / 2; i++)
            B->bt[b * B->bt_stride + i] = B->bt[i];
    }
    free(perm);
}

void randomize_q(dbufs *B)
{
    for (size_t i = 0; i < B->n_q; i++)
        B->h_q[i] = rval(B->c.dtype);
}

/* K/V values: random everywhere, or (poison) NaN everywhere but the keys in use. */
static void fill_kv(dbufs *B)
{
    const dcase *c = &B->c;
    for (size_t i = 0; i < B->n_kv; i++)
        B->h_kv[i] = c->poison ? POISON16 : rval(c->dtype);
    if (!c->poison)
        return;
    for (int b = 0; b < c->batch; b++)
        for (int j = 0; j < B->used[b]; j++)
            for (int kh = 0; kh < c->hkv; kh++)
                for (int w = 0; w < 2; w++) {
                    uint16_t *x = B->h_kv + kv_at(B, w, b, j, kh);
                    for (int e = 0; e < c->hd; e++)
                        x[e] = rval(c->dtype);
                }
}

/* The device copies of what may change between graph replays: Q, block table, seqused_k. */
void upload_dynamic(dbufs *B)
{
    CU(cu->cuMemcpyHtoD(B->d_q, B->h_q, B->n_q * 2));
    if (B->bt)
        CU(cu->cuMemcpyHtoD(B->d_bt, B->bt, sizeof(int32_t) * (size_t)(B->c.batch * B->bt_stride)));
    if (B->d_used)
        CU(cu->cuMemcpyHtoD(B->d_used, B->used, sizeof(int32_t) * (size_t)B->c.batch));
}

CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(cu->cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

/* Builds the problem of `c` on fresh random inputs; with `src` (same batch, shape and
 * lengths), copies its Q and its keys instead, whatever the layouts. */
void setup(dbufs *B, const dcase *c, const dbufs *src)
{
    memset(B, 0, sizeof *B);
    B->c = *c;
    B->hq = c->hkv * c->group;
    if (c->varlen) {
        for (int b = 0; b < c->batch; b++) {
            B->cuq[b + 1] = B->cuq[b] + c->qlens[b];
            B->seqlen_q = c->qlens[b] > B->seqlen_q ? c->qlens[b] : B->seqlen_q;
        }
        B->rows = B->cuq[c->batch];
    } else {
        B->seqlen_q = c->q_len;
        B->rows = (int64_t)c->batch * c->q_len;
    }
    if (src)
        memcpy(B->used, src->used, sizeof B->used);
    else
        randomize_used(B);
    ck_assert(!c->hnd || c->paged);
    B->row_stride = c->hnd ? c->hd : (int64_t)c->hkv * c->hd;
    B->head_stride = c->hnd ? (int64_t)c->page_size * c->hd : c->hd;
    if (c->paged) {
        B->page_size = c->page_size;
        B->bt_stride = (c->seqlen_k + c->page_size - 1) / c->page_size;
        if (B->bt_stride < 1)
            B->bt_stride = 1;
        B->num_pages = c->spare;
        for (int b = 0; b < c->batch; b++)
            B->num_pages += pages_of(B, b);
        B->bt = malloc(sizeof(int32_t) * (size_t)(c->batch * B->bt_stride));
        assign_pages(B);
    } else {
        B->page_size = c->seqlen_k;
        B->num_pages = c->batch;
    }
    const int64_t P = (int64_t)B->page_size * c->hkv * c->hd;   /* elements of a dense page */
    if (c->layout == KV_INTERLEAVED) {
        B->page_stride = 2 * P;
        B->off[0] = 0, B->off[1] = P;
        B->n_kv = (size_t)(B->num_pages * 2 * P);
    } else {
        B->page_stride = P + (c->page_pad ? 64 : 0);
        B->off[0] = 0, B->off[1] = (int64_t)B->num_pages * B->page_stride;
        B->n_kv = (size_t)(2 * B->off[1]);
    }
    B->n_q = B->n_o = (size_t)(B->rows * B->hq * c->hd);
    B->n_lse = (size_t)(B->rows * B->hq);
    B->h_q = malloc(2 * (B->n_q + 8));
    B->h_o = malloc(2 * (B->n_o + O_GUARD));
    B->h_lse = malloc(sizeof(float) * (B->n_lse + LSE_GUARD));
    B->h_kv = malloc(2 * B->n_kv);
    if (src) {
        memcpy(B->h_q, src->h_q, 2 * B->n_q);
        for (size_t i = 0; i < B->n_kv; i++)
            B->h_kv[i] = c->poison ? POISON16 : rval(c->dtype);
        for (int b = 0; b < c->batch; b++)
            for (int j = 0; j < B->used[b]; j++)
                for (int kh = 0; kh < c->hkv; kh++)
                    for (int w = 0; w < 2; w++)
                        memcpy(B->h_kv + kv_at(B, w, b, j, kh), src->h_kv + kv_at(src, w, b, j, kh),
                               2 * (size_t)c->hd);
    } else {
        randomize_q(B);
        fill_kv(B);
    }

    B->d_q = dalloc(2 * B->n_q);
    B->d_o = dalloc(2 * (B->n_o + O_GUARD));
    B->d_lse = dalloc(sizeof(float) * (B->n_lse + LSE_GUARD));
    const void *k, *v;
    if (c->layout == KV_SEPARATE) {
        size_t half = B->n_kv / 2;
        B->d_k = dalloc(2 * half), B->d_v = dalloc(2 * half);
        CU(cu->cuMemcpyHtoD(B->d_k, B->h_kv, 2 * half));
        CU(cu->cuMemcpyHtoD(B->d_v, B->h_kv + half, 2 * half));
        k = (const void *)B->d_k, v = (const void *)B->d_v;
    } else {   /* one allocation for both */
        B->d_k = dalloc(2 * B->n_kv);
        CU(cu->cuMemcpyHtoD(B->d_k, B->h_kv, 2 * B->n_kv));
        k = (const void *)(B->d_k + 2 * (size_t)B->off[0]);
        v = (const void *)(B->d_k + 2 * (size_t)B->off[1]);
    }
    if (B->bt)
        B->d_bt = dalloc(sizeof(int32_t) * (size_t)(c->batch * B->bt_stride));
    if (c->paged && c->use_seqused)
        B->d_used = dalloc(sizeof(int32_t) * MAXB);
    if (c->varlen) {
        B->d_cuq = dalloc(sizeof B->cuq);
        CU(cu->cuMemcpyHtoD(B->d_cuq, B->cuq, sizeof B->cuq));
    }
    upload_dynamic(B);

    fajit_attn_desc *d = &B->desc;
    fajit_attn_desc_init(d, (const void *)B->d_q, k, v, (void *)B->d_o, c->batch, B->hq, c->hkv,
                         B->seqlen_q, c->seqlen_k, c->hd, (fajit_dtype)c->dtype);
    d->mask = (fajit_mask)c->mask;
    if (c->mask == FAJIT_MASK_WINDOW)
        d->window_left = c->wl, d->window_right = 0;
    if (c->want_lse)
        d->lse = (float *)B->d_lse;
    if (c->varlen) {
        d->cu_seqlens_q = (const int32_t *)B->d_cuq;
        if (c->give_total_q)
            d->total_q = B->cuq[c->batch];
    }
    if (c->paged) {
        d->k_row_stride = d->v_row_stride = B->row_stride;
        d->k_head_stride = d->v_head_stride = B->head_stride;
        d->block_table = (const int32_t *)B->d_bt;
        d->block_table_stride = B->bt_stride;
        d->page_size = c->page_size;
        d->num_pages = B->num_pages;
        if (c->layout != KV_SEPARATE || c->page_pad || c->hnd)   /* else 0: dense pages */
            d->k_page_stride = d->v_page_stride = B->page_stride;
        if (c->use_seqused)
            d->seqused_k = (const int32_t *)B->d_used;
    }
    d->num_splits = c->num_splits;
}

void teardown(dbufs *B)
{
    CUdeviceptr ps[] = {B->d_q, B->d_k, B->d_v, B->d_o, B->d_lse, B->d_bt, B->d_cuq, B->d_used};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            cu->cuMemFree(ps[i]);
    free(B->bt), free(B->h_q), free(B->h_kv), free(B->h_o), free(B->h_lse);
    memset(B, 0, sizeof *B);
}

void case_text(const dbufs *B, char *t, size_t n)
{
    const dcase *c = &B->c;
    static const char *const layouts[] = {"kv-separate", "kv-stacked", "kv-interleaved"};
    size_t at = (size_t)snprintf(t, n, "b%d hkv%d G%d (hq%d) hd%d %s %s", c->batch, c->hkv,
                                 c->group, B->hq, c->hd, c->dtype ? "bf16" : "f16",
                                 c->mask == 0 ? "none" : c->mask == 1 ? "causal" : "window");
#define ADD(...) (at += at < n ? (size_t)snprintf(t + at, n - at, __VA_ARGS__) : 0)
    if (c->mask == FAJIT_MASK_WINDOW)
        ADD(" wl%d", c->wl);
    if (c->varlen) {
        ADD(" varlen q[");
        for (int b = 0; b < c->batch; b++)
            ADD("%s%d", b ? "," : "", c->qlens[b]);
        ADD("]%s", c->give_total_q ? " total_q" : "");
    } else {
        ADD(" q_len%d", c->q_len);
    }
    ADD(" sk%d", c->seqlen_k);
    if (c->paged) {
        ADD(" ps%d pages%d %s%s%s", c->page_size, B->num_pages, layouts[c->layout],
            c->page_pad ? "+pad" : "", c->hnd ? " hnd" : "");
        if (c->use_seqused) {
            ADD(" used[");
            for (int b = 0; b < c->batch; b++)
                ADD("%s%d", b ? "," : "", B->used[b]);
            ADD("]");
        }
    } else {
        ADD(" contiguous");
    }
    ADD(" splits%d%s%s%s", c->num_splits, c->want_lse ? " lse" : "", c->poison ? " nan-outside" : "",
        c->share ? " shared-prefix" : "");
#undef ADD
}

/*------ launching ------*/

/* O and LSE, with their guards, filled with 0xFF bytes (NaN): what a call leaves unwritten
 * shows. Waits for it, so that it is ordered before a launch on a non-blocking stream too. */
void poison_outputs(dbufs *B)
{
    CU(cu->cuMemsetD8(B->d_o, 0xff, 2 * (B->n_o + O_GUARD)));
    CU(cu->cuMemsetD8(B->d_lse, 0xff, sizeof(float) * (B->n_lse + LSE_GUARD)));
    CU(cu->cuCtxSynchronize());
}

/* Poisons O and LSE (and their guards), then launches on `stream`. */
fajit_status launch(fajit_ctx *ctx, dbufs *B, CUstream stream)
{
    poison_outputs(B);
    return fajit_attn_fwd(ctx, &B->desc, stream);
}

/* Waits for everything and copies O and LSE (with their guards) back. */
void fetch(dbufs *B)
{
    CU(cu->cuCtxSynchronize());
    CU(cu->cuMemcpyDtoH(B->h_o, B->d_o, 2 * (B->n_o + O_GUARD)));
    CU(cu->cuMemcpyDtoH(B->h_lse, B->d_lse, sizeof(float) * (B->n_lse + LSE_GUARD)));
}

/*------ the float64 reference ------*/

/* ro: [rows][hq][hd]; rl: [rows][hq] (-inf for a row that sees no key). */
void reference(const dbufs *B, double *ro, double *rl)
{
    const dcase *c = &B->c;
    const int hd = c->hd, G = c->group, dt = c->dtype;
    const double scale = B->desc.softmax_scale;
    const int wl = c->mask == FAJIT_MASK_WINDOW ? c->wl : -1;
    const int wr = c->mask == FAJIT_MASK_NONE ? -1 : 0;
    const size_t maxk = (size_t)(c->seqlen_k > 0 ? c->seqlen_k : 1);
    double *kf = malloc(sizeof(double) * maxk * (size_t)hd);
    double *vf = malloc(sizeof(double) * maxk * (size_t)hd);
    double *s = malloc(sizeof(double) * maxk), *qd = malloc(sizeof(double) * (size_t)hd);
    for (int b = 0; b < c->batch; b++) {
        const int len = B->used[b], ql = qlen_of(B, b);
        for (int kh = 0; kh < c->hkv; kh++) {
            for (int j = 0; j < len; j++) {
                const uint16_t *kr = B->h_kv + kv_at(B, 0, b, j, kh);
                const uint16_t *vr = B->h_kv + kv_at(B, 1, b, j, kh);
                for (int e = 0; e < hd; e++) {
                    kf[(size_t)j * hd + e] = fj_half_to_f32(kr[e], dt);
                    vf[(size_t)j * hd + e] = fj_half_to_f32(vr[e], dt);
                }
            }
            for (int i = 0; i < ql; i++)
                for (int g = 0; g < G; g++) {
                    const int h = kh * G + g;
                    const int64_t r = row_of(B, b, i);
                    const uint16_t *q = B->h_q + (r * B->hq + h) * hd;
                    double *o = ro + (r * B->hq + h) * hd;
                    for (int e = 0; e < hd; e++)
                        qd[e] = fj_half_to_f32(q[e], dt), o[e] = 0;
                    const int shift = i + len - ql;
                    int lo = wl < 0 ? 0 : shift - wl, hi = wr < 0 ? len - 1 : shift + wr;
                    lo = lo < 0 ? 0 : lo, hi = hi > len - 1 ? len - 1 : hi;
                    if (lo > hi) {
                        rl[r * B->hq + h] = -INFINITY;
                        continue;
                    }
                    double m = -INFINITY;
                    for (int j = lo; j <= hi; j++) {
                        double dot = 0;
                        for (int e = 0; e < hd; e++)
                            dot += qd[e] * kf[(size_t)j * hd + e];
                        s[j] = dot * scale;
                        m = s[j] > m ? s[j] : m;
                    }
                    double l = 0;
                    for (int j = lo; j <= hi; j++) {
                        const double p = exp(s[j] - m);
                        l += p;
                        for (int e = 0; e < hd; e++)
                            o[e] += p * vf[(size_t)j * hd + e];
                    }
                    for (int e = 0; e < hd; e++)
                        o[e] /= l;
                    rl[r * B->hq + h] = m + log(l);
                }
        }
    }
    free(kf), free(vf), free(s), free(qd);
}

/*------ comparing ------*/

double tol_of(int dtype) { return dtype == FAJIT_BF16 ? 1.0 / 64 : 1.0 / 256; }
int g_rowrel = 1;

#define FAIL(...)                                                   \
    do {                                                            \
        if (v->ok)                                                  \
            snprintf(v->why, sizeof v->why, __VA_ARGS__);           \
        v->ok = 0;                                                  \
    } while (0)

void compare(const dbufs *B, const double *ro, const double *rl, verdict *v)
{
    const dcase *c = &B->c;
    const int hd = c->hd, dt = c->dtype;
    const double tol = tol_of(dt);
    memset(v, 0, sizeof *v);
    v->ok = 1;
    for (int b = 0; b < c->batch; b++)
        for (int i = 0; i < qlen_of(B, b); i++)
            for (int h = 0; h < B->hq; h++) {
                const int64_t r = row_of(B, b, i), base = (r * B->hq + h) * hd;
                const double want_lse = rl[r * B->hq + h];
                const int empty = isinf(want_lse);
                double rmax = 0;
                for (int e = 0; e < hd; e++)
                    rmax = fabs(ro[base + e]) > rmax ? fabs(ro[base + e]) : rmax;
                for (int e = 0; e < hd; e++) {
                    const uint16_t bits = B->h_o[base + e];
                    const double got = fj_half_to_f32(bits, dt), want = ro[base + e];
                    if (empty) {
                        if ((bits & 0x7fff) != 0)
                            FAIL("seq %d row %d head %d sees no key but O[%d] = %g (bits %04x), "
                                 "not 0", b, i, h, e, got, bits);
                        continue;
                    }
                    if (!isfinite(got)) {
                        FAIL("seq %d row %d head %d: O[%d] = %g (bits %04x) is not finite", b, i,
                             h, e, got, bits);
                        v->err = v->rowrel = INFINITY;
                        continue;
                    }
                    const double diff = fabs(got - want);
                    const double en = diff / (rmax > 1 ? rmax : 1);
                    const double er = diff / (rmax > 1.0 / 16 ? rmax : 1.0 / 16);
                    v->err = en > v->err ? en : v->err;
                    v->rowrel = er > v->rowrel ? er : v->rowrel;
                    if (en > tol || (g_rowrel && er > tol))
                        FAIL("seq %d row %d head %d: O[%d] = %.6g, reference %.6g (row max %.4g): "
                             "error %.3g of max(1, row max), %.3g of max(1/16, row max), tol %.4g",
                             b, i, h, e, got, want, rmax, en, er, tol);
                }
                if (!c->want_lse)
                    continue;
                const float got_l = B->h_lse[lse_at(B, b, i, h)];
                if (empty) {
                    if (!(isinf(got_l) && got_l < 0))
                        FAIL("seq %d row %d head %d sees no key but LSE = %g, not -inf", b, i, h,
                             (double)got_l);
                    continue;
                }
                const double dl = fabs((double)got_l - want_lse) /
                                  (fabs(want_lse) > 1 ? fabs(want_lse) : 1);
                if (!(dl <= 2e-3)) {   /* NaN fails too */
                    FAIL("seq %d row %d head %d: LSE = %.7g, reference %.7g (error %.3g, tol "
                         "2e-3 * max(1, |ref|))", b, i, h, (double)got_l, want_lse, dl);
                    v->lse_err = INFINITY;
                } else if (dl > v->lse_err) {
                    v->lse_err = dl;
                }
            }
    for (int e = 0; e < O_GUARD; e++)
        if (B->h_o[B->n_o + e] != POISON16) {
            FAIL("O written past its end: element %zu + %d", B->n_o, e);
            break;
        }
    uint32_t lb;
    for (int e = 0; e < LSE_GUARD; e++) {
        memcpy(&lb, &B->h_lse[B->n_lse + e], 4);
        if (lb != 0xFFFFFFFFu) {
            FAIL("LSE written past its end: element %zu + %d", B->n_lse, e);
            break;
        }
    }
}
#undef FAIL

/* Runs the reference and compares; ck_asserts a pass, naming `what`. */
verdict check_against_reference(const dbufs *B, const char *what)
{
    double *ro = malloc(sizeof(double) * (B->n_o + 1));
    double *rl = malloc(sizeof(double) * (B->n_lse + 1));
    reference(B, ro, rl);
    verdict v;
    compare(B, ro, rl, &v);
    free(ro), free(rl);
    char t[512];
    case_text(B, t, sizeof t);
    ck_assert_msg(v.ok, "%s (%s): %s", what, t, v.why);
    return v;
}

/* Distance in units in the last place between two finite 16-bit floats (sign-magnitude). */
int ulp_dist(uint16_t a, uint16_t b)
{
    const int ia = a & 0x8000 ? -(int)(a & 0x7fff) : (int)a;
    const int ib = b & 0x8000 ? -(int)(b & 0x7fff) : (int)b;
    return abs(ia - ib);
}
/* One ulp of the dtype at magnitude x (normal numbers; the smallest subnormal step below). */
double ulp_at(double x, int dtype)
{
    const int mant = dtype == FAJIT_BF16 ? 7 : 10;
    int e;
    frexp(x, &e);   /* x = m * 2^e, m in [0.5, 1) */
    const double u = ldexp(1.0, e - 1 - mant);
    const double smallest = dtype == FAJIT_BF16 ? ldexp(1.0, -133) : ldexp(1.0, -24);
    return x > 0 && u > smallest ? u : smallest;
}

fajit_ctx *new_ctx(int checked)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = g_cache_dir;
    o.checked = checked;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    ck_assert_msg(st == FAJIT_OK, "ctx: %s", fajit_errmsg(ctx));
    return ctx;
}

/* A context whose decode defaults load K/V by TMA where it fits (FAJIT_DECODE_LOADER=tma;
 * cp.async elsewhere: page sizes 1 and 64-multiples of head_dim aside, and before sm_90). */
fajit_ctx *new_ctx_tma(int checked)
{
    setenv("FAJIT_DECODE_LOADER", "tma", 1);
    fajit_ctx *ctx = new_ctx(checked);
    unsetenv("FAJIT_DECODE_LOADER");
    return ctx;
}

/* A context whose paged prefill may run on the Hopper kernel (FAJIT_PAGED_PREFILL=hopper, the
 * default, set here so that a caller's FAJIT_PAGED_PREFILL=decode does not turn it off). */
fajit_ctx *new_ctx_paged_hopper(void)
{
    setenv("FAJIT_PAGED_PREFILL", "hopper", 1);
    fajit_ctx *ctx = new_ctx(0);
    unsetenv("FAJIT_PAGED_PREFILL");
    return ctx;
}

/* A context that never launches thread-block clusters (FAJIT_DECODE_CLUSTER=0): on sm_90+
 * its splits merge by the last CTA of each group or the combine kernel, as before sm_90. */
fajit_ctx *new_ctx_nocluster(int checked)
{
    setenv("FAJIT_DECODE_CLUSTER", "0", 1);
    fajit_ctx *ctx = new_ctx(checked);
    unsetenv("FAJIT_DECODE_CLUSTER");
    return ctx;
}
