/* feat_check.c - dev tool: the Hopper kernel's model features (softcap, sinks, ALiBi) on a GPU
 * against a float64 reference on the host, through the public API with the family forced to
 * fa3: contiguous, varlen and paged K/V, head_dim 64/128/256, f16/bf16, causal/none, rows that
 * see no key (seqlen_q > seqlen_k, causal). Prints one line per case and the worst errors.
 * Tolerances: O 2e-2 (bf16) / 4e-3 (f16) absolute, LSE 2e-3 (6e-3 with the softcap: tanh.approx
 * has about 2^-11 relative error). The GPU suite's tests/test_gpu_features.c is the real check;
 * this is a quick look at one family. Written without a GPU at hand: not run yet.
 * Build: cc -O2 -o carry/feat_check dev/fa3/feat_check.c -Iinclude -LBUILD -lfajit -ldl -lm
 *        (and libfajit.so.0 of BUILD beside it in carry/)
 * Run:   FAJIT_VALIDATE=off LD_LIBRARY_PATH=carry carry/feat_check   (exit 1 when a case fails)
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fajit.h"

typedef unsigned long long dptr;
static int (*cuInit_)(unsigned);
static int (*cuDeviceGet_)(int *, int);
static int (*cuDevicePrimaryCtxRetain_)(void **, int);
static int (*cuCtxSetCurrent_)(void *);
static int (*cuMemAlloc_)(dptr *, size_t);
static int (*cuMemFree_)(dptr);
static int (*cuMemcpyHtoD_)(dptr, const void *, size_t);
static int (*cuMemcpyDtoH_)(void *, dptr, size_t);
static int (*cuMemsetD8_)(dptr, unsigned char, size_t);
static int (*cuCtxSynchronize_)(void);

#define CK(x)                                                              \
    do {                                                                   \
        int r_ = (x);                                                      \
        if (r_) {                                                          \
            fprintf(stderr, "%s: %d (line %d)\n", #x, r_, __LINE__);       \
            exit(2);                                                       \
        }                                                                  \
    } while (0)

static void load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "no libcuda\n");
        exit(77);
    }
#define SYM(v, n) *(void **)&v = dlsym(h, n)
    SYM(cuInit_, "cuInit");
    SYM(cuDeviceGet_, "cuDeviceGet");
    SYM(cuDevicePrimaryCtxRetain_, "cuDevicePrimaryCtxRetain");
    SYM(cuCtxSetCurrent_, "cuCtxSetCurrent");
    SYM(cuMemAlloc_, "cuMemAlloc_v2");
    SYM(cuMemFree_, "cuMemFree_v2");
    SYM(cuMemcpyHtoD_, "cuMemcpyHtoD_v2");
    SYM(cuMemcpyDtoH_, "cuMemcpyDtoH_v2");
    SYM(cuMemsetD8_, "cuMemsetD8_v2");
    SYM(cuCtxSynchronize_, "cuCtxSynchronize");
    int dev;
    void *ctx;
    CK(cuInit_(0));
    CK(cuDeviceGet_(&dev, 0));
    CK(cuDevicePrimaryCtxRetain_(&ctx, dev));
    CK(cuCtxSetCurrent_(ctx));
}

static uint64_t g_rng = 12345;
static double frand(void)   /* [-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static uint16_t to_half(float f, int bf)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (bf)
        return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    /* f16: round to nearest even, normal range only (inputs are small) */
    const uint32_t s = (u >> 16) & 0x8000;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t m = u & 0x7fffff;
    if (e <= 0)
        return (uint16_t)s;
    uint32_t r = ((uint32_t)e << 10) | (m >> 13);
    const uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(s | r);
}
static double from_half(uint16_t h, int bf)
{
    if (bf) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

typedef struct cs {
    int batch, hq, hkv, d, bf, causal, varlen, paged, page, softcap, sinks, alibi;
    int lq[4], lk[4];   /* per sequence (fixed length: all equal) */
} cs;

/* One case: returns 1 when it passes. */
static int run_case(fajit_ctx *ctx, const cs *c)
{
    int cq[5] = {0}, ck[5] = {0};
    for (int b = 0; b < c->batch; b++)
        cq[b + 1] = cq[b] + c->lq[b], ck[b + 1] = ck[b] + c->lk[b];
    const int tq = cq[c->batch], tk = ck[c->batch], hd = c->d, bf = c->bf;
    int maxq = 0, maxk = 0;
    for (int b = 0; b < c->batch; b++)
        maxq = c->lq[b] > maxq ? c->lq[b] : maxq, maxk = c->lk[b] > maxk ? c->lk[b] : maxk;
    /* host tensors, packed rows [rows][heads][hd] */
    const size_t nq = (size_t)tq * c->hq * hd, nk = (size_t)tk * c->hkv * hd;
    uint16_t *q = malloc(nq * 2), *k = malloc(nk * 2), *v = malloc(nk * 2), *o = malloc(nq * 2);
    float *lse = malloc((size_t)tq * c->hq * 4);
    for (size_t i = 0; i < nq; i++)
        q[i] = to_half((float)(frand() * 1.5), bf);
    for (size_t i = 0; i < nk; i++)
        k[i] = to_half((float)(frand() * 1.5), bf), v[i] = to_half((float)frand(), bf);
    float sinks[64], slopes[4 * 64];
    for (int h = 0; h < c->hq; h++)
        sinks[h] = (float)(frand() * 3.0);
    for (int i = 0; i < c->batch * c->hq; i++)
        slopes[i] = (float)(0.05 + 0.2 * fabs(frand()));

    dptr dq, dk, dv, dout, dl, dsink, dslope, dcq = 0, dck = 0, dbt = 0, dsu = 0;
    CK(cuMemAlloc_(&dq, nq * 2));
    CK(cuMemAlloc_(&dout, nq * 2));
    CK(cuMemAlloc_(&dl, (size_t)tq * c->hq * 4));
    CK(cuMemAlloc_(&dsink, sizeof sinks));
    CK(cuMemAlloc_(&dslope, sizeof slopes));
    CK(cuMemcpyHtoD_(dq, q, nq * 2));
    CK(cuMemcpyHtoD_(dsink, sinks, sizeof sinks));
    CK(cuMemcpyHtoD_(dslope, slopes, sizeof slopes));
    fajit_attn_desc d;
    int *bt = NULL;
    int npages = 0, bt_stride = 0;
    if (c->paged) {
        /* pages of c->page rows [page][row][hkv][hd], in a shuffled order, garbage (NaN) in
         * unused slots */
        bt_stride = (maxk + c->page - 1) / c->page + 1;
        npages = c->batch * bt_stride + 3;
        const size_t pe = (size_t)c->page * c->hkv * hd;
        uint16_t *pk = malloc(npages * pe * 2), *pv = malloc(npages * pe * 2);
        for (size_t i = 0; i < npages * pe; i++)
            pk[i] = pv[i] = bf ? 0x7fc0 : 0x7e00;
        bt = malloc(sizeof(int) * c->batch * bt_stride);
        int next = npages - 1;
        for (int b = 0; b < c->batch; b++)
            for (int p = 0; p < bt_stride; p++) {
                bt[b * bt_stride + p] = next;
                next = (next + npages - 2) % npages;
                for (int r = 0; r < c->page; r++) {
                    const int j = p * c->page + r;
                    if (j >= c->lk[b])
                        continue;
                    memcpy(pk + (size_t)bt[b * bt_stride + p] * pe + (size_t)r * c->hkv * hd,
                           k + ((size_t)ck[b] + j) * c->hkv * hd, (size_t)c->hkv * hd * 2);
                    memcpy(pv + (size_t)bt[b * bt_stride + p] * pe + (size_t)r * c->hkv * hd,
                           v + ((size_t)ck[b] + j) * c->hkv * hd, (size_t)c->hkv * hd * 2);
                }
            }
        CK(cuMemAlloc_(&dk, npages * pe * 2));
        CK(cuMemAlloc_(&dv, npages * pe * 2));
        CK(cuMemcpyHtoD_(dk, pk, npages * pe * 2));
        CK(cuMemcpyHtoD_(dv, pv, npages * pe * 2));
        CK(cuMemAlloc_(&dbt, sizeof(int) * c->batch * bt_stride));
        CK(cuMemcpyHtoD_(dbt, bt, sizeof(int) * c->batch * bt_stride));
        CK(cuMemAlloc_(&dsu, sizeof ck));
        int su[4];
        for (int b = 0; b < c->batch; b++)
            su[b] = c->lk[b];
        CK(cuMemcpyHtoD_(dsu, su, sizeof su));
        free(pk), free(pv);
    } else {
        CK(cuMemAlloc_(&dk, nk * 2));
        CK(cuMemAlloc_(&dv, nk * 2));
        CK(cuMemcpyHtoD_(dk, k, nk * 2));
        CK(cuMemcpyHtoD_(dv, v, nk * 2));
    }
    fajit_attn_desc_init(&d, (void *)dq, (void *)dk, (void *)dv, (void *)dout, c->batch, c->hq,
                         c->hkv, maxq, maxk, hd, bf ? FAJIT_BF16 : FAJIT_F16);
    d.q_head_stride = d.o_head_stride = d.k_head_stride = d.v_head_stride = hd;
    d.q_row_stride = d.o_row_stride = (int64_t)c->hq * hd;
    d.k_row_stride = d.v_row_stride = (int64_t)c->hkv * hd;
    d.q_batch_stride = d.o_batch_stride = (int64_t)c->hq * hd * maxq;
    d.k_batch_stride = d.v_batch_stride = (int64_t)c->hkv * hd * maxk;
    d.mask = c->causal ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
    d.lse = (float *)dl;
    d.softmax_scale = 1.f / sqrtf((float)hd);
    if (c->varlen) {
        CK(cuMemAlloc_(&dcq, sizeof cq));
        CK(cuMemcpyHtoD_(dcq, cq, sizeof cq));
        d.cu_seqlens_q = (const int32_t *)dcq;
        d.total_q = tq;
        d.q_batch_stride = d.o_batch_stride = 0;
        if (!c->paged) {
            CK(cuMemAlloc_(&dck, sizeof ck));
            CK(cuMemcpyHtoD_(dck, ck, sizeof ck));
            d.cu_seqlens_k = (const int32_t *)dck;
            d.total_k = tk;
            d.k_batch_stride = d.v_batch_stride = 0;
        }
    }
    if (c->paged) {
        d.block_table = (const int32_t *)dbt;
        d.block_table_stride = bt_stride;
        d.page_size = c->page;
        d.num_pages = npages;
        d.seqused_k = (const int32_t *)dsu;
        d.k_batch_stride = d.v_batch_stride = 0;
    }
    if (c->softcap)
        d.softcap = 2.0f;   /* small: most scores are capped */
    if (c->sinks)
        d.sinks = (const float *)dsink;
    if (c->alibi) {
        d.alibi_slopes = (const float *)dslope;
        d.alibi_batch_stride = c->hq;
    }
    char line[512] = "";
    fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line);
    CK(cuMemsetD8_(dout, 0xff, nq * 2));
    CK(cuMemsetD8_(dl, 0xff, (size_t)tq * c->hq * 4));
    fajit_status st = fajit_attn_fwd(ctx, &d, NULL);
    if (st != FAJIT_OK) {
        printf("FAIL status %d: %s\n", (int)st, fajit_errmsg(ctx));
        return 0;
    }
    CK(cuCtxSynchronize_());
    CK(cuMemcpyDtoH_(o, dout, nq * 2));
    CK(cuMemcpyDtoH_(lse, dl, (size_t)tq * c->hq * 4));

    /* reference */
    double eo = 0, el = 0, omax = 0;
    int empty = 0;
    double *s = malloc(sizeof(double) * maxk);
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->hq; h++) {
            const int hk = h / (c->hq / c->hkv);
            for (int i = 0; i < c->lq[b]; i++) {
                const int sq = c->lq[b], sk = c->lk[b];
                double m = -INFINITY;
                int vis = 0;
                for (int j = 0; j < sk; j++) {
                    s[j] = -INFINITY;
                    if (c->causal && j > i + sk - sq)
                        continue;
                    double x = 0;
                    for (int t = 0; t < hd; t++)
                        x += from_half(q[((size_t)cq[b] + i) * c->hq * hd + h * hd + t], bf) *
                             from_half(k[((size_t)ck[b] + j) * c->hkv * hd + hk * hd + t], bf);
                    x *= d.softmax_scale;
                    if (c->softcap)
                        x = d.softcap * tanh(x / d.softcap);
                    if (c->alibi)
                        x -= slopes[b * c->hq + h] * fabs((double)(i + sk - sq - j));
                    s[j] = x;
                    m = fmax(m, x);
                    vis++;
                }
                double sink = c->sinks ? sinks[h] : -INFINITY;
                double top = fmax(m, sink), den = 0;
                if (top == -INFINITY)
                    top = 0;
                for (int j = 0; j < sk; j++)
                    den += exp(s[j] - top);
                den += exp(sink - top);
                const double rl = den > 0 ? top + log(den) : -INFINITY;
                empty += vis == 0;
                const size_t row = ((size_t)cq[b] + i) * c->hq * hd + h * hd;
                for (int t = 0; t < hd; t++) {
                    double acc = 0;
                    for (int j = 0; j < sk; j++)
                        if (s[j] > -INFINITY)
                            acc += exp(s[j] - top) *
                                   from_half(v[((size_t)ck[b] + j) * c->hkv * hd + hk * hd + t], bf);
                    const double ref = den > 0 ? acc / den : 0;
                    const double got = from_half(o[row + t], bf);
                    const double e = isnan(got) ? INFINITY : fabs(got - ref);
                    eo = fmax(eo, e);
                    omax = fmax(omax, fabs(ref));
                }
                /* LSE: [heads][total_q] varlen, else [batch][heads][seqlen_q] */
                const size_t li = c->varlen ? (size_t)h * tq + cq[b] + i
                                            : ((size_t)b * c->hq + h) * maxq + i;
                const double gl = lse[li];
                const double e = rl == -INFINITY ? (gl == -INFINITY ? 0 : INFINITY)
                                 : isnan(gl)     ? INFINITY
                                                 : fabs(gl - rl);
                el = fmax(el, e);
            }
        }
    const double tol_o = bf ? 2e-2 : 4e-3, tol_l = c->softcap ? 6e-3 : 2e-3;   /* tanh.approx */
    const int ok = eo <= tol_o && el <= tol_l;
    printf("%s d%d %s %s%s%s%s%s%s b%d hq%d hkv%d lq%d.. lk%d.. empty rows %d: O err %.2e (|O| %.2f) "
           "LSE err %.2e | %.*s\n",
           ok ? "ok  " : "FAIL", hd, bf ? "bf16" : "f16", c->causal ? "causal" : "none",
           c->varlen ? " varlen" : "", c->paged ? " paged" : "", c->softcap ? " softcap" : "",
           c->sinks ? " sinks" : "", c->alibi ? " alibi" : "", c->batch, c->hq, c->hkv, c->lq[0],
           c->lk[0], empty, eo, omax, el, 60, line);
    free(s), free(q), free(k), free(v), free(o), free(lse), free(bt);
    cuMemFree_(dq), cuMemFree_(dk), cuMemFree_(dv), cuMemFree_(dout), cuMemFree_(dl);
    cuMemFree_(dsink), cuMemFree_(dslope);
    if (dcq) cuMemFree_(dcq);
    if (dck) cuMemFree_(dck);
    if (dbt) cuMemFree_(dbt);
    if (dsu) cuMemFree_(dsu);
    return ok;
}

