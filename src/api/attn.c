/* attn.c - the attention descriptor: its defaults and its validation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void fajit_attn_desc_init_sized(fajit_attn_desc *user, size_t struct_size, const void *q,
                                const void *k, const void *v, void *o, int batch, int heads_q,
                                int heads_kv, int seqlen_q, int seqlen_k, int head_dim,
                                fajit_dtype dtype)
{
    fajit_attn_desc full, *d = &full;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->q = q, d->k = k, d->v = v, d->o = o;
    d->batch = batch, d->heads_q = heads_q, d->heads_kv = heads_kv;
    d->seqlen_q = seqlen_q, d->seqlen_k = seqlen_k, d->head_dim = head_dim;
    d->dtype = dtype;
    d->mask = FAJIT_MASK_NONE;
    d->window_left = d->window_right = -1;
    d->softmax_scale = head_dim > 0 ? 1.0f / sqrtf((float)head_dim) : 1.0f;
    int64_t hd = head_dim;
    d->q_head_stride = d->o_head_stride = hd;
    d->q_row_stride = d->o_row_stride = hd * heads_q;
    d->q_batch_stride = d->o_batch_stride = hd * heads_q * seqlen_q;
    d->k_head_stride = d->v_head_stride = hd;
    d->k_row_stride = d->v_row_stride = hd * heads_kv;
    d->k_batch_stride = d->v_batch_stride = hd * heads_kv * seqlen_k;
    d->op = FAJIT_OP_FWD;
    d->workspace = NULL, d->workspace_bytes = 0;
    fj_struct_export(user, struct_size, d, sizeof *d);
}

/* The defaults of the fields past a shorter (older) caller's struct. */
static const fajit_attn_desc k_desc_defaults = {.op = FAJIT_OP_FWD};

fajit_status fj_desc_import(fajit_ctx *ctx, const fajit_attn_desc *user, fajit_attn_desc *local)
{
    FJ_CTX_CHECK_NULL_OK(ctx);
    FJ_RETURN_IF(!user, ctx, FAJIT_INVALID_ARGUMENT, "desc must not be NULL");
    return fj_struct_import(ctx, "fajit_attn_desc", user, FAJIT_ATTN_DESC_SIZE_V1, sizeof *local,
                            &k_desc_defaults, local);
}

/*------ validation ------*/

