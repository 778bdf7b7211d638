/* test_unit.c - the `unit` suite: no GPU, no NVRTC. Status table, descriptor validation,
 * context options and fallbacks, error paths through a fake driver table (fake_cuda.c), the
 * tuner and the family registry; plus the decode family's host half (test_unit_decode.c)
 * and the cache tests of test_cache*.c (kernel-key known answers: test_cache_key.c). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "../src/api/oracle.h"
#include "../src/autotune/spec.h"
#include "../src/autotune/tune.h"
#include "../src/autotune/fa2_config.h"
#include "../src/families/fa2.h"
#include "../src/families/fa3.h"
#include "../src/kernels_src/fj_tile_order.h"

TCase *fj_tcase_cache(void);
TCase *fj_tcase_spec(void);
TCase *fj_tcase_abi(void);
TCase *fj_tcase_gate(void);
TCase *fj_tcase_decode(void);
TCase *fj_tcase_fa3_features(void);
TCase *fj_tcase_other_nvrtc(void);

/*------ status table ------*/

START_TEST(status_table)
{
    ck_assert_str_eq(fajit_status_name(FAJIT_OK), "FAJIT_OK");
    ck_assert_str_eq(fajit_status_name(FAJIT_INVALID_ARGUMENT), "FAJIT_INVALID_ARGUMENT");
    ck_assert_str_eq(fajit_status_name(FAJIT_IO_ERROR), "FAJIT_IO_ERROR");
    ck_assert_str_eq(fajit_status_name((fajit_status)999), "FAJIT_UNKNOWN_STATUS");
    ck_assert_str_eq(fajit_strerror(FAJIT_CACHE_MISS),
                     "kernel not in cache and compiling is not allowed (STRICT policy)");
    /* Values are stable: a renumbering breaks every embedder. */
    ck_assert_int_eq(FAJIT_NO_DRIVER, 3);
    ck_assert_int_eq(FAJIT_COMPILE_FAILED, 6);
    ck_assert_int_eq(FAJIT_IO_ERROR, 11);
    ck_assert_int_eq(FAJIT_VALIDATION_FAILED, 12);
    for (int s = 0; s <= FAJIT_VALIDATION_FAILED; s++) {
        ck_assert_str_ne(fajit_status_name((fajit_status)s), "FAJIT_UNKNOWN_STATUS");
        ck_assert_str_ne(fajit_strerror((fajit_status)s), "unknown status code");
    }
    ck_assert_str_eq(fajit_version_string(), FAJIT_VERSION_STRING);
    ck_assert_uint_eq(fajit_version_number(), FAJIT_VERSION_NUMBER);
}
END_TEST

/*------ descriptor validation ------*/

static fajit_ctx *memory_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

static fajit_attn_desc valid_desc(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 2, 100, 130, 64, FAJIT_BF16);
    return d;
}

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
    fajit_ctx *ctx = memory_ctx();
    fajit_attn_desc ok = valid_desc();
    ck_assert_int_eq(fajit_attn_check(ctx, &ok), FAJIT_OK);
    ck_assert_int_eq(fajit_attn_check(ctx, NULL), FAJIT_INVALID_ARGUMENT);
    const bad_case *c = &k_bad[_i];
    fajit_attn_desc d = valid_desc();
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
 * feature, on every target; the plan key tells features apart. */
START_TEST(features_unserved)
{
    fajit_ctx *ctx = memory_ctx();
    fajit_attn_desc d = valid_desc();
    d.head_dim = 192, d.head_dim_v = 128;
    d.q_row_stride = d.o_row_stride = 192 * 8, d.k_row_stride = d.v_row_stride = 192 * 2;
    d.q_head_stride = d.k_head_stride = d.v_head_stride = d.o_head_stride = 192;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    char line[512];
    const char *archs[] = {"sm_80", "sm_90a", "sm_100a"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[i], &d, line, sizeof line),
                         FAJIT_UNSUPPORTED);
        ck_assert_msg(strstr(fajit_errmsg(ctx), "no kernel family of this fajit serves this "
                             "problem with head_dim_v != head_dim on sm_"), "%s",
                      fajit_errmsg(ctx));
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(validation_accepts)
{
    fajit_ctx *ctx = memory_ctx();
    fajit_attn_desc d = valid_desc();
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
    fajit_attn_desc big = valid_desc();
    big.batch = FAJIT_MAX_BATCH;
    ck_assert_int_eq(fajit_attn_check(ctx, &big), FAJIT_OK);
    big = valid_desc();
    big.heads_q = FAJIT_MAX_HEADS, big.heads_kv = 1;
    ck_assert_int_eq(fajit_attn_check(ctx, &big), FAJIT_OK);
    big = valid_desc();
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
    fajit_ctx *ctx = memory_ctx();
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
    fajit_ctx *ctx = memory_ctx();
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
    fajit_ctx *ctx = memory_ctx();
    fajit_attn_desc d = valid_desc(), p;
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
    p = valid_desc();
    p.page_size = 16;
    ck_assert_int_eq(fajit_attn_check(ctx, &p), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "need a block_table, got page_size 16"));
    p = valid_desc();
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

/* FAJIT_LINEINFO: 0 or 1 only; 1 compiles with -lineinfo under other keys (the line tables
 * are other bytes: a kernel compiled without them must never be served for it). */
START_TEST(lineinfo_variable)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    fajit_ctx *plain = NULL, *lined = NULL, *bad = NULL;
    unsetenv("FAJIT_LINEINFO");
    ck_assert_int_eq(fajit_ctx_create(&plain, &o), FAJIT_OK);
    ck_assert_int_eq(plain->lineinfo, 0);
    setenv("FAJIT_LINEINFO", "1", 1);
    ck_assert_int_eq(fajit_ctx_create(&lined, &o), FAJIT_OK);
    ck_assert_int_eq(lined->lineinfo, 1);
    setenv("FAJIT_LINEINFO", "on", 1);
    ck_assert_int_eq(fajit_ctx_create(&bad, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(bad), "FAJIT_LINEINFO must be 0 or 1, got 'on'"));
    unsetenv("FAJIT_LINEINFO");

    fajit_attn_desc d = valid_desc();
    fj_target t = {.sm = 90, .arch_a = 1};
    fj_kcfg c;
    ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c), 0);
    fj_kernels ks;
    c.fam->kernels(&c, &d, &ks);
    fj_key k_plain, k_lined, k_plain2;
    ck_assert_int_eq(fj_kernel_key(plain, &ks.v[0], "sm_90a", 13000, &k_plain), FAJIT_OK);
    ck_assert_int_eq(fj_kernel_key(lined, &ks.v[0], "sm_90a", 13000, &k_lined), FAJIT_OK);
    ck_assert_int_eq(fj_kernel_key(plain, &ks.v[0], "sm_90a", 13000, &k_plain2), FAJIT_OK);
    ck_assert_int_ne(memcmp(&k_plain, &k_lined, sizeof k_plain), 0);
    ck_assert_int_eq(memcmp(&k_plain, &k_plain2, sizeof k_plain), 0);
    fajit_ctx_destroy(plain);
    fajit_ctx_destroy(lined);
    fajit_ctx_destroy(bad);
}
END_TEST