int main(void)
{
    load_driver();
    fajit_ctx_opts op;
    fajit_ctx_opts_init(&op);
    op.family = FAJIT_FAMILY_FA3;
    fajit_ctx *ctx;
    if (fajit_ctx_create(&ctx, &op) != FAJIT_OK) {
        fprintf(stderr, "ctx: %s\n", fajit_errmsg(ctx));
        return 2;
    }
    int fails = 0, n = 0;
    const int feats[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
    const int dims[] = {64, 128, 256};
    for (int f = 0; f < 4; f++)
        for (int di = 0; di < 3; di++)
            for (int layout = 0; layout < 3; layout++)   /* contiguous, varlen, paged */
                for (int causal = 0; causal < 2; causal++) {
                    cs c;
                    memset(&c, 0, sizeof c);
                    c.d = dims[di];
                    c.bf = (f + di + causal) & 1;
                    c.causal = causal;
                    c.softcap = feats[f][0], c.sinks = feats[f][1], c.alibi = feats[f][2];
                    c.hq = 4, c.hkv = 2;
                    c.batch = 2;
                    /* seqlen_q > seqlen_k in some: causal rows that see no key */
                    const int lq = layout == 2 ? 300 : 333, lk = causal && f != 1 ? 517 : 250;
                    for (int b = 0; b < c.batch; b++)
                        c.lq[b] = lq, c.lk[b] = lk;
                    if (layout == 1) {
                        c.varlen = 1;
                        c.lq[1] = 190, c.lk[1] = causal ? 150 : 401;   /* shorter than lq */
                    }
                    if (layout == 2) {
                        c.paged = 1;
                        c.page = di == 0 ? 16 : 128;
                        if (causal)   /* a varlen paged batch too */
                            c.varlen = 1, c.lq[1] = 200, c.lk[1] = 399;
                    }
                    fails += !run_case(ctx, &c);
                    n++;
                }
    printf("%d cases, %d failed\n", n, fails);
    fajit_ctx_destroy(ctx);
    return fails ? 1 : 0;
}
