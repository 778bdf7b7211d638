/* test_unit_desc.c - the `unit` suite's checks of problem descriptors at the boundary: the
 * rules fajit_attn_check applies (one bad field at a time, each refused with a message that
 * names the rule and the value), what it accepts (varlen, paged, windows, features), the
 * merge descriptor's rules, the checked mode's option, and the strides fajit_attn_desc_init
 * fills. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_util.h"

typedef struct bad_case {
    const char *what;
    void (*mutate)(fajit_attn_desc *);
    fajit_status want;
    const char *msg;   /* substring of fajit_errmsg */
} bad_case;

#define MUT(name, body) static void name(fajit_attn_desc *d) { body; }
MUT(m_q_null, d->q = NULL)
MUT(m_o_misaligned, d->o = (void *)(uintptr_t)0x10008)
MUT(m_batch0, d->batch = 0)
MUT(m_heads_neg, d->heads_q = -3)
MUT(m_gqa, d->heads_q = 7)
MUT(m_seq0, d->seqlen_q = 0)
MUT(m_hdim100, d->head_dim = 100)
MUT(m_hdim264, d->head_dim = 264)
MUT(m_stride, d->k_row_stride = 100)
MUT(m_dtype, d->dtype = (fajit_dtype)7)
MUT(m_mask, d->mask = (fajit_mask)9)
MUT(m_window, (d->mask = FAJIT_MASK_WINDOW, d->window_left = -2, d->window_right = 0))
MUT(m_window_big, (d->mask = FAJIT_MASK_WINDOW, d->window_left = 5, d->window_right = 2000000000))
MUT(m_scale, d->softmax_scale = 0.f)
MUT(m_varlen_half, d->cu_seqlens_q = (const int32_t *)(uintptr_t)0x2000)
MUT(m_lse, d->lse = (float *)(uintptr_t)0x2002)
MUT(m_total, (d->cu_seqlens_q = d->cu_seqlens_k = (const int32_t *)(uintptr_t)0x2000,
              d->total_q = 50))
MUT(m_batch_grid, d->batch = 65536)
MUT(m_heads_grid, (d->heads_q = 65536, d->heads_kv = 1))
MUT(m_seqk_huge, d->seqlen_k = 2147483647)
MUT(m_seqq_huge, d->seqlen_q = 2147483647)
MUT(m_seqk_limit, d->seqlen_k = (1 << 29) + 1)
MUT(m_tiles, (d->batch = 4096, d->heads_q = 4096, d->heads_kv = 1, d->seqlen_q = 8192))
MUT(m_extent, d->k_batch_stride = (int64_t)1 << 47)
MUT(m_extent_sat, (d->batch = 65535, d->q_batch_stride = (int64_t)1 << 62))
MUT(m_k_null_keys, (d->cu_seqlens_q = d->cu_seqlens_k = (const int32_t *)(uintptr_t)0x2000,
                   d->k = NULL))
MUT(m_v_null_paged, (d->cu_seqlens_q = (const int32_t *)(uintptr_t)0x2000, d->seqlen_k = 0,
                     d->block_table = (const int32_t *)(uintptr_t)0x3000, d->page_size = 16,
                     d->num_pages = 4, d->block_table_stride = 4, d->v = NULL))
MUT(m_total_k_empty, (d->cu_seqlens_q = d->cu_seqlens_k = (const int32_t *)(uintptr_t)0x2000,
                      d->seqlen_k = 0, d->total_k = 3, d->k = d->v = NULL))
MUT(m_softcap_neg, d->softcap = -1.f)
MUT(m_softcap_nan, d->softcap = NAN)
MUT(m_sinks_misaligned, d->sinks = (const float *)(uintptr_t)0x2002)
MUT(m_alibi_stride_alone, d->alibi_batch_stride = 8)
MUT(m_alibi_stride_short, (d->alibi_slopes = (const float *)(uintptr_t)0x2000,
                           d->alibi_batch_stride = 4))