/* The persistent tile orders of the fa3 and fa4 kernels (fj_tile_order.h, the code the kernels
 * run): each visits every tile of the problem exactly once; the masked order puts the longest
 * tiles (the last query blocks) first within each L2 group of heads; the static round robin
 * gives every tile index to exactly one (round, CTA), and its serpentine keeps the CTAs' work
 * within one tile of each other where every CTA gets at least two tiles. */
START_TEST(tile_orders)
{
    static const struct { int batch, heads_q, heads_kv, num_mb, seqlen_k; long long bytes; } k[] = {
        {1, 1, 1, 1, 128, 1 << 20},    {1, 4, 1, 5, 4096, 1 << 20},  {3, 6, 2, 16, 8192, 3 << 20},
        {2, 8, 8, 7, 1000, 1},         {4, 32, 8, 9, 2048, 32 << 20}, {1, 64, 4, 64, 16384, 32 << 20},
        {5, 12, 3, 3, 256, 200000},
    };
    static const int grids[] = {1, 7, 132};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const int bhn = k[i].batch * k[i].heads_q, nmb = k[i].num_mb, total = bhn * nmb;
        const int g = fj_order_group(bhn, k[i].heads_q, k[i].heads_kv, k[i].seqlen_k, 128,
                                     k[i].bytes);
        const int ratio = k[i].heads_q / k[i].heads_kv;
        ck_assert_msg(g >= 1 && g <= bhn && (g == bhn || g % ratio == 0), "case %zu: group %d", i, g);
        if (g > ratio)   /* more than one GQA group: their K + V fit the budget */
            ck_assert_int_le((long long)(g / ratio) * 4 * k[i].seqlen_k * 128, k[i].bytes);
        char *seen = calloc((size_t)total, 1), *seen_plain = calloc((size_t)total, 1);
        int prev_mb = nmb, prev_group = -1;
        for (int t = 0; t < total; t++) {
            int b, h, mb;
            fj_order_masked(t, nmb, bhn, g, k[i].heads_q, &b, &h, &mb);
            ck_assert_msg(b >= 0 && b < k[i].batch && h >= 0 && h < k[i].heads_q && mb >= 0 &&
                              mb < nmb, "case %zu tile %d: (%d, %d, %d)", i, t, b, h, mb);
            const int id = (b * k[i].heads_q + h) * nmb + mb;
            ck_assert_msg(!seen[id], "case %zu: tile %d visits (%d, %d, %d) twice", i, t, b, h, mb);
            seen[id] = 1;
            const int group = (b * k[i].heads_q + h) / g;
            if (group != prev_group) {   /* a new L2 group starts at the longest blocks */
                ck_assert_int_eq(mb, nmb - 1);
                ck_assert_int_eq(group, prev_group + 1);
                prev_group = group;
            } else {
                ck_assert_msg(mb <= prev_mb, "case %zu tile %d: block %d after %d", i, t, mb, prev_mb);
            }
            prev_mb = mb;
            fj_order_plain(t, nmb, k[i].heads_q, &b, &h, &mb);
            ck_assert(b >= 0 && b < k[i].batch && h >= 0 && h < k[i].heads_q && mb >= 0 && mb < nmb);
            ck_assert_msg(!seen_plain[(b * k[i].heads_q + h) * nmb + mb], "plain order twice");
            seen_plain[(b * k[i].heads_q + h) * nmb + mb] = 1;
        }
        for (int id = 0; id < total; id++)   /* (both are bijections: every tile was visited) */
            ck_assert(seen[id] && seen_plain[id]);
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
            const int G = grids[gi], rounds = (total + G - 1) / G;
            for (int serp = 0; serp < 2; serp++) {
                int *count = calloc((size_t)rounds * G, sizeof(int));
                long long *work = calloc((size_t)G, sizeof(long long));
                for (int r = 0; r < rounds; r++)
                    for (int cta = 0; cta < G; cta++) {
                        const int t = fj_order_round(r, cta, G, serp);
                        ck_assert(t >= 0 && t < rounds * G);
                        count[t]++;
                        if (t < total) {   /* causal work of the tile: its query block + 1 */
                            int b, h, mb;
                            fj_order_masked(t, nmb, bhn, g, k[i].heads_q, &b, &h, &mb);
                            work[cta] += mb + 1;
                        }
                    }
                for (int t = 0; t < rounds * G; t++)
                    ck_assert_int_eq(count[t], 1);
                long long lo = work[0], hi = work[0];
                for (int cta = 0; cta < G; cta++)
                    lo = work[cta] < lo ? work[cta] : lo, hi = work[cta] > hi ? work[cta] : hi;
                if (serp && g == bhn && total >= 2 * G)   /* one group: the serpentine balance */
                    ck_assert_msg(hi - lo <= nmb, "case %zu grid %d: CTA work %lld..%lld over %d",
                                  i, G, lo, hi, nmb);
                free(count), free(work);
            }
        }
        free(seen), free(seen_plain);
    }
}
END_TEST

/* Threads sharing a context each read their own last error, never another thread's. */
typedef struct {
    fajit_ctx *ctx;
    int head_dim;
    pthread_barrier_t *bar;
    int ok;
} err_thread;

static void *err_worker(void *arg)
{
    err_thread *t = arg;
    char want[64];
    fajit_attn_desc d = valid_desc();
    d.head_dim = t->head_dim;
    snprintf(want, sizeof want, "got %d", t->head_dim);
    t->ok = 1;
    for (int i = 0; i < 2000; i++) {
        if (i == 0)
            pthread_barrier_wait(t->bar);
        if (fajit_attn_check(t->ctx, &d) == FAJIT_OK ||
            !strstr(fajit_errmsg(t->ctx), want))
            t->ok = 0;
    }
    return NULL;
}