static fajit_status check_ptr(fajit_ctx *ctx, const void *p, const char *name, unsigned align)
{
    FJ_RETURN_IF(!p, ctx, FAJIT_INVALID_ARGUMENT, "%s must not be NULL", name);
    FJ_RETURN_IF((uintptr_t)p % align, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s must be %u-byte aligned, got %p", name, align, p);
    return FAJIT_OK;
}

static fajit_status check_strides(fajit_ctx *ctx, char t, int64_t b, int64_t r, int64_t h)
{
    const int64_t s[3] = {b, r, h};
    static const char *const names[3] = {"batch", "row", "head"};
    for (int i = 0; i < 3; i++) {
        FJ_RETURN_IF(s[i] < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "%c_%s_stride must be >= 0, got %lld", t, names[i], (long long)s[i]);
        FJ_RETURN_IF(s[i] % 8, ctx, FAJIT_INVALID_ARGUMENT,
                     "%c_%s_stride must be a multiple of 8 elements (16 bytes), got %lld", t,
                     names[i], (long long)s[i]);
    }
    return FAJIT_OK;
}

/* (n - 1) * stride for n >= 1, saturated at 2^60 so that a few of them add up without
 * overflow. */
static int64_t span(int64_t n, int64_t stride)
{
    const int64_t cap = (int64_t)1 << 60;
    if (n <= 1 || stride == 0)
        return 0;
    return stride > cap / (n - 1) ? cap : (n - 1) * stride;
}

int64_t fj_tensor_last(int64_t batch, int64_t bs, int64_t rows, int64_t rs, int64_t heads,
                       int64_t hs, int head_dim)
{
    return span(batch, bs) + span(rows, rs) + span(heads, hs) + head_dim;
}

/* A tensor's last element must lie within a GPU's address space (2^48 bytes): beyond it
 * the descriptor cannot describe real memory, and the kernels' 64-bit offsets would be
 * near overflow. rows: the rows of one sequence (varlen: all packed rows, batch 1). */
static fajit_status check_extent(fajit_ctx *ctx, char t, int64_t batch, int64_t bs,
                                 int64_t rows, int64_t rs, int64_t heads, int64_t hs,
                                 int head_dim)
{
    const int64_t last = fj_tensor_last(batch, bs, rows, rs, heads, hs, head_dim);
    FJ_RETURN_IF(last > FJ_MAX_TENSOR_ELEMS, ctx, FAJIT_INVALID_ARGUMENT,
                 "%c spans %lld elements (batch %lld, rows %lld, heads %lld and their "
                 "strides), more than the 2^47 two-byte elements a GPU can address", t,
                 (long long)last, (long long)batch, (long long)rows, (long long)heads);
    return FAJIT_OK;
}

/* What the launch grids and the kernels' int index arithmetic hold: batch and heads are
 * the grid's z and y (at most 65535 each, in every family's non-persistent grid), a
 * length plus a window (up to 2^30) plus a tile stays below 2^31, and the persistent
 * Hopper kernel counts query tiles (64 rows at the smallest) in int. Counted in 64 bits
 * here. */
static fajit_status check_sizes(fajit_ctx *ctx, const fajit_attn_desc *d, int varlen)
{
    FJ_RETURN_IF(d->batch > FAJIT_MAX_BATCH, ctx, FAJIT_UNSUPPORTED,
                 "batch must be at most %d (the launch grid's z dimension), got %d",
                 FAJIT_MAX_BATCH, d->batch);
    FJ_RETURN_IF(d->heads_q > FAJIT_MAX_HEADS, ctx, FAJIT_UNSUPPORTED,
                 "heads_q must be at most %d (the launch grid's y dimension), got %d",
                 FAJIT_MAX_HEADS, d->heads_q);
    FJ_RETURN_IF(d->seqlen_q > FAJIT_MAX_SEQLEN, ctx, FAJIT_UNSUPPORTED,
                 "seqlen_q must be at most %d (2^29: the kernels index rows in int), got %d",
                 FAJIT_MAX_SEQLEN, d->seqlen_q);
    FJ_RETURN_IF(d->seqlen_k > FAJIT_MAX_SEQLEN, ctx, FAJIT_UNSUPPORTED,
                 "seqlen_k must be at most %d (2^29: the kernels index keys in int), got %d",
                 FAJIT_MAX_SEQLEN, d->seqlen_k);
    const int64_t tiles = ((int64_t)d->seqlen_q + 63) / 64 * d->heads_q * d->batch;
    FJ_RETURN_IF(tiles > INT32_MAX, ctx, FAJIT_UNSUPPORTED,
                 "batch x heads_q x ceil(seqlen_q / 64) must be below 2^31 (query tiles are "
                 "counted in int), got %lld", (long long)tiles);
    const int64_t b = varlen ? 1 : d->batch;
    const int64_t rq = varlen && d->total_q > 0 ? d->total_q : d->seqlen_q;
    const int64_t rk = varlen && d->total_k > 0 ? d->total_k : d->seqlen_k;
    FJ_CHECK(check_extent(ctx, 'q', b, d->q_batch_stride, rq, d->q_row_stride, d->heads_q,
                          d->q_head_stride, d->head_dim));
    const int dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    FJ_CHECK(check_extent(ctx, 'o', b, d->o_batch_stride, rq, d->o_row_stride, d->heads_q,
                          d->o_head_stride, dv));
    if (d->block_table)   /* pages: num_pages x page_size rows, page strides checked apart */
        return FAJIT_OK;
    FJ_CHECK(check_extent(ctx, 'k', b, d->k_batch_stride, rk, d->k_row_stride, d->heads_kv,
                          d->k_head_stride, d->head_dim));
    return check_extent(ctx, 'v', b, d->v_batch_stride, rk, d->v_row_stride, d->heads_kv,
                        d->v_head_stride, dv);
}

/* The model features' fields (fajit.h): values the kernels can take, and the pointers they
 * read. Whether a family serves them is dispatch's question (fj_features). */
static fajit_status check_features(fajit_ctx *ctx, const fajit_attn_desc *d)
{
    FJ_RETURN_IF(!(d->softcap >= 0.f) || isinf(d->softcap), ctx, FAJIT_INVALID_ARGUMENT,
                 "softcap must be finite and >= 0 (0: off), got %g", (double)d->softcap);
    if (d->sinks)
        FJ_CHECK(check_ptr(ctx, d->sinks, "sinks", 4));
    if (d->alibi_slopes)
        FJ_CHECK(check_ptr(ctx, d->alibi_slopes, "alibi_slopes", 4));
    FJ_RETURN_IF(d->alibi_batch_stride && !d->alibi_slopes, ctx, FAJIT_INVALID_ARGUMENT,
                 "alibi_batch_stride needs alibi_slopes, got %lld without them",
                 (long long)d->alibi_batch_stride);
    FJ_RETURN_IF(d->alibi_batch_stride < 0 ||
                     (d->alibi_batch_stride > 0 && d->alibi_batch_stride < d->heads_q), ctx,
                 FAJIT_INVALID_ARGUMENT, "alibi_batch_stride must be 0 (one row of slopes) or "
                 "at least heads_q (%d), got %lld", d->heads_q,
                 (long long)d->alibi_batch_stride);
    FJ_RETURN_IF(d->head_dim_v && (d->head_dim_v < 8 || d->head_dim_v > 256 ||
                                   d->head_dim_v % 8), ctx, FAJIT_UNSUPPORTED,
                 "head_dim_v must be 0 (head_dim) or a multiple of 8 in [8, 256], got %d",
                 d->head_dim_v);
    switch (d->kv_dtype) {
    case FAJIT_KV_AS_Q:
        FJ_RETURN_IF(d->k_descale || d->v_descale || d->descale_batch_stride ||
                         d->descale_head_stride, ctx, FAJIT_INVALID_ARGUMENT,
                     "k_descale, v_descale and their strides are for an FP8 kv_dtype, got "
                     "them with kv_dtype AS_Q");
        return FAJIT_OK;
    case FAJIT_KV_E4M3:
    case FAJIT_KV_E5M2:
        break;
    default:
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "kv_dtype must be AS_Q (0), E4M3 (1) or "
                       "E5M2 (2), got %d", (int)d->kv_dtype);
    }
    const char *kt = d->kv_dtype == FAJIT_KV_E4M3 ? "e4m3" : "e5m2";
    FJ_RETURN_IF(!d->k_descale || !d->v_descale, ctx, FAJIT_INVALID_ARGUMENT,
                 "kv_dtype %s needs k_descale and v_descale (device fp32; 1.0 where the cache "
                 "is not scaled), got %s NULL", kt, d->k_descale ? "v_descale" : "k_descale");
    FJ_CHECK(check_ptr(ctx, d->k_descale, "k_descale", 4));
    FJ_CHECK(check_ptr(ctx, d->v_descale, "v_descale", 4));
    FJ_RETURN_IF(d->descale_batch_stride < 0 || d->descale_head_stride < 0, ctx,
                 FAJIT_INVALID_ARGUMENT, "descale_batch_stride and descale_head_stride must be "
                 ">= 0, got %lld and %lld", (long long)d->descale_batch_stride,
                 (long long)d->descale_head_stride);
    FJ_RETURN_IF(d->head_dim % 16 || (d->head_dim_v && d->head_dim_v % 16), ctx,
                 FAJIT_UNSUPPORTED, "an FP8 K/V cache needs head dims that are multiples of 16 "
                 "(16-byte rows), got head_dim %d, head_dim_v %d", d->head_dim, d->head_dim_v);
    const int64_t s[8] = {d->k_batch_stride, d->k_row_stride, d->k_head_stride,
                          d->k_page_stride, d->v_batch_stride, d->v_row_stride,
                          d->v_head_stride, d->v_page_stride};
    for (int i = 0; i < 8; i++)
        FJ_RETURN_IF(s[i] % 16, ctx, FAJIT_INVALID_ARGUMENT,
                     "FP8 K/V strides must be multiples of 16 elements (16 bytes), got %s %lld",
                     (const char *const[]){"k_batch_stride", "k_row_stride", "k_head_stride",
                                           "k_page_stride", "v_batch_stride", "v_row_stride",
                                           "v_head_stride", "v_page_stride"}[i],
                     (long long)s[i]);
    return FAJIT_OK;
}

