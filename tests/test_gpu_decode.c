/* test_gpu_decode.c - the `gpu` suite's tests of the decode family (src/families/decode.c):
 * paged K/V through a block table (NHD and HND pages), seqused_k, varlen queries (decode,
 * speculative decode, chunked prefill; prefill over pages, which the Hopper family serves
 * where its tiles fit the pages: prefill_sweep), split-KV and its LSE merge, the checked mode,
 * CUDA-graph replay with changing device-side inputs, the lengths and block table rewritten
 * by the kernel right before the call while the call, a dependent launch, may already run
 * (sm_90+). Exits 77 (skipped) when no CUDA driver can be loaded.
 *
 * Oracle: a float64 CPU reference computed here directly from the paged layout: for each
 * sequence its keys are gathered through the host copy of the block table, then
 * softmax(Q K^T * scale + mask) V and the LSE in double. Sequence b has q_len_b query rows
 * and len_b keys (seqused_k[b], else seqlen_k); query i sees key j iff
 *   j >= i + len_b - q_len_b - window_left  (WINDOW only)  and
 *   j <= i + len_b - q_len_b                (CAUSAL and WINDOW: window_right = 0).
 * Inputs are fresh random numbers in [-1, 1) per case (exact in the dtype); O and LSE are
 * poisoned with 0xFF bytes (NaN) before every launch, with a guard zone after each that
 * must stay poisoned. In half of the paged cases every K/V element that is not a key of
 * some sequence (the rows past len_b in a sequence's last page, spare pages, the gaps of
 * padded page strides, the pages the unused block-table entries point at) is NaN as
 * well: a kernel must not let them into the result (a freshly allocated vLLM cache holds
 * anything).
 *
 * Tolerances (sweep, graph replay, checked mode): every valid O element finite and
 *   |o - ref| <= tol * max(1, max |ref| over the row's head_dim elements),
 *   tol = 1/64 (bf16), 1/256 (f16),
 * well above the rounding of the inputs and outputs (bf16 rounds at 2^-9 relative, f16 at
 * 2^-12) and of P to the dtype before P@V. Because decode rows average thousands of keys,
 * |O| is often ~0.01, where that bound would pass an all-zero output; so the same tol is
 * also applied row-relative, |o - ref| <= tol * max(1/16, max |ref row|) (the rounding
 * terms are all proportional to the row's scale; FAJIT_TEST_DECODE_ROWREL=0 turns this
 * second bound off). A row that sees no key must be exactly O = 0 and LSE = -inf. LSE:
 * |lse - ref| <= 2e-3 * max(1, |ref|).
 *
 * Environment: FAJIT_TEST_SEED (default: time), FAJIT_TEST_CACHE_DIR (default: a fresh
 * temporary directory, removed at exit), FAJIT_TEST_DECODE_CASES (sweep cases, default
 * 200), FAJIT_TEST_DECODE_ONLY=k (run only sweep case k: each case has its own seed),
 * FAJIT_TEST_DECODE_POISON=0 (no NaN outside the keys), FAJIT_TEST_DECODE_ROWREL=0,
 * FAJIT_TEST_DECODE_VERBOSE=1 (a line per sweep case). One test alone:
 * CK_RUN_CASE=<name>, e.g. CK_RUN_CASE=graph_replay.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/api/internal.h"
#include "cpu_ref.h"

static const fj_cuda *cu;
static char g_cache_dir[256];
static unsigned g_seed;

#define CU(call)                                                                  \
    do {                                                                          \
        CUresult r_ = (call);                                                     \
        char e_[64];                                                              \
        ck_assert_msg(r_ == 0, "%s: %s", #call, fj_cuda_errname(cu, r_, e_, 64)); \
    } while (0)

static int env_int(const char *name, int def)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

/*------ random numbers ------*/