START_TEST(errmsg_per_thread)
{
    fajit_ctx *ctx = memory_ctx();
    ck_assert_str_eq(fajit_errmsg(ctx), "");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    err_thread a = {ctx, 7, &bar, 0}, b = {ctx, 264, &bar, 0};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, err_worker, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, err_worker, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&bar);
    ck_assert_msg(a.ok && b.ok, "a thread read another thread's message");
    ck_assert_str_eq(fajit_errmsg(ctx), "");   /* this thread failed nothing */
    /* a thread keeps its last failure per context */
    fajit_ctx *other = memory_ctx();
    fajit_attn_desc d = valid_desc();
    d.head_dim = 7;
    ck_assert_int_ne(fajit_attn_check(ctx, &d), FAJIT_OK);
    d.head_dim = 264;
    ck_assert_int_ne(fajit_attn_check(other, &d), FAJIT_OK);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 7"));
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(other), "got 264"));
    fajit_ctx_destroy(other);
    fajit_ctx_destroy(ctx);
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

/* The parameter block's layout as the kernels see it (they static_assert the same). */
START_TEST(params_layout)
{
    ck_assert_uint_eq(sizeof(fj_attn_params), FJ_PARAMS_SIZE);
    ck_assert_uint_eq(offsetof(fj_attn_params, batch), 152);
    ck_assert_uint_eq(offsetof(fj_attn_params, scale), 184);
    ck_assert_uint_eq(offsetof(fj_attn_params, lse), 32);
    ck_assert_uint_eq(offsetof(fj_attn_params, k_batch_stride), 80);
    /* the decode kernels' block: the offsets its comments give */
    ck_assert_uint_eq(sizeof(fj_decode_params), FJ_DECODE_PARAMS_SIZE);
    ck_assert_uint_eq(offsetof(fj_decode_params, counters), 88);
    ck_assert_uint_eq(offsetof(fj_decode_params, q_batch_stride), 96);
    ck_assert_uint_eq(offsetof(fj_decode_params, batch), 192);
    ck_assert_uint_eq(offsetof(fj_decode_params, num_pages), 224);
    ck_assert_uint_eq(offsetof(fj_decode_params, scale), 248);
    ck_assert_uint_eq(offsetof(fj_decode_params, total_rows), 256);
    ck_assert_uint_eq(offsetof(fj_decode_params, page_shift), 260);
    ck_assert_uint_eq(offsetof(fj_decode_params, k_page16), 264);
    ck_assert_uint_eq(offsetof(fj_decode_params, off16), 280);
    /* the Hopper kernel's paged K/V */
    ck_assert_uint_eq(sizeof(fj_kv_pages), FJ_KV_PAGES_SIZE);
    ck_assert_uint_eq(offsetof(fj_kv_pages, bt_stride), 16);
    ck_assert_uint_eq(offsetof(fj_kv_pages, num_pages), 28);
    ck_assert_uint_eq(offsetof(fj_kv_pages, min_q), 32);
}
END_TEST

