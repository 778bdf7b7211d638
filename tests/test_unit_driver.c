/* test_unit_driver.c - the unit suite's tests through the fake CUDA driver of fake_cuda.c
 * (no GPU): error paths, inputs over shuffled pages, the Hopper family's tile counters and
 * length classes, a context without a driver; and the compile's embedded headers and ptxas
 * log parsing. Part of the TCase "api" (test_unit.c). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "../src/api/oracle.h"
#include "../src/families/fa3.h"

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

/* head_dim_v: V and O of head_dim_v columns (strides, the V pages and their twin); an FP8
 * kv_dtype is still refused. */
START_TEST(inputs_head_dim_v)
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
    snprintf(p.name, sizeof p.name, "mla");
    p.dtype = FAJIT_BF16, p.head_dim = 48, p.head_dim_v = 32, p.heads_q = 4, p.heads_kv = 2;
    p.window_left = p.window_right = -1;
    p.page_size = 16;
    const fj_shape sh = {8, 50, 3};   /* 4 pages per sequence, 12 in all */
    const int pages = 12, rows_k = 64, pev = 16 * 2 * 32;
    fj_inputs in;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, 1, &in), FAJIT_OK);
    const fajit_attn_desc *d = &in.d[0];
    ck_assert_int_eq(d->head_dim, 48);
    ck_assert_int_eq(d->head_dim_v, 32);
    ck_assert_int_eq(d->k_row_stride, 2 * 48);
    ck_assert_int_eq(d->v_row_stride, 2 * 32);
    ck_assert_int_eq(d->v_head_stride, 32);
    ck_assert_int_eq(d->o_row_stride, 4 * 32);
    ck_assert_int_eq(d->o_head_stride, 32);
    ck_assert_int_eq(d->o_batch_stride, 4 * 32 * 8);
    ck_assert_int_eq(d->k_batch_stride, rows_k * 2 * 48);
    ck_assert_int_eq(d->v_batch_stride, rows_k * 2 * 32);
    ck_assert_int_eq(fajit_attn_check(ctx, d), FAJIT_OK);
    const int32_t *bt = d->block_table;
    for (int l = 0; l < pages; l++) {   /* V's twin: logical page l from physical bt[l] */
        const uint16_t *v = (const uint16_t *)(uintptr_t)in.v[0] + (size_t)bt[l] * pev;
        ck_assert(!memcmp((const uint16_t *)(uintptr_t)in.v_twin + (size_t)l * pev, v, pev * 2));
    }
    fj_inputs_free(ctx->cu, &in);
    /* contiguous */
    p.page_size = 0;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, 0, &in), FAJIT_OK);
    ck_assert_int_eq(in.d[0].v_batch_stride, 50 * 2 * 32);
    ck_assert_int_eq(in.d[0].k_batch_stride, 50 * 2 * 48);
    ck_assert_int_eq(fajit_attn_check(ctx, &in.d[0]), FAJIT_OK);
    fj_inputs_free(ctx->cu, &in);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* An FP8 code's value, by the OCP formats (normal and subnormal codes). */
static float fp8_of(uint8_t b, int e4m3)
{
    const int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    const int e = (b & 0x7f) >> mb, m = b & ((1 << mb) - 1);
    float v = e ? ldexpf(1.f + (float)m / (float)(1 << mb), e - bias)
                : ldexpf((float)m / (float)(1 << mb), 1 - bias);
    return b & 0x80 ? -v : v;
}

static float half_of(uint16_t h, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return h & 0x8000 ? -v : v;
}

/* Checks FP8 `codes` (n, physical pages of pe elements, page l of the twin from physical
 * page bt[l]; bt NULL: in order) against the twin: each a normal code, the twin its value
 * times descale, exactly. */
static void check_fp8(const uint8_t *codes, const uint16_t *twin, const int32_t *bt, size_t n,
                      size_t pe, int e4m3, int bf16, float descale)
{
    for (size_t i = 0; i < n; i++) {
        const size_t at = bt ? (size_t)bt[i / pe] * pe + i % pe : i;
        const uint8_t b = codes[at];
        ck_assert_msg((b & 0x7f) >> (e4m3 ? 3 : 2) != 0, "code %02x is not normal", b);
        ck_assert_msg(e4m3 ? (b & 0x7f) != 0x7f : ((b & 0x7f) >> 2) != 31, "code %02x", b);
        ck_assert_msg(half_of(twin[i], bf16) == fp8_of(b, e4m3) * descale,
                      "element %zu: twin %g, code %02x -> %g", i, half_of(twin[i], bf16), b,
                      fp8_of(b, e4m3) * descale);
    }
}