MUT(m_hdim_v, d->head_dim_v = 100)
MUT(m_kv_dtype, d->kv_dtype = (fajit_kv_dtype)3)
MUT(m_descale_no_fp8, d->k_descale = (const float *)(uintptr_t)0x2000)
MUT(m_fp8_no_scale, (d->kv_dtype = FAJIT_KV_E4M3, d->k_descale = (const float *)(uintptr_t)0x2000))
MUT(m_fp8_stride, (d->kv_dtype = FAJIT_KV_E5M2,
                   d->k_descale = d->v_descale = (const float *)(uintptr_t)0x2000,
                   d->k_row_stride = 136))
MUT(m_fp8_hdim, (d->kv_dtype = FAJIT_KV_E4M3, d->head_dim = 72, d->q_row_stride = 576,
                 d->o_row_stride = 576, d->k_row_stride = d->v_row_stride = 144,
                 d->k_descale = d->v_descale = (const float *)(uintptr_t)0x2000))

static const bad_case k_bad[] = {
    {"softcap < 0", m_softcap_neg, FAJIT_INVALID_ARGUMENT, "softcap must be finite and >= 0 (0: off), got -1"},
    {"softcap NaN", m_softcap_nan, FAJIT_INVALID_ARGUMENT, "softcap must be finite and >= 0"},
    {"sinks misaligned", m_sinks_misaligned, FAJIT_INVALID_ARGUMENT, "sinks must be 4-byte aligned"},
    {"alibi stride alone", m_alibi_stride_alone, FAJIT_INVALID_ARGUMENT, "alibi_batch_stride needs alibi_slopes"},
    {"alibi stride short", m_alibi_stride_short, FAJIT_INVALID_ARGUMENT, "alibi_batch_stride must be 0 (one row of slopes) or at least heads_q (8), got 4"},
    {"head_dim_v 100", m_hdim_v, FAJIT_UNSUPPORTED, "head_dim_v must be 0 (head_dim) or a multiple of 8 in [8, 256], got 100"},
    {"kv_dtype 3", m_kv_dtype, FAJIT_INVALID_ARGUMENT, "kv_dtype must be AS_Q (0), E4M3 (1) or E5M2 (2), got 3"},
    {"descale without fp8", m_descale_no_fp8, FAJIT_INVALID_ARGUMENT, "k_descale, v_descale and their strides are for an FP8 kv_dtype"},
    {"fp8 without v_descale", m_fp8_no_scale, FAJIT_INVALID_ARGUMENT, "kv_dtype e4m3 needs k_descale and v_descale (device fp32; 1.0 where the cache is not scaled), got v_descale NULL"},
    {"fp8 stride", m_fp8_stride, FAJIT_INVALID_ARGUMENT, "FP8 K/V strides must be multiples of 16 elements (16 bytes), got k_row_stride 136"},
    {"fp8 head_dim", m_fp8_hdim, FAJIT_UNSUPPORTED, "an FP8 K/V cache needs head dims that are multiples of 16 (16-byte rows), got head_dim 72"},
    {"q NULL", m_q_null, FAJIT_INVALID_ARGUMENT, "q must not be NULL"},
    {"o misaligned", m_o_misaligned, FAJIT_INVALID_ARGUMENT, "o must be 16-byte aligned, got 0x10008"},
    {"batch 0", m_batch0, FAJIT_INVALID_ARGUMENT, "batch must be >= 1, got 0"},
    {"heads_q -3", m_heads_neg, FAJIT_INVALID_ARGUMENT, "heads_q must be >= 1, got -3"},
    {"gqa", m_gqa, FAJIT_INVALID_ARGUMENT, "heads_q must be a multiple of heads_kv, got heads_q 7, heads_kv 2"},
    {"seqlen 0", m_seq0, FAJIT_INVALID_ARGUMENT, "seqlen_q must be >= 1, got 0"},
    {"hdim 100", m_hdim100, FAJIT_UNSUPPORTED, "head_dim must be a multiple of 8 in [8, 256], got 100"},
    {"hdim 264", m_hdim264, FAJIT_UNSUPPORTED, "got 264"},
    {"stride", m_stride, FAJIT_INVALID_ARGUMENT, "k_row_stride must be a multiple of 8 elements (16 bytes), got 100"},
    {"dtype", m_dtype, FAJIT_INVALID_ARGUMENT, "dtype must be FAJIT_F16 (0) or FAJIT_BF16 (1), got 7"},
    {"mask", m_mask, FAJIT_INVALID_ARGUMENT, "got 9"},
    {"window", m_window, FAJIT_INVALID_ARGUMENT, "window_left must be in [0, 2^30], got -2"},
    {"window big", m_window_big, FAJIT_INVALID_ARGUMENT, "window_right must be in [0, 2^30], got 2000000000"},
    {"scale", m_scale, FAJIT_INVALID_ARGUMENT, "softmax_scale must be finite and > 0, got 0"},
    {"varlen half", m_varlen_half, FAJIT_INVALID_ARGUMENT, "cu_seqlens_q and cu_seqlens_k must be given together"},
    {"lse misaligned", m_lse, FAJIT_INVALID_ARGUMENT, "lse must be 4-byte aligned"},
    {"batch > grid z", m_batch_grid, FAJIT_UNSUPPORTED, "batch must be at most 65535 (the launch grid's z dimension), got 65536"},
    {"heads > grid y", m_heads_grid, FAJIT_UNSUPPORTED, "heads_q must be at most 65535 (the launch grid's y dimension), got 65536"},
    {"seqlen_k 2^31-1", m_seqk_huge, FAJIT_UNSUPPORTED, "seqlen_k must be at most 536870912 (2^29: the kernels index keys in int), got 2147483647"},
    {"seqlen_q 2^31-1", m_seqq_huge, FAJIT_UNSUPPORTED, "seqlen_q must be at most 536870912"},
    {"seqlen_k 2^29+1", m_seqk_limit, FAJIT_UNSUPPORTED, "got 536870913"},
    {"query tiles", m_tiles, FAJIT_UNSUPPORTED, "batch x heads_q x ceil(seqlen_q / 64) must be below 2^31 (query tiles are counted in int), got 2147483648"},
    {"k extent", m_extent, FAJIT_INVALID_ARGUMENT, "k spans 140737488371968 elements (batch 2, rows 130, heads 2"},
    {"q extent saturated", m_extent_sat, FAJIT_INVALID_ARGUMENT, "q spans"},
    {"k NULL with keys", m_k_null_keys, FAJIT_INVALID_ARGUMENT, "k must not be NULL"},
    {"v NULL paged", m_v_null_paged, FAJIT_INVALID_ARGUMENT, "v must not be NULL"},
    {"total_k without keys", m_total_k_empty, FAJIT_INVALID_ARGUMENT, "total_k (3) must be 0 when seqlen_k, the longest key sequence, is 0"},
    {"total_q short", m_total, FAJIT_INVALID_ARGUMENT, "total_q (50) must be at least seqlen_q, the longest sequence (100)"},
};