START_TEST(arch_names)
{
    ck_assert_int_eq(fj_arch_sm("sm_80"), 80);
    ck_assert_int_eq(fj_arch_sm("sm_90a"), 90);
    ck_assert_int_eq(fj_arch_sm("sm_100a"), 100);
    ck_assert_int_eq(fj_arch_sm("sm_120"), 120);
    ck_assert_int_eq(fj_arch_sm("sm_90x"), -1);
    ck_assert_int_eq(fj_arch_sm("compute_90"), -1);
    ck_assert_int_eq(fj_arch_sm(""), -1);
    ck_assert_int_eq(fj_arch_sm(NULL), -1);
    fajit_ctx *ctx = memory_ctx();
    ck_assert_int_eq(fajit_warm(ctx, "sm_9O", 1, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 'sm_9O'"));
    ck_assert_int_eq(fajit_warm(ctx, "sm_75", 1, NULL, NULL), FAJIT_UNSUPPORTED);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ contexts: options, environment, fallbacks ------*/

typedef struct log_sink {
    int n;
    char last[512];
} log_sink;

static void sink(void *user, fajit_log_level level, const char *msg)
{
    log_sink *s = user;
    (void)level;
    s->n++;
    snprintf(s->last, sizeof s->last, "%s", msg);
}

START_TEST(ctx_options)
{
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(NULL, NULL), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(NULL);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    ck_assert_int_eq(o.device, 0);
    ck_assert_int_eq(o.policy, FAJIT_POLICY_BLOCKING);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    o.policy = (fajit_policy)5;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "policy must be"));
    fajit_ctx_destroy(ctx);

    o.policy = FAJIT_POLICY_BLOCKING;
    setenv("FAJIT_POLICY", "sometimes", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 'sometimes'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_POLICY", "strict", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.policy, FAJIT_POLICY_STRICT);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_POLICY");
    setenv("FAJIT_FAMILY", "fa5", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_FAMILY must be auto, fa2, fa3, decode, fa4, mixed, got 'fa5'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_FAMILY", "ref", 1);   /* the oracle is not a dispatch choice */
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_FAMILY", "FA2", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.family, FAJIT_FAMILY_FA2);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_FAMILY");
    o.cache_max_bytes = -5;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cache_max_bytes must be >= 0 (0: no cap), got -5"));
    fajit_ctx_destroy(ctx);
    o.cache_max_bytes = 0;
    setenv("FAJIT_CACHE_MAX_MB", "64k", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_CACHE_MAX_MB must be a whole number of MiB >= 0 (0: no cap), got '64k'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_CACHE_MAX_MB", "64", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.cache_max_bytes, 64ll << 20);
    ck_assert_int_eq(fajit_cache_prune(ctx, -1, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_cache_prune(ctx, 0, NULL, NULL), FAJIT_OK);   /* memory cache */
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_CACHE_MAX_MB");
}
END_TEST

START_TEST(ctx_cache_location)
{
    char dir[] = "/tmp/fajit-unit-XXXXXX", want[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    fajit_sysinfo si;
    fajit_ctx *ctx;

    /* FAJIT_CACHE_DIR beats XDG_CACHE_HOME; the option beats both */
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("FAJIT_CACHE_DIR");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    snprintf(want, sizeof want, "%s/fajit/", dir);
    ck_assert_ptr_nonnull(si.cache_path);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    snprintf(want, sizeof want, "%s/env", dir);
    setenv("FAJIT_CACHE_DIR", want, 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    snprintf(want, sizeof want, "%s/opt", dir);
    o.cache_dir = want;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    /* nothing set at all: memory only, with a warning through the log callback */
    unsetenv("FAJIT_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("HOME");
    log_sink s = {0};
    o.cache_dir = NULL;
    o.log = sink;
    o.log_user = &s;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_ptr_null(si.cache_path);
    ck_assert_int_ge(s.n, 1);
    ck_assert_ptr_nonnull(strstr(s.last, "memory only"));
    fajit_ctx_destroy(ctx);
    if (home) {
        setenv("HOME", home, 1);
        free(home);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/*------ a fake driver (fake_cuda.c): error paths without a GPU ------*/

START_TEST(fake_driver)
{
    fj_cuda fake = fake_device_table();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    fajit_ctx *ctx;

    g_count = 0;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_NO_DEVICE);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "device must be in [0, 0), got 0"));
    fajit_ctx_destroy(ctx);

    g_count = 1, g_fail_get = 1;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_CUDA_ERROR);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "CUDA_ERROR_FAKE (999)"));
    fajit_ctx_destroy(ctx);

    g_fail_get = 0;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_str_eq(ctx->arch, "sm_90a");
    ck_assert_int_eq(ctx->sm_count, 132);
    ck_assert_str_eq(ctx->gpu_name, "Fake GPU");
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* The tuner's paged inputs (oracle.c): the block table scatters the pages in random order,
 * and the reference's twin holds set 0's keys and values in sequence order, page by page
 * from where the table put them. Device memory is host memory here (a fake driver). */
static CUresult f_hmalloc(CUdeviceptr *p, size_t n)
{
    void *m = malloc(n);
    *p = (CUdeviceptr)(uintptr_t)m;
    return m ? 0 : 2;
}
static CUresult f_hfree(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
static CUresult f_htod(CUdeviceptr d, const void *s, size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}

START_TEST(inputs_shuffled_pages)
{
    fj_cuda fake = fake_device_table();
    fake.cuMemAlloc = f_hmalloc, fake.cuMemFree = f_hfree, fake.cuMemcpyHtoD = f_htod;
    fj_cuda_set_for_testing(&fake);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    fajit_ctx *ctx;
    g_count = 1, g_fail_get = 0;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);

    fj_problem p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "paged");
    p.dtype = FAJIT_BF16, p.head_dim = 16, p.heads_q = 4, p.heads_kv = 2;
    p.window_left = p.window_right = -1;
    p.page_size = 16;
    const fj_shape sh = {1, 50, 3};   /* 4 pages per sequence, 12 in all */
    const int pps = 4, pages = 12, pe = 16 * 2 * 16;
    fj_inputs in;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 2, NULL, NULL, 1, &in), FAJIT_OK);
    const fajit_attn_desc *d = &in.d[0];
    ck_assert_int_eq(d->page_size, 16);
    ck_assert_int_eq(d->block_table_stride, pps);
    ck_assert_int_eq(d->num_pages, pages);
    ck_assert_ptr_eq(d->block_table, (const void *)(uintptr_t)in.bt);
    ck_assert_ptr_eq(in.d[1].block_table, d->block_table);
    const int32_t *bt = d->block_table;
    int seen[12] = {0}, moved = 0;
    for (int l = 0; l < pages; l++) {
        ck_assert(bt[l] >= 0 && bt[l] < pages);
        seen[bt[l]]++;
        moved += bt[l] != l;
    }
    for (int l = 0; l < pages; l++)
        ck_assert_int_eq(seen[l], 1);   /* a permutation ... */
    ck_assert_int_gt(moved, pages / 2);  /* ... that moves most pages */
    ck_assert(in.k_twin && in.v_twin);
    for (int l = 0; l < pages; l++) {   /* the twin: logical page l from physical bt[l] */
        const uint16_t *k = (const uint16_t *)(uintptr_t)in.k[0] + (size_t)bt[l] * pe;
        const uint16_t *v = (const uint16_t *)(uintptr_t)in.v[0] + (size_t)bt[l] * pe;
        ck_assert(!memcmp((const uint16_t *)(uintptr_t)in.k_twin + (size_t)l * pe, k, pe * 2));
        ck_assert(!memcmp((const uint16_t *)(uintptr_t)in.v_twin + (size_t)l * pe, v, pe * 2));
    }
    ck_assert(memcmp((const void *)(uintptr_t)in.k[0], (const void *)(uintptr_t)in.k_twin,
                     (size_t)pages * pe * 2));
    /* the oracle refuses a paged problem without its twin (before any launch) */
    fj_oracle orc;
    memset(&orc, 0, sizeof orc);
    ck_assert_int_eq(fj_oracle_reference(ctx, &orc, d, 0, 0), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "sequence order"));
    fj_inputs_free(ctx->cu, &in);
    ck_assert(!in.k_twin && !in.bt);

    /* without the twin (the benchmark): shuffled pages, no second copy */
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, 0, &in), FAJIT_OK);
    ck_assert(in.bt && !in.k_twin && !in.v_twin);
    fj_inputs_free(ctx->cu, &in);
    /* contiguous: no table, no twin even when asked */
    p.page_size = 0;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, 1, &in), FAJIT_OK);
    ck_assert(!in.bt && !in.k_twin && !in.d[0].block_table);
    fj_inputs_free(ctx->cu, &in);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

static CUresult f_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)e;
    g_sc.arg[g_sc.launches++ % 8] = *(CUdeviceptr *)a[4];
    return 0;
}
static CUresult f_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                       const unsigned long long *st, const unsigned *b, const unsigned *el, int i,
                       int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)d, (void)st, (void)b, (void)el, (void)i, (void)w, (void)l, (void)o;
    memset(m, 0, 128);
    return 0;
}