/* The rules, on a full-size descriptor. */
/* The paged K/V fields: all of them with a block table, none without one. Page ids and
 * used lengths are device values: only the checked mode can test them. */
static fajit_status check_paged(fajit_ctx *ctx, const fajit_attn_desc *d)
{
    FJ_RETURN_IF(d->num_splits < 0 || d->num_splits > FAJIT_MAX_SPLITS, ctx,
                 FAJIT_INVALID_ARGUMENT, "num_splits must be in [0, %d] (0: chosen by fajit), "
                 "got %d", FAJIT_MAX_SPLITS, d->num_splits);
    FJ_RETURN_IF(d->num_splits_max < 0 || d->num_splits_max > FAJIT_MAX_SPLITS, ctx,
                 FAJIT_INVALID_ARGUMENT, "num_splits_max must be in [0, %d] (0: no bound), "
                 "got %d", FAJIT_MAX_SPLITS, d->num_splits_max);
    FJ_RETURN_IF(d->num_splits && d->num_splits_max && d->num_splits > d->num_splits_max, ctx,
                 FAJIT_INVALID_ARGUMENT, "num_splits (%d, a forced count) must be at most "
                 "num_splits_max (%d, the bound) when both are given", d->num_splits,
                 d->num_splits_max);
    if (!d->block_table) {
        FJ_RETURN_IF(d->page_size || d->num_pages || d->block_table_stride || d->k_page_stride ||
                         d->v_page_stride, ctx, FAJIT_INVALID_ARGUMENT,
                     "page_size, num_pages, block_table_stride and the page strides need a "
                     "block_table, got page_size %d, num_pages %d without one", d->page_size,
                     d->num_pages);
        FJ_RETURN_IF(d->seqused_k != NULL, ctx, FAJIT_INVALID_ARGUMENT,
                     "seqused_k needs a block_table (paged K/V)");
        return FAJIT_OK;
    }
    FJ_CHECK(check_ptr(ctx, d->block_table, "block_table", 4));
    FJ_RETURN_IF(d->page_size < 1 || d->page_size > FAJIT_MAX_PAGE_SIZE, ctx,
                 FAJIT_INVALID_ARGUMENT, "a block_table needs page_size in 1..%d, got %d",
                 FAJIT_MAX_PAGE_SIZE, d->page_size);
    FJ_RETURN_IF(d->num_pages < 1, ctx, FAJIT_INVALID_ARGUMENT,
                 "a block_table needs num_pages >= 1 (the pages of the K/V caches), got %d",
                 d->num_pages);
    FJ_RETURN_IF(d->block_table_stride < 1 || d->block_table_stride > (1 << 30), ctx,
                 FAJIT_INVALID_ARGUMENT, "block_table_stride must be in [1, 2^30], got %lld",
                 (long long)d->block_table_stride);
    FJ_RETURN_IF((int64_t)d->seqlen_k > d->block_table_stride * d->page_size, ctx,
                 FAJIT_INVALID_ARGUMENT, "seqlen_k (%d) exceeds block_table_stride * page_size "
                 "(%lld): the block table cannot address that many keys", d->seqlen_k,
                 (long long)(d->block_table_stride * d->page_size));
    FJ_RETURN_IF(d->cu_seqlens_k != NULL, ctx, FAJIT_INVALID_ARGUMENT,
                 "with a block_table the key counts come from seqused_k (or seqlen_k), not "
                 "cu_seqlens_k");
    const int64_t ps[2] = {d->k_page_stride, d->v_page_stride};
    for (int i = 0; i < 2; i++)
        FJ_RETURN_IF(ps[i] < 0 || ps[i] % 8, ctx, FAJIT_INVALID_ARGUMENT,
                     "%c_page_stride must be >= 0 and a multiple of 8 elements (0: dense "
                     "pages), got %lld", "kv"[i], (long long)ps[i]);
    if (d->seqused_k)
        FJ_CHECK(check_ptr(ctx, d->seqused_k, "seqused_k", 4));
    /* The pages as a [num_pages][page_size][heads_kv][head_dim] tensor (a page stride of 0:
     * page_size rows), bounded as dense K and V are; the kernels' parameter fill then
     * multiplies page_size by a row stride without overflow. */
    const int64_t rs[2] = {d->k_row_stride, d->v_row_stride};
    const int64_t hs[2] = {d->k_head_stride, d->v_head_stride};
    for (int i = 0; i < 2; i++)
        FJ_CHECK(check_extent(ctx, "kv"[i], d->num_pages,
                              ps[i] ? ps[i] : span((int64_t)d->page_size + 1, rs[i]),
                              d->page_size, rs[i], d->heads_kv, hs[i],
                              i && d->head_dim_v ? d->head_dim_v : d->head_dim));
    return FAJIT_OK;
}