START_TEST(validation_rules)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc ok = unit_desc();
    ck_assert_int_eq(fajit_attn_check(ctx, &ok), FAJIT_OK);
    ck_assert_int_eq(fajit_attn_check(ctx, NULL), FAJIT_INVALID_ARGUMENT);
    const bad_case *c = &k_bad[_i];
    fajit_attn_desc d = unit_desc();
    c->mutate(&d);
    fajit_status st = fajit_attn_check(ctx, &d);
    ck_assert_msg(st == c->want, "%s: got %s", c->what, fajit_status_name(st));
    ck_assert_msg(strstr(fajit_errmsg(ctx), c->msg), "%s: message '%s' lacks '%s'", c->what,
                  fajit_errmsg(ctx), c->msg);
    /* The same rule through the launch entry point: rejected before any GPU work. */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), c->want);
    ck_assert_int_eq(fajit_attn_fwd(NULL, &d, NULL), c->want);
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    ck_assert_uint_eq(cnt.calls, 0);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* A model feature that no family serves: FAJIT_UNSUPPORTED before any launch, naming the
 * feature, on every target; the plan key tells features apart. head_dim_v over paged K/V
 * with 16 query rows: the decode family (and so the mixed one) does not take it, the Hopper
 * family's paged prefill needs 64 rows, the reference kernel reads no block table. Over
 * contiguous K/V it is served. */