START_TEST(sched_counters)
{
    fj_cuda fake = fake_device_table();
    fake.cuCtxSetCurrent = f_setcur;
    fake.cuLaunchKernel = f_launch;
    fake.cuTensorMapEncodeTiled = f_tmap;
    fj_cuda_set_for_testing(&fake);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    fajit_ctx *ctx;
    g_count = 1, g_fail_get = 0;
    memset(&g_sc, 0, sizeof g_sc);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);

    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 16, 16, 1024, 1024, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    fj_kernel k;
    memset(&k, 0, sizeof k);
    k.fn = (CUfunction)0x1;
    fj_kplan l;
    memset(&l, 0, sizeof l);
    fj_fa3_kcfg(&(fj_fa3_config){128, 128, 1, 1, 2}, &l.cfg);
    l.cfg.fam->kernels(&l.cfg, &d, &l.ks);
    l.k[0] = &k;
    fj_fa3_config *l_fa3 = (fj_fa3_config *)(void *)l.cfg.b;

    /* a driver table without cuMemAlloc: a clear error, no launch */
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, NULL), FAJIT_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cuMemAlloc"));
    ck_assert_int_eq(g_sc.launches, 0);
    fake.cuMemAlloc = f_alloc;
    fake.cuMemsetD8 = f_memset;
    fake.cuCtxSynchronize = f_sync;
    fake.cuMemFree = f_free;
    for (int i = 0; i < FJ_COUNTER_SLOTS + 2; i++)
        ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_sc.bytes,
                      (FJ_COUNTER_SLOTS + FJ_COUNTER_GRAPH_SLOTS) * FJ_COUNTER_SLOT_BYTES);
    ck_assert_int_eq(g_sc.memsets, 1);   /* zeroed once, and synchronized */
    ck_assert_int_eq(g_sc.syncs, 1);
    ck_assert_int_eq(g_sc.launches, FJ_COUNTER_SLOTS + 2);
    /* launches 0..FJ_COUNTER_SLOTS+1: the ring wraps after FJ_COUNTER_SLOTS */
    ck_assert_uint_eq(g_sc.arg[0], g_sc.alloc);
    ck_assert_uint_eq(g_sc.arg[1], g_sc.alloc + FJ_COUNTER_SLOT_BYTES);
    ck_assert_uint_eq(g_sc.arg[FJ_COUNTER_SLOTS % 8], g_sc.alloc);
    ck_assert_uint_eq(g_sc.arg[(FJ_COUNTER_SLOTS + 1) % 8], g_sc.alloc + FJ_COUNTER_SLOT_BYTES);
    l_fa3->persistent = 1;   /* the static order: no counter */
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_sc.arg[(FJ_COUNTER_SLOTS + 2) % 8], 0);
    fajit_ctx_destroy(ctx);
    ck_assert_uint_eq(g_sc.freed, g_sc.alloc);

    /* With the allocation functions, a 9.0 device gets the ring with the context: the
     * synchronize happens there, and no launch synchronizes (launches may be captured). */
    memset(&g_sc, 0, sizeof g_sc);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(g_sc.memsets, 1);
    ck_assert_int_eq(g_sc.syncs, 1);
    ck_assert_uint_eq(atomic_load(&ctx->counters), g_sc.alloc);
    l_fa3->persistent = 2;
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_sc.arg[0], g_sc.alloc);
    ck_assert_int_eq(g_sc.syncs, 1);
    /* launches under graph capture get slots of their own, past the ring */
    fake.cuStreamIsCapturing = f_capturing;
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, F_CAPTURED), FAJIT_OK);
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, F_CAPTURED), FAJIT_OK);
    ck_assert_int_eq(fj_kplan_launch(ctx, &l, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_sc.arg[1], g_sc.alloc + FJ_COUNTER_SLOT_BYTES * FJ_COUNTER_SLOTS);
    ck_assert_uint_eq(g_sc.arg[2], g_sc.alloc + FJ_COUNTER_SLOT_BYTES * (FJ_COUNTER_SLOTS + 1));
    ck_assert_uint_eq(g_sc.arg[3], g_sc.alloc + FJ_COUNTER_SLOT_BYTES);
    fajit_ctx_destroy(ctx);
    ck_assert_uint_eq(g_sc.freed, g_sc.alloc);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* The Hopper default's length classes: the boundaries, a representative seqlen per class
 * that maps back to it, and rules that differ between them (causal hd 256: the dynamic order
 * in the long class, the grid above FJ_FA3_LONG_SEQ; the mid class: hd 128 unmasked only). */
START_TEST(fa3_length_classes)
{
    static const struct { int seqlen, cls; } k[] = {
        {0, FJ_FA3_CLASS_LONG},       {1, FJ_FA3_CLASS_LONG},
        {2, FJ_FA3_CLASS_SHORT},      {FJ_FA3_SHORT_SEQ, FJ_FA3_CLASS_SHORT},
        {FJ_FA3_SHORT_SEQ + 1, FJ_FA3_CLASS_MID}, {FJ_FA3_MID_SEQ, FJ_FA3_CLASS_MID},
        {FJ_FA3_MID_SEQ + 1, FJ_FA3_CLASS_LONG},  {FJ_FA3_LONG_SEQ, FJ_FA3_CLASS_LONG},
        {FJ_FA3_LONG_SEQ + 1, FJ_FA3_CLASS_VLONG}, {1 << 24, FJ_FA3_CLASS_VLONG},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        ck_assert_msg(fj_fa3_length_class(k[i].seqlen) == k[i].cls, "seqlen %d", k[i].seqlen);
    for (int c = 0; c < FJ_FA3_CLASSES; c++)
        ck_assert_int_eq(fj_fa3_length_class(fj_fa3_class_seqlen(c)), c);
    ck_assert_int_eq(fj_fa3_default(256, FJ_MASK_CAUSAL, 4096).persistent, 2);
    ck_assert_int_eq(fj_fa3_default(256, FJ_MASK_CAUSAL, 16384).persistent, 0);
    ck_assert_int_eq(fj_fa3_default(64, FJ_MASK_CAUSAL, 16384).persistent, 0);
    /* hd 128 causal keeps the dynamic order at every length */
    for (int c = 0; c < FJ_FA3_CLASSES; c++)
        ck_assert_int_eq(fj_fa3_default(128, FJ_MASK_CAUSAL, fj_fa3_class_seqlen(c)).persistent, 2);
    /* the mid class is the long class but for hd 97..128 unmasked (128x128 persistent) */
    for (int hd = 8; hd <= 256; hd += 8)
        for (int m = 0; m < 3; m++) {
            fj_fa3_config mid = fj_fa3_default(hd, m, FJ_FA3_MID_SEQ);
            fj_fa3_config lng = fj_fa3_default(hd, m, FJ_FA3_LONG_SEQ);
            if (m == FJ_MASK_NONE && hd > 96 && hd <= 128)
                ck_assert(mid.block_m == 128 && mid.block_n == 128 && mid.persistent == 1);
            else
                ck_assert_msg(memcmp(&mid, &lng, sizeof mid) == 0, "hd %d mask %d", hd, m);
        }
}
END_TEST

/* On a machine without a driver (CI), a context for a device fails cleanly. */
START_TEST(no_driver)
{
    char why[256] = "";
    if (fj_cuda_get(why, sizeof why))
        return;   /* a driver is present: nothing to check here */
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_NO_DRIVER);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "libcuda.so.1"));
    fajit_ctx_destroy(ctx);
    fajit_device_info di;
    ck_assert_int_eq(fajit_device_info_get(NULL, 0, &di), FAJIT_NO_DRIVER);
}
END_TEST

