/* merge.c - fajit_attn_merge: two partial attention results merged by their LSE
 * (src/kernels_src/attn_merge.cu; cascade / shared-prefix attention). Not a family: one
 * kernel per dtype, no tuning, no plan; the kernel store (kernel.c) and the policy as every
 * other call. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MERGE_WARPS 4   /* FJ_MERGE_WARPS in attn_merge.cu */
enum { MERGE_DESC_SIZE_V1 = 176 };   /* fajit_merge_desc as first published */
_Static_assert(sizeof(fajit_merge_desc) == MERGE_DESC_SIZE_V1,
               "fajit_merge_desc grows only by appending (bump the import's size_v1 rule)");

void fajit_merge_desc_init_sized(fajit_merge_desc *user, size_t struct_size, const void *o_a,
                                 const float *lse_a, const void *o_b, const float *lse_b,
                                 void *o, float *lse, int batch, int seqlen, int heads,
                                 int head_dim, fajit_dtype dtype)
{
    fajit_merge_desc m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.o_a = o_a, m.lse_a = lse_a, m.o_b = o_b, m.lse_b = lse_b, m.o = o, m.lse = lse;
    m.batch = batch, m.seqlen = seqlen, m.heads = heads, m.head_dim = head_dim;
    m.dtype = dtype;
    const int64_t hd = head_dim, row = hd * heads, seq = row * seqlen;
    m.a_head_stride = m.b_head_stride = m.o_head_stride = hd;
    m.a_row_stride = m.b_row_stride = m.o_row_stride = row;
    m.a_batch_stride = m.b_batch_stride = m.o_batch_stride = seq;
    m.lse_row_stride = 1, m.lse_head_stride = seqlen;
    m.lse_batch_stride = (int64_t)heads * seqlen;
    fj_struct_export(user, struct_size, &m, sizeof m);
}

/* The kernel of a dtype (fajit_warm compiles both). */
void fj_merge_variant(int dtype, fj_variant *v)
{
    memset(v, 0, sizeof *v);
    v->op = FAJIT_OP_FWD;
    v->source = "attn_merge.cu";
    v->function = "fj_attn_merge";
    snprintf(v->preamble, sizeof v->preamble, "#define FJ_DTYPE %d\n", dtype);
    snprintf(v->name, sizeof v->name, "merge %s", fj_dtype_name(dtype));
}