START_TEST(features_unserved)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    d.head_dim = 192, d.head_dim_v = 128, d.seqlen_q = 16;
    d.q_row_stride = 192 * 8, d.k_row_stride = 192 * 2, d.v_row_stride = 128 * 2;
    d.o_row_stride = 128 * 8;
    d.q_head_stride = d.k_head_stride = 192, d.v_head_stride = d.o_head_stride = 128;
    d.q_batch_stride = 192 * 8 * 16, d.o_batch_stride = 128 * 8 * 16;
    d.k_batch_stride = d.v_batch_stride = 0;
    d.block_table = (const int32_t *)(uintptr_t)0x10000;
    d.page_size = 16, d.num_pages = 20, d.block_table_stride = 9;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    char line[512];
    const char *archs[] = {"sm_80", "sm_90a", "sm_100a"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[i], &d, line, sizeof line),
                         FAJIT_UNSUPPORTED);
        ck_assert_msg(strstr(fajit_errmsg(ctx), "no kernel family of this fajit serves paged "
                             "K/V with head_dim_v != head_dim on sm_"), "%s",
                      fajit_errmsg(ctx));
    }
    /* contiguous: fa2 serves it (fa3 on sm_90a) */
    d.block_table = NULL, d.page_size = d.num_pages = 0, d.block_table_stride = 0;
    d.k_batch_stride = 192 * 2 * 130, d.v_batch_stride = 128 * 2 * 130;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[i], &d, line, sizeof line),
                         FAJIT_OK);
        ck_assert_msg(strncmp(line, i == 1 ? "fa3 bf16 d192 " : "fa2 bf16 d192 ", 14) == 0 &&
                          strstr(line, " dv128"), "%s", line);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(validation_accepts)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    d.mask = FAJIT_MASK_CAUSAL;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    d.mask = FAJIT_MASK_WINDOW, d.window_left = 0, d.window_right = 0;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    d.heads_kv = 1; /* MQA */
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    for (int h = 8; h <= 256; h += 8) {
        d.head_dim = h;
        ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    }
    /* the largest sizes the grids and the kernels' int arithmetic hold */
    fajit_attn_desc big = unit_desc();
    big.batch = FAJIT_MAX_BATCH;
    ck_assert_int_eq(fajit_attn_check(ctx, &big), FAJIT_OK);
    big = unit_desc();
    big.heads_q = FAJIT_MAX_HEADS, big.heads_kv = 1;
    ck_assert_int_eq(fajit_attn_check(ctx, &big), FAJIT_OK);
    big = unit_desc();
    big.batch = 1, big.seqlen_q = big.seqlen_k = FAJIT_MAX_SEQLEN;
    ck_assert_int_eq(fajit_attn_check(ctx, &big), FAJIT_OK);
    /* varlen: maxima may be 0 when every sequence is empty */
    d.cu_seqlens_q = d.cu_seqlens_k = (const int32_t *)(uintptr_t)0x2000;
    d.seqlen_q = d.seqlen_k = 0;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    /* no keys at all: K and V have no storage (NULL), totals known (total_k 0) */
    fajit_attn_desc e = d;
    e.seqlen_q = 7, e.total_q = 9, e.total_k = 0, e.k = e.v = NULL;
    ck_assert_int_eq(fajit_attn_check(ctx, &e), FAJIT_OK);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &e, NULL), FAJIT_NO_DEVICE);   /* validated */
    /* a context without a device validates, then refuses to launch */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "no device"));
    fajit_ctx_destroy(ctx);
}
END_TEST