/* FP8 K/V inputs (the validation gate's, the tuner's, the benchmark's): K and V hold random
 * normal FP8 codes, one descale per tensor after the sinks (and slopes), and the twin holds
 * their descaled values in Q's dtype, exactly: in sequence order where paged, as they are
 * where contiguous. Without FJ_INPUTS_TWIN (the benchmark) no twin. */
START_TEST(inputs_fp8)
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
    snprintf(p.name, sizeof p.name, "fp8");
    p.dtype = FAJIT_BF16, p.head_dim = 16, p.heads_q = 4, p.heads_kv = 2;
    p.window_left = p.window_right = -1;
    p.page_size = 16, p.kv_dtype = FAJIT_KV_E4M3, p.features = FJ_PROBLEM_SINKS;
    const fj_shape sh = {1, 50, 3};
    const size_t pe = 16 * 2 * 16, n = 12 * pe;
    fj_inputs in;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, 0, &in), FAJIT_OK);
    ck_assert(!in.k_twin && !in.v_twin && in.bt && in.d[0].kv_dtype == FAJIT_KV_E4M3);
    ck_assert_ptr_eq(in.d[0].k_descale, (const float *)(uintptr_t)in.feat + 8);
    fj_inputs_free(ctx->cu, &in);
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, FJ_INPUTS_TWIN, &in), FAJIT_OK);
    const fajit_attn_desc *d = &in.d[0];
    const float *feat = (const float *)(uintptr_t)in.feat;
    ck_assert_int_eq(d->kv_dtype, FAJIT_KV_E4M3);
    ck_assert_ptr_eq(d->sinks, feat);
    ck_assert_ptr_eq(d->k_descale, feat + 8);
    ck_assert_ptr_eq(d->v_descale, feat + 9);
    ck_assert(d->descale_batch_stride == 0 && d->descale_head_stride == 0);
    ck_assert(feat[8] == FJ_INPUTS_K_DESCALE && feat[9] == FJ_INPUTS_V_DESCALE);
    check_fp8((const uint8_t *)(uintptr_t)in.k[0], (const uint16_t *)(uintptr_t)in.k_twin,
              d->block_table, n, pe, 1, 1, FJ_INPUTS_K_DESCALE);
    check_fp8((const uint8_t *)(uintptr_t)in.v[0], (const uint16_t *)(uintptr_t)in.v_twin,
              d->block_table, n, pe, 1, 1, FJ_INPUTS_V_DESCALE);
    fj_inputs_free(ctx->cu, &in);

    /* contiguous e5m2 under f16: the twin is the descaled copy in place */
    p.page_size = 0, p.kv_dtype = FAJIT_KV_E5M2, p.dtype = FAJIT_F16, p.features = 0;
    ck_assert_int_eq(fj_inputs_make(ctx, &p, &sh, 1, NULL, NULL, FJ_INPUTS_TWIN, &in), FAJIT_OK);
    ck_assert(in.k_twin && in.v_twin && !in.bt && in.feat);
    ck_assert_ptr_eq(in.d[0].k_descale, (const float *)(uintptr_t)in.feat + 8);
    check_fp8((const uint8_t *)(uintptr_t)in.k[0], (const uint16_t *)(uintptr_t)in.k_twin, NULL,
              (size_t)3 * 50 * 2 * 16, 1, 0, 0, FJ_INPUTS_K_DESCALE);
    check_fp8((const uint8_t *)(uintptr_t)in.v[0], (const uint16_t *)(uintptr_t)in.v_twin, NULL,
              (size_t)3 * 50 * 2 * 16, 1, 0, 0, FJ_INPUTS_V_DESCALE);
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

void fj_unit_tests_driver(TCase *tc)
{
    tcase_add_test(tc, fake_driver);
    tcase_add_test(tc, inputs_shuffled_pages);
    tcase_add_test(tc, inputs_head_dim_v);
    tcase_add_test(tc, inputs_fp8);
    tcase_add_test(tc, sched_counters);
    tcase_add_test(tc, fa3_length_classes);
    tcase_add_test(tc, no_driver);
    tcase_add_test(tc, kernel_headers);
    tcase_add_test(tc, ptxas_log_parse);
}