static fajit_status check_o(fajit_ctx *ctx, const fajit_merge_desc *m, const char *name,
                            const void *p, int64_t bs, int64_t rs, int64_t hs)
{
    FJ_RETURN_IF(!p, ctx, FAJIT_INVALID_ARGUMENT, "%s must not be NULL", name);
    FJ_RETURN_IF((uintptr_t)p % 8, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s must be 8-byte aligned, got %p", name, p);
    FJ_RETURN_IF(bs < 0 || rs < 0 || hs < 0 || bs % 4 || rs % 4 || hs % 4, ctx,
                 FAJIT_INVALID_ARGUMENT, "the strides of %s must be >= 0 and multiples of 4 "
                 "elements, got batch %lld, row %lld, head %lld", name, (long long)bs,
                 (long long)rs, (long long)hs);
    const int64_t last = fj_tensor_last(m->batch, bs, m->seqlen, rs, m->heads, hs, m->head_dim);
    FJ_RETURN_IF(last > FJ_MAX_TENSOR_ELEMS, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s spans %lld elements (batch, seqlen, heads and their strides), more than the "
                 "2^47 two-byte elements a GPU can address", name, (long long)last);
    return FAJIT_OK;
}

static fajit_status check_lse(fajit_ctx *ctx, const char *name, const float *p, int required)
{
    FJ_RETURN_IF(required && !p, ctx, FAJIT_INVALID_ARGUMENT, "%s must not be NULL", name);
    FJ_RETURN_IF((uintptr_t)p % 4, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s must be 4-byte aligned, got %p", name, (const void *)p);
    return FAJIT_OK;
}

static fajit_status merge_check(fajit_ctx *ctx, const fajit_merge_desc *m)
{
    FJ_RETURN_IF(m->dtype != FAJIT_F16 && m->dtype != FAJIT_BF16, ctx, FAJIT_INVALID_ARGUMENT,
                 "dtype must be FAJIT_F16 or FAJIT_BF16, got %d", (int)m->dtype);
    FJ_RETURN_IF(m->batch < 0 || m->seqlen < 0 || m->heads < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "batch, seqlen and heads must be >= 0, got %d, %d, %d", m->batch, m->seqlen,
                 m->heads);
    FJ_RETURN_IF(m->head_dim <= 0 || m->head_dim % 4 || m->head_dim > 4096, ctx,
                 FAJIT_INVALID_ARGUMENT, "head_dim must be a multiple of 4 in 4..4096, got %d",
                 m->head_dim);
    /* batch * seqlen < 2^62; the product with heads only once it cannot overflow */
    const long long limit = 0x7fffffffLL * MERGE_WARPS - 1, bs = (long long)m->batch * m->seqlen;
    FJ_RETURN_IF(m->heads && bs > limit / m->heads, ctx, FAJIT_INVALID_ARGUMENT,
                 "batch * seqlen * heads (%d * %d * %d) exceeds the merge's grid (%lld)",
                 m->batch, m->seqlen, m->heads, limit);
    FJ_CHECK(check_o(ctx, m, "o_a", m->o_a, m->a_batch_stride, m->a_row_stride,
                     m->a_head_stride));
    FJ_CHECK(check_o(ctx, m, "o_b", m->o_b, m->b_batch_stride, m->b_row_stride,
                     m->b_head_stride));
    FJ_CHECK(check_o(ctx, m, "o", m->o, m->o_batch_stride, m->o_row_stride, m->o_head_stride));
    FJ_CHECK(check_lse(ctx, "lse_a", m->lse_a, 1));
    FJ_CHECK(check_lse(ctx, "lse_b", m->lse_b, 1));
    FJ_CHECK(check_lse(ctx, "lse", m->lse, 0));
    FJ_RETURN_IF(m->lse_batch_stride < 0 || m->lse_row_stride < 0 || m->lse_head_stride < 0,
                 ctx, FAJIT_INVALID_ARGUMENT, "the LSE strides must be >= 0, got batch %lld, "
                 "row %lld, head %lld", (long long)m->lse_batch_stride,
                 (long long)m->lse_row_stride, (long long)m->lse_head_stride);
    return FAJIT_OK;
}

static void merge_params(const fajit_merge_desc *m, fj_merge_params *p)
{
    memset(p, 0, sizeof *p);
    p->o_a = (uintptr_t)m->o_a, p->o_b = (uintptr_t)m->o_b, p->o = (uintptr_t)m->o;
    p->lse_a = (uintptr_t)m->lse_a, p->lse_b = (uintptr_t)m->lse_b, p->lse = (uintptr_t)m->lse;
    p->a_batch_stride = m->a_batch_stride, p->a_row_stride = m->a_row_stride;
    p->a_head_stride = m->a_head_stride;
    p->b_batch_stride = m->b_batch_stride, p->b_row_stride = m->b_row_stride;
    p->b_head_stride = m->b_head_stride;
    p->o_batch_stride = m->o_batch_stride, p->o_row_stride = m->o_row_stride;
    p->o_head_stride = m->o_head_stride;
    p->lse_batch_stride = m->lse_batch_stride, p->lse_row_stride = m->lse_row_stride;
    p->lse_head_stride = m->lse_head_stride;
    p->batch = m->batch, p->seqlen = m->seqlen, p->heads = m->heads;
    p->head_dim = m->head_dim;
}

fajit_status fajit_attn_merge(fajit_ctx *ctx, const fajit_merge_desc *user, void *stream)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!user, ctx, FAJIT_INVALID_ARGUMENT, "desc must not be NULL");
    static const fajit_merge_desc defaults = {0};
    fajit_merge_desc m;
    FJ_CHECK(fj_struct_import(ctx, "fajit_merge_desc", user, MERGE_DESC_SIZE_V1, sizeof m,
                              &defaults, &m));
    FJ_CHECK(merge_check(ctx, &m));
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "the context has no device "
                 "(created with FAJIT_DEVICE_NONE or without a driver)");
    const long long pairs = (long long)m.batch * m.seqlen * m.heads;
    if (pairs == 0)
        return FAJIT_OK;

    fj_variant v;
    fj_merge_variant((int)m.dtype, &v);
    const unsigned flags = ctx->opts.policy == FAJIT_POLICY_BLOCKING ? FJ_KF_SERVING
                                                                     : FJ_KF_NO_COMPILE;
    /* (a first use inside an application's stream capture: loads in relaxed mode, as
     * fj_kplan_load does) */
    const fj_cuda *cu = ctx->cu;
    int mode = FJ_CU_CAPTURE_MODE_RELAXED;
    int swapped = cu->cuThreadExchangeStreamCaptureMode &&
                  cu->cuThreadExchangeStreamCaptureMode(&mode) == 0;
    fj_kernel *k = NULL;
    fajit_status st = fj_kernel_get(ctx, &v, flags, &k);
    if (swapped)
        cu->cuThreadExchangeStreamCaptureMode(&mode);
    if (st == FAJIT_CACHE_MISS)
        return fj_fail(ctx, st, "%s is not in the cache and the %s policy does not compile "
                       "(fajit-tune warm compiles it)", v.name,
                       ctx->opts.policy == FAJIT_POLICY_STRICT ? "STRICT" : "FALLBACK");
    FJ_CHECK(st);

    fj_merge_params p;
    merge_params(&m, &p);
    void *args[] = {&p};
    const unsigned grid[3] = {(unsigned)((pairs + MERGE_WARPS - 1) / MERGE_WARPS), 1, 1};
    char err[64];
    CUresult r = fj_launch(cu, k->fn, grid, 32 * MERGE_WARPS, 0, (CUstream)stream, args,
                           fj_target_of(ctx, NULL).sm >= 90, 0);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel(%s): %s", v.name,
                 fj_cuda_errname(cu, r, err, sizeof err));
    ctx->calls++;
    return FAJIT_OK;
}