/* fajit_bench_spec refuses before touching a GPU: bad reps, a compile-only context, a dead
 * context; the spec is read only after those. */
START_TEST(bench_refuses)
{
    fajit_ctx *ctx = unit_memory_ctx();
    ck_assert_int_eq(fajit_bench_spec(ctx, "llama-3-8b", 0, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "reps must be in [1, 1000], got 0"));
    ck_assert_int_eq(fajit_bench_spec(ctx, "llama-3-8b", 1001, NULL, NULL),
                     FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_bench_spec(ctx, "llama-3-8b", 5, NULL, NULL), FAJIT_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "benchmarking needs a device"));
    fajit_ctx_destroy(ctx);
    ck_assert_int_eq(fajit_bench_spec(ctx, "llama-3-8b", 5, NULL, NULL), FAJIT_INVALID_ARGUMENT);
}
END_TEST

/* Paged K/V: every rule the host can check, each refused with the rule and the value. */
/* fajit_attn_merge: the defaults of its descriptor and every refusal before a launch. */
START_TEST(merge_validation)
{
    fajit_ctx *ctx = unit_memory_ctx();
    void *oa = (void *)(uintptr_t)0x10000, *ob = (void *)(uintptr_t)0x20000;
    void *o = (void *)(uintptr_t)0x30000;
    float *la = (float *)(uintptr_t)0x40000, *lb = (float *)(uintptr_t)0x50000;
    fajit_merge_desc m;
    fajit_merge_desc_init(&m, oa, la, ob, lb, o, NULL, 3, 7, 5, 96, FAJIT_BF16);
    ck_assert_uint_eq(m.struct_size, sizeof m);
    ck_assert_int_eq(m.a_head_stride, 96);
    ck_assert_int_eq(m.b_row_stride, 96 * 5);
    ck_assert_int_eq(m.o_batch_stride, 96 * 5 * 7);
    /* fajit's LSE layout [batch][heads][seqlen] */
    ck_assert_int_eq(m.lse_row_stride, 1);
    ck_assert_int_eq(m.lse_head_stride, 7);
    ck_assert_int_eq(m.lse_batch_stride, 35);
    fajit_merge_desc_init(NULL, oa, la, ob, lb, o, NULL, 1, 1, 1, 8, FAJIT_BF16);   /* no-op */

    /* valid up to the device: a compile-only context has none */
    ck_assert_int_eq(fajit_attn_merge(ctx, &m, NULL), FAJIT_NO_DEVICE);
    static const struct { const char *field, *msg; } bad[] = {
        {"o_a", "o_a must not be NULL"}, {"lse_b", "lse_b must not be NULL"},
        {"o align", "o must be 8-byte aligned"}, {"lse align", "lse must be 4-byte aligned"},
        {"head_dim", "head_dim must be a multiple of 4"}, {"dtype", "dtype must be"},
        {"stride", "the strides of o_b must be"}, {"lse stride", "the LSE strides"},
        {"batch", "batch, seqlen and heads must be >= 0"}, {"grid", "exceeds the merge's grid"},
        /* products that wrapped int64 (to 0 and below 0) and passed the check */
        {"grid wraps to 0", "exceeds the merge's grid"},
        {"grid wraps negative", "exceeds the merge's grid"},
        {"extent", "o_a spans"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fajit_merge_desc e = m;
        switch (i) {
        case 0: e.o_a = NULL; break;
        case 1: e.lse_b = NULL; break;
        case 2: e.o = (char *)o + 4; break;
        case 3: e.lse = (float *)(uintptr_t)0x60002; break;
        case 4: e.head_dim = 6; break;
        case 5: e.dtype = (fajit_dtype)7; break;
        case 6: e.b_row_stride = 482; break;
        case 7: e.lse_head_stride = -1; break;
        case 8: e.batch = -1; break;
        case 9: e.batch = 1 << 20, e.seqlen = 1 << 12, e.heads = 1 << 10; break;
        case 10: e.batch = 1 << 21, e.seqlen = 1 << 21, e.heads = 1 << 22; break;
        case 11: e.batch = 0x7fffffff, e.seqlen = 0x7fffffff, e.heads = 3; break;
        case 12: e.batch = 2, e.a_batch_stride = INT64_MAX & ~(int64_t)3; break;
        }
        ck_assert_int_eq(fajit_attn_merge(ctx, &e, NULL), FAJIT_INVALID_ARGUMENT);
        ck_assert_msg(strstr(fajit_errmsg(ctx), bad[i].msg), "%s: %s", bad[i].field,
                      fajit_errmsg(ctx));
    }
    ck_assert_int_eq(fajit_attn_merge(ctx, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_attn_merge(NULL, &m, NULL), FAJIT_INVALID_ARGUMENT);
    /* a struct_size from a newer header with non-zero bytes past ours */
    struct { fajit_merge_desc d; int extra; } big;
    memset(&big, 0, sizeof big);
    big.d = m, big.d.struct_size = sizeof big, big.extra = 1;
    ck_assert_int_eq(fajit_attn_merge(ctx, &big.d, NULL), FAJIT_INVALID_ARGUMENT);
    /* fajit_warm covers its kernels */
    static fj_variant vs[1200];
    const int n = fj_warm_variants("sm_80", vs, 1200);
    int merges = 0;
    for (int i = 0; i < n; i++)
        merges += strcmp(vs[i].function, "fj_attn_merge") == 0;
    ck_assert_int_eq(merges, 2);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(validation_paged)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc(), p;
    d.seqlen_q = 1, d.seqlen_k = 1000;
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 64, d.page_size = 16, d.num_pages = 4096;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    d.seqused_k = (const int32_t *)(uintptr_t)0x4000;
    d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;   /* varlen queries, no cu_seqlens_k */
    d.k_page_stride = 16 * 1024, d.v_page_stride = 0;
    d.num_splits = FAJIT_MAX_SPLITS;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    /* a bound: alone, or with a forced count within it */
    static const int fine[][2] = {{0, 1}, {0, FAJIT_MAX_SPLITS}, {4, 8}, {8, 8}, {1, 1}};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        p = d;
        p.num_splits = fine[i][0], p.num_splits_max = fine[i][1];
        ck_assert_msg(fajit_attn_check(ctx, &p) == FAJIT_OK, "%d, %d: %s", fine[i][0],
                      fine[i][1], fajit_errmsg(ctx));
    }
    static const struct { int field; long long value; const char *msg; } bad[] = {
        {0, 0, "a block_table needs page_size in 1..65536, got 0"},
        {0, 65537, "a block_table needs page_size in 1..65536, got 65537"},
        {0, INT32_MAX, "a block_table needs page_size in 1..65536, got 2147483647"},
        /* the pages' extent, as dense K and V have it */
        {4, INT64_MAX & ~7ll, "k spans "},
        {9, 1ll << 40, "v spans "},            /* (page_size - 1) x the row stride */
        {9, INT64_MAX & ~7ll, "v spans "},     /* page_size x row stride would overflow */
        {10, 1ll << 47, "k spans "},
        {1, 0, "a block_table needs num_pages >= 1"},
        {2, 0, "block_table_stride must be in [1, 2^30], got 0"},
        {3, 1025, "seqlen_k (1025) exceeds block_table_stride * page_size (1024)"},
        {4, 12, "k_page_stride must be >= 0 and a multiple of 8"},
        {5, -1, "num_splits must be in [0, 128]"},
        {5, 129, "num_splits must be in [0, 128]"},
        {8, -1, "num_splits_max must be in [0, 128] (0: no bound), got -1"},
        {8, 129, "num_splits_max must be in [0, 128] (0: no bound), got 129"},
        {8, 8, "num_splits (128, a forced count) must be at most num_splits_max (8, the bound)"},
        {6, 2, "seqused_k must be 4-byte aligned"},
        {7, 0x6000, "not cu_seqlens_k"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = d;
        switch (bad[i].field) {
        case 0: p.page_size = (int)bad[i].value; break;
        case 1: p.num_pages = (int)bad[i].value; break;
        case 2: p.block_table_stride = bad[i].value; break;
        case 3: p.seqlen_k = (int)bad[i].value; break;
        case 4: p.k_page_stride = bad[i].value; break;
        case 5: p.num_splits = (int)bad[i].value; break;
        case 6: p.seqused_k = (const int32_t *)(uintptr_t)(0x4000 + bad[i].value); break;
        case 7: p.cu_seqlens_k = (const int32_t *)(uintptr_t)bad[i].value; break;
        case 8: p.num_splits_max = (int)bad[i].value; break;
        case 9: p.v_row_stride = bad[i].value; break;   /* v's page stride: 0, dense */
        case 10: p.k_head_stride = bad[i].value; break;
        }
        ck_assert_int_eq(fajit_attn_check(ctx, &p), FAJIT_INVALID_ARGUMENT);
        ck_assert_msg(strstr(fajit_errmsg(ctx), bad[i].msg), "case %zu: '%s'", i,
                      fajit_errmsg(ctx));
    }
    /* the paged fields without a block table */
    p = unit_desc();
    p.page_size = 16;
    ck_assert_int_eq(fajit_attn_check(ctx, &p), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "need a block_table, got page_size 16"));
    p = unit_desc();
    p.seqused_k = (const int32_t *)(uintptr_t)0x4000;
    ck_assert_int_eq(fajit_attn_check(ctx, &p), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "seqused_k needs a block_table"));
    /* the checked mode: an option and a variable */
    fajit_ctx_destroy(ctx);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "", o.checked = 2;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "checked must be 0 or 1, got 2"));
    fajit_ctx_destroy(ctx);
    o.checked = 0;
    setenv("FAJIT_CHECKED", "1", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.checked, 1);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_CHECKED", "yes", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_CHECKED");
}
END_TEST

