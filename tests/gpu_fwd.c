/* gpu_fwd.c - the harness of the `gpu` suite's forward tests (gpu_fwd.h): random inputs,
 * one problem's buffers and descriptor, a launch on poisoned outputs, comparing results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_ref.h"
#include "gpu_fwd.h"

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

uint64_t g_rng;
uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
int pick(const int *v, int n) { return v[rnd() % (unsigned)n]; }
float frand(void) { return (float)(rnd() % 2000001) / 1000000.f - 1.f; }

fajit_ctx *new_ctx(const char *dir)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    fajit_ctx *ctx = NULL;
    fajit_status st = fajit_ctx_create(&ctx, &o);
    ck_assert_msg(st == FAJIT_OK, "ctx: %s", fajit_errmsg(ctx));
    return ctx;
}

/*------ one problem ------*/

void setup(const tc *c, bufs *B)
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

void teardown(bufs *B)
{
    CUdeviceptr ps[] = {B->q, B->k, B->v, B->o, B->lse, B->cuq, B->cuk};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i])
            cu->cuMemFree(ps[i]);
    free(B->hq), free(B->hk), free(B->hv), free(B->ho), free(B->hlse);
}

void run_kernel(fajit_ctx *ctx, fwd_fn fwd, bufs *B, const tc *c, float *o, float *lse)
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

errs compare(const tc *c, const bufs *B, const float *o, const float *lse, const double *ref,
             const double *ref_lse)
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


errs compare_kernels(const tc *c, const bufs *B, const float *o, const float *lse,
                     const float *ref, const float *ref_lse)
{
    size_t nq = (size_t)(B->rows_q * B->row_q) + 8;
    size_t nl = (size_t)c->hq * (size_t)(c->varlen ? B->rows_q : c->batch * c->sq) + 1;
    double *r = malloc(nq * sizeof(double)), *rl = malloc(nl * sizeof(double));
    for (size_t i = 0; i < nq; i++)
        r[i] = ref[i];
    for (size_t i = 0; i < nl; i++)
        rl[i] = ref_lse[i];
    errs e = compare(c, B, o, lse, r, rl);
    free(r), free(rl);
    return e;
}

/*------ for the tuning, policy and gate tests ------*/

void tmp_dir(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/fajit-gpu-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

void rm_dir(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

void tune_case(tc *c)
{
    memset(c, 0, sizeof *c);
    c->batch = 2, c->hq = 8, c->hkv = 2, c->sq = c->sk = 1024, c->d = 128;
    c->dtype = FJ_DT_BF16, c->mask = FJ_MASK_CAUSAL;
    snprintf(c->text, sizeof c->text, "tune case b2 h8/2 s1024 d128 bf16 causal");
}

void check_against_reference(fajit_ctx *ctx, const tc *c)
{
    bufs B;
    setup(c, &B);
    size_t nq = (size_t)(B.rows_q * B.row_q) + 8;
    size_t nl = (size_t)c->hq * (size_t)(c->batch * c->sq) + 1;
    float *o = malloc(nq * 4), *l = malloc(nl * 4), *ro = malloc(nq * 4), *rl = malloc(nl * 4);
    run_kernel(ctx, fajit_attn_fwd, &B, c, o, l);
    run_kernel(ctx, fajit_attn_fwd_reference, &B, c, ro, rl);
    errs e = compare_kernels(c, &B, o, l, ro, rl);
    ck_assert_msg(e.max_abs <= 2.0 / 256 * fmax(e.max_ref, 1e-3) + 1e-6,
                  "%s: max error %g against the reference kernel", c->text, e.max_abs);
    free(o), free(l), free(ro), free(rl);
    teardown(&B);
}