static uint64_t g_rng;
static void reseed(uint64_t s)
{
    g_rng = s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static int urange(int lo, int hi) { return lo + (int)(rnd() % (unsigned)(hi - lo + 1)); }
static int pick(const int *v, int n) { return v[rnd() % (unsigned)n]; }
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

static void randomize_used(dbufs *B)
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
static void assign_pages(dbufs *B)
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

static void randomize_q(dbufs *B)
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
static void upload_dynamic(dbufs *B)
{
    CU(cu->cuMemcpyHtoD(B->d_q, B->h_q, B->n_q * 2));
    if (B->bt)
        CU(cu->cuMemcpyHtoD(B->d_bt, B->bt, sizeof(int32_t) * (size_t)(B->c.batch * B->bt_stride)));
    if (B->d_used)
        CU(cu->cuMemcpyHtoD(B->d_used, B->used, sizeof(int32_t) * (size_t)B->c.batch));
}

static CUdeviceptr dalloc(size_t bytes)
{
    CUdeviceptr p = 0;
    CU(cu->cuMemAlloc(&p, bytes ? bytes : 16));
    return p;
}

/* Builds the problem of `c` on fresh random inputs; with `src` (same batch, shape and
 * lengths), copies its Q and its keys instead, whatever the layouts. */
static void setup(dbufs *B, const dcase *c, const dbufs *src)
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

static void teardown(dbufs *B)
{
    CUdeviceptr ps[] = {B->d_q, B->d_k, B->d_v, B->d_o, B->d_lse, B->d_bt, B->d_cuq, B->d_used};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            cu->cuMemFree(ps[i]);
    free(B->bt), free(B->h_q), free(B->h_kv), free(B->h_o), free(B->h_lse);
    memset(B, 0, sizeof *B);
}

static void case_text(const dbufs *B, char *t, size_t n)
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
static void poison_outputs(dbufs *B)
{
    CU(cu->cuMemsetD8(B->d_o, 0xff, 2 * (B->n_o + O_GUARD)));
    CU(cu->cuMemsetD8(B->d_lse, 0xff, sizeof(float) * (B->n_lse + LSE_GUARD)));
    CU(cu->cuCtxSynchronize());
}

/* Poisons O and LSE (and their guards), then launches on `stream`. */
static fajit_status launch(fajit_ctx *ctx, dbufs *B, CUstream stream)
{
    poison_outputs(B);
    return fajit_attn_fwd(ctx, &B->desc, stream);
}

/* Waits for everything and copies O and LSE (with their guards) back. */
static void fetch(dbufs *B)
{
    CU(cu->cuCtxSynchronize());
    CU(cu->cuMemcpyDtoH(B->h_o, B->d_o, 2 * (B->n_o + O_GUARD)));
    CU(cu->cuMemcpyDtoH(B->h_lse, B->d_lse, sizeof(float) * (B->n_lse + LSE_GUARD)));
}

/*------ the float64 reference ------*/

/* ro: [rows][hq][hd]; rl: [rows][hq] (-inf for a row that sees no key). */
static void reference(const dbufs *B, double *ro, double *rl)
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

static double tol_of(int dtype) { return dtype == FAJIT_BF16 ? 1.0 / 64 : 1.0 / 256; }
static int g_rowrel = 1;

typedef struct verdict {
    int ok;
    double err;      /* max |o - ref| / max(1, max |ref row|) */
    double rowrel;   /* max |o - ref| / max(1/16, max |ref row|) */
    double lse_err;  /* max |lse - ref| / max(1, |ref|) */
    char why[320];   /* the first violation */
} verdict;

#define FAIL(...)                                                   \
    do {                                                            \
        if (v->ok)                                                  \
            snprintf(v->why, sizeof v->why, __VA_ARGS__);           \
        v->ok = 0;                                                  \
    } while (0)

static void compare(const dbufs *B, const double *ro, const double *rl, verdict *v)
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
static verdict check_against_reference(const dbufs *B, const char *what)
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
static int ulp_dist(uint16_t a, uint16_t b)
{
    const int ia = a & 0x8000 ? -(int)(a & 0x7fff) : (int)a;
    const int ib = b & 0x8000 ? -(int)(b & 0x7fff) : (int)b;
    return abs(ia - ib);
}
/* One ulp of the dtype at magnitude x (normal numbers; the smallest subnormal step below). */
static double ulp_at(double x, int dtype)
{
    const int mant = dtype == FAJIT_BF16 ? 7 : 10;
    int e;
    frexp(x, &e);   /* x = m * 2^e, m in [0.5, 1) */
    const double u = ldexp(1.0, e - 1 - mant);
    const double smallest = dtype == FAJIT_BF16 ? ldexp(1.0, -133) : ldexp(1.0, -24);
    return x > 0 && u > smallest ? u : smallest;
}

static fajit_ctx *new_ctx(int checked)
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
static fajit_ctx *new_ctx_tma(int checked)
{
    setenv("FAJIT_DECODE_LOADER", "tma", 1);
    fajit_ctx *ctx = new_ctx(checked);
    unsetenv("FAJIT_DECODE_LOADER");
    return ctx;
}

/* A context whose paged prefill may run on the Hopper kernel (FAJIT_PAGED_PREFILL=hopper, the
 * default, set here so that a caller's FAJIT_PAGED_PREFILL=decode does not turn it off). */
static fajit_ctx *new_ctx_paged_hopper(void)
{
    setenv("FAJIT_PAGED_PREFILL", "hopper", 1);
    fajit_ctx *ctx = new_ctx(0);
    unsetenv("FAJIT_PAGED_PREFILL");
    return ctx;
}

/* A context that never launches thread-block clusters (FAJIT_DECODE_CLUSTER=0): on sm_90+
 * its splits merge by the last CTA of each group or the combine kernel, as before sm_90. */
static fajit_ctx *new_ctx_nocluster(int checked)
{
    setenv("FAJIT_DECODE_CLUSTER", "0", 1);
    fajit_ctx *ctx = new_ctx(checked);
    unsetenv("FAJIT_DECODE_CLUSTER");
    return ctx;
}

/*------ 1. paged_sweep ------*/

/* Multiply-adds of the reference (both products, visible keys only), with a budget that
 * keeps a case's CPU reference under ~0.5 s: shapes over it are drawn again. */
#define REF_BUDGET 5e8

static double ref_cost(const dcase *c)
{
    const int wl = c->mask == FAJIT_MASK_WINDOW ? c->wl : -1;
    const int wr = c->mask == FAJIT_MASK_NONE ? -1 : 0;
    double s = 0;
    for (int b = 0; b < c->batch; b++) {
        const int ql = c->varlen ? c->qlens[b] : c->q_len, len = c->used[b];
        for (int i = 0; i < ql; i++) {
            int lo = wl < 0 ? 0 : i + len - ql - wl, hi = wr < 0 ? len - 1 : i + len - ql + wr;
            lo = lo < 0 ? 0 : lo, hi = hi > len - 1 ? len - 1 : hi;
            s += hi >= lo ? hi - lo + 1 : 0;
        }
    }
    return 2.0 * s * c->hkv * c->group * c->hd;
}

/* Draws the key counts of c into c->used (fixed from then on). */
static void preset_lengths(dcase *c)
{
    dbufs tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.c = *c;
    tmp.c.preset_used = 0;
    randomize_used(&tmp);
    memcpy(c->used, tmp.used, sizeof c->used);
    c->preset_used = 1;
}

static void draw_case(dcase *c)
{
    static const int groups[] = {1, 2, 3, 4, 5, 6, 8, 16};
    static int hds[8] = {64, 80, 96, 128, 192, 256}, nhd = 6;
    static int hds_read;
    if (!hds_read) {   /* FAJIT_TEST_DECODE_HDS="32,48,64": the head_dims drawn from */
        hds_read = 1;
        const char *e = getenv("FAJIT_TEST_DECODE_HDS");
        int n = 0, v, used = 0;
        while (e && n < 8 && sscanf(e, "%d%n", &v, &used) == 1 && v >= 8 && v <= 256 &&
               v % 8 == 0) {
            hds[n++] = v;
            e += used;
            e = *e == ',' ? e + 1 : NULL;
        }
        nhd = n ? n : nhd;
    }
    static const int pages[] = {1, 16, 64, 128, 256};
    static const int edges[] = {1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1025};
    memset(c, 0, sizeof *c);
    const int big = rnd() % 25 == 0;   /* many splits: one long sequence */
    c->batch = big ? 1 : urange(1, MAXB);
    c->hkv = urange(1, 4);
    c->group = pick(groups, 8);
    c->hd = pick(hds, nhd);
    c->dtype = (int)(rnd() % 2);
    c->q_len = urange(1, 16);
    c->seqlen_k = big ? urange(3001, 40000) : rnd() % 4 == 0 ? pick(edges, 16) : urange(1, 3000);
    c->paged = rnd() % 6 != 0;
    c->varlen = c->paged && rnd() % 4 == 0;
    if (!c->paged && c->q_len * c->group > 64)   /* contiguous: the decode family's range */
        c->q_len = 64 / c->group;
    if (c->varlen) {
        for (int b = 0; b < c->batch; b++)
            c->qlens[b] = urange(0, c->q_len);
        if (rnd() % 3 == 0)   /* one chunked-prefill sequence */
            c->qlens[rnd() % (unsigned)c->batch] = urange(17, 300);
    }
    const unsigned m = rnd() % 16;
    c->mask = m < 7 ? FAJIT_MASK_NONE : m < 14 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_WINDOW;
    c->wl = urange(0, c->seqlen_k + c->seqlen_k / 4);
    if (c->paged) {
        c->page_size = pick(pages, 5);
        c->use_seqused = rnd() % 8 != 0;
        c->force_empty = rnd() % 4 == 0;
        c->force_full = rnd() % 2 == 0;
        const unsigned l = rnd() % 4;   /* half separate, a quarter each of the others */
        c->layout = l == 3 ? KV_INTERLEAVED : l == 2 ? KV_STACKED : KV_SEPARATE;
        c->page_pad = c->layout == KV_SEPARATE && rnd() % 3 == 0;
        c->spare = urange(1, 8);
        c->poison = rnd() % 2 && env_int("FAJIT_TEST_DECODE_POISON", 1);
    }
    if (rnd() % 2) {
        int most = (c->seqlen_k + 63) / 64;
        most = most < FAJIT_MAX_SPLITS ? most : FAJIT_MAX_SPLITS;
        c->num_splits = urange(1, most);
    }
    c->want_lse = rnd() % 2;
    c->give_total_q = c->varlen && (c->want_lse || rnd() % 2);
}

typedef struct sweep_tally {
    int passed, failed, tma;   /* tma: cases whose kernel loaded K/V by TMA */
    int packed;                /* cases whose CTAs took 2 or 4 KV heads (FJ_DEC_HP) */
    double err[2], rowrel[2], lse;   /* by dtype (0 f16, 1 bf16), over passing cases */
    int first_failed;
    char first[1024];
} sweep_tally;

/* One launch of B against the float64 oracle: the verdict in *v (why: the failing status). */
static void launch_and_check(fajit_ctx *ctx, dbufs *B, verdict *v)
{
    memset(v, 0, sizeof *v);
    fajit_status st = launch(ctx, B, NULL);
    if (st != FAJIT_OK) {
        snprintf(v->why, sizeof v->why, "fajit_attn_fwd: %s: %s", fajit_status_name(st),
                 fajit_errmsg(ctx));
        return;
    }
    fetch(B);
    double *ro = malloc(sizeof(double) * (B->n_o + 1));
    double *rl = malloc(sizeof(double) * (B->n_lse + 1));
    reference(B, ro, rl);
    compare(B, ro, rl, v);
    free(ro), free(rl);
}

/* A case from `draw` whose reference stays within REF_BUDGET (drawn again, at most 1000
 * times), its key counts fixed. */
static void draw_within_budget(dcase *c, void (*draw)(dcase *))
{
    for (int tries = 0;; tries++) {
        draw(c);
        preset_lengths(c);
        if (ref_cost(c) <= REF_BUDGET || tries == 1000)
            break;
    }
}

/* Case k: its own seed, so that FAJIT_TEST_DECODE_ONLY=k replays it alone. */
static void sweep_case(fajit_ctx *ctx, int k, int describe, int verbose, sweep_tally *t)
{
    dcase c;
    dbufs B;
    reseed(((uint64_t)g_seed << 20) ^ (uint64_t)k ^ 0x5eedull);
    draw_within_budget(&c, draw_case);
    setup(&B, &c, NULL);
    char text[512], buf[1024];
    case_text(&B, text, sizeof text);
    fajit_status dst = fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf);
    if (describe)
        printf("decode sweep: case %d: %s\n  -> %s\n", k, text,
               dst == FAJIT_OK ? buf : fajit_errmsg(ctx));
    const int by_tma = dst == FAJIT_OK && strstr(buf, " tma") != NULL;
    const int by_hp = dst == FAJIT_OK && (strstr(buf, " h2 ") || strstr(buf, " h4 "));
    verdict v;
    launch_and_check(ctx, &B, &v);
    if (v.ok) {
        t->passed++;
        t->tma += by_tma;
        t->packed += by_hp;
        t->err[c.dtype] = v.err > t->err[c.dtype] ? v.err : t->err[c.dtype];
        t->rowrel[c.dtype] = v.rowrel > t->rowrel[c.dtype] ? v.rowrel : t->rowrel[c.dtype];
        t->lse = v.lse_err > t->lse ? v.lse_err : t->lse;
    } else {
        if (t->failed++ == 0) {
            t->first_failed = k;
            snprintf(t->first, sizeof t->first, "case %d (FAJIT_TEST_SEED=%u "
                     "FAJIT_TEST_DECODE_ONLY=%d%s): %s: %s", k, g_seed, k, by_tma ? ", TMA" : "",
                     text, v.why);
        }
        if (t->failed <= 10)
            printf("decode sweep: FAILED case %d%s%s: %s: %s\n", k, by_tma ? " (TMA)" : "",
                   by_hp ? " (KV heads packed)" : "", text, v.why);
    }
    if (verbose && v.ok)
        printf("decode sweep: case %d ok (err %.3g, row-relative %.3g): %s\n", k, v.err, v.rowrel,
               text);
    teardown(&B);
}