/* Every compile gets the embedded headers: all of them fit FJ_NVRTC_MAX_HEADERS (a header
 * past the limit fails here, not as a confusing "cannot open" in a kernel's compile), and
 * an array too small for them is refused, not silently cut. */
START_TEST(kernel_headers)
{
    fj_src h[FJ_NVRTC_MAX_HEADERS];
    const int n = fj_kernel_headers(h, FJ_NVRTC_MAX_HEADERS);
    ck_assert_int_gt(n, 0);
    int dec = 0, params = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(h[i].name);
        ck_assert(strcmp(h[i].name + len - 2, ".h") == 0 || strcmp(h[i].name + len - 4, ".cuh") == 0);
        ck_assert_uint_eq(h[i].len, strlen(h[i].text));
        params += strcmp(h[i].name, "fajit_params.h") == 0;
        dec += strcmp(h[i].name, "fj_sm80_prims.cuh") == 0;
    }
    ck_assert_int_eq(params + dec, 2);
    ck_assert_int_eq(fj_kernel_headers(h, n - 1), -1);
    ck_assert_int_eq(fj_kernel_headers(h, n), n);
}
END_TEST

START_TEST(ptxas_log_parse)
{
    const char *log =
        "ptxas info    : Compiling entry function 'fj_attn_ref' for 'sm_90a'\n"
        "ptxas info    : Function properties for fj_attn_ref\n"
        "    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 2080 bytes smem, 576 bytes cmem[0]\n";
    int regs, smem, spill, stack;
    fj_parse_ptxas_log(log, &regs, &smem, &spill, &stack);
    ck_assert_int_eq(regs, 40);
    ck_assert_int_eq(smem, 2080);
    ck_assert_int_eq(spill, 8);
    ck_assert_int_eq(stack, 24);
    fj_parse_ptxas_log("", &regs, &smem, &spill, &stack);
    ck_assert_int_eq(regs, -1);
}
END_TEST


/*------ the tuner's choice, with fake hooks ------*/

typedef struct fake_tuner {
    const double *ms;       /* true time of each candidate */
    int prune, wrong;       /* candidate pruned at compile, candidate that computes wrong */
    unsigned noise;         /* seed of the timing noise */
    int calls[8];
} fake_tuner;

static int f_prepare(void *u, int i, char *why, size_t n)
{
    fake_tuner *f = u;
    f->calls[i]++;
    if (i == f->prune) {
        snprintf(why, n, "spills 16 B, local memory 0 B");
        return -1;
    }
    return 0;
}

static int f_check(void *u, int i, char *why, size_t n)
{
    fake_tuner *f = u;
    if (i == f->wrong) {
        snprintf(why, n, "wrong result: max error 0.5 against the reference kernel");
        return -1;
    }
    return 0;
}

static int f_time(void *u, int i, double *s, int reps, char *why, size_t n)
{
    fake_tuner *f = u;
    (void)why, (void)n;
    for (int k = 0; k < reps; k++) {   /* +-1% noise, and one 3x outlier */
        f->noise = f->noise * 1103515245u + 12345u;
        s[k] = f->ms[i] * (0.99 + 0.02 * (f->noise >> 16 & 0x7fff) / 32767.0) * (k == 3 ? 3 : 1);
    }
    return 0;
}

static int run_fake(const double *ms, int n, int prune, int wrong, unsigned seed,
                    fj_tune_entry *e)
{
    fake_tuner f = {ms, prune, wrong, seed, {0}};
    fj_tune_hooks h = {f_prepare, f_check, f_time, NULL, &f};
    for (int i = 0; i < n; i++)
        snprintf(e[i].config, sizeof e[i].config, "cand%d", i);
    return fj_tune_run(e, n, &h, 21, 0.03);
}

START_TEST(tune_choice)
{
    fj_tune_entry e[5];
    /* clear winner */
    const double a[] = {1.0, 0.7, 0.9, 1.2};
    ck_assert_int_eq(run_fake(a, 4, -1, -1, 1, e), 1);
    /* deterministic under different noise */
    for (unsigned seed = 2; seed < 40; seed++)
        ck_assert_int_eq(run_fake(a, 4, -1, -1, seed, e), 1);
    /* inside the noise band the earlier (the default, index 0) wins, whatever the noise */
    const double b[] = {1.0, 0.985, 1.1};
    for (unsigned seed = 1; seed < 40; seed++)
        ck_assert_int_eq(run_fake(b, 3, -1, -1, seed, e), 0);
    /* pruned and wrong candidates never win, and say why */
    const double c[] = {1.0, 0.5, 0.6, 0.8};
    ck_assert_int_eq(run_fake(c, 4, 1, 2, 7, e), 3);
    ck_assert_int_eq(e[1].ok, 0);
    ck_assert_ptr_nonnull(strstr(e[1].why, "spills"));
    ck_assert_int_eq(e[2].ok, 0);
    ck_assert_ptr_nonnull(strstr(e[2].why, "wrong result"));
    /* the median ignores the outlier; the spread is stated */
    ck_assert_double_eq_tol(e[3].median_ms, 0.8, 0.01);
    ck_assert_double_le(e[3].spread, 0.05);
    /* the whole table is kept */
    char json[2048];
    fj_tune_table_json(e, 4, json, sizeof json);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "\"cand%d\"", i);
        ck_assert_ptr_nonnull(strstr(json, name));
    }
    ck_assert_ptr_nonnull(strstr(json, "spills 16 B"));
    /* everything pruned: no winner */
    const double d1[] = {1.0};
    ck_assert_int_eq(run_fake(d1, 1, 0, -1, 1, e), -1);
}
END_TEST