fajit_status fj_desc_check(fajit_ctx *ctx, const fajit_attn_desc *d)
{
    FJ_RETURN_IF(d->op != FAJIT_OP_FWD, ctx, FAJIT_INVALID_ARGUMENT,
                 "op must be FAJIT_OP_FWD (0), got %d", (int)d->op);
    FJ_CHECK(check_ptr(ctx, d->q, "q", 16));
    /* No key to read: every sequence's keys are empty (seqlen_k, their maximum, is 0; only
     * varlen allows it). Zero-element tensors have no storage, so k and v may be NULL; the
     * kernels write O = 0 and LSE = -inf without reading them. A paged cache has pages. */
    const int no_keys = d->seqlen_k == 0 && !d->block_table;
    if (!no_keys || d->k)
        FJ_CHECK(check_ptr(ctx, d->k, "k", 16));
    if (!no_keys || d->v)
        FJ_CHECK(check_ptr(ctx, d->v, "v", 16));
    FJ_CHECK(check_ptr(ctx, d->o, "o", 16));
    FJ_RETURN_IF(d->dtype != FAJIT_F16 && d->dtype != FAJIT_BF16, ctx, FAJIT_INVALID_ARGUMENT,
                 "dtype must be FAJIT_F16 (0) or FAJIT_BF16 (1), got %d", (int)d->dtype);
    FJ_RETURN_IF(d->batch < 1, ctx, FAJIT_INVALID_ARGUMENT, "batch must be >= 1, got %d",
                 d->batch);
    FJ_RETURN_IF(d->heads_q < 1, ctx, FAJIT_INVALID_ARGUMENT, "heads_q must be >= 1, got %d",
                 d->heads_q);
    FJ_RETURN_IF(d->heads_kv < 1, ctx, FAJIT_INVALID_ARGUMENT,
                 "heads_kv must be >= 1, got %d", d->heads_kv);
    FJ_RETURN_IF(d->heads_q % d->heads_kv, ctx, FAJIT_INVALID_ARGUMENT,
                 "heads_q must be a multiple of heads_kv, got heads_q %d, heads_kv %d",
                 d->heads_q, d->heads_kv);
    int varlen = d->cu_seqlens_q || d->cu_seqlens_k;
    int min_len = varlen ? 0 : 1;   /* varlen maxima may be 0 when all sequences are empty */
    FJ_RETURN_IF(d->seqlen_q < min_len, ctx, FAJIT_INVALID_ARGUMENT,
                 "seqlen_q must be >= %d, got %d", min_len, d->seqlen_q);
    FJ_RETURN_IF(d->seqlen_k < min_len, ctx, FAJIT_INVALID_ARGUMENT,
                 "seqlen_k must be >= %d, got %d", min_len, d->seqlen_k);
    FJ_RETURN_IF(d->head_dim < 8 || d->head_dim > 256 || d->head_dim % 8, ctx,
                 FAJIT_UNSUPPORTED, "head_dim must be a multiple of 8 in [8, 256], got %d",
                 d->head_dim);
    FJ_CHECK(check_strides(ctx, 'q', d->q_batch_stride, d->q_row_stride, d->q_head_stride));
    FJ_CHECK(check_strides(ctx, 'k', d->k_batch_stride, d->k_row_stride, d->k_head_stride));
    FJ_CHECK(check_strides(ctx, 'v', d->v_batch_stride, d->v_row_stride, d->v_head_stride));
    FJ_CHECK(check_strides(ctx, 'o', d->o_batch_stride, d->o_row_stride, d->o_head_stride));
    FJ_CHECK(check_sizes(ctx, d, varlen));
    switch (d->mask) {
    case FAJIT_MASK_NONE:
    case FAJIT_MASK_CAUSAL:
        break;
    case FAJIT_MASK_WINDOW:
        FJ_RETURN_IF(d->window_left < 0 || d->window_left > (1 << 30), ctx,
                     FAJIT_INVALID_ARGUMENT, "window_left must be in [0, 2^30], got %d",
                     d->window_left);
        FJ_RETURN_IF(d->window_right < 0 || d->window_right > (1 << 30), ctx,
                     FAJIT_INVALID_ARGUMENT, "window_right must be in [0, 2^30], got %d",
                     d->window_right);
        break;
    default:
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT,
                       "mask must be NONE (0), CAUSAL (1) or WINDOW (2), got %d", (int)d->mask);
    }
    FJ_RETURN_IF(!(d->softmax_scale > 0.f) || isinf(d->softmax_scale), ctx,
                 FAJIT_INVALID_ARGUMENT, "softmax_scale must be finite and > 0, got %g",
                 (double)d->softmax_scale);
    FJ_CHECK(check_paged(ctx, d));
    FJ_CHECK(check_features(ctx, d));
    FJ_RETURN_IF(!d->block_table && !d->cu_seqlens_q != !d->cu_seqlens_k, ctx,
                 FAJIT_INVALID_ARGUMENT,
                 "cu_seqlens_q and cu_seqlens_k must be given together (varlen), got %s only",
                 d->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
    if (varlen) {
        FJ_CHECK(check_ptr(ctx, d->cu_seqlens_q, "cu_seqlens_q", 4));
        if (!d->block_table)
            FJ_CHECK(check_ptr(ctx, d->cu_seqlens_k, "cu_seqlens_k", 4));
        FJ_RETURN_IF(d->total_q < 0 || d->total_k < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "total_q and total_k must be >= 0 (0 = unknown), got %d and %d",
                     d->total_q, d->total_k);
        FJ_RETURN_IF(d->total_q > 0 && d->total_q < d->seqlen_q, ctx, FAJIT_INVALID_ARGUMENT,
                     "total_q (%d) must be at least seqlen_q, the longest sequence (%d)",
                     d->total_q, d->seqlen_q);
        FJ_RETURN_IF(d->total_k > 0 && d->total_k < d->seqlen_k, ctx, FAJIT_INVALID_ARGUMENT,
                     "total_k (%d) must be at least seqlen_k, the longest sequence (%d)",
                     d->total_k, d->seqlen_k);
        FJ_RETURN_IF(d->seqlen_k == 0 && d->total_k > 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "total_k (%d) must be 0 when seqlen_k, the longest key sequence, is 0",
                     d->total_k);
    }
    if (d->lse)
        FJ_CHECK(check_ptr(ctx, d->lse, "lse", 4));
    FJ_RETURN_IF(!d->workspace != !d->workspace_bytes, ctx, FAJIT_INVALID_ARGUMENT,
                 "workspace and workspace_bytes must be given together, got workspace %p, "
                 "workspace_bytes %zu", d->workspace, d->workspace_bytes);
    FJ_RETURN_IF((uintptr_t)d->workspace % 256, ctx, FAJIT_INVALID_ARGUMENT,
                 "workspace must be 256-byte aligned, got %p", d->workspace);
    return FAJIT_OK;
}

fajit_status fajit_attn_check(fajit_ctx *ctx, const fajit_attn_desc *user)
{
    fajit_attn_desc d;
    FJ_CHECK(fj_desc_import(ctx, user, &d));
    return fj_desc_check(ctx, &d);
}