START_TEST(paged_sweep)
{
    /* odd cases through a context that loads by TMA where it fits (the default's loader
     * may be either: both are checked), every fourth through one without clusters (the
     * default merges 2..16 splits in a cluster on sm_90+: the other merges stay checked) */
    fajit_ctx *ctx = new_ctx(0), *tctx = new_ctx_tma(0), *nctx = new_ctx_nocluster(0);
    const int n = env_int("FAJIT_TEST_DECODE_CASES", 200);
    const int only = env_int("FAJIT_TEST_DECODE_ONLY", -1);
    const int verbose = env_int("FAJIT_TEST_DECODE_VERBOSE", 0);
    sweep_tally t;
    memset(&t, 0, sizeof t);
    int ran = 0;
    for (int k = 0; k < n || (only >= n && k <= only); k++) {
        if (only >= 0 && k != only)
            continue;
        sweep_case(k % 2 ? tctx : k % 4 == 2 ? nctx : ctx, k, ran < 4 || only >= 0, verbose, &t);
        ran++;
    }
    printf("decode sweep: %d/%d cases passed (%d through TMA loads, %d with KV heads packed), "
           "max rel err bf16 %.3g, f16 %.3g (row-relative bf16 %.3g, f16 %.3g; tol bf16 %.4g, "
           "f16 %.4g), max LSE err %.3g\n",
           t.passed, ran, t.tma, t.packed, t.err[1], t.err[0], t.rowrel[1], t.rowrel[0],
           tol_of(FAJIT_BF16),
           tol_of(FAJIT_F16), t.lse);
    fajit_ctx_destroy(ctx);
    fajit_ctx_destroy(tctx);
    fajit_ctx_destroy(nctx);
    ck_assert_msg(t.failed == 0, "%d of %d decode cases failed; first: %s", t.failed, ran, t.first);
}
END_TEST

/*------ 1b. prefill_sweep ------*/

/* Prefill and chunked prefill over paged K/V: 64..300 query rows (some varlen batches mixed
 * with short sequences of 0..20 rows: decode rows, and 17..20 across the mixed plan's bound,
 * where such a batch on sm_90 is one plan of the Hopper and the decode kernels), keys from fewer than the queries to 1,000 more, page sizes
 * 1..256 (those that fit the Hopper kernel's tiles go to it on sm_90, the others to the decode
 * family), GQA ratios including 3, 5 and 6, head_dim 64..256, shared prefixes, the sweep's
 * layouts, lengths, masks and NaN outside the keys. */
static void draw_prefill_case(dcase *c)
{
    static const int groups[] = {1, 2, 3, 4, 5, 6, 8};
    static const int hds[] = {64, 80, 96, 128, 192, 256};
    static const int pages[] = {1, 3, 8, 16, 16, 32, 64, 128, 256};
    memset(c, 0, sizeof *c);
    c->batch = urange(1, 4);
    c->hkv = urange(1, 2);
    c->group = pick(groups, 7);
    c->hd = pick(hds, 6);
    c->dtype = (int)(rnd() % 2);
    c->paged = 1;
    c->varlen = rnd() % 2;
    c->q_len = urange(64, 300);
    int qmax = c->q_len;
    if (c->varlen) {
        qmax = 0;
        for (int b = 0; b < c->batch; b++) {
            c->qlens[b] = rnd() % 3 == 0 ? urange(0, 20) : urange(64, 300);
            qmax = c->qlens[b] > qmax ? c->qlens[b] : qmax;
        }
        c->give_total_q = rnd() % 8 != 0;   /* without it: the decode family */
    }
    c->seqlen_k = rnd() % 8 == 0 ? urange(1, qmax) : urange(qmax, qmax + 1000);
    const unsigned m = rnd() % 16;
    c->mask = m < 6 ? FAJIT_MASK_NONE : m < 13 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_WINDOW;
    c->wl = urange(0, c->seqlen_k);
    c->page_size = pick(pages, 9);
    c->use_seqused = rnd() % 4 != 0;
    c->force_empty = rnd() % 4 == 0;
    c->force_full = rnd() % 2 == 0;
    const unsigned l = rnd() % 4;
    c->layout = l == 3 ? KV_INTERLEAVED : l == 2 ? KV_STACKED : KV_SEPARATE;
    c->page_pad = c->layout == KV_SEPARATE && rnd() % 3 == 0;
    c->spare = urange(1, 8);
    c->poison = rnd() % 2 && env_int("FAJIT_TEST_DECODE_POISON", 1);
    c->share = c->batch > 1 && rnd() % 3 == 0;
    c->want_lse = rnd() % 2;
}

START_TEST(prefill_sweep)
{
    fajit_ctx *ctx = new_ctx_paged_hopper();
    fajit_device_info di;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &di), FAJIT_OK);
    const int n = env_int("FAJIT_TEST_PREFILL_CASES", 60);
    const int only = env_int("FAJIT_TEST_DECODE_ONLY", -1);
    int failed = 0, fa3 = 0, ran = 0, mixed = 0, mixed_short = 0;
    double worst[2] = {0, 0};
    char first[1024] = "";
    for (int k = 0; k < n; k++) {
        if (only >= 0 && k != only)
            continue;
        dcase c;
        dbufs B;
        reseed(((uint64_t)g_seed << 20) ^ (uint64_t)k ^ 0x9ef11ull);
        draw_within_budget(&c, draw_prefill_case);
        setup(&B, &c, NULL);
        char text[512], buf[1024];
        case_text(&B, text, sizeof text);
        ck_assert_msg(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf) == FAJIT_OK,
                      "describe: %s", fajit_errmsg(ctx));
        const int by_fa3 = strstr(buf, "fa3 ") != NULL;
        /* the mixed plan: the decode launch's QMAX variant after the Hopper one */
        const int by_mix = by_fa3 && strstr(buf, " qmax") != NULL;
        int short_rows = 0;   /* sequences of at most 16 rows in the batch */
        for (int b = 0; c.varlen && b < c.batch; b++)
            short_rows += c.qlens[b] <= 16;
        const char *who = by_mix ? "mixed" : by_fa3 ? "fa3" : "decode";
        if (ran < 4 || only >= 0)
            printf("prefill sweep: case %d: %s\n  -> %s\n", k, text, buf);
        verdict v;
        launch_and_check(ctx, &B, &v);
        ran++;
        fa3 += by_fa3 && v.ok;
        mixed += by_mix && v.ok;
        mixed_short += by_mix && short_rows > 0 && v.ok;
        if (v.ok) {
            worst[c.dtype] = v.err > worst[c.dtype] ? v.err : worst[c.dtype];
        } else {
            if (failed++ == 0)
                snprintf(first, sizeof first, "case %d (FAJIT_TEST_SEED=%u FAJIT_TEST_DECODE_ONLY=%d, "
                         "%s): %s: %s", k, g_seed, k, who, text, v.why);
            if (failed <= 10)
                printf("prefill sweep: FAILED case %d (%s): %s: %s\n", k, who, text, v.why);
        }
        teardown(&B);
    }
    printf("prefill sweep: %d/%d cases passed, %d of them on the Hopper kernel (%d as the mixed "
           "plan, %d of those with sequences of at most 16 rows), max rel err bf16 %.3g, f16 "
           "%.3g\n", ran - failed, ran, fa3, mixed, mixed_short, worst[1], worst[0]);
    fajit_ctx_destroy(ctx);
    ck_assert_msg(failed == 0, "%d of %d prefill cases failed; first: %s", failed, ran, first);
    /* on sm_90 most page sizes drawn fit the Hopper kernel: it must have served */
    if (di.cc_major == 9 && di.cc_minor == 0 && only < 0)
    {
        ck_assert_msg(fa3 >= ran / 3, "only %d of %d paged prefill cases ran on the Hopper kernel",
                      fa3, ran);
        /* about a quarter of the draws are varlen batches the mixed plan serves */
        ck_assert_msg(mixed_short >= ran / 20, "only %d of %d paged prefill cases ran as the "
                      "mixed plan with decode rows", mixed_short, ran);
    }
}
END_TEST

/*------ 2. contiguous_matches_paged ------*/

START_TEST(contiguous_matches_paged)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0xc0ffeeull);
    dcase c = {.batch = 4, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1000, .want_lse = 1};
    dbufs C, P;
    setup(&C, &c, NULL);
    dcase pc = c;
    pc.paged = 1, pc.page_size = 16, pc.spare = 7;
    setup(&P, &pc, &C);   /* the same Q and keys, in shuffled pages of 16 */
    for (int i = 0; i < 2; i++) {
        char buf[1024];
        fajit_status st = fajit_dispatch_describe(ctx, NULL, i ? &P.desc : &C.desc, buf, sizeof buf);
        printf("contiguous_matches_paged: %s: %s\n", i ? "paged" : "contiguous",
               st == FAJIT_OK ? buf : fajit_errmsg(ctx));
    }
    uint16_t *want = malloc(2 * C.n_o);
    static const int splits[] = {1, 4};
    for (int s = 0; s < 2; s++) {
        C.desc.num_splits = C.c.num_splits = splits[s];
        P.desc.num_splits = P.c.num_splits = splits[s];
        char buf[1024];
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &C.desc, buf, sizeof buf), FAJIT_OK);
        ck_assert_msg(strstr(buf, "dec ") != NULL, "contiguous decode step not served by the "
                      "decode family: %s", buf);
        ck_assert_msg(launch(ctx, &C, NULL) == FAJIT_OK, "contiguous: %s", fajit_errmsg(ctx));
        fetch(&C);
        check_against_reference(&C, "contiguous");
        memcpy(want, C.h_o, 2 * C.n_o);
        ck_assert_msg(launch(ctx, &P, NULL) == FAJIT_OK, "paged: %s", fajit_errmsg(ctx));
        fetch(&P);
        check_against_reference(&P, "paged");
        int worst = 0;
        size_t differ = 0;
        for (size_t i = 0; i < C.n_o; i++) {
            int u = ulp_dist(want[i], P.h_o[i]);
            differ += u != 0;
            worst = u > worst ? u : worst;
        }
        printf("contiguous_matches_paged: splits %d: %s (%zu of %zu elements differ, max %d "
               "ulp)\n", splits[s], differ ? "within ulps" : "bit-identical", differ, C.n_o, worst);
        ck_assert_msg(worst <= 1, "splits %d: paged O differs from contiguous by %d ulp (%zu "
                      "elements differ)", splits[s], worst, differ);
    }
    free(want);
    teardown(&C), teardown(&P);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 3. checked_mode ------*/