START_TEST(tune_stats)
{
    double s[] = {5, 1, 4, 2, 3};
    double med, spread;
    fj_tune_stats(s, 5, &med, &spread);
    ck_assert_double_eq(med, 3);
    ck_assert_double_eq_tol(spread, (5.0 - 1.0) / 3.0, 1e-12);
    double t[] = {2, 4};
    fj_tune_stats(t, 2, &med, &spread);
    ck_assert_double_eq(med, 3);
}
END_TEST

/* The plan cache's bucket index changes exactly where the tuning row's bucket name does. */
START_TEST(bucket_index_matches_names)
{
    static const int lens[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 511, 512, 513, 1000, 1024, 1025, 2048, 2049, 4096,
                               4097, 8192, 8193, 16384, 16385, 50000, 1 << 20};
    int n = (int)(sizeof lens / sizeof lens[0]);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            for (int c = 0; c < n; c++)
                for (int e = 0; e < n; e++) {
                    char x[FJ_BUCKET_LEN], y[FJ_BUCKET_LEN];
                    ck_assert_int_eq(fj_shape_bucket(lens[a], lens[b], x, sizeof x), 0);
                    ck_assert_int_eq(fj_shape_bucket(lens[c], lens[e], y, sizeof y), 0);
                    int same_name = strcmp(x, y) == 0;
                    int same_index = fj_bucket_index(lens[a], lens[b]) ==
                                     fj_bucket_index(lens[c], lens[e]);
                    ck_assert_msg(same_name == same_index, "(%d,%d)=%s vs (%d,%d)=%s",
                                  lens[a], lens[b], x, lens[c], lens[e], y);
                }
}
END_TEST

START_TEST(config_names)
{
    fj_fa2_config c = {128, 64, 4, 2};
    fj_kcfg k, back;
    char name[32];
    fj_fa2_kcfg(&c, &k);
    fj_kcfg_name(&k, name);
    ck_assert_str_eq(name, "128x64w4s2");   /* FA2 rows carry no prefix */
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&k, &back));
    ck_assert_int_eq(fj_kcfg_parse("128x64w4", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("128x64w4s2x", &back), -1);
    fj_fa3_kcfg(&(fj_fa3_config){128, 176, 1, 1, 2}, &k);
    fj_kcfg_name(&k, name);
    ck_assert_str_eq(name, "fa3:128x176o1p1s2");
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&k, &back));
    ck_assert_int_eq(fj_kcfg_parse("fa3:128x176o1p1", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("ref", &back), 0);
    ck_assert_str_eq(back.fam->name, "ref");
    ck_assert_int_eq(fj_kcfg_parse("nope:1", &back), -1);
    /* dense, stable family values and names */
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_AUTO), "auto");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_REF), "ref");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA2), "fa2");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA3), "fa3");
    ck_assert_ptr_null(fajit_family_name((fajit_family)77));
    for (int i = 0; i < fj_family_count(); i++)
        ck_assert_int_eq(fj_family_at(i)->id, i + 1);
}
END_TEST

/*------ a family registered through the registry alone ------*/

/* "dummy": head_dim 72 on sm_90a only, a main kernel and a combine kernel sharing scratch
 * and a counter; rank above every shipped family. */
static int dm_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return d->head_dim == 72 && t->sm == 90 && t->arch_a;
}
static void dm_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out);
static int dm_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    dm_default(d, t, out);
    return 1;
}
static int dm_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *w,
                    size_t n)
{
    (void)c, (void)d, (void)w, (void)n;
    return t->sm == 90 ? 0 : -1;
}
static void dm_name(const fj_kcfg *c, char *out, size_t n) { snprintf(out, n, "s%d", c->b[0]); }
static int dm_parse(const char *s, fj_kcfg *c);
static void dm_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    memset(out, 0, sizeof *out);
    out->n = 2;
    for (int i = 0; i < 2; i++) {
        out->v[i].op = FAJIT_OP_FWD;
        out->v[i].source = "attn_ref.cu";
        out->v[i].function = i ? "dummy_combine" : "dummy_main";
        snprintf(out->v[i].preamble, sizeof out->v[i].preamble,
                 "#define DUMMY %d\n#define S %d\n#define FJ_DTYPE %d\n", i, c->b[0],
                 (int)d->dtype);
        snprintf(out->v[i].name, sizeof out->v[i].name, "dummy %s d%d s%d",
                 i ? "combine" : "main", d->head_dim, c->b[0]);
        out->threads[i] = 64 * (i + 1);
    }
}
static void dm_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                    size_t n)
{
    (void)c, (void)d, (void)t;
    snprintf(out, n, "grid (splits, heads_q, batch)");
}
static void dm_ws(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                  fj_workspace *out)
{
    (void)c, (void)t;
    out->counter_bytes = 4;
    out->scratch_bytes = (size_t)d->batch * 4096;
}
static fajit_status dm_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                            const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    (void)c, (void)why, (void)n;
    a->grid[0] = 1, a->grid[1] = (unsigned)d->heads_q, a->grid[2] = (unsigned)d->batch;
    long long mark = 100 + i;
    fj_args_push(a, &mark, sizeof mark, 8);
    fj_args_push(a, &env->scratch, sizeof env->scratch, 8);
    fj_args_push(a, &env->counters, sizeof env->counters, 8);
    return FAJIT_OK;
}
static const fj_family k_dummy = {
    .name = "dummy", .id = 9, .op = FAJIT_OP_FWD, .rank = 100, .cfg_prefix = "dummy:",
    .applies = dm_applies, .default_cfg = dm_default, .candidates = dm_one, .shipped = dm_one,
    .check = dm_check, .cfg_name = dm_name, .cfg_parse = dm_parse, .kernels = dm_kernels,
    .describe_grid = dm_grid, .workspace = dm_ws, .launch_args = dm_args,
};
static void dm_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    (void)d, (void)t;
    memset(out, 0, sizeof *out);
    out->fam = &k_dummy;
    out->b[0] = 3;
}
static int dm_parse(const char *s, fj_kcfg *c)
{
    int v;
    char tail;
    if (sscanf(s, "s%d%c", &v, &tail) != 1)
        return -1;
    c->fam = &k_dummy;
    c->b[0] = (unsigned char)v;
    return 0;
}