START_TEST(desc_init_strides)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init(&d, p, p, p, p, 3, 16, 4, 50, 70, 128, FAJIT_F16);
    ck_assert_int_eq(d.q_head_stride, 128);
    ck_assert_int_eq(d.q_row_stride, 16 * 128);
    ck_assert_int_eq(d.q_batch_stride, 16 * 128 * 50);
    ck_assert_int_eq(d.k_row_stride, 4 * 128);
    ck_assert_int_eq(d.v_batch_stride, 4 * 128 * 70);
    ck_assert_float_eq_tol(d.softmax_scale, 0.08838834764f, 1e-7f);
    fj_attn_params prm;
    d.mask = FAJIT_MASK_CAUSAL;
    fj_params_from_desc(&d, &prm);
    ck_assert_int_eq(prm.window_left, -1);
    ck_assert_int_eq(prm.window_right, 0);
    ck_assert_float_eq_tol(prm.scale_log2, 0.08838834764f * 1.44269504f, 1e-6f);
}
END_TEST

TCase *fj_tcase_desc(void)
{
    TCase *tc = tcase_create("desc");
    tcase_add_loop_test(tc, validation_rules, 0, (int)(sizeof k_bad / sizeof k_bad[0]));
    tcase_add_test(tc, features_unserved);
    tcase_add_test(tc, validation_accepts);
    tcase_add_test(tc, bench_refuses);
    tcase_add_test(tc, merge_validation);
    tcase_add_test(tc, validation_paged);
    tcase_add_test(tc, desc_init_strides);
    return tc;
}