START_TEST(checked_mode)
{
    const char *env = getenv("FAJIT_CHECKED");
    if (env && strcmp(env, "1") != 0) {
        printf("checked_mode: skipped: FAJIT_CHECKED=%s overrides opts.checked\n", env);
        return;
    }
    fajit_ctx *ctx = new_ctx(1);
    reseed(g_seed ^ 0xc4ec4edull);
    dcase c = {.batch = 2, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .q_len = 2, .seqlen_k = 200, .paged = 1,
               .page_size = 16, .use_seqused = 1, .full_table = 1, .spare = 5, .want_lse = 1,
               .preset_used = 1, .used = {200, 199}};   /* every page of both in use */
    dbufs B;
    setup(&B, &c, NULL);

    /* a good problem */
    fajit_status st = launch(ctx, &B, NULL);
    ck_assert_msg(st == FAJIT_OK, "good problem, checked: %s: %s", fajit_status_name(st),
                  fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "checked mode, good problem");

    /* bad page ids: past the pool, and negative */
    const struct { int b, i, value; } bad[] = {{1, 2, B.num_pages + 5}, {0, 0, -1}};
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; n++) {
        int32_t *e = &B.bt[bad[n].b * B.bt_stride + bad[n].i], keep = *e;
        *e = bad[n].value;
        upload_dynamic(&B);
        st = launch(ctx, &B, NULL);
        char want[64];
        snprintf(want, sizeof want, "block_table[%d][%d] = %d", bad[n].b, bad[n].i, bad[n].value);
        printf("checked_mode: planted %s: %s: %s\n", want, fajit_status_name(st), fajit_errmsg(ctx));
        ck_assert_msg(st == FAJIT_INVALID_ARGUMENT, "planted %s: got %s (%s)", want,
                      fajit_status_name(st), fajit_errmsg(ctx));
        ck_assert_msg(strstr(fajit_errmsg(ctx), want) != NULL, "planted %s, message: %s", want,
                      fajit_errmsg(ctx));
        *e = keep;
    }

    /* a used length beyond what the block table addresses */
    const int over = (int)(B.bt_stride * c.page_size) + 3, keep = B.used[0];
    B.used[0] = over;
    upload_dynamic(&B);
    st = launch(ctx, &B, NULL);
    char want[64];
    snprintf(want, sizeof want, "seqused_k[0] = %d", over);
    printf("checked_mode: planted %s: %s: %s\n", want, fajit_status_name(st), fajit_errmsg(ctx));
    ck_assert_msg(st == FAJIT_INVALID_ARGUMENT, "planted %s: got %s (%s)", want,
                  fajit_status_name(st), fajit_errmsg(ctx));
    ck_assert_msg(strstr(fajit_errmsg(ctx), "seqused_k") != NULL, "planted %s, message: %s",
                  want, fajit_errmsg(ctx));
    B.used[0] = keep;

    /* and the context is fine afterwards: the good problem again */
    upload_dynamic(&B);
    st = launch(ctx, &B, NULL);
    ck_assert_msg(st == FAJIT_OK, "good problem after the bad ones: %s: %s", fajit_status_name(st),
                  fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "checked mode, good problem again");
    printf("checked_mode: good problem OK before and after 3 planted bad indices\n");
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 4. graph_replay ------*/

/* Driver graph entry points the library does not use, looked up for this test. */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
static struct {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*begin)(CUstream, int);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*instantiate_flags)(CUgraphExec *, CUgraph, unsigned long long);
    /* drivers before 11.4: cuGraphInstantiate_v2 (error node, log buffer) */
    CUresult (*instantiate_log)(CUgraphExec *, CUgraph, void *, char *, size_t);
} G;

/* NULL when every entry point is there, else the name of a missing one. */
static const char *graph_api(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return "libcuda.so.1 (not loaded)";
    static const char *const names[] = {"cuStreamCreate", "cuStreamDestroy_v2",
                                        "cuStreamSynchronize", "cuStreamBeginCapture_v2",
                                        "cuStreamEndCapture", "cuGraphLaunch",
                                        "cuGraphExecDestroy", "cuGraphDestroy"};
    void *slots[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slots[i] = dlsym(h, names[i])))
            return names[i];
    memcpy(&G.stream_create, &slots[0], sizeof(void *));
    memcpy(&G.stream_destroy, &slots[1], sizeof(void *));
    memcpy(&G.stream_sync, &slots[2], sizeof(void *));
    memcpy(&G.begin, &slots[3], sizeof(void *));
    memcpy(&G.end, &slots[4], sizeof(void *));
    memcpy(&G.launch, &slots[5], sizeof(void *));
    memcpy(&G.exec_destroy, &slots[6], sizeof(void *));
    memcpy(&G.graph_destroy, &slots[7], sizeof(void *));
    void *p = dlsym(h, "cuGraphInstantiateWithFlags");
    if (p) {
        memcpy(&G.instantiate_flags, &p, sizeof p);
        return NULL;
    }
    if (!(p = dlsym(h, "cuGraphInstantiate_v2")))
        return "cuGraphInstantiateWithFlags";
    memcpy(&G.instantiate_log, &p, sizeof p);
    return NULL;
}

static CUresult graph_instantiate(CUgraphExec *exec, CUgraph graph)
{
    if (G.instantiate_flags)
        return G.instantiate_flags(exec, graph, 0);
    char log[256];
    return G.instantiate_log(exec, graph, NULL, log, sizeof log);
}

/* New contents for the same device buffers: lengths (one empty and one full sequence in
 * the first replay), a new page permutation, new queries. */
static void new_step(dbufs *B, int replay)
{
    randomize_used(B);
    if (replay == 0)
        B->used[0] = 0, B->used[B->c.batch - 1] = B->c.seqlen_k;
    assign_pages(B);
    randomize_q(B);
    upload_dynamic(B);
}

/* Captures one call into a graph on `s`, then replays it `replays` times with new inputs,
 * each checked against the reference. */