START_TEST(registry_dummy_family)
{
    fj_family_register_for_testing(&k_dummy);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 8, 128, 4096, 72, FAJIT_BF16);   /* prefill */
    char line[1024];

    /* plan: dispatch picks it where it applies, and shows both launches */
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "dummy main d72 s3 (default)") &&
                  strstr(line, "; then dummy combine d72 s3") &&
                  strstr(line, "entry dummy_combine"), "%s", line);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa2 bf16 d72") && !strstr(line, "dummy"), "%s", line);
    d.head_dim = 64;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(!strstr(line, "dummy"), "%s", line);
    d.head_dim = 72;
    /* a forced family that applies wins over the dummy's rank */
    fajit_ctx_destroy(ctx);
    o.family = FAJIT_FAMILY_FA2;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa2 bf16 d72"), "%s", line);
    fajit_ctx_destroy(ctx);

    /* warm: both kernels of the family, for sm_90a only */
    static fj_variant vs[1200];
    int n = fj_warm_variants("sm_90a", vs, 1200), mains = 0, combines = 0;
    for (int i = 0; i < n; i++) {
        mains += strncmp(vs[i].name, "dummy main d72", 14) == 0;
        combines += strncmp(vs[i].name, "dummy combine d72", 17) == 0;
    }
    ck_assert_int_eq(mains, 2);      /* f16 and bf16 */
    ck_assert_int_eq(combines, 2);
    n = fj_warm_variants("sm_80", vs, 1200);
    for (int i = 0; i < n; i++)
        ck_assert_msg(strncmp(vs[i].name, "dummy", 5) != 0, "%s on sm_80", vs[i].name);
    fj_kcfg k;
    ck_assert_int_eq(fj_kcfg_parse("dummy:s5", &k), 0);
    ck_assert_ptr_eq(k.fam, &k_dummy);

    /* launch: a plan of two kernels on one stream, with context scratch (stream-ordered,
     * given back after the launches) and a counter slot, or the caller's workspace */
    fj_cuda fake = fake_device_table();
    fake.cuLaunchKernel = dm_launch;
    fake.cuMemAlloc = f_alloc;
    fake.cuMemsetD8 = f_memset;
    fake.cuCtxSynchronize = f_sync;
    fake.cuMemFree = f_free;
    fake.cuCtxSetCurrent = f_setcur;
    fj_cuda_set_for_testing(&fake);
    g_count = 1, g_fail_get = 0;
    memset(&g_sc, 0, sizeof g_sc);
    memset(&g_dm, 0, sizeof g_dm);
    o.device = 0;
    o.family = FAJIT_FAMILY_AUTO;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    dm_default(&d, NULL, &kp.cfg);
    k_dummy.kernels(&kp.cfg, &d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_UNSUPPORTED);  /* no async alloc */
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cuMemAllocAsync"));
    ck_assert_int_eq(g_dm.launches, 0);
    fake.cuMemAllocAsync = dm_alloc_async;
    fake.cuMemFreeAsync = dm_free_async;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dm.launches, 2);
    ck_assert(g_dm.mark[0] == 100 && g_dm.mark[1] == 101);   /* main, then combine */
    ck_assert_uint_eq(g_dm.threads[0], 64);
    ck_assert_uint_eq(g_dm.threads[1], 128);
    ck_assert_uint_eq(g_dm.allocated, 0x9000000 + 2 * 4096);
    ck_assert_uint_eq(g_dm.scratch[0], g_dm.allocated);
    ck_assert_uint_eq(g_dm.scratch[1], g_dm.allocated);
    ck_assert_uint_eq(g_dm.freed, g_dm.allocated);
    ck_assert_uint_eq(g_dm.counters[0], g_sc.alloc);   /* the ring's first slot */
    ck_assert_uint_eq(g_dm.counters[1], g_sc.alloc);
    /* the caller's workspace: counters first, scratch 256 bytes in */
    size_t need;
    ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
    ck_assert_uint_eq(need, 256 + 2 * 4096);
    d.workspace = (void *)(uintptr_t)0x4000000;
    d.workspace_bytes = need - 1;
    g_dm.launches = 0;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "workspace_bytes must be at least 8448"));
    ck_assert_int_eq(g_dm.launches, 0);
    d.workspace_bytes = need;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_dm.counters[0], 0x4000000);
    ck_assert_uint_eq(g_dm.scratch[1], 0x4000000 + 256);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    fj_family_register_for_testing(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("unit");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, status_table);
    tcase_add_loop_test(tc, validation_rules, 0, (int)(sizeof k_bad / sizeof k_bad[0]));
    tcase_add_test(tc, validation_accepts);
    tcase_add_test(tc, features_unserved);
    tcase_add_test(tc, bench_refuses);
    tcase_add_test(tc, validation_paged);
    tcase_add_test(tc, errmsg_per_thread);
    tcase_add_test(tc, lineinfo_variable);
    tcase_add_test(tc, tile_orders);
    tcase_add_test(tc, desc_init_strides);
    tcase_add_test(tc, params_layout);
    tcase_add_test(tc, arch_names);
    tcase_add_test(tc, ctx_options);
    tcase_add_test(tc, ctx_cache_location);
    tcase_add_test(tc, fake_driver);
    tcase_add_test(tc, inputs_shuffled_pages);
    tcase_add_test(tc, sched_counters);
    tcase_add_test(tc, fa3_length_classes);
    tcase_add_test(tc, no_driver);
    tcase_add_test(tc, kernel_headers);
    tcase_add_test(tc, ptxas_log_parse);
    suite_add_tcase(s, tc);
    TCase *tt = tcase_create("autotune");
    tcase_set_timeout(tt, 120);   /* bucket_index_matches_names ran past 4 s under TSan in CI */
    tcase_add_test(tt, tune_choice);
    tcase_add_test(tt, tune_stats);
    tcase_add_test(tt, bucket_index_matches_names);
    tcase_add_test(tt, config_names);
    tcase_add_test(tt, registry_dummy_family);
    tcase_add_test(tt, merge_validation);
    suite_add_tcase(s, tt);
    suite_add_tcase(s, fj_tcase_cache());
    suite_add_tcase(s, fj_tcase_spec());
    suite_add_tcase(s, fj_tcase_abi());
    suite_add_tcase(s, fj_tcase_gate());
    suite_add_tcase(s, fj_tcase_decode());
    suite_add_tcase(s, fj_tcase_fa3_features());
    suite_add_tcase(s, fj_tcase_other_nvrtc());
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