static void capture_and_replay(fajit_ctx *ctx, dbufs *B, CUstream s, int replays, const char *what)
{
    /* warm outside the capture (the kernel loaded, the plan's workspace in place) */
    ck_assert_msg(launch(ctx, B, s) == FAJIT_OK, "%s, plain launch: %s", what, fajit_errmsg(ctx));
    fetch(B);
    check_against_reference(B, what);

    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = fajit_attn_fwd(ctx, &B->desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "%s, launch inside capture: %s", what, fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec = NULL;
    CU(graph_instantiate(&exec, graph));
    for (int rep = 0; rep < replays; rep++) {
        new_step(B, rep);
        poison_outputs(B);   /* (after the copies: both land before the replay) */
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        fetch(B);
        char name[160];
        snprintf(name, sizeof name, "%s, replay %d", what, rep);
        verdict v = check_against_reference(B, name);
        printf("graph_replay: %s: ok (err %.3g, row-relative %.3g, LSE %.3g; used[0..2] %d %d "
               "%d)\n", name, v.err, v.rowrel, v.lse_err, B->used[0], B->used[1], B->used[2]);
    }
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
}

START_TEST(graph_replay)
{
    const char *missing = graph_api();
    if (missing) {
        printf("graph_replay: skipped: the driver lacks %s\n", missing);
        return;
    }
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x6a2a9ull);
    dcase c = {.batch = 8, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 4096, .paged = 1,
               .page_size = 16, .use_seqused = 1, .full_table = 1, .spare = 16,
               .num_splits = 0, .want_lse = 1};
    dbufs B;
    setup(&B, &c, NULL);
    char buf[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("graph_replay: %s\n", buf);
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));

    /* with the caller's workspace: the graph owns no fajit memory */
    size_t bytes = 0;
    ck_assert_msg(fajit_attn_workspace_size(ctx, &B.desc, &bytes) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    printf("graph_replay: workspace %zu bytes\n", bytes);
    if (bytes) {
        CUdeviceptr ws = dalloc((bytes + 255) / 256 * 256);
        ck_assert_msg(ws % 256 == 0, "cuMemAlloc returned a pointer not 256-byte aligned");
        CU(cu->cuMemsetD8(ws, 0, (bytes + 255) / 256 * 256));
        B.desc.workspace = (void *)ws;
        B.desc.workspace_bytes = bytes;
        capture_and_replay(ctx, &B, s, 5, "caller workspace");
        B.desc.workspace = NULL, B.desc.workspace_bytes = 0;
        CU(cu->cuCtxSynchronize());
        CU(cu->cuMemFree(ws));
    } else {
        printf("graph_replay: the plan needs no workspace (no split): caller-workspace capture "
               "skipped\n");
    }
    /* with the context's scratch (stream-ordered allocation inside the graph) */
    capture_and_replay(ctx, &B, s, 2, "context scratch");
    /* TMA loads where they fit: the tensor maps are kernel parameters baked into the graph
     * (addresses and shapes only), while seqused_k and the block table change */
    fajit_ctx *tctx = new_ctx_tma(0);
    ck_assert_int_eq(fajit_dispatch_describe(tctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("graph_replay: %s\n", buf);
    capture_and_replay(tctx, &B, s, 2, "TMA loads, context scratch");
    fajit_ctx_destroy(tctx);

    CU(G.stream_destroy(s));
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 4a. mixed_graph_replay ------*/

/* A new split of the same query rows over the sequences (the launch shape, fixed at
 * capture, depends on their total, the batch and the longest sequence, `cap` rows, only):
 * replay 0 empties some sequences (a smaller batch) and moves rows between the long ones;
 * later ones draw a random split of prefill sequences and decode rows, none over `cap`. */
static void new_mixed_split(dbufs *B, int replay, int cap)
{
    const int n = B->c.batch, total = (int)B->rows;
    int q[MAXB] = {0}, left = total;
    if (replay == 0) {   /* {0, 1, 0, cap, 1, 16, 0, rest} */
        const int fixed[MAXB] = {0, 1, 0, cap, 1, 16, 0, 0};
        memcpy(q, fixed, sizeof q);
        for (int b = 0; b < n; b++)
            left -= q[b];
    } else {
        for (int b = 0; b < n && left > 0; b++) {
            const int hi = left < cap ? left : cap;
            q[b] = rnd() % 2 ? urange(0, 16 < hi ? 16 : hi) : urange(0, hi);
            left -= q[b];
        }
    }
    for (int b = n - 1; b >= 0 && left > 0; b--) {   /* the rest where there is room */
        const int add = cap - q[b] < left ? cap - q[b] : left;
        q[b] += add, left -= add;
    }
    ck_assert_int_eq(left, 0);
    B->cuq[0] = 0;
    for (int b = 0; b < n; b++) {
        B->c.qlens[b] = q[b];
        B->cuq[b + 1] = B->cuq[b] + q[b];
    }
    CU(cu->cuMemcpyHtoD(B->d_cuq, B->cuq, sizeof B->cuq));
}

/* vLLM's unified step as one captured call: chunked-prefill sequences and decode rows of
 * one varlen batch over the paged cache (the mixed plan on sm_90a: the Hopper kernel, then
 * the decode kernel), replayed with other query splits (no sequence over the longest at
 * capture), fewer sequences, other key lengths and new pages, each against the oracle. */
START_TEST(mixed_graph_replay)
{
    const char *missing = graph_api();
    if (missing) {
        printf("mixed_graph_replay: skipped: the driver lacks %s\n", missing);
        return;
    }
    fajit_ctx *ctx = new_ctx_paged_hopper();
    reseed(g_seed ^ 0x4d1c3ull);
    dcase c = {.batch = 8, .hkv = 4, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .varlen = 1,
               .qlens = {512, 1, 1, 300, 1, 16, 1, 1}, .give_total_q = 1, .paged = 1,
               .page_size = 16, .seqlen_k = 2048, .use_seqused = 1, .full_table = 1,
               .spare = 16, .want_lse = 1};
    dbufs B;
    setup(&B, &c, NULL);
    char buf[2048];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("mixed_graph_replay: %s\n", buf);
    fajit_device_info di;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &di), FAJIT_OK);
    if (di.cc_major == 9 && di.cc_minor == 0)
        ck_assert_msg(strstr(buf, "fa3 ") && strstr(buf, "then dec "), "not the mixed plan: %s",
                      buf);
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    ck_assert_msg(launch(ctx, &B, s) == FAJIT_OK, "plain launch: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "mixed, before capture");
    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = fajit_attn_fwd(ctx, &B.desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "launch inside capture: %s", fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec = NULL;
    CU(graph_instantiate(&exec, graph));
    for (int rep = 0; rep < 6; rep++) {
        new_mixed_split(&B, rep, c.qlens[0]);   /* (the longest at capture) */
        new_step(&B, rep);
        poison_outputs(&B);
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        fetch(&B);
        char name[160];
        snprintf(name, sizeof name, "mixed, replay %d", rep);
        verdict v = check_against_reference(&B, name);
        printf("mixed_graph_replay: %s: ok (err %.3g, LSE %.3g; q[0..3] %d %d %d %d, used[0..3] "
               "%d %d %d %d)\n", name, v.err, v.lse_err, B.c.qlens[0], B.c.qlens[1],
               B.c.qlens[2], B.c.qlens[3], B.used[0], B.used[1], B.used[2], B.used[3]);
    }
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
    CU(G.stream_destroy(s));
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 4b. pdl_rewrite ------*/

/* One CTA that lets the next kernel launch at once, waits `ns` nanoseconds, then copies a
 * new block table and new lengths into place: a decode step launched after it as a
 * dependent (programmatic dependent launch, sm_90+) can be resident while the old ones are
 * still there (its launch follows this grid's trigger, not its end), and must use the new
 * ones (nothing it reads before its wait on this grid may come from memory this grid
 * writes). A lab run (2026-12-05) measured reading the lengths and first page ids early and checking
 * them after the wait as slower (dev/decode/NOTES.md); this keeps any such idea honest. */
static const char k_writer_src[] =
    "extern \"C\" __global__ void fj_test_writer(int *bt, const int *bt_new, int n_bt,\n"
    "                                            int *used, const int *used_new, int n_used,\n"
    "                                            unsigned long long ns)\n"
    "{\n"
    "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "    unsigned long long t0, t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    do {\n"
    "        asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    } while (t - t0 < ns);\n"
    "    for (int i = threadIdx.x; i < n_bt; i += blockDim.x)\n"
    "        bt[i] = bt_new[i];\n"
    "    for (int i = threadIdx.x; i < n_used; i += blockDim.x)\n"
    "        used[i] = used_new[i];\n"
    "}\n";

START_TEST(pdl_rewrite)
{
    fajit_ctx *ctx = new_ctx(0);
    if (ctx->cc < 90) {
        printf("pdl_rewrite: skipped: no dependent launches before sm_90\n");
        fajit_ctx_destroy(ctx);
        return;
    }
    char why[512], err[512];
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    ck_assert_msg(nv != NULL, "%s", why);
    fj_src src = {"writer.cu", k_writer_src, strlen(k_writer_src)};
    fj_compile_out out;
    ck_assert_msg(fj_nvrtc_compile(nv, "", &src, NULL, 0, ctx->arch, NULL, &out, err,
                                   sizeof err) == 0, "%s\n%s", err, out.log);
    fj_module wm;
    CU(fj_module_load(cu, out.cubin, "fj_test_writer", &wm));
    fj_compile_out_free(&out);
    const char *missing = graph_api();   /* (its stream entry points) */
    ck_assert_msg(missing == NULL, "the driver lacks %s", missing ? missing : "");
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    /* batch 1 x q_len 1 (16 splits merged by the last CTA at 4k, 8 in a cluster at 2k),
     * q_len 4 (causal: each row's keys move with the length), batch 2 x 16k (a split per
     * CTA of 2k keys), ps16 and ps1 (an id per row) */
    static const struct { int batch, q_len, seqlen_k, page_size; } shapes[] = {
        {1, 1, 4096, 16}, {1, 1, 2048, 16}, {1, 4, 4096, 16}, {2, 1, 16384, 16}, {1, 1, 4096, 1}};
    reseed(g_seed ^ 0x5bec5bull);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        dcase c = {.batch = shapes[i].batch, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = shapes[i].q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                   .q_len = shapes[i].q_len, .seqlen_k = shapes[i].seqlen_k, .paged = 1,
                   .page_size = shapes[i].page_size, .use_seqused = 1, .full_table = 1,
                   .spare = 16, .num_splits = 0, .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        char line[1024];
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, line, sizeof line),
                         FAJIT_OK);
        printf("pdl_rewrite: %s\n", line);
        ck_assert_msg(launch(ctx, &B, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));   /* (warm) */
        fetch(&B);
        check_against_reference(&B, "pdl_rewrite, before the writer");
        const size_t n_bt = (size_t)c.batch * (size_t)B.bt_stride;
        CUdeviceptr bt_new = dalloc(sizeof(int32_t) * n_bt);
        CUdeviceptr used_new = dalloc(sizeof(int32_t) * (size_t)c.batch);
        for (int step = 0; step < 3; step++) {
            /* the next step's lengths and pages (the host copies the reference reads),
             * staged: the device still holds the old ones */
            randomize_used(&B);
            if (step == 0) {   /* the longest, and (batch 2) a third of it */
                B.used[0] = c.seqlen_k;
                if (c.batch > 1)
                    B.used[1] = c.seqlen_k / 3;
            }
            assign_pages(&B);
            CU(cu->cuMemcpyHtoD(bt_new, B.bt, sizeof(int32_t) * n_bt));
            CU(cu->cuMemcpyHtoD(used_new, B.used, sizeof(int32_t) * (size_t)c.batch));
            poison_outputs(&B);
            int nb = (int)n_bt, nu = c.batch;
            unsigned long long ns = 20000;   /* 20 us: time for the decode CTAs to launch */
            void *args[] = {&B.d_bt, &bt_new, &nb, &B.d_used, &used_new, &nu, &ns};
            const unsigned grid[3] = {1, 1, 1};
            CU(fj_launch(cu, wm.fn, grid, 128, 0, s, args, 0, 0));
            ck_assert_msg(fajit_attn_fwd(ctx, &B.desc, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));
            fetch(&B);
            char name[160];
            snprintf(name, sizeof name, "pdl_rewrite, %d x %d keys, q_len %d, ps%d, step %d",
                     c.batch, c.seqlen_k, c.q_len, c.page_size, step);
            verdict v = check_against_reference(&B, name);
            printf("pdl_rewrite: %s: ok (err %.3g, LSE %.3g; used %d .. %d)\n", name, v.err,
                   v.lse_err, B.used[0], B.used[c.batch - 1]);
        }
        CU(cu->cuMemFree(bt_new));
        CU(cu->cuMemFree(used_new));
        teardown(&B);
    }
    CU(G.stream_destroy(s));
    CU(cu->cuModuleUnload(wm.module));
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 5. lse_merge_consistency ------*/

START_TEST(lse_merge_consistency)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x15e15eull);
    dcase c;
    dbufs B;
    do {   /* a random paged case long enough for 7 splits of 64-key tiles */
        draw_case(&c);
        c.paged = 1, c.page_size = c.page_size ? c.page_size : 16, c.spare = 3;
        c.varlen = 0, c.batch = urange(1, 4), c.q_len = urange(1, 4);
        c.seqlen_k = urange(7 * 64 + 1, 3000);
        c.use_seqused = 0, c.poison = 0, c.want_lse = 1;
        c.mask = rnd() % 2 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        preset_lengths(&c);
    } while (ref_cost(&c) > REF_BUDGET);
    setup(&B, &c, NULL);
    char text[512];
    case_text(&B, text, sizeof text);
    uint16_t *o1 = malloc(2 * B.n_o);
    float *l1 = malloc(sizeof(float) * B.n_lse);
    B.desc.num_splits = B.c.num_splits = 1;
    ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "splits 1: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "splits 1");
    memcpy(o1, B.h_o, 2 * B.n_o);
    memcpy(l1, B.h_lse, sizeof(float) * B.n_lse);
    B.desc.num_splits = B.c.num_splits = 7;
    ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "splits 7: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "splits 7");
    /* O: within 2 ulp at the row's largest |O| (elements near 0 of a row carry the absolute
     * error of the row's scale, so an element-wise ulp would be meaningless there) */
    double worst_ulps = 0, worst_lse = 0;
    int worst_elem = 0;
    for (int64_t r = 0; r < B.rows; r++)
        for (int h = 0; h < B.hq; h++) {
            const size_t base = (size_t)((r * B.hq + h) * c.hd);
            double rmax = 0;
            for (int e = 0; e < c.hd; e++) {
                double x = fabs(fj_half_to_f32(o1[base + e], c.dtype));
                rmax = x > rmax ? x : rmax;
            }
            const double u = ulp_at(rmax, c.dtype);
            for (int e = 0; e < c.hd; e++) {
                double a = fj_half_to_f32(o1[base + e], c.dtype);
                double b = fj_half_to_f32(B.h_o[base + e], c.dtype);
                double d = fabs(a - b) / u;
                worst_ulps = d > worst_ulps ? d : worst_ulps;
                int eu = ulp_dist(o1[base + e], B.h_o[base + e]);
                worst_elem = eu > worst_elem ? eu : worst_elem;
            }
        }
    for (size_t i = 0; i < B.n_lse; i++) {
        const double a = l1[i], b = B.h_lse[i];
        if (isinf(a) || isinf(b)) {
            ck_assert_msg(a == b, "LSE[%zu]: %g with 1 split, %g with 7", i, a, b);
            continue;
        }
        const double d = fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
        worst_lse = d > worst_lse ? d : worst_lse;
    }
    printf("lse_merge_consistency: %s: splits 1 vs 7: O max %.3g ulp of the row max (%d ulp "
           "element-wise), LSE max rel diff %.3g\n", text, worst_ulps, worst_elem, worst_lse);
    ck_assert_msg(worst_ulps <= 2, "%s: O with 7 splits differs from 1 split by %.3g ulp of the "
                  "row max", text, worst_ulps);
    ck_assert_msg(worst_lse <= 1e-4, "%s: LSE with 7 splits differs from 1 split by %.3g "
                  "(relative, tol 1e-4)", text, worst_lse);
    free(o1), free(l1);
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 6. combine_paths ------*/

/* The three ways splits are merged: as one thread-block cluster per (b, kv head, q tile)
 * group (sm_90+, the default where the GPU runs it), by the last CTA of each group with a
 * counter per group from the context's ring (FAJIT_DECODE_CLUSTER=0 here), and by the
 * combine kernel where the counters would not fit a ring slot (here 8 sequences x 4 KV heads
 * x 19 q tiles of a 300-row chunked prefill = 608 groups; also without clusters). All
 * against the float64 oracle. (That the fused path leaves its counters at zero is
 * graph_replay's: the replays of one capture share one slot.) */
START_TEST(combine_paths)
{
    fajit_ctx *cctx = new_ctx(0), *ctx = new_ctx_nocluster(0);
    reseed(g_seed ^ 0xc0b1eull);
    /* (the cluster runs: few enough groups that the clusters take one wave, so the cluster
     * merge is what runs, not only what describe offers) */
    static const struct {
        const char *what, *want;
        int varlen, splits, cluster, batch, hkv;
    } runs[] = {
        {"cluster", "a cluster per group merges", 0, 5, 1, 2, 4},
        {"cluster, chunked prefill", "a cluster per group merges", 1, 3, 1, 2, 1},
        {"fused", "the last CTA of each group combines", 0, 5, 0, 8, 4},
        {"kernel", "the combine kernel", 1, 3, 0, 8, 4},
    };
    for (int i = 0; i < 4; i++) {
        if (runs[i].cluster && cctx->cc < 90)
            continue;   /* (no clusters before sm_90) */
        dcase c = {.batch = runs[i].batch, .hkv = runs[i].hkv, .group = 4, .hd = 128,
                   .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_CAUSAL, .q_len = 2, .seqlen_k = 1000, .paged = 1,
                   .page_size = 16, .use_seqused = 1, .spare = 5, .want_lse = 1,
                   .num_splits = runs[i].splits, .varlen = runs[i].varlen};
        if (c.varlen) {
            for (int b = 0; b < c.batch; b++)
                c.qlens[b] = b == c.batch / 2 ? 300 : 1 + b % 2;
            c.give_total_q = 1;
        }
        dbufs B;
        setup(&B, &c, NULL);
        char buf[1024];
        fajit_ctx *x = runs[i].cluster ? cctx : ctx;
        ck_assert_int_eq(fajit_dispatch_describe(x, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
        printf("combine_paths: %s: %s\n", runs[i].what, buf);
        ck_assert_msg(strstr(buf, runs[i].want), "%s: expected '%s' in: %s", runs[i].what,
                      runs[i].want, buf);
        ck_assert_msg(launch(x, &B, NULL) == FAJIT_OK, "%s: %s", runs[i].what,
                      fajit_errmsg(x));
        fetch(&B);
        verdict v = check_against_reference(&B, runs[i].what);
        printf("combine_paths: %s: ok (err %.3g, LSE err %.3g)\n", runs[i].what, v.err,
               v.lse_err);
        teardown(&B);
    }
    fajit_ctx_destroy(cctx);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 7. merge_partials ------*/

/* The largest difference between two O tensors in ulps of each (row, head)'s largest |O|. */
static double row_ulps(const uint16_t *x, const uint16_t *y, int64_t rows, int hq, int hd, int dt)
{
    double worst = 0;
    for (int64_t r = 0; r < rows * hq; r++) {
        double rmax = 0;
        for (int e = 0; e < hd; e++) {
            const double a = fabs(fj_half_to_f32(x[r * hd + e], dt));
            rmax = a > rmax ? a : rmax;
        }
        const double u = ulp_at(rmax, dt);
        for (int e = 0; e < hd; e++) {
            const double d = fabs(fj_half_to_f32(x[r * hd + e], dt) -
                                  fj_half_to_f32(y[r * hd + e], dt)) / u;
            worst = d > worst ? d : worst;
        }
    }
    return worst;
}

/* fajit_attn_merge: attention over keys [0, 400) and over [400, 1000), merged, equals the
 * attention over all 1000 keys (and the float64 oracle); into a third buffer and in place
 * (o = o_a, lse = lse_a). */
START_TEST(merge_partials)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x3e4ce5ull);
    for (int dt = 0; dt < 2; dt++) {
        dcase c = {.batch = 3, .hkv = 2, .group = 4, .hd = dt ? 128 : 80, .dtype = dt,
                   .mask = FAJIT_MASK_NONE, .q_len = 3, .seqlen_k = 1000, .want_lse = 1,
                   .num_splits = 1};
        dbufs B;
        setup(&B, &c, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "full: %s", fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "all keys");
        uint16_t *want = malloc(2 * B.n_o), *got = malloc(2 * B.n_o);
        float *want_lse = malloc(4 * B.n_lse), *got_lse = malloc(4 * B.n_lse);
        memcpy(want, B.h_o, 2 * B.n_o);
        memcpy(want_lse, B.h_lse, 4 * B.n_lse);
        const CUdeviceptr oa = dalloc(2 * B.n_o), ob = dalloc(2 * B.n_o);
        const CUdeviceptr la = dalloc(4 * B.n_lse), lb = dalloc(4 * B.n_lse);
        fajit_attn_desc A = B.desc, Z = B.desc;
        A.seqlen_k = 400, A.o = (void *)oa, A.lse = (float *)la;
        const size_t skip = (size_t)400 * (size_t)B.desc.k_row_stride * 2;
        Z.k = (const char *)B.desc.k + skip, Z.v = (const char *)B.desc.v + skip;
        Z.seqlen_k = 600, Z.o = (void *)ob, Z.lse = (float *)lb;
        ck_assert_msg(fajit_attn_fwd(ctx, &A, NULL) == FAJIT_OK, "keys 0..400: %s",
                      fajit_errmsg(ctx));
        ck_assert_msg(fajit_attn_fwd(ctx, &Z, NULL) == FAJIT_OK, "keys 400..1000: %s",
                      fajit_errmsg(ctx));
        for (int in_place = 0; in_place < 2; in_place++) {
            CU(cu->cuMemsetD8(B.d_o, 0xff, 2 * B.n_o));   /* NaN: every element must be written */
            CU(cu->cuMemsetD8(B.d_lse, 0xff, 4 * B.n_lse));
            const CUdeviceptr out = in_place ? oa : B.d_o, out_lse = in_place ? la : B.d_lse;
            fajit_merge_desc m;
            fajit_merge_desc_init(&m, (void *)oa, (float *)la, (void *)ob, (float *)lb,
                                  (void *)out, (float *)out_lse, c.batch, c.q_len, B.hq, c.hd,
                                  (fajit_dtype)dt);
            m.a_batch_stride = m.b_batch_stride = m.o_batch_stride = B.desc.o_batch_stride;
            m.a_row_stride = m.b_row_stride = m.o_row_stride = B.desc.o_row_stride;
            m.a_head_stride = m.b_head_stride = m.o_head_stride = B.desc.o_head_stride;
            ck_assert_msg(fajit_attn_merge(ctx, &m, NULL) == FAJIT_OK, "merge: %s",
                          fajit_errmsg(ctx));
            CU(cu->cuCtxSynchronize());
            CU(cu->cuMemcpyDtoH(got, out, 2 * B.n_o));
            CU(cu->cuMemcpyDtoH(got_lse, out_lse, 4 * B.n_lse));
            double lse_err = 0;
            for (size_t i = 0; i < B.n_lse; i++) {
                const double d = fabs(got_lse[i] - want_lse[i]) /
                                 (fabs(want_lse[i]) > 1 ? fabs(want_lse[i]) : 1);
                lse_err = d > lse_err || d != d ? d : lse_err;
            }
            const double u = row_ulps(want, got, B.rows, B.hq, c.hd, dt);
            printf("merge_partials: %s hd %d%s: merged vs all keys: O max %.3g ulp of the row "
                   "max, LSE max rel diff %.3g\n", dt ? "bf16" : "f16", c.hd,
                   in_place ? " (in place)" : "", u, lse_err);
            ck_assert_msg(u <= 2, "merged O differs from the one-call O by %.3g ulp", u);
            ck_assert_msg(lse_err <= 1e-5, "merged LSE differs by %.3g (relative)", lse_err);
            if (!in_place) {
                fetch(&B);
                check_against_reference(&B, "merged");
            }
        }
        free(want), free(got), free(want_lse), free(got_lse);
        CU(cu->cuMemFree(oa));
        CU(cu->cuMemFree(ob));
        CU(cu->cuMemFree(la));
        CU(cu->cuMemFree(lb));
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 8. paged_plans_and_strict ------*/

/* A contiguous prefill (the Hopper or portable family) and the same problem over a paged
 * cache (the decode family) in one context: each gets its own plan (the plan key has a
 * paged bit; without it the paged call ran the contiguous plan). Then a fresh cache warmed
 * from a paged spec serves its decode and chunked-prefill shapes under STRICT with no
 * compile. */
START_TEST(paged_plans_and_strict)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x9a9edull);
    dcase c = {.batch = 2, .hkv = 2, .group = 2, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .q_len = 100, .seqlen_k = 300, .want_lse = 1};
    dbufs C, P;
    setup(&C, &c, NULL);
    dcase pc = c;
    pc.paged = 1, pc.page_size = 16, pc.spare = 3;
    setup(&P, &pc, &C);
    char buf[1024];
    for (int i = 0; i < 2; i++) {
        dbufs *B = i ? &P : &C;
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B->desc, buf, sizeof buf), FAJIT_OK);
        printf("paged_plans_and_strict: %s: %s\n", i ? "paged" : "contiguous", buf);
        ck_assert_msg(launch(ctx, B, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
        fetch(B);
        check_against_reference(B, i ? "paged after contiguous" : "contiguous");
    }
    teardown(&C), teardown(&P);
    fajit_ctx_destroy(ctx);

    char dir[] = "/tmp/fajit-strict-XXXXXX", spec[300];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(spec, sizeof spec, "%s/serve.spec", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model serve]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\npage_size = 16\ndecode = 2k\nshapes = 4:2k, 100:300\nbatch = 2\n", f);
    fclose(f);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_device_info info;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &info), FAJIT_OK);
    int compiled = 0, cached = 0;
    ck_assert_msg(fajit_warm_spec(ctx, spec, info.arch, 0, &compiled, &cached) == FAJIT_OK,
                  "warm: %s", fajit_errmsg(ctx));
    printf("paged_plans_and_strict: warmed %s for %s: %d compiled\n", spec, info.arch, compiled);
    fajit_ctx_destroy(ctx);
    o.policy = FAJIT_POLICY_STRICT;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    static const int shapes[][2] = {{1, 2048}, {4, 2048}, {100, 300}};
    for (int i = 0; i < 3; i++) {
        dcase s = {.batch = 2, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_CAUSAL, .q_len = shapes[i][0], .seqlen_k = shapes[i][1],
                   .paged = 1, .page_size = 16, .use_seqused = 1, .spare = 2, .want_lse = 1};
        dbufs B;
        setup(&B, &s, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "STRICT %dx%d: %s", shapes[i][0],
                      shapes[i][1], fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "STRICT from a warmed paged spec");
        teardown(&B);
    }
    fajit_counters k;
    fajit_counters_get(ctx, &k);
    printf("paged_plans_and_strict: STRICT: %llu calls, %llu disk hits, %llu compiles, %llu "
           "misses\n", (unsigned long long)k.calls, (unsigned long long)k.hits_disk,
           (unsigned long long)k.compiles, (unsigned long long)k.misses);
    ck_assert_uint_eq(k.compiles, 0);
    ck_assert_uint_eq(k.misses, 0);
    fajit_ctx_destroy(ctx);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/*------ 9. loader_page_sizes ------*/

/* One context (TMA where it fits) serving the same problem over page sizes the TMA loader
 * takes (16, 64, 256) and those it does not (1, 12): every call must pick its own plan
 * (a TMA plan reused for page size 1 would wait for boxes it never issued), and all match
 * the float64 oracle, NaN in every slot that is not a key. */
START_TEST(loader_page_sizes)
{
    fajit_ctx *ctx = new_ctx_tma(0);
    static const int pages[] = {16, 1, 64, 12, 256, 16};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        reseed(g_seed ^ 0x70ad5ull ^ i);
        dcase c = {.batch = 3, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1500, .paged = 1,
                   .page_size = pages[i], .use_seqused = 1, .spare = 4, .poison = 1,
                   .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        char buf[1024], text[512];
        case_text(&B, text, sizeof text);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
        const int tma = strstr(buf, " tma") != NULL;
        ck_assert_msg(tma == (ctx->cc >= 90 && pages[i] % 16 == 0), "page size %d: %s",
                      pages[i], buf);
        fajit_status st = launch(ctx, &B, NULL);
        ck_assert_msg(st == FAJIT_OK, "page size %d: %s", pages[i], fajit_errmsg(ctx));
        fetch(&B);
        double *ro = malloc(sizeof(double) * (B.n_o + 1));
        double *rl = malloc(sizeof(double) * (B.n_lse + 1));
        reference(&B, ro, rl);
        verdict v;
        memset(&v, 0, sizeof v);
        compare(&B, ro, rl, &v);
        free(ro), free(rl);
        printf("loader_page_sizes: page size %d (%s): %s (err %.3g)\n", pages[i],
               tma ? "TMA" : "cp.async", v.ok ? "ok" : v.why, v.err);
        ck_assert_msg(v.ok, "page size %d: %s: %s", pages[i], text, v.why);
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 10. plans_per_class ------*/

/* One context, one length bucket, two batches: the decode family's tiles depend on the
 * batch through the split class (the sequences x KV heads fill the SMs or not), so each
 * batch gets a plan of its own holding its own default (plans keyed without the class
 * served the second batch the tiles of the first: on the H200 64x3m1n4 for 1 x 32 KV
 * heads instead of 128x2m1n8). */
START_TEST(plans_per_class)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x5c1a55ull);
    const int batches[2] = {8, 1};   /* 8 x 32 KV heads fill 132 SMs; 1 x 32 do not */
    char names[2][64];
    for (int i = 0; i < 2; i++) {
        dcase c = {.batch = batches[i], .hkv = 32, .group = 1, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1024, .paged = 1,
                   .page_size = 16, .spare = 4, .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "plans_per_class");
        const int cls = fj_dec_split_class(&B.desc, ctx->sm_count);
        const fj_target t = fj_target_of(ctx, NULL);
        fj_kcfg want;
        ck_assert_int_eq(fj_kcfg_default(&B.desc, &t, FAJIT_FAMILY_AUTO, &want), 0);
        fj_kcfg_name(&want, names[i]);
        char got[64] = "";
        int plans = 0;
        for (int b = 0; b < FJ_PLAN_BUCKETS; b++)
            for (fj_plan *p = ctx->plans[b]; p; p = p->next) {
                plans++;
                if (p->key.split_class == cls)
                    fj_kcfg_name(&atomic_load(&p->launch)->cfg, got);
            }
        printf("plans_per_class: batch %d x 32 KV heads, split class %d: plan %s, default %s, "
               "%d plan(s)\n", batches[i], cls, got, names[i], plans);
        ck_assert_int_eq(plans, i + 1);
        ck_assert_str_eq(got, names[i]);
        teardown(&B);
    }
    if (ctx->cc == 90)   /* (the sm_90 defaults differ by class; elsewhere they may not) */
        ck_assert_str_ne(names[0], names[1]);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 11. defaults_per_class ------*/

/* Every default tile of the decode family on this GPU against the oracle: head_dim 32, 48,
 * 64 and 128, a shape in each split class (fj_dec_split_class: the batch fills the SMs; the keys
 * stream from DRAM; latency-bound with many or few (sequence, KV head) pairs), q_len 1, 4
 * and 8 over 4 query heads per KV head (4, 16 and 32 packed rows), and a full batch whose
 * last wave the split rule fills (q_len 1). On an sm_90 GPU that is each class's own tiles
 * (decode_rules.c's default_cfg: at head_dim 64 256-key tiles where the keys stream, 64-key tiles
 * four CTAs per SM where the batch fills the SMs; at head_dim 32 128-key tiles over 8 warps
 * where latency-bound or streaming; at 32 and 48 KV heads packed where the batch fills the
 * SMs or the keys stream), which the random sweep reaches rarely: its long sequences are one
 * in 25 cases. */
START_TEST(defaults_per_class)
{
    fajit_ctx *ctx = new_ctx(0);
    static const struct {
        const char *what;
        int batch, hkv, seqlen_k, q_lens;
    } shapes[] = {
        {"no split", 8, 32, 600, 3},        /* 256 pairs */
        {"stream", 2, 4, 33000, 3},         /* >= 32 MiB of K+V at head_dim 32 */
        {"latency", 4, 8, 1500, 3},         /* 32 pairs */
        {"latency, few", 1, 4, 3000, 3},    /* 4 pairs */
        /* 320 pairs: at head_dim 128 a second wave of 56 CTAs, so 2 splits (fill_splits) */
        {"full batch, last wave filled", 8, 40, 2048, 1},
    };
    static const int hds[] = {32, 48, 64, 128}, q_lens[] = {1, 4, 8};
    int n = 0;
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int q = 0; q < shapes[i].q_lens; q++) {
                reseed(g_seed ^ 0xdefc1a55ull ^ (h << 8 | i << 4 | q));
                dcase c = {.batch = shapes[i].batch, .hkv = shapes[i].hkv, .group = 4,
                           .hd = hds[h], .dtype = (int)(n++ % 2), .q_len = q_lens[q],
                           .mask = q_lens[q] > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                           .seqlen_k = shapes[i].seqlen_k, .paged = 1, .page_size = 16,
                           .use_seqused = 1, .force_full = 1, .spare = 4, .poison = 1,
                           .want_lse = 1};
                dbufs B;
                setup(&B, &c, NULL);
                char buf[1024], what[96];
                ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf),
                                 FAJIT_OK);
                const int cls = fj_dec_split_class(&B.desc, ctx->sm_count);
                snprintf(what, sizeof what, "defaults_per_class: %s, head_dim %d, q_len %d",
                         shapes[i].what, hds[h], q_lens[q]);
                ck_assert_msg(strstr(buf, "(default)"), "%s: %s", what, buf);
                ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "%s: %s", what,
                              fajit_errmsg(ctx));
                fetch(&B);
                const verdict v = check_against_reference(&B, what);
                printf("%s (split class %d): ok (err %.3g): %.*s\n", what, cls, v.err,
                       (int)strcspn(buf, ":"), buf);
                teardown(&B);
            }
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 12. hnd_layout ------*/

/* vLLM's HND cache, pages of [heads_kv][page_size][head_dim] (k_head_stride = page_size *
 * head_dim, k_row_stride = head_dim), holding the keys of an NHD cache: through cp.async and
 * (TMA context, sm_90+, where the page size allows) TMA loads, one split and forced splits,
 * q_len 1 and 4, NaN in every slot that is not a key; each result against the float64
 * oracle. K/V heads are not side by side, so no tile packs heads (its rows would be read
 * at head_dim strides). The ulps from the NHD result are printed (other tiles may serve it:
 * head packing). */
START_TEST(hnd_layout)
{
    static const int pages[] = {16, 64, 5};
    for (int tma_ctx = 0; tma_ctx < 2; tma_ctx++) {
        fajit_ctx *ctx = tma_ctx ? new_ctx_tma(0) : new_ctx(0);
        for (size_t i = 0; i < 2 * sizeof pages / sizeof pages[0]; i++) {
            reseed(g_seed ^ 0x4e4dull ^ (uint64_t)i << 8 ^ (uint64_t)tma_ctx);
            const int q_len = i % 2 ? 4 : 1;
            dcase c = {.batch = 3, .hkv = 4, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                       .mask = q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                       .q_len = q_len, .seqlen_k = 1500, .paged = 1,
                       .page_size = pages[i / 2], .use_seqused = 1, .spare = 4, .poison = 1,
                       .want_lse = 1};
            dbufs N, H;
            setup(&N, &c, NULL);
            dcase hc = c;
            hc.hnd = 1;
            setup(&H, &hc, &N);   /* the same Q and keys, heads apart in each page */
            ck_assert(H.desc.k_head_stride == (int64_t)c.page_size * c.hd &&
                      H.desc.k_row_stride == c.hd &&
                      H.desc.k_page_stride == (int64_t)c.hkv * c.page_size * c.hd);
            char buf[1024];
            ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &H.desc, buf, sizeof buf),
                             FAJIT_OK);
            ck_assert_msg(!strstr(buf, " h2 ") && !strstr(buf, " h4 "), "HND packed: %s", buf);
            static const int splits[] = {0, 3};
            for (int s = 0; s < 2; s++) {
                N.desc.num_splits = N.c.num_splits = splits[s];
                H.desc.num_splits = H.c.num_splits = splits[s];
                ck_assert_msg(launch(ctx, &N, NULL) == FAJIT_OK, "NHD: %s", fajit_errmsg(ctx));
                fetch(&N);
                check_against_reference(&N, "NHD");
                ck_assert_msg(launch(ctx, &H, NULL) == FAJIT_OK, "HND: %s", fajit_errmsg(ctx));
                fetch(&H);
                check_against_reference(&H, "HND");
                int worst = 0;
                for (size_t e = 0; e < H.n_o; e++) {
                    const int u = ulp_dist(N.h_o[e], H.h_o[e]);
                    worst = u > worst ? u : worst;
                }
                printf("hnd_layout: page size %d, q_len %d, splits %d, %s: ok (max %d ulp from "
                       "NHD)\n", c.page_size, q_len, splits[s],
                       strstr(buf, " tma") ? "TMA" : "cp.async", worst);
            }
            teardown(&N), teardown(&H);
        }
        fajit_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    char why[256];
    cu = fj_cuda_get(why, sizeof why);
    if (!cu) {
        printf("gpu-decode suite skipped: %s\n", why);
        return 77;
    }
    /* the primary context current for the raw allocations of the tests */
    CUdevice dev;
    CUcontext pctx;
    if (cu->cuDeviceGet(&dev, 0) || cu->cuDevicePrimaryCtxRetain(&pctx, dev) ||
        cu->cuCtxSetCurrent(pctx)) {
        printf("gpu-decode suite skipped: no usable device 0\n");
        return 77;
    }
    g_seed = (unsigned)env_int("FAJIT_TEST_SEED", (int)time(NULL));
    g_rowrel = env_int("FAJIT_TEST_DECODE_ROWREL", 1);
    const char *dir = getenv("FAJIT_TEST_CACHE_DIR");
    if (dir) {
        snprintf(g_cache_dir, sizeof g_cache_dir, "%s", dir);
    } else {
        snprintf(g_cache_dir, sizeof g_cache_dir, "/tmp/fajit-gpu-decode-XXXXXX");
        if (!mkdtemp(g_cache_dir))
            return 1;
    }
    printf("gpu-decode suite: seed %u (FAJIT_TEST_SEED), cache %s, %d sweep cases\n", g_seed,
           g_cache_dir, env_int("FAJIT_TEST_DECODE_CASES", 200));
    Suite *s = suite_create("gpu-decode");
    const struct { const char *name; const TTest *test; int timeout; } cases[] = {
        {"paged_sweep", paged_sweep, 3600},
        {"prefill_sweep", prefill_sweep, 1800},
        {"contiguous_matches_paged", contiguous_matches_paged, 600},
        {"checked_mode", checked_mode, 600},
        {"graph_replay", graph_replay, 600},
        {"mixed_graph_replay", mixed_graph_replay, 600},
        {"pdl_rewrite", pdl_rewrite, 600},
        {"lse_merge_consistency", lse_merge_consistency, 600},
        {"combine_paths", combine_paths, 600},
        {"merge_partials", merge_partials, 600},
        {"paged_plans_and_strict", paged_plans_and_strict, 600},
        {"loader_page_sizes", loader_page_sizes, 600},
        {"plans_per_class", plans_per_class, 600},
        {"defaults_per_class", defaults_per_class, 900},
        {"hnd_layout", hnd_layout, 600},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {   /* CK_RUN_CASE=<name> */
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, cases[i].timeout);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);   /* one CUDA context for the whole run */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (!dir) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_cache_dir);
        if (system(cmd) != 0)
            failed++;
    }
    return failed ? 1 : 0;
}
