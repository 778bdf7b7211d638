/* test_unit_decode.c - the decode family's host half in the `unit` suite (no GPU): its
 * descriptions, launches through the fake device of fake_cuda.h (splits, workspace,
 * programmatic dependent launch, the fused and cluster merges, the TMA loader's maps), the
 * sm_90 defaults per split class, plan buckets, and the staged-merge cap. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "../src/families/decode.h"
#include "../src/families/fa3.h"
#include "../src/autotune/spec.h"

/* t with the decode family's options `loader` and `pack` (held in *o) */
static fj_target dec_target(fj_target t, fj_fopts *o, int loader, int pack)
{
    memset(o, 0, sizeof *o);
    fj_dec_opts *d = (fj_dec_opts *)(void *)o->b[FAJIT_FAMILY_DECODE];
    d->loader = loader, d->pack = pack;
    t.fopts = o;
    return t;
}

static struct {
    fj_decode_params p[4];
    unsigned grid[4][3], threads[4];
    int launches, pdl_launches;
} g_dec;
static CUresult dec_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e)
{
    (void)f, (void)by, (void)bz, (void)smem, (void)s, (void)e;
    int i = g_dec.launches++ % 4;
    memcpy(&g_dec.p[i], a[0], sizeof g_dec.p[i]);
    g_dec.grid[i][0] = gx, g_dec.grid[i][1] = gy, g_dec.grid[i][2] = gz;
    g_dec.threads[i] = bx;
    return 0;
}

/* cuLaunchKernelEx: counts the launches that ask for programmatic dependent launch. */
static CUresult dec_launch_ex(const fj_cu_launch_config *c, CUfunction f, void **a, void **e)
{
    for (unsigned i = 0; i < c->num_attrs; i++)
        g_dec.pdl_launches += c->attrs[i].id == FJ_CU_LAUNCH_ATTR_PDL && c->attrs[i].v.value == 1;
    return dec_launch(f, c->grid_x, c->grid_y, c->grid_z, c->block_x, c->block_y, c->block_z,
                      c->smem, c->stream, a, e);
}

/* The splits that a launch of configuration `cfg` (a tuning-row name) takes for d through
 * ctx's fake device: the launch must succeed. */
static int dec_splits_of(fajit_ctx *ctx, const char *cfg, const fajit_attn_desc *d)
{
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    ck_assert_int_eq(fj_kcfg_parse(cfg, &kp.cfg), 0);
    kp.cfg.fam->kernels(&kp.cfg, d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_msg(fj_kplan_launch(ctx, &kp, d, NULL) == FAJIT_OK, "%s: %s", cfg,
                  fajit_errmsg(ctx));
    return g_dec.p[0].splits;
}

/* The fake 132-SM sm_90 device of the decode tests: launches recorded by dec_launch,
 * allocations (scratch, stream-ordered) faked. */
static fj_cuda dec_fake_device(void)
{
    fj_cuda fake = fake_device_table();
    fake.cuLaunchKernel = dec_launch;
    fake.cuMemAlloc = f_alloc, fake.cuMemsetD8 = f_memset, fake.cuCtxSynchronize = f_sync;
    fake.cuMemFree = f_free, fake.cuCtxSetCurrent = f_setcur;
    fake.cuMemAllocAsync = dm_alloc_async, fake.cuMemFreeAsync = dm_free_async;
    fake.cuStreamIsCapturing = f_capturing;
    return fake;
}

/* A context on the fake device that fj_cuda_set_for_testing() installed (device 0, memory
 * cache). */
static fajit_ctx *fake_ctx(void)
{
    g_count = 1, g_fail_get = 0;
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "", o.device = 0;
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

START_TEST(decode_family_host)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    /* decode step: 32 query heads over 8 KV heads, one new token, paged K/V */
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 1, 32768, 128, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 2048, d.page_size = 16, d.num_pages = 1 << 20;
    char line[1024];
    const char *archs[] = {"sm_80", "sm_86", "sm_90a", "sm_100a"};
    for (int a = 0; a < 4; a++) {
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[a], &d, line, sizeof line), FAJIT_OK);
        ck_assert_msg(strstr(line, "dec bf16 d128") && strstr(line, "then dec combine bf16 d128"),
                      "%s: %s", archs[a], line);
    }
    /* contiguous decode goes to the decode family too; prefill does not */
    fajit_attn_desc c = d;
    c.block_table = NULL, c.block_table_stride = 0, c.page_size = 0, c.num_pages = 0;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &c, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "dec bf16 d128"), "%s", line);
    c.seqlen_q = c.seqlen_k = 512;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &c, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa3 bf16 d128"), "%s", line);
    /* the reference kernel does not read paged K/V */
    fajit_ctx_destroy(ctx);

    /* launches through a fake 132-SM device: splits where batch * heads_kv cannot fill it */
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    g_count = 1, g_fail_get = 0;
    o.device = 0;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    const fj_target t = fj_target_of(ctx, NULL);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &kp.cfg), 0);
    ck_assert_ptr_eq(kp.cfg.fam, &fj_family_decode);
    kp.cfg.fam->kernels(&kp.cfg, &d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    memset(&g_dec, 0, sizeof g_dec);
    memset(&g_dm, 0, sizeof g_dm);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 1);   /* the split step, combined by its last CTAs */
    const fj_decode_params *q = &g_dec.p[0];
    ck_assert_uint_ne(q->counters, 0);      /* a counter per (b, kv head, q tile) */
    ck_assert_int_ge(q->splits, 16);       /* 8 CTAs alone would leave 124 SMs idle */
    ck_assert_uint_eq(g_dec.grid[0][0], (unsigned)(q->splits * q->q_tiles));
    ck_assert_uint_eq(g_dec.grid[0][1], 8);
    ck_assert_uint_eq(g_dec.grid[0][2], 1);
    ck_assert_int_eq(q->split_keys % 64, 0);
    ck_assert_int_ge((long long)q->split_keys * q->splits, 32768);
    ck_assert_int_lt((long long)q->split_keys * (q->splits - 1), 32768);
    ck_assert_int_eq(q->k_page_stride, 16 * 8 * 128);   /* dense pages by default */
    ck_assert_int_eq(q->page_size, 16);
    ck_assert_int_eq(q->bt_stride, 2048);
    ck_assert_int_eq(q->page_shift, 4);           /* page 16: shifts */
    ck_assert_int_eq(q->off16, 1);                /* 2^20 pages of 32 KiB: 32-bit offsets */
    ck_assert_uint_eq(q->k_page16, 16 * 8 * 128 / 8);
    ck_assert_uint_eq(q->k_row16, 8 * 128 / 8);
    ck_assert_uint_eq(q->v_page16, 16 * 8 * 128 / 8);
    ck_assert_uint_eq(q->v_row16, 8 * 128 / 8);
    ck_assert_int_eq(q->window_left, -1);
    ck_assert_int_eq(q->window_right, -1);
    ck_assert_uint_eq(q->part_o, g_dm.allocated & ~0ull);
    ck_assert(q->part_lse > q->part_o && (q->part_lse - q->part_o) % 256 == 0);
    ck_assert_uint_eq(g_dm.freed, g_dm.allocated);
    size_t need;   /* a caller's workspace: the counters' 256 bytes, then the partials */
    ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
    ck_assert_uint_eq(need, 256 + ((size_t)q->splits * 32 * 128 * 4 + 255) / 256 * 256 +
                                (size_t)q->splits * 32 * 4);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "the last CTA of each group combines"), "%s", line);
    /* with cuLaunchKernelEx, on this sm_90 device: a programmatic dependent launch */
    fake.cuLaunchKernelEx = dec_launch_ex;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 1);
    ck_assert_int_eq(g_dec.pdl_launches, 1);
    ck_assert_uint_eq(g_dec.grid[0][1], 8);
    /* the address fast paths only where they hold: a page size of 24 divides; 2^21 pages
     * of 32 KiB (64 GiB of K) just fit 2^32 16-byte units, one page more does not; a stride
     * off 16 bytes and a negative one keep the 64-bit path */
    static const struct { int page_size, num_pages; int64_t v_page; int shift, off16; } ap[] = {
        {24, 1 << 20, 0, -1, 1}, {16, (1 << 21) + 1, 0, 4, 0}, {16, 1 << 21, 0, 4, 1},
        {16, 1 << 20, 16 * 8 * 128 + 4, 4, 0}, {32, 1 << 20, -16 * 8 * 128, 5, 0}};
    for (size_t i = 0; i < sizeof ap / sizeof ap[0]; i++) {
        fajit_attn_desc e = d;
        e.page_size = ap[i].page_size, e.num_pages = ap[i].num_pages;
        e.k_page_stride = 16 * 8 * 128;   /* (page 24 or 32: rows past 16 overlap; only strides) */
        e.v_page_stride = ap[i].v_page ? ap[i].v_page : 16 * 8 * 128;
        e.block_table_stride = 32768 / ap[i].page_size + 1;
        memset(&g_dec, 0, sizeof g_dec);
        if (fj_kplan_launch(ctx, &kp, &e, NULL) != FAJIT_OK) {   /* (a refused stride) */
            ck_assert_msg(ap[i].v_page % 8 || ap[i].v_page < 0, "case %zu: %s", i,
                          fajit_errmsg(ctx));
            continue;
        }
        ck_assert_msg(g_dec.p[0].page_shift == ap[i].shift && g_dec.p[0].off16 == ap[i].off16,
                      "case %zu: shift %d off16 %d", i, g_dec.p[0].page_shift, g_dec.p[0].off16);
    }
    /* contiguous K/V: no block table, no shift; 32-bit offsets within 64 GiB */
    fajit_attn_desc f = d;
    f.block_table = NULL, f.block_table_stride = 0, f.page_size = 0, f.num_pages = 0;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].page_shift, -1);
    ck_assert_int_eq(g_dec.p[0].off16, 1);
    ck_assert_uint_eq(g_dec.p[0].k_page16, (uint32_t)(f.k_batch_stride / 8));
    /* a full batch needs no split and no combine; a forced count is obeyed */
    d.batch = 64, d.seqlen_k = 16384;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 1);
    ck_assert_int_eq(g_dec.p[0].splits, 1);
    ck_assert_uint_eq(g_dec.p[0].part_o, 0);
    /* forced splits over 64 x 8 groups: more counters than a slot holds, the combine kernel */
    d.num_splits = 3;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 2);
    ck_assert_int_eq(g_dec.p[0].splits, 3);
    ck_assert_uint_eq(g_dec.p[0].counters, 0);
    ck_assert_uint_eq(g_dec.grid[1][0], 64);            /* a row per CTA, */
    ck_assert_uint_eq(g_dec.grid[1][1], 32 * 32 / 128); /* a thread per (head, 4 columns) */
    ck_assert_uint_eq(g_dec.threads[1], 128);
    ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
    ck_assert_uint_eq(need, (3ull * 64 * 32 * 128 * 4 + 255) / 256 * 256 + 3ull * 64 * 32 * 4);
    /* the split rule counts the CTAs that fit an SM: 16 x 8k keys take 2 splits of the
     * default (2 CTAs per SM) but 1 of a 5-deep pipeline (167 KB: one per SM, a wave of 128) */
    d.num_splits = 0, d.batch = 16, d.seqlen_k = 8192;
    const char *deep[][2] = {{"dec:64x3m1n4s0", "2"}, {"dec:64x5m1n4s0", "1"}, {"dec:64x4m1n4s0", "1"},
                            {"dec:128x2m1n4s0", "1"}};
    for (int i = 0; i < 4; i++) {
        const int n = dec_splits_of(ctx, deep[i][0], &d);
        ck_assert_msg(n == atoi(deep[i][1]), "%s: %d splits", deep[i][0], n);
    }
    /* a full batch whose second wave would idle takes the splits that fill the waves
     * (fill_splits; 64x3m1n4 at head_dim 128: 2 CTAs per SM, 264 slots): 40 x 8k (320 CTAs,
     * a second wave of 56) 4 splits of 2k keys, 48 x 8k 2, 100 x 8k 6; 64 x 8k (97% of two
     * waves) and 33 x 8k (one full wave) none; 40 x 2k 2 (16 tiles each, the least), 40 x 1k
     * none; at head_dim 64 (50 KB: 4 per SM, 528 slots) 40 x 8k is one wave: none.
     * Where the gain left after many waves does not pay the partials' traffic (rows x
     * splits / keys), none: 200 x 4k (6.06 waves) at any q_len; 100 x 8k at q_len 8 (32 rows
     * a CTA, 64x3m2n2) but at q_len 4; head_dim 64's 100 x 8k and 200 x 8k at q_len 8. */
    static const struct { int batch, keys, head_dim, q_len, splits; } fill[] = {
        {40, 8192, 128, 1, 4}, {48, 8192, 128, 1, 2}, {100, 8192, 128, 1, 6},
        {64, 8192, 128, 1, 1}, {33, 8192, 128, 1, 1}, {40, 2048, 128, 1, 2},
        {40, 1024, 128, 1, 1}, {40, 8192, 64, 1, 1}, {80, 8192, 64, 1, 4},
        {200, 4096, 128, 1, 1}, {200, 4096, 128, 4, 1}, {200, 4096, 128, 8, 1},
        {100, 8192, 128, 4, 6}, {100, 8192, 128, 8, 1}, {40, 8192, 128, 8, 4},
        {100, 8192, 64, 1, 7}, {100, 8192, 64, 8, 1}, {200, 8192, 64, 1, 6},
        {200, 8192, 64, 8, 1}};
    for (size_t i = 0; i < sizeof fill / sizeof fill[0]; i++) {
        fajit_attn_desc e = d;
        e.batch = fill[i].batch, e.seqlen_k = fill[i].keys, e.head_dim = fill[i].head_dim;
        e.seqlen_q = fill[i].q_len;
        const char *cfg = fill[i].q_len * 4 > 16 ? "dec:64x3m2n2s0" : "dec:64x3m1n4s0";
        const int n = dec_splits_of(ctx, cfg, &e);
        ck_assert_msg(n == fill[i].splits, "%d x %d, head_dim %d, q_len %d: %d splits",
                      fill[i].batch, fill[i].keys, fill[i].head_dim, fill[i].q_len, n);
    }
    /* the wave rule's best is over split counts that launch: 3 sequences x 1 KV head x 8k
     * keys took no split (3 CTAs on 132 SMs) while a count that never launches (44: 2 tiles
     * each, as 32) set a bar of 1.0; now 32 splits. Likewise 3 x 8 KV heads x 1k (24 CTAs)
     * and 5 x 2 x 2k; the benchmark's shapes keep their counts (1 x 8 x 4k 16, 1 x 8 x 32k
     * 16, 1 x 2 x 128k 64, 2 x 8 x 8k 8). */
    static const struct { int batch, hq, hkv, keys; const char *cfg; int splits; } waves[] = {
        {3, 8, 1, 8192, "dec:128x2m1n8s0", 32},     {3, 32, 8, 1024, "dec:128x2m1n8s0", 4},
        {5, 16, 2, 2048, "dec:128x2m1n8s0", 8},     {1, 32, 8, 4096, "dec:128x2m1n8s0", 16},
        {1, 32, 8, 32768, "dec:128x3m1n8s0", 16},   {1, 16, 2, 131072, "dec:128x3m1n8s0", 64},
        {2, 32, 8, 8192, "dec:128x3m1n8s0", 8}};
    for (size_t i = 0; i < sizeof waves / sizeof waves[0]; i++) {
        fajit_attn_desc e = d;
        e.batch = waves[i].batch, e.heads_q = waves[i].hq, e.heads_kv = waves[i].hkv;
        e.seqlen_k = waves[i].keys, e.seqlen_q = 1, e.head_dim = 128;
        const int n = dec_splits_of(ctx, waves[i].cfg, &e);
        ck_assert_msg(n == waves[i].splits, "%d x %d/%d heads x %d keys, %s: %d splits",
                      waves[i].batch, waves[i].hq, waves[i].hkv, waves[i].keys, waves[i].cfg, n);
    }
    /* the reference kernel does not read paged K/V */
    ck_assert_int_eq(fajit_attn_fwd_reference(ctx, &d, NULL), FAJIT_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "no kernel family computes fwd"));
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* Decode problems at one length but different batches take different tiles (the split
 * class), so their tuning buckets (and plans) differ by class: ",latf" / ",lat" / ",bw" /
 * none. */
START_TEST(decode_split_buckets)
{
    static const struct {
        int batch, seqlen_q, seqlen_k, sm_count;
        const char *want;
    } cases[] = {
        {1, 1, 2048, 132, "sq=1,sk<=2k,latf"},   {128, 1, 2048, 132, "sq=1,sk<=2k"},
        {1, 1, 32768, 132, "sq=1,sk>16k,bw"},    {64, 1, 32768, 132, "sq=1,sk>16k"},
        {16, 1, 8192, 132, "sq=1,sk<=8k,bw"},    {16, 1, 8192, 100, "sq=1,sk<=8k"},
        {16, 1, 8192, 0, "sq=1,sk<=8k,bw"},      {1, 8, 4096, 132, "sq<=8,sk<=4k,latf"},
        {1, 16, 16384, 132, "sq<=16,sk<=16k,bw"}, {1, 512, 4608, 132, "sq<=512"},
        {1, 17, 4096, 132, "sq<=512"},           {4, 4, 4096, 132, "sq<=4,sk<=4k,bw"},
        {4, 4, 2047, 132, "sq<=4,sk<=2k,lat"},   {1, 1, 2048, 127, "sq=1,sk<=2k,lat"},
        {2, 1, 1024, 132, "sq=1,sk<=1k,lat"},    {8, 1, 512, 132, "sq=1,sk<=512,lat"},
    };
    void *p = (void *)(uintptr_t)0x100000;
    char b[FJ_DESC_BUCKET_LEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, cases[i].batch, 32, 8, cases[i].seqlen_q,
                             cases[i].seqlen_k, 128, FAJIT_BF16);
        fj_desc_bucket(&d, cases[i].sm_count, b, sizeof b);
        ck_assert_msg(strcmp(b, cases[i].want) == 0, "case %zu: %s, want %s", i, b,
                      cases[i].want);
    }
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 1, 2048, 128, FAJIT_BF16);
    ck_assert_int_eq(fj_dec_split_class(&d, 132), FJ_DEC_SPLIT_LATENCY_FEW);
    fj_desc_bucket(&d, 132, b, 12);   /* "sq=1,sk<=2k,latf" does not fit: empty */
    ck_assert_str_eq(b, "");
    d.batch = 17;   /* 136 (sequence, KV head) pairs: the batch alone fills 132 SMs */
    ck_assert_int_eq(fj_dec_split_class(&d, 132), FJ_DEC_SPLIT_NONE);
    ck_assert_int_eq(fj_dec_split_class(&d, 140), FJ_DEC_SPLIT_STREAM);   /* 142 MB */
}
END_TEST

/* The decode defaults by shape: on sm_90 at head_dim 72..128 a problem whose keys split
 * (fewer sequence x KV head pairs than the 132 SMs) takes 128-key tiles 2-3 deep, the warps
 * by split class and rows (decode_rules.c's default_cfg), at head_dim 49..64 256-key tiles where
 * the keys stream and 64-key tiles 3 deep (four CTAs per SM) where the batch fills the SMs
 * (128-key ones, two per SM, where it fills them at most twice over), at head_dim <= 48
 * 128-key tiles 2 deep where latency-bound or streaming (at <= 32); a full batch at
 * head_dim 72..128, other head_dims and other targets keep 64-key tiles 3 deep (4 at
 * head_dim <= 64, 2 on sm_80 at head_dim 128); the shipped list holds all, so that warm
 * compiles what STRICT serves at any length. */
START_TEST(decode_defaults)
{
    /* 32 query heads over 8 KV heads: q_len 1, 4 and 8 pack 4, 16 and 32 rows; the tiles
     * without head packing (FJ_DEC_PACK_OFF: decode_head_packing checks its rule) */
    static const struct {
        int sm, batch, seqlen_k, head_dim;
        const char *want1, *want4, *want8;
    } cases[] = {
        /* sm_90, bandwidth-bound (STREAM): 128, 64, 32, 16 and 8 pairs */
        {90, 16, 8192, 128, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 8, 4096, 104, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 4, 4096, 128, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 2, 131072, 96, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 1, 32768, 128, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 1, 8192, 128, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        {90, 1, 16384, 72, "128x3m1n8", "128x3m1n8", "128x2m2n4"},
        /* no split: the batch fills the SMs */
        {90, 64, 16384, 128, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        {90, 128, 2048, 96, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        {90, 17, 8192, 128, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        {90, 40, 512, 128, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        /* latency-bound (LATENCY): 64 and 16 pairs */
        {90, 8, 1024, 80, "128x2m1n8", "128x2m1n4", "128x2m2n4"},
        {90, 2, 2048, 128, "128x2m1n8", "128x2m1n4", "128x2m2n4"},
        /* LATENCY_FEW: 8 pairs, two q tiles of 16 rows at 17..32 rows */
        {90, 1, 4096, 128, "128x2m1n8", "128x2m1n4", "128x2m1n4"},
        {90, 1, 8191, 128, "128x2m1n8", "128x2m1n4", "128x2m1n4"},
        {90, 1, 4096, 104, "128x2m1n8", "128x2m1n4", "128x2m1n4"},
        {90, 1, 2048, 128, "128x2m1n8", "128x2m1n4", "128x2m1n4"},
        {90, 1, 1024, 96, "128x2m1n8", "128x2m1n4", "128x2m1n4"},
        /* head_dim 49..64 on sm_90: stream, no split, latency-bound, few pairs */
        {90, 16, 8192, 64, "256x3m1n8", "256x3m1n8", "128x2m2n4"},
        {90, 1, 32768, 64, "256x3m1n8", "256x3m1n8", "128x2m2n4"},
        {90, 64, 16384, 64, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        {90, 128, 2048, 56, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
        {90, 34, 16384, 64, "64x3m1n4", "64x3m1n4", "64x3m2n2"},   /* 272 pairs, but */
        {90, 33, 16384, 64, "128x3m1n8", "128x3m1n8", "64x3m2n2"},  /* 264: two per SM */
        {90, 17, 4096, 64, "128x3m1n8", "128x3m1n8", "64x3m2n2"},
        {90, 8, 1024, 64, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 1, 4096, 64, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 1, 2048, 56, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        /* head_dim <= 48 on sm_90: 8 warps along 128-key tiles where latency-bound, and
         * where the keys stream at <= 32; 64x4m1n4 else; 17..32 rows as elsewhere */
        {90, 16, 8192, 48, "64x4m1n4", "64x4m1n4", "64x3m2n2"},
        {90, 16, 8192, 32, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 1, 131072, 16, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 64, 16384, 32, "64x4m1n4", "64x4m1n4", "64x3m2n2"},
        {90, 128, 2048, 48, "64x4m1n4", "64x4m1n4", "64x3m2n2"},
        {90, 1, 4096, 32, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 8, 1024, 48, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        {90, 1, 2048, 40, "128x2m1n8", "128x2m1n8", "64x3m2n2"},
        /* other targets and head_dims: no split class */
        {80, 16, 8192, 64, "64x4m1n4", "64x4m1n4", "64x3m2n2"},
        {100, 1, 4096, 64, "64x4m1n4", "64x4m1n4", "64x3m2n2"},
        {90, 16, 8192, 256, "32x3m1n2", "32x3m1n2", "32x3m2n2"},
        {80, 1, 4096, 128, "64x2m1n4", "64x2m1n4", "64x2m2n2"},
        {80, 16, 8192, 128, "64x2m1n4", "64x2m1n4", "64x2m2n2"},
        {100, 16, 8192, 128, "64x3m1n4", "64x3m1n4", "64x3m2n2"},
    };
    void *p = (void *)(uintptr_t)0x100000;
    char name[64], want_name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, cases[i].batch, 32, 8, 1, cases[i].seqlen_k,
                             cases[i].head_dim, FAJIT_BF16);
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.block_table_stride = 4096, d.page_size = 16, d.num_pages = 1 << 20;
        fj_fopts fo;
        const fj_target t = dec_target((fj_target){cases[i].sm, cases[i].sm >= 90, 132, 0, 0,
                                                   NULL}, &fo, FJ_DEC_LOADER_AUTO, FJ_DEC_PACK_OFF);
        const int q_lens[3] = {1, 4, 8};
        const char *wants[3] = {cases[i].want1, cases[i].want4, cases[i].want8};
        for (int q = 0; q < 3; q++) {
            d.seqlen_q = q_lens[q];
            d.mask = q_lens[q] > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
            fj_kcfg c;
            ck_assert_msg(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c) == 0,
                          "case %zu q_len %d: no default", i, q_lens[q]);
            fj_kcfg_name(&c, name);
            snprintf(want_name, sizeof want_name, "dec:%ss0", wants[q]);
            ck_assert_msg(strcmp(name, want_name) == 0, "case %zu q_len %d: %s, want %s", i,
                          q_lens[q], name, want_name);
        }
    }
    /* shipped on sm_90 at head_dim 128: the row-16 tiles of the four split classes, then
     * the wider row layouts */
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 1, 4096, 128, FAJIT_BF16);
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg s[64];
    const int n = fj_family_decode.shipped(&d, &h200, s, 64);
    ck_assert_int_eq(n, 7);
    const char *want[] = {"dec:128x2m1n8s0", "dec:128x3m1n8s0", "dec:64x3m1n4s0",
                          "dec:128x2m1n4s0", "dec:128x2m2n4s0", "dec:64x3m2n2s0",
                          "dec:64x3m4n1s0"};
    for (int i = 0; i < n; i++) {
        fj_kcfg_name(&s[i], name);
        ck_assert_str_eq(name, want[i]);
    }
    /* on sm_80 the long and short defaults are one */
    const fj_target a100 = {80, 0, 108, 0, 0, NULL};
    ck_assert_int_eq(fj_family_decode.shipped(&d, &a100, s, 64), 3);
    /* every default of a decode step (up to 16 query rows, 64 packed) at any batch, length
     * and grouping is in the shipped list of its target: warm compiles what STRICT serves
     * (with K/V heads side by side: head packing's defaults among them) */
    static const int batches[] = {1, 2, 3, 4, 6, 8, 16, 24, 32, 64, 128, 4096};
    static const int lengths[] = {1, 1000, 2048, 4096, 8192, 32768, 1 << 20};
    static const int kv_heads[] = {1, 2, 4, 6, 8}, groups[] = {1, 3, 4, 8, 16}, q_lens[] = {1, 4, 16};
    static const int sms[] = {132, 108, 20, 0}, dims[] = {32, 48, 64, 96, 128, 256};
    int checked = 0;
    for (size_t a = 0; a < sizeof sms / sizeof sms[0]; a++)
        for (size_t h = 0; h < sizeof dims / sizeof dims[0]; h++) {
            const fj_target t = {90, 1, sms[a], 0, 0, NULL};
            fajit_attn_desc e;
            fajit_attn_desc_init(&e, p, p, p, p, 1, 8, 8, 1, 1, dims[h], FAJIT_BF16);
            const int ns = fj_family_decode.shipped(&e, &t, s, 64);
            ck_assert_int_lt(ns, 64);
            for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
                    for (size_t k = 0; k < sizeof kv_heads / sizeof kv_heads[0]; k++)
                        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                            for (size_t q = 0; q < sizeof q_lens / sizeof q_lens[0]; q++) {
                                if (groups[g] * q_lens[q] > 64)
                                    continue;
                                e.batch = batches[b], e.seqlen_k = lengths[l];
                                e.heads_kv = kv_heads[k], e.heads_q = kv_heads[k] * groups[g];
                                e.seqlen_q = q_lens[q];
                                fj_kcfg c;
                                fj_family_decode.default_cfg(&e, &t, &c);
                                int found = 0;
                                for (int i = 0; i < ns && !found; i++)
                                    found = fj_kcfg_same(&s[i], &c);
                                fj_kcfg_name(&c, name);
                                ck_assert_msg(found, "%s (batch %d, %d keys, %d/%d heads, q_len "
                                              "%d, %d SMs, head_dim %d) is not shipped", name,
                                              e.batch, e.seqlen_k, e.heads_q, e.heads_kv,
                                              e.seqlen_q, sms[a], dims[h]);
                                checked++;
                            }
        }
    ck_assert_int_gt(checked, 10000);
}
END_TEST

/* The fused merge stages at most 48 KiB of partials in one CTA: q_len 4 (16 packed rows)
 * at 1 x 4k takes 128x2m1n4 by default, whose 16 splits end in the combine kernel; over 16
 * splits of a forced 128x2m1n8 its 132 KB of partials
 * would fit that config's shared memory, but take the combine kernel, and so do batch 2's
 * 66 KB (8 splits); q_len 1's 33 KB over 16 splits stay fused. */
START_TEST(decode_staged_cap)
{
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 4, 4096, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 256, d.page_size = 16, d.num_pages = 1000;
    char line[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "128x2 m1 n4") && strstr(line, "16 splits") &&
                      strstr(line, "then the combine kernel"), "%s", line);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    ck_assert_int_eq(fj_kcfg_parse("dec:128x2m1n8s0", &kp.cfg), 0);
    kp.cfg.fam->kernels(&kp.cfg, &d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 16);
    ck_assert_uint_eq(g_dec.p[0].counters, 0);
    ck_assert_int_eq(g_dec.launches, 2);   /* the combine kernel */
    /* batch 2: 8 splits of 16 rows, 66 KB: the combine kernel too */
    d.batch = 2;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 8);
    ck_assert_uint_eq(g_dec.p[0].counters, 0);
    ck_assert_int_eq(g_dec.launches, 2);
    d.batch = 1;
    /* q_len 1 (4 rows) over the same 16 splits: 33 KB staged by the last CTA */
    d.seqlen_q = 1, d.mask = FAJIT_MASK_NONE;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_uint_ne(g_dec.p[0].counters, 0);
    ck_assert_int_eq(g_dec.launches, 1);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* The cluster merge's host half: the probe (fj_cluster_max) against a fake driver that runs
 * clusters up to g_cl.fit CTAs, the launch (cluster dimension, CTA order, no combine
 * kernel, no counters) where the plan's probe allows the splits, the last-CTA merge where
 * it does not, FAJIT_DECODE_CLUSTER=0, and fj_launch without cuLaunchKernelEx. */
static struct {
    int fit, nonportable, set_fails, queries;
    unsigned dim[4];   /* the cluster x of each recorded launch, 0 without */
    unsigned smem[4];  /* and its dynamic shared memory */
} g_cl;
/* The cluster x of a launch configuration, 0 without the attribute. */
static unsigned cluster_x(const fj_cu_launch_config *c)
{
    for (unsigned i = 0; i < c->num_attrs; i++)
        if (c->attrs[i].id == FJ_CU_LAUNCH_ATTR_CLUSTER)
            return c->attrs[i].v.dim[0];
    return 0;
}
static CUresult cl_occupancy(int *n, CUfunction f, const fj_cu_launch_config *c)
{
    (void)f;
    g_cl.queries++;
    const unsigned x = cluster_x(c) ? cluster_x(c) : 1;
    *n = (int)x <= g_cl.fit && (x <= 8 || g_cl.nonportable) ? 3 : 0;
    return 0;
}
static CUresult cl_set_attr(CUfunction f, int attr, int value)
{
    (void)f;
    if (attr == FJ_CU_FUNC_ATTR_NON_PORTABLE_CLUSTER) {
        if (g_cl.set_fails)
            return 1;
        g_cl.nonportable = value;
    }
    return 0;
}
static CUresult cl_launch_ex(const fj_cu_launch_config *c, CUfunction f, void **a, void **e)
{
    g_cl.dim[g_dec.launches % 4] = cluster_x(c);
    g_cl.smem[g_dec.launches % 4] = c->smem;
    return dec_launch_ex(c, f, a, e);
}

/* The probe's answer for every cluster size 2..8: n clusters at once. */
static void set_active(fj_kplan *kp, int n)
{
    for (int s = 2; s <= 8; s++)
        kp->cluster_active[0][s] = n;
}

START_TEST(decode_cluster_merge)
{
    fj_cuda fake = dec_fake_device();
    fake.cuLaunchKernelEx = cl_launch_ex;
    fake.cuOccupancyMaxActiveClusters = cl_occupancy;
    fake.cuFuncSetAttribute = cl_set_attr;
    fj_cuda_set_for_testing(&fake);
    g_count = 1, g_fail_get = 0;
    /* the probe: how many clusters of each size run at once, sizes above 8 only where
     * non-portable sizes were allowed; the largest that runs */
    memset(&g_cl, 0, sizeof g_cl);
    CUfunction fn = (CUfunction)(uintptr_t)0x10;
    int act[FJ_CLUSTER_MAX + 1];
    g_cl.fit = 16;
    ck_assert_int_eq(fj_cluster_probe(&fake, fn, 128, 135168, 16, act), 16);
    ck_assert_int_eq(act[0] + act[1], 0);
    for (int n = 2; n <= 16; n++)
        ck_assert_int_eq(act[n], 3);
    ck_assert_int_eq(g_cl.nonportable, 1);
    g_cl.nonportable = 0, g_cl.set_fails = 1;
    ck_assert_int_eq(fj_cluster_probe(&fake, fn, 128, 135168, 16, act), 8);
    ck_assert_int_eq(act[8], 3);
    ck_assert_int_eq(act[9], 0);
    g_cl.set_fails = 0, g_cl.fit = 5;
    ck_assert_int_eq(fj_cluster_probe(&fake, fn, 128, 135168, 8, act), 5);
    ck_assert_int_eq(act[5], 3);
    ck_assert_int_eq(act[6], 0);
    g_cl.fit = 1;
    ck_assert_int_eq(fj_cluster_probe(&fake, fn, 128, 135168, 8, act), 0);
    ck_assert_int_eq(act[2], 0);
    fj_cuda bare = fake;
    bare.cuOccupancyMaxActiveClusters = NULL;
    ck_assert_int_eq(fj_cluster_probe(&bare, fn, 128, 135168, 8, act), 0);
    /* a cluster launch needs cuLaunchKernelEx: refused, never launched without clusters */
    bare.cuLaunchKernelEx = NULL;
    const unsigned grid1[3] = {16, 8, 1};
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_launch(&bare, fn, grid1, 128, 0, NULL, NULL, 1, 8),
                     FJ_CU_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(g_dec.launches, 0);

    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "", o.device = 0;
    fajit_ctx *ctx;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_attn_desc d;   /* 2 x 8k keys, q_len 1: 16 groups of 8 splits (128x2m1n4) */
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 32, 8, 1, 8192, 128, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 512, d.page_size = 16, d.num_pages = 1 << 20;
    const fj_target t = fj_target_of(ctx, NULL);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &kp.cfg), 0);
    kp.cfg.fam->kernels(&kp.cfg, &d, &kp.ks);
    ck_assert_int_eq(kp.ks.cluster[0], 8);   /* the split step may cluster, the combine not */
    ck_assert_int_eq(kp.ks.cluster[1], 0);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    kp.cluster_max[0] = 8;   /* as the load's probe found, */
    set_active(&kp, 16);
    kp.cluster_smem[0] = kp.ks.dyn_smem[0] + 1024;   /* (at least half an SM's memory) */
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 1);
    ck_assert_int_eq(g_dec.p[0].splits, 8);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_uint_eq(g_cl.dim[0], 8);
    ck_assert_uint_eq(g_cl.smem[0], (unsigned)kp.ks.dyn_smem[0] + 1024);
    ck_assert_uint_eq(g_dec.grid[0][0], 8);   /* x: the group's splits in a row */
    ck_assert_uint_eq(g_dec.grid[0][2], 2);
    ck_assert_int_eq(g_dec.pdl_launches, 1);  /* and still a dependent launch */
    /* no counters and no partials: the context allocates nothing for it, and takes no
     * counter slot (the dependent launches of graphs count them) */
    ck_assert_uint_eq(g_dec.p[0].counters, 0);
    ck_assert_uint_eq(g_dec.p[0].part_o, 0);
    ck_assert_uint_eq(g_dec.p[0].part_lse, 0);
    memset(&g_dm, 0, sizeof g_dm);
    const unsigned graph_slots = atomic_load(&ctx->counter_graph_next);
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, F_CAPTURED), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_uint_eq(g_dm.allocated, 0);
    ck_assert_uint_eq(atomic_load(&ctx->counter_graph_next), graph_slots);
    /* a caller's workspace is still held to the plan's whole size (fajit_attn_workspace_size:
     * the same on a GPU without clusters) */
    size_t need;
    ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
    ck_assert_uint_gt(need, 256);
    fajit_attn_desc w = d;
    w.workspace = (void *)(uintptr_t)0x8000000, w.workspace_bytes = need - 256;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &w, NULL), FAJIT_INVALID_ARGUMENT);
    w.workspace_bytes = need;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &w, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_uint_eq(g_dec.p[0].part_o, 0);
    /* q_len 8 (32 rows, 128x2m2n4): its merge went to the combine kernel; now the cluster */
    fajit_attn_desc e = d;
    e.seqlen_q = 8, e.seqlen_k = 2048, e.mask = FAJIT_MASK_CAUSAL;
    fj_kplan kq;
    memset(&kq, 0, sizeof kq);
    ck_assert_int_eq(fj_kcfg_default(&e, &t, FAJIT_FAMILY_AUTO, &kq.cfg), 0);
    kq.cfg.fam->kernels(&kq.cfg, &e, &kq.ks);
    kq.k[0] = &kk[0], kq.k[1] = &kk[1];
    kq.cluster_max[0] = 8;
    set_active(&kq, 16);
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kq, &e, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.launches, 1);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_int_le(g_dec.p[0].splits, 8);
    ck_assert_uint_eq(g_cl.dim[0], (unsigned)g_dec.p[0].splits);
    ck_assert_uint_eq(g_dec.grid[0][0], (unsigned)(g_dec.p[0].splits * g_dec.p[0].q_tiles));
    /* clusters that would take a wave more than the plain CTAs (4 at once: 16 in 4 waves
     * against 128 CTAs in one): merged as before */
    set_active(&kp, 4);
    memset(&g_dec, 0, sizeof g_dec);
    memset(g_cl.dim, 0, sizeof g_cl.dim);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    ck_assert_uint_ne(g_dec.p[0].counters, 0);
    ck_assert_uint_ne(g_dec.p[0].part_o, 0);
    ck_assert_uint_eq(g_cl.dim[0], 0);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, F_CAPTURED), FAJIT_OK);   /* (a slot) */
    ck_assert_uint_eq(atomic_load(&ctx->counter_graph_next), graph_slots + 1);
    ck_assert_uint_eq(g_cl.smem[0], (unsigned)kp.ks.dyn_smem[0]);   /* its own */
    set_active(&kp, 16);
    /* per size: 16 groups of 7 forced splits where the GPU runs 15 such clusters at once
     * (clusters live in a GPC: no more of 7 than of 8) merge as before */
    kp.cluster_active[0][7] = 15;
    d.num_splits = 7;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 7);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    d.num_splits = 0;
    /* 16 splits (one sequence of 32k keys): more than a cluster merges */
    fajit_attn_desc f = d;
    f.batch = 1, f.seqlen_k = 32768, f.block_table_stride = 2048;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 16);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    ck_assert_uint_eq(g_cl.dim[0], 0);
    /* one sequence of 2k keys: 16 tiles, where the wave rule takes 16 splits of one tile,
     * 8 splits of 2 in clusters; 4k (32 tiles) keeps its 16; a forced 16 stays */
    f.seqlen_k = 2048;
    char line[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &f, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "16 splits") && strstr(line, "8 splits merged by clusters"),
                  "%s", line);
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 8);
    ck_assert_int_eq(g_dec.p[0].split_keys, 256);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_uint_eq(g_cl.dim[0], 8);
    f.num_splits = 16;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 16);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    /* q_len 8 x 4 heads (32 rows, 128x2m2n4) over 2k keys: 16 tiles, but 16 splits stay */
    fajit_attn_desc g = f;
    g.num_splits = 0, g.seqlen_q = 8, g.mask = FAJIT_MASK_CAUSAL, g.seqlen_k = 2048;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kq, &g, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 16);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    f.num_splits = 0, f.seqlen_k = 4096;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].splits, 16);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    /* a GPU that runs clusters of 4 only: 8 splits merge as before, forced 4 in clusters */
    kp.cluster_max[0] = 4;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    d.num_splits = 4;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 1);
    ck_assert_uint_eq(g_cl.dim[0], 4);
    /* one split: nothing to merge, no cluster */
    d.num_splits = 1;
    memset(&g_dec, 0, sizeof g_dec);
    memset(g_cl.dim, 0, sizeof g_cl.dim);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    ck_assert_uint_eq(g_cl.dim[0], 0);
    d.num_splits = 0;
    fajit_ctx_destroy(ctx);
    /* FAJIT_DECODE_CLUSTER=0: never, whatever the probe said; a bad value is refused */
    setenv("FAJIT_DECODE_CLUSTER", "0", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    kp.cluster_max[0] = 8;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dec.p[0].cluster, 0);
    ck_assert_uint_ne(g_dec.p[0].counters, 0);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_DECODE_CLUSTER", "yes", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_DECODE_CLUSTER must be 0 or 1"));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_DECODE_CLUSTER");
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* The decode family's two loaders: FAJIT_DECODE_LOADER, where TMA fits (sm_90+, head_dim a
 * multiple of 64, page sizes that tile the key tile), its names, and the tensor maps its
 * launch encodes (a fake encoder records them). */
static struct {
    int calls;
    unsigned long long dim[2][4], stride[2][3];
    unsigned box[2][4];
    int swizzle;
} g_dtm;
static CUresult dec_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                         const unsigned long long *st, const unsigned *b, const unsigned *el,
                         int i, int w, int l, int o)
{
    (void)t, (void)a, (void)el, (void)i, (void)l, (void)o;
    const int x = g_dtm.calls++ % 2;
    ck_assert_uint_eq(r, 4);
    memcpy(g_dtm.dim[x], d, sizeof g_dtm.dim[x]);
    memcpy(g_dtm.stride[x], st, sizeof g_dtm.stride[x]);
    memcpy(g_dtm.box[x], b, sizeof g_dtm.box[x]);
    g_dtm.swizzle = w;
    memset(m, 0, 128);
    return 0;
}

START_TEST(decode_loader)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    fajit_ctx *ctx = NULL, *bad = NULL;
    setenv("FAJIT_DECODE_LOADER", "TMA", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(fj_dec_opts_of(&ctx->fopts)->loader, FJ_DEC_LOADER_TMA);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_DECODE_LOADER", "bulk", 1);
    ck_assert_int_eq(fajit_ctx_create(&bad, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(bad),
                                 "FAJIT_DECODE_LOADER must be auto, cpasync or tma, got 'bulk'"));
    fajit_ctx_destroy(bad);
    unsetenv("FAJIT_DECODE_LOADER");

    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 1, 4096, 128, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 256, d.page_size = 16, d.num_pages = 1000;
    fj_fopts tma_opts;
    fj_target h200 = dec_target((fj_target){90, 1, 132, 0, 0, NULL}, &tma_opts, FJ_DEC_LOADER_TMA,
                                FJ_DEC_PACK_AUTO),
              a100 = {80, 0, 108, 0, 0, &tma_opts};
    fj_kcfg c, back;
    char name[64], why[256];
    fj_kernels ks;
    /* forced TMA where it fits: its own name, macro and shared memory */
    ck_assert_int_eq(fj_kcfg_default(&d, &h200, FAJIT_FAMILY_AUTO, &c), 0);
    fj_kcfg_name(&c, name);
    ck_assert_str_eq(name, "dec:128x2m1n8s0t");
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    fj_kcfg_name(&back, name);
    ck_assert_str_eq(name, "dec:128x2m1n8s0t");
    c.fam->kernels(&c, &d, &ks);
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_DEC_TMA 1\n"));
    ck_assert_ptr_nonnull(strstr(ks.v[0].name, " tma"));
    ck_assert_int_eq(ks.dyn_smem[0], 135168 + 64 + 1024);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0tt", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0x", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0", &back), 0);   /* rows of before */
    back.fam->kernels(&back, &d, &ks);
    ck_assert_ptr_null(strstr(ks.v[0].preamble, "FJ_DEC_TMA"));
    /* where TMA does not fit, the forced default keeps cp.async and check() says why */
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0t", &back), 0);
    const struct { fj_target *t; int page, hd; const char *why; } misfit[] = {
        {&a100, 16, 128, "TMA loads need sm_90 or later"},
        {&h200, 1, 128, "TMA loads need page_size"},
        {&h200, 12, 128, "TMA loads need page_size"},
        {&h200, 16, 80, "TMA loads need head_dim a multiple of 64"},
    };
    for (size_t i = 0; i < sizeof misfit / sizeof misfit[0]; i++) {
        fajit_attn_desc e = d;
        e.page_size = misfit[i].page, e.head_dim = misfit[i].hd;
        e.block_table_stride = 4096 / e.page_size + 1;
        ck_assert_int_eq(fj_kcfg_default(&e, misfit[i].t, FAJIT_FAMILY_AUTO, &c), 0);
        fj_kcfg_name(&c, name);
        ck_assert_msg(name[strlen(name) - 1] == '0', "%zu: %s", i, name);
        why[0] = 0;
        ck_assert_int_ne(back.fam->check(&back, &e, misfit[i].t, why, sizeof why), 0);
        ck_assert_msg(strstr(why, misfit[i].why), "%zu: %s", i, why);
    }
    fajit_attn_desc e = d;   /* pages holding whole tiles fit as well */
    e.page_size = 128, e.block_table_stride = 32;
    ck_assert_int_eq(back.fam->check(&back, &e, &h200, why, sizeof why), 0);
    /* the candidates: both loaders on sm_90, cp.async alone on sm_80 */
    fj_kcfg cand[64];
    int tma[2] = {0, 0};
    const fj_target *ts[2] = {&a100, &h200};
    for (int x = 0; x < 2; x++) {
        const int n = fj_kcfg_candidates(&d, ts[x], cand, 64);
        for (int i = 0; i < n; i++) {
            fj_kcfg_name(&cand[i], name);
            tma[x] += strncmp(name, "dec:", 4) == 0 && name[strlen(name) - 1] == 't';
        }
    }
    ck_assert_int_eq(tma[0], 0);
    ck_assert_int_gt(tma[1], 4);

    /* a launch encodes K and V maps of [pages][page_size][heads_kv][head_dim] */
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    g_count = 1, g_fail_get = 0;
    o.device = 0;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0t", &kp.cfg), 0);
    kp.cfg.fam->kernels(&kp.cfg, &d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_UNSUPPORTED);   /* no encoder */
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cuTensorMapEncodeTiled"));
    fake.cuTensorMapEncodeTiled = dec_tmap;
    memset(&g_dtm, 0, sizeof g_dtm);
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dtm.calls, 2);
    for (int x = 0; x < 2; x++) {
        const unsigned long long dim[4] = {128, 16, 8, 1000}, str[3] = {8 * 128 * 2, 128 * 2,
                                                                       16 * 8 * 128 * 2};
        const unsigned box[4] = {64, 16, 1, 1};
        ck_assert_int_eq(memcmp(g_dtm.dim[x], dim, sizeof dim), 0);
        ck_assert_int_eq(memcmp(g_dtm.stride[x], str, sizeof str), 0);
        ck_assert_int_eq(memcmp(g_dtm.box[x], box, sizeof box), 0);
    }
    ck_assert_int_eq(g_dtm.swizzle, FJ_TMA_SWIZZLE_128B);
    /* contiguous K/V: sequences as pages of seqlen_k rows, boxes of a whole tile */
    fajit_attn_desc f = d;
    f.block_table = NULL, f.block_table_stride = 0, f.page_size = 0, f.num_pages = 0;
    f.batch = 3;
    memset(&g_dtm, 0, sizeof g_dtm);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &f, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_dtm.dim[0][1], 4096);
    ck_assert_uint_eq(g_dtm.dim[0][3], 3);
    ck_assert_uint_eq(g_dtm.box[0][1], 64);
    ck_assert_uint_eq(g_dtm.stride[0][2], 4096ull * 8 * 128 * 2);
    /* a TMA plan never launches a page size it cannot load (it would wait forever) */
    fajit_attn_desc g = d;
    g.page_size = 1, g.block_table_stride = 4096;
    memset(&g_dec, 0, sizeof g_dec);
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &g, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cannot load head_dim 128 with page_size 1"));
    ck_assert_int_eq(g_dec.launches, 0);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* dec_splits() keeps the calling thread's last answer: two problems that differ in any one
 * input it reads (batch, heads, q_len, keys, head_dim, num_splits, num_splits_max, the
 * configuration, the SM count) must not share it. Each pair's answers are first taken apart (another problem
 * between them), then back to back in both orders. */
START_TEST(decode_splits_memo)
{
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    g_fake_sms = 66;
    fajit_ctx *small = fake_ctx();
    g_fake_sms = 132;
    fajit_attn_desc a0;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&a0, p, p, p, p, 1, 32, 8, 1, 32768, 128, FAJIT_BF16);
    a0.block_table = (const int32_t *)(uintptr_t)0x3000;
    a0.block_table_stride = 8192, a0.page_size = 16, a0.num_pages = 1 << 20;
    fajit_attn_desc other = a0;
    other.batch = 3, other.seqlen_k = 5000;
    const char *cfg = "dec:64x3m1n4s0";
    enum { BATCH, HEADS_KV, HEADS_Q, Q_LEN, KEYS, HEAD_DIM, NUM_SPLITS, NUM_SPLITS_MAX, CONFIG,
           SMS, N };
    static const char *names[N] = {"batch", "heads_kv", "heads_q", "q_len", "keys",
                                   "head_dim", "num_splits", "num_splits_max", "configuration",
                                   "SM count"};
    for (int f = 0; f < N; f++) {
        fajit_attn_desc a = a0, b = a0;
        const char *cfg_b = cfg;
        fajit_ctx *ctx_b = ctx;
        switch (f) {
        case BATCH: b.batch = 2; break;
        case HEADS_KV:
            b.batch = a.batch = 16, b.seqlen_k = a.seqlen_k = 8192, b.heads_kv = 16;
            break;
        case HEADS_Q:
            b.seqlen_q = a.seqlen_q = 4, b.mask = a.mask = FAJIT_MASK_CAUSAL, b.heads_q = 128;
            break;
        case Q_LEN: b.seqlen_q = 8, b.mask = FAJIT_MASK_CAUSAL; break;
        case KEYS: b.seqlen_k = 2048; break;
        case HEAD_DIM:
            b.batch = a.batch = 16, b.seqlen_k = a.seqlen_k = 8192, b.head_dim = 256;
            break;
        case NUM_SPLITS: b.num_splits = 3; break;
        case NUM_SPLITS_MAX: b.num_splits_max = 3; break;
        case CONFIG:
            b.batch = a.batch = 16, b.seqlen_k = a.seqlen_k = 8192, cfg_b = "dec:128x2m1n4s0";
            break;
        case SMS: ctx_b = small; break;
        }
        dec_splits_of(ctx, cfg, &other);
        const int sa = dec_splits_of(ctx, cfg, &a);
        dec_splits_of(ctx, cfg, &other);
        const int sb = dec_splits_of(ctx_b, cfg_b, &b);
        ck_assert_msg(sa != sb, "%s: %d splits either way (no test)", names[f], sa);
        ck_assert_int_eq(dec_splits_of(ctx, cfg, &a), sa);
        ck_assert_msg(dec_splits_of(ctx_b, cfg_b, &b) == sb, "%s after: %d", names[f], sb);
        ck_assert_msg(dec_splits_of(ctx, cfg, &a) == sa, "%s before: %d", names[f], sa);
    }
    /* The rule reads seqlen_k only as its key tiles (the memo's key): a length and the same
     * length rounded up to whole tiles get the same splits, each asked fresh (another
     * problem asked between), over full batches at lengths off the tile (fill_splits'
     * territory) and latency-bound ones; first the problems where fill_splits' cost over
     * seqlen_k (until 2026-12-05) answered otherwise (found by a sweep of 921,600 plans) */
    const fj_target t = fj_target_of(ctx, NULL);
    static const int offs[] = {1000, 1500, 3000, 4097, 5000, 12000, 33333};
    static const int edge[][6] = {   /* head_dim, heads_kv, group, q_len, batch, keys */
        {32, 8, 1, 4, 257, 4097}, {48, 8, 1, 8, 173, 5000}, {64, 8, 1, 8, 201, 5000},
        {128, 1, 8, 16, 313, 12000}, {256, 8, 1, 4, 110, 1000}, {256, 8, 4, 16, 24, 1000}};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    enum { NB = 28, PER_LEN = 2 * 2 * NB, NO = sizeof offs / sizeof offs[0] };
    for (int i = 0; i < ne + PER_LEN * NO; i++) {
        int hd, hk, g, q, batch, keys;
        if (i < ne) {
            hd = edge[i][0], hk = edge[i][1], g = edge[i][2], q = edge[i][3];
            batch = edge[i][4], keys = edge[i][5];
        } else {   /* head_dim 128/256 x q_len 1/8 x NB batches x NO lengths, 8 x 4 heads */
            const int j = i - ne;
            hd = 128 << j % 2, q = j / 2 % 2 ? 8 : 1, hk = 8, g = 4;
            batch = 1 + j / 4 % NB * 11, keys = offs[j / PER_LEN];
        }
        fajit_attn_desc a = a0;
        a.head_dim = hd, a.batch = batch, a.seqlen_k = keys, a.seqlen_q = q;
        a.heads_kv = hk, a.heads_q = hk * g;
        a.k_row_stride = a.v_row_stride = (int64_t)hk * hd;
        a.q_row_stride = a.o_row_stride = (int64_t)hk * g * hd;
        a.q_batch_stride = a.o_batch_stride = q * a.q_row_stride;
        a.k_head_stride = a.v_head_stride = a.q_head_stride = a.o_head_stride = hd;
        a.block_table_stride = (keys + 255 + 15) / 16;   /* (room for the rounded length) */
        a.mask = q > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        fj_kcfg c;
        ck_assert_int_eq(fj_kcfg_default(&a, &t, FAJIT_FAMILY_AUTO, &c), 0);
        char name[32];
        fj_kcfg_name(&c, name);
        int bn;
        ck_assert_int_eq(sscanf(name, "dec:%d", &bn), 1);
        fajit_attn_desc whole = a;
        whole.seqlen_k = (keys + bn - 1) / bn * bn;
        dec_splits_of(ctx, cfg, &other);
        const int sa = dec_splits_of(ctx, name, &a);
        dec_splits_of(ctx, cfg, &other);
        const int sw = dec_splits_of(ctx, name, &whole);
        ck_assert_msg(sw == sa, "%s, %d x %d keys, %d x %d heads, head_dim %d, q_len %d: %d "
                      "splits, %d at %d keys", name, batch, keys, hk, g, hd, q, sa, sw,
                      whole.seqlen_k);
    }
    fajit_ctx_destroy(small);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* Head packing (FJ_DEC_HP): the tuning-row names, check()'s conditions, the default's rule, and
 * a launch of 2 KV heads per CTA through the fake H200: the kernel's view of the problem
 * (heads_kv / 2 heads, head strides x 2, the group's rows x 2) in the grid, the parameters,
 * the preamble and the shared memory of head_dim x 2; partials per real head. */
START_TEST(decode_head_packing)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 64, 32, 8, 1, 16384, 32, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 1024, d.page_size = 16, d.num_pages = 1 << 17;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg c, plain;
    char name[64], why[256];
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h2", &c), 0);
    fj_kcfg_name(&c, name);
    ck_assert_str_eq(name, "dec:64x3m1n4s0h2");
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h4t", &plain), 0);
    fj_kcfg_name(&plain, name);
    ck_assert_str_eq(name, "dec:64x3m1n4s0h4t");
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h", &plain), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h1", &plain), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0th2", &plain), -1);
    ck_assert_int_eq(c.fam->check(&c, &d, &h200, why, sizeof why), 0);
    const struct {
        const char *cfg;
        int heads_kv, hd;
        int64_t head_stride;
        const char *why;
    } bad[] = {
        {"dec:64x3m1n4s0h3", 8, 32, 32, "must be 1, 2 or 4"},
        {"dec:64x3m1n4s0h4t", 8, 64, 64, "need cp.async loads"},
        {"dec:32x3m1n2s0h2", 8, 160, 160, "head_dim * heads <= 256"},
        {"dec:64x3m1n4s0h4", 6, 32, 32, "heads_kv a multiple"},
        {"dec:64x3m1n4s0h2", 8, 32, 64, "head strides == head_dim"},
        {"dec:64x3m1n4s0h2", 8, 32, 0, "head strides == head_dim"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fajit_attn_desc e = d;
        e.heads_kv = bad[i].heads_kv, e.heads_q = 4 * bad[i].heads_kv, e.head_dim = bad[i].hd;
        e.k_head_stride = e.v_head_stride = bad[i].head_stride;
        fj_kcfg b;
        ck_assert_int_eq(fj_kcfg_parse(bad[i].cfg, &b), 0);
        why[0] = 0;
        ck_assert_int_ne(b.fam->check(&b, &e, &h200, why, sizeof why), 0);
        ck_assert_msg(strstr(why, bad[i].why), "%zu: %s", i, why);
    }
    /* kernels: the macro, the name, head_dim 64's tiles and shared memory */
    fj_kernels ks, k64;
    c.fam->kernels(&c, &d, &ks);
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_HEAD_DIM 32\n"));
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_DEC_HP 2\n"));
    ck_assert_ptr_nonnull(strstr(ks.v[0].name, "d32 h2 64x3 m1 n4"));
    fajit_attn_desc w = d;
    w.head_dim = 64;
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0", &plain), 0);
    plain.fam->kernels(&plain, &w, &k64);
    ck_assert_int_eq(ks.dyn_smem[0], k64.dyn_smem[0]);
    ck_assert_ptr_null(strstr(k64.v[0].preamble, "FJ_DEC_HP"));   /* (cache keys as before) */
    ck_assert_str_eq(ks.v[1].preamble, "#define FJ_DTYPE 1\n#define FJ_HEAD_DIM 32\n");

    /* launches: 64 x 8 heads -> 256 CTAs of 2 heads, no split; 1 sequence of 32k -> splits */
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    ck_assert_int_eq(dec_splits_of(ctx, "dec:64x3m1n4s0h2", &d), 1);
    const fj_decode_params *q = &g_dec.p[0];
    ck_assert_uint_eq(g_dec.grid[0][0], 1);
    ck_assert_uint_eq(g_dec.grid[0][1], 4);
    ck_assert_uint_eq(g_dec.grid[0][2], 64);
    ck_assert_int_eq(q->heads_kv, 4);
    ck_assert_int_eq(q->heads_q, 32);
    ck_assert_int_eq(q->head_dim, 32);
    ck_assert_int_eq(q->k_head_stride, 64);
    ck_assert_int_eq(q->v_head_stride, 64);
    ck_assert_int_eq(q->k_row_stride, 8 * 32);
    ck_assert_int_eq(q->q_tiles, 1);   /* 8 query heads x 1 row: one tile of 16 */
    fajit_attn_desc one = d;
    one.batch = 1, one.seqlen_k = 32768, one.block_table_stride = 2048;
    const int s2 = dec_splits_of(ctx, "dec:64x3m1n4s0h2", &one);
    ck_assert_uint_eq(g_dec.grid[0][1], 4);
    ck_assert_uint_eq(g_dec.grid[0][0], (unsigned)(s2 * g_dec.p[0].q_tiles));
    const int s1 = dec_splits_of(ctx, "dec:64x3m1n4s0", &one);
    ck_assert_msg(s2 >= s1, "4 CTAs of 2 heads split no less than 8 of one: %d < %d", s2, s1);
    /* q_len 4: 2 x 4 x 4 = 32 packed rows, two q tiles of 16 */
    one.seqlen_q = 4, one.mask = FAJIT_MASK_CAUSAL;
    dec_splits_of(ctx, "dec:64x3m1n4s0h2", &one);
    ck_assert_int_eq(g_dec.p[0].q_tiles, 2);
    /* the rule (decode_rules.c's pack_rule, sm_90): 8 KV heads side by side, 4 query heads each */
    static const struct {
        int batch, seqlen_k, hd, q_len, pack;   /* pack: FJ_DEC_PACK_*, 0 = auto */
        const char *want;                       /* "h2", "h4", or "" for none */
    } rule[] = {
        {64, 16384, 32, 1, 0, "h4"},   /* the batch fills the SMs: 4 rows x 4 */
        {64, 16384, 32, 4, 0, "h2"},   /* 16 rows: x 2 keeps 32 */
        {128, 2048, 48, 1, 0, "h4"},   /* head_dim 48 x 4 = 192 */
        {128, 2048, 48, 4, 0, "h2"},
        {64, 16384, 64, 1, 0, "h2"},   /* head_dim 64 x 2 = 128 (x 4 = 256 not) */
        {64, 16384, 64, 8, 0, ""},     /* 32 rows */
        {64, 16384, 128, 1, 0, ""},    /* head_dim 128: none */
        {64, 16384, 16, 1, 0, ""},     /* below 32: not measured, none */
        {64, 16384, 40, 1, 0, ""},     /* 40, 56: not run packed on a GPU, none */
        {64, 16384, 40, 1, FJ_DEC_PACK_4, "h4"},
        {16, 8192, 32, 1, 0, "h2"},    /* the keys stream: head_dim 32 x 2 up to 32 rows */
        {1, 131072, 32, 4, 0, "h2"},
        {16, 8192, 48, 1, 0, "h2"},    /* at 48 x 2 up to 16 packed rows */
        {1, 32768, 48, 1, 0, "h2"},
        {16, 8192, 48, 4, 0, ""},      /* (16 rows x 2 = 32: none) */
        {16, 8192, 64, 1, 0, ""},
        {1, 4096, 32, 1, 0, ""},       /* latency-bound: none */
        {4, 4096, 32, 1, 0, ""},
        {64, 16384, 32, 1, FJ_DEC_PACK_OFF, ""},
        {1, 4096, 32, 1, FJ_DEC_PACK_4, "h4"},   /* forced: wherever the layout allows */
        {1, 4096, 128, 1, FJ_DEC_PACK_2, "h2"},
        {1, 4096, 256, 1, FJ_DEC_PACK_2, ""},    /* 512 columns: none */
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
        fajit_attn_desc e;
        fajit_attn_desc_init(&e, p, p, p, p, rule[i].batch, 32, 8, rule[i].q_len,
                             rule[i].seqlen_k, rule[i].hd, FAJIT_BF16);
        e.mask = rule[i].q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        e.block_table = d.block_table, e.page_size = 16, e.num_pages = 1 << 20;
        e.block_table_stride = e.seqlen_k / 16;
        fj_fopts fo, fo_tma;
        const fj_target t = dec_target(h200, &fo, FJ_DEC_LOADER_AUTO, rule[i].pack);
        ck_assert_int_eq(fj_kcfg_default(&e, &t, FAJIT_FAMILY_AUTO, &c), 0);
        fj_kcfg_name(&c, name);
        const char *h = strstr(name, "s0h");
        ck_assert_msg(*rule[i].want ? h && strncmp(h + 2, rule[i].want, 2) == 0 : !h,
                      "%zu: %s, want %s", i, name, *rule[i].want ? rule[i].want : "none");
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), *rule[i].want ? rule[i].want[1] - '0' : 1);
        ck_assert_int_eq(c.fam->check(&c, &e, &t, why, sizeof why), 0);
        /* not off sm_90, nor with the TMA loader forced, nor over other layouts */
        const fj_target others[] = {{80, 0, 108, 0, 0, &fo},
                                    {100, 1, 148, 0, 0, NULL},
                                    dec_target(h200, &fo_tma, FJ_DEC_LOADER_TMA, rule[i].pack)};
        for (size_t o = 0; o < 3 && !rule[i].pack; o++) {
            ck_assert_int_eq(fj_kcfg_default(&e, &others[o], FAJIT_FAMILY_AUTO, &c), 0);
            fj_kcfg_name(&c, name);
            ck_assert_msg(!strstr(name, "s0h"), "%zu, target %zu: %s", i, o, name);
        }
        e.heads_kv = 3, e.heads_q = 12;
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), 1);
        e.heads_kv = 8, e.heads_q = 32, e.k_head_stride = 2 * e.head_dim;
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), 1);
    }
    /* the tuner's candidates hold the default with 1, 2 and 4 heads per CTA at head_dim
     * <= 64 on sm_90 */
    fj_kcfg cands[128];
    const int nc = c.fam->candidates(&d, &h200, cands, 128);
    int seen[3] = {0, 0, 0};
    for (int k = 0; k < nc; k++) {
        fj_kcfg_name(&cands[k], name);
        seen[strstr(name, "s0h4") ? 2 : strstr(name, "s0h2") ? 1 : 0]++;
        ck_assert_int_eq(c.fam->check(&cands[k], &d, &h200, why, sizeof why), 0);
    }
    ck_assert_msg(seen[0] && seen[1] && seen[2], "%d candidates: %d/%d/%d", nc, seen[0],
                  seen[1], seen[2]);
    /* warm's list (shipped()) holds the packed defaults, from a descriptor without heads or
     * strides as warm's own, in every split class (STRICT serves them) */
    fj_kcfg list[128];
    fajit_attn_desc bare;
    memset(&bare, 0, sizeof bare);
    bare.head_dim = 32, bare.dtype = FAJIT_BF16, bare.batch = bare.heads_q = bare.heads_kv = 1;
    bare.block_table = d.block_table, bare.page_size = 16;
    const int nl = c.fam->shipped(&bare, &h200, list, 128);
    static const int shapes[][3] = {{64, 16384, 8}, {1, 32768, 8}, {16, 8192, 8}, {128, 2048, 8},
                                    {16, 8192, 4}, {1, 131072, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        fajit_attn_desc e = d;
        e.batch = shapes[i][0], e.seqlen_k = shapes[i][1], e.heads_kv = shapes[i][2];
        e.heads_q = 4 * e.heads_kv, e.k_row_stride = e.v_row_stride = e.heads_kv * 32;
        e.block_table_stride = e.seqlen_k / 16;
        fj_kcfg want;
        ck_assert_int_eq(fj_kcfg_default(&e, &h200, FAJIT_FAMILY_AUTO, &want), 0);
        fj_kcfg_name(&want, name);
        ck_assert_msg(strstr(name, "s0h"), "%zu: %s", i, name);
        int found = 0;
        for (int k = 0; k < nl && !found; k++)
            found = fj_kcfg_same(&list[k], &want);
        ck_assert_msg(found, "%zu: %s not among the %d shipped", i, name, nl);
    }
    fajit_attn_desc odd = d;
    odd.heads_kv = 1, odd.heads_q = 8;
    ck_assert_int_eq(fj_kcfg_default(&odd, &h200, FAJIT_FAMILY_AUTO, &c), 0);
    fj_kcfg_name(&c, name);
    ck_assert_msg(!strstr(name, "s0h"), "one KV head packs nothing: %s", name);
    /* FAJIT_DECODE_HEAD_PACK: read at the context's creation, bad values refused */
    static const struct { const char *v; int want; } env[] = {
        {"auto", FJ_DEC_PACK_AUTO}, {"OFF", FJ_DEC_PACK_OFF}, {"2", FJ_DEC_PACK_2},
        {"4", FJ_DEC_PACK_4}, {"3", -1}, {"on", -1}};
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        fajit_ctx *x = NULL;
        setenv("FAJIT_DECODE_HEAD_PACK", env[i].v, 1);
        const fajit_status st = fajit_ctx_create(&x, &o);
        if (env[i].want >= 0) {
            ck_assert_int_eq(st, FAJIT_OK);
            ck_assert_int_eq(fj_dec_opts_of(&x->fopts)->pack, env[i].want);
            ck_assert_int_eq(fj_dec_opts_of(fj_target_of(x, NULL).fopts)->pack, env[i].want);
        } else {
            ck_assert_int_eq(st, FAJIT_INVALID_ARGUMENT);
            snprintf(why, sizeof why, "FAJIT_DECODE_HEAD_PACK must be auto, off, 2 or 4, got '%s'",
                     env[i].v);
            ck_assert_ptr_nonnull(strstr(fajit_errmsg(x), why));
        }
        fajit_ctx_destroy(x);
    }
    unsetenv("FAJIT_DECODE_HEAD_PACK");
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* Random decode problems through a fake A100, A6000, H200 and B200 (sm_80, 86, 90, 100
 * with 108, 84, 132 and 148 SMs): whatever the split rules (wave rule, fill_splits, the
 * cluster cut, a forced num_splits) choose, the launch holds the kernel's contract:
 * 1..FAJIT_MAX_SPLITS splits of whole key tiles, none empty, the grid (splits x q tiles,
 * heads_kv, batch), partials only with splits and as large as they are, merged in clusters
 * (sm_90+; then no partials, no counters, nothing allocated) or by the last CTA (counters)
 * or else by the combine kernel, a caller's workspace of
 * fajit_attn_workspace_size() bytes enough, and the same launch when only the device values
 * (seqused_k, block table, query contents) change, as between CUDA-graph replays. */
static unsigned dec_rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Paged prefill on sm_90a goes to the Hopper family where its K/V blocks fit the pages and
 * enough query rows come; decode rows, other page sizes, varlen without total_q, the checked
 * mode and other targets stay with the decode family. */
START_TEST(fa3_paged_dispatch)
{
    static const fj_target h = {90, 1, 132, 0, 1, NULL}, hc = {90, 1, 132, 1, 1, NULL},
                           a = {80, 0, 108, 0, 0, NULL};
    void *ptr = (void *)(uintptr_t)0x100000;
    static const struct {
        int hd, mask, q, ps, varlen, total_q;
        const fj_target *t;
        int fa3;   /* 1: the Hopper family, 0: decode, 2: mixed (varlen: both) */
    } cases[] = {
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &h, 1},
        {128, FAJIT_MASK_NONE, 512, 256, 0, 0, &h, 1},
        {64, FAJIT_MASK_CAUSAL, 2048, 8, 0, 0, &h, 1},
        {256, FAJIT_MASK_NONE, 4096, 32, 0, 0, &h, 1},   /* 128x80 does not fit: 128x64 */
        {128, FAJIT_MASK_WINDOW, 1024, 64, 1, 1, &h, 2},
        {128, FAJIT_MASK_CAUSAL, 64, 16, 0, 0, &h, 1},
        {128, FAJIT_MASK_CAUSAL, 63, 16, 0, 0, &h, 0},  /* too few rows */
        {128, FAJIT_MASK_CAUSAL, 1, 16, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 1, 0, 0, &h, 0}, /* no tile fits pages of 1, 3, 12 */
        {128, FAJIT_MASK_CAUSAL, 4096, 3, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 12, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 24, 0, 0, &h, 1}, /* 128x128 does not fit: 128x144 */
        {128, FAJIT_MASK_CAUSAL, 1024, 16, 1, 0, &h, 0}, /* varlen without total_q */
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &hc, 0}, /* checked: page ids tested */
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &a, 0},
        {72, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &h, 0},  /* head_dim not a multiple of 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 2, 32, 8, cases[i].q, 8192, cases[i].hd,
                             FAJIT_BF16);
        d.mask = (fajit_mask)cases[i].mask;
        if (d.mask == FAJIT_MASK_WINDOW)
            d.window_left = 100, d.window_right = 0;
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = cases[i].ps;
        d.block_table_stride = (8192 + cases[i].ps - 1) / cases[i].ps;
        d.num_pages = 4096;
        d.k_row_stride = d.v_row_stride = 8 * cases[i].hd;
        if (cases[i].varlen) {
            d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
            d.total_q = cases[i].total_q ? 2 * cases[i].q : 0;
        }
        const fj_family *f = fj_family_choose(&d, cases[i].t, FAJIT_FAMILY_AUTO);
        ck_assert_msg(f == (cases[i].fa3 == 2   ? &fj_family_mixed
                            : cases[i].fa3 ? &fj_family_fa3
                                           : &fj_family_decode),
                      "case %zu: %s", i, f ? f->name : "none");
        fj_kcfg c;
        ck_assert_int_eq(fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_AUTO, &c), 0);
        if (cases[i].fa3 == 2) {   /* its Hopper part: the family's default, as forced */
            ck_assert_int_eq(fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_FA3, &c), 0);
            f = &fj_family_fa3;
        }
        if (!cases[i].fa3)
            continue;
        const fj_fa3_config *fc = fj_fa3_of(&c);
        ck_assert_msg(fj_fa3_page_fit(fc->block_n, cases[i].ps), "case %zu: block_n %d", i,
                      fc->block_n);
        char why[256];
        ck_assert_int_eq(f->check(&c, &d, cases[i].t, why, sizeof why), 0);
        fj_kernels ks;
        f->kernels(&c, &d, &ks);
        ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_FA3_PAGED 1\n"));
        ck_assert_ptr_nonnull(strstr(ks.v[0].name, " paged"));
        /* every candidate fits the pages, the default first */
        fj_kcfg cand[32];
        const int n = f->candidates(&d, cases[i].t, cand, 32);
        ck_assert_int_ge(n, 1);
        ck_assert_mem_eq(fj_fa3_of(&cand[0]), fc, sizeof *fc);
        for (int k = 0; k < n; k++)
            ck_assert(fj_fa3_page_fit(fj_fa3_of(&cand[k])->block_n, cases[i].ps));
        /* a tuned tile that does not fit the pages is refused with the rule */
        fj_fa3_config bad = *fc;
        bad.block_n = cases[i].ps == 8 ? 80 : 176;
        if (!fj_fa3_page_fit(bad.block_n, cases[i].ps)) {
            fj_kcfg b;
            fj_fa3_kcfg(&bad, &b);
            ck_assert_int_eq(f->check(&b, &d, cases[i].t, why, sizeof why), -1);
            ck_assert_ptr_nonnull(strstr(why, "page_size"));
        }
        /* the same problem over contiguous K/V: no paged variant */
        d.block_table = NULL;
        if (!d.cu_seqlens_q && fj_family_choose(&d, cases[i].t, FAJIT_FAMILY_AUTO) == &fj_family_fa3) {
            fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_AUTO, &c);
            f->kernels(&c, &d, &ks);
            ck_assert_ptr_null(strstr(ks.v[0].preamble, "FJ_FA3_PAGED"));
        }
    }
    {   /* paged consumers have 232 registers: 128x176 at head_dim 128 is refused with the rule */
        fajit_attn_desc d;
        void *ptr = (void *)(uintptr_t)0x100000;
        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 2, 32, 8, 4096, 4096, 128, FAJIT_BF16);
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = 16, d.block_table_stride = 256, d.num_pages = 1024;
        fj_fa3_config wide = {128, 176, 1, 1, 2};
        fj_kcfg w;
        char why[256];
        fj_fa3_kcfg(&wide, &w);
        ck_assert_int_eq(fj_family_fa3.check(&w, &d, &h, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "232 registers"));
        d.block_table = NULL;   /* contiguous: 240 registers, allowed */
        ck_assert_int_eq(fj_family_fa3.check(&w, &d, &h, why, sizeof why), 0);
    }
    ck_assert(fj_fa3_page_fit(128, 256) && fj_fa3_page_fit(128, 16) && fj_fa3_page_fit(176, 16) &&
              fj_fa3_page_fit(128, 128) && !fj_fa3_page_fit(176, 32) && !fj_fa3_page_fit(128, 4) &&
              !fj_fa3_page_fit(128, 48) && !fj_fa3_page_fit(128, 1) && fj_fa3_page_fit(80, 160));
}
END_TEST

/* The mixed family: a varlen batch over paged K/V on sm_90a that the Hopper family serves
 * is one plan of its kernel (sequences of more than 16 rows, fj_kv_pages.min_q 17) and the
 * decode kernels' QMAX variants (q_len 16); fixed-length paged prefill stays with the
 * Hopper family, short batches, other targets and the checked mode with the decode one. */
static CUresult mix_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                         const unsigned long long *st, const unsigned *b, const unsigned *el,
                         int i, int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)d, (void)st, (void)b, (void)el, (void)i, (void)w, (void)l;
    (void)o;
    memset(m, 0, 128);
    return 0;
}
static void mix_desc(fajit_attn_desc *d, int seqlen_q, int varlen)
{
    void *ptr = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(d, ptr, ptr, ptr, ptr, 4, 32, 8, seqlen_q, 4096, 128, FAJIT_BF16);
    d->mask = FAJIT_MASK_CAUSAL;
    d->block_table = (const int32_t *)(uintptr_t)0x3000;
    d->page_size = 16, d->block_table_stride = 256, d->num_pages = 4096;
    d->seqused_k = (const int32_t *)(uintptr_t)0x4000;
    d->k_row_stride = d->v_row_stride = 8 * 128;
    if (varlen) {
        d->cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
        d->total_q = 400;
        d->q_batch_stride = d->o_batch_stride = 0;
    }
}
START_TEST(mixed_plan)
{
    static const fj_target h = {90, 1, 132, 0, 1, NULL}, hc = {90, 1, 132, 1, 1, NULL},
                           a = {80, 0, 108, 0, 0, NULL};
    fajit_attn_desc d, dd;
    /* routing */
    mix_desc(&d, 300, 1);
    ck_assert_ptr_eq(fj_family_choose(&d, &h, FAJIT_FAMILY_AUTO), &fj_family_mixed);
    ck_assert_ptr_eq(fj_family_choose(&d, &hc, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert_ptr_eq(fj_family_choose(&d, &a, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert_ptr_eq(fj_family_choose(&d, &h, FAJIT_FAMILY_FA3), &fj_family_fa3);
    mix_desc(&dd, 300, 0);   /* fixed length: no decode rows */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_fa3);
    mix_desc(&dd, 63, 1);    /* every sequence at most 63 rows: the decode family */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    mix_desc(&dd, 300, 1);
    dd.total_q = 0;          /* (the Hopper kernel's maps need total_q) */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    mix_desc(&dd, 300, 1);
    dd.page_size = 12, dd.block_table_stride = 342;   /* no Hopper tile fits the pages */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert(!fj_family_mixed.applies(&dd, &h));

    /* the configuration: the Hopper default and the decode default for 16 rows */
    fj_kcfg c, f3, fd, back;
    ck_assert_int_eq(fj_kcfg_default(&d, &h, FAJIT_FAMILY_AUTO, &c), 0);
    ck_assert_ptr_eq(c.fam, &fj_family_mixed);
    fj_family_fa3.default_cfg(&d, &h, &f3);
    mix_desc(&dd, 16, 1);
    fj_family_decode.default_cfg(&dd, &h, &fd);
    char name[32], n3[32], nd[32], want[64];
    fj_kcfg_name(&c, name);
    fj_kcfg_name(&f3, n3);
    fj_kcfg_name(&fd, nd);
    snprintf(want, sizeof want, "mix:%s+%s", n3 + 4, nd + 4);
    ck_assert_str_eq(name, want);
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&back, &c));
    static const char *const bad[] = {"mix:128x128o1p1s2", "mix:+64x3m1n4s0",
                                      "mix:128x128o1p1s2+", "mix:128x128o1p1s2+64x3m1n4s0x",
                                      "mix:128x128o1p1+64x3m1n4s0", "mix:12345678901234567890"
                                      "12345678901+64x3m1n4s0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(fj_kcfg_parse(bad[i], &back) == -1, "%s", bad[i]);
    char why[256] = "";
    ck_assert_msg(fj_family_mixed.check(&c, &d, &h, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fj_family_mixed.check(&c, &d, &a, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "sm_90a"));
    ck_assert_int_eq(fj_kcfg_parse("mix:128x176o1p1s2+64x3m1n4s0", &back), 0);
    mix_desc(&dd, 300, 1);
    dd.page_size = 32, dd.block_table_stride = 128;   /* (176 keys: 5.5 pages) */
    ck_assert_int_eq(fj_family_mixed.check(&back, &dd, &h, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "page_size"));
    mix_desc(&dd, 16, 1);   /* (the decode launch's problem again) */
    fj_kcfg cand[4];
    ck_assert_int_eq(fj_family_mixed.candidates(&d, &h, cand, 4), 1);
    ck_assert(fj_kcfg_same(&cand[0], &c));

    /* the kernels: the paged Hopper kernel, then the decode split and combine (QMAX) */
    fj_kernels ks, k3, kd;
    fj_family_mixed.kernels(&c, &d, &ks);
    fj_family_fa3.kernels(&f3, &d, &k3);
    fj_family_decode.kernels(&fd, &dd, &kd);
    ck_assert_int_eq(ks.n, 3);
    ck_assert_str_eq(ks.v[0].preamble, k3.v[0].preamble);
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_FA3_PAGED 1\n"));
    ck_assert_int_eq(ks.pdl[0], 0);
    for (int i = 1; i < 3; i++) {
        ck_assert_str_eq(ks.v[i].function, kd.v[i - 1].function);
        ck_assert_ptr_null(strstr(kd.v[i - 1].preamble, "FJ_DEC_QMAX"));
        ck_assert_ptr_nonnull(strstr(ks.v[i].preamble, "#define FJ_DEC_QMAX 1\n"));
        ck_assert_ptr_nonnull(strstr(ks.v[i].name, " qmax"));
        ck_assert_int_eq(ks.pdl[i], 1);
        ck_assert_int_eq(ks.threads[i], kd.threads[i - 1]);
        ck_assert_int_eq(ks.dyn_smem[i], kd.dyn_smem[i - 1]);
        ck_assert_int_eq(ks.cluster[i], kd.cluster[i - 1]);
    }
    char grid[512];
    fj_family_mixed.describe_grid(&c, &d, &h, grid, sizeof grid);
    ck_assert_msg(strncmp(grid, "fa3 persistent grid", 19) == 0 &&
                      strstr(grid, "more than 16 query rows, then dec grid (") &&
                      strstr(grid, "at most 16"), "%s", grid);

    /* the workspace: the decode launch's for 16 rows; counters shared with the Hopper one */
    fj_workspace wm = {0, 0, 0}, w3 = {0, 0, 0}, wd = {0, 0, 0};
    fj_family_mixed.workspace(&c, &d, &h, &wm);
    fj_family_fa3.workspace(&f3, &d, &h, &w3);
    fj_kcfg fdq;
    ck_assert_int_eq(fj_kcfg_parse(nd, &fdq), 0);
    fj_family_decode.workspace(&fdq, &dd, &h, &wd);
    ck_assert_uint_eq(wm.scratch_bytes, wd.scratch_bytes);
    ck_assert_uint_eq(wm.counter_bytes, wd.counter_bytes > w3.counter_bytes ? wd.counter_bytes
                                                                              : w3.counter_bytes);
    ck_assert_uint_eq(wm.report_bytes, 0);

    /* the launches */
    fj_cuda fake = dec_fake_device();
    fake.cuTensorMapEncodeTiled = mix_tmap;
    fj_launch_env env = {&fake, 132, 0x7000, 0x8000, 0, 90, {0}, {{0}}, NULL};
    fj_args ar;
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&c, 0, &d, &env, &ar, why, sizeof why), FAJIT_OK);
    ck_assert_int_eq(ar.n, 6);
    fj_kv_pages pg;
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 17);
    ck_assert_int_eq(pg.page_size, 16);
    memset(&ar, 0, sizeof ar);   /* plain Hopper: none skipped */
    ck_assert_int_eq(fj_family_fa3.launch_args(&f3, 0, &d, &env, &ar, why, sizeof why), FAJIT_OK);
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 0);
    for (int i = 1; i < 3; i++) {
        memset(&ar, 0, sizeof ar);
        ck_assert_int_eq(fj_family_mixed.launch_args(&c, i, &d, &env, &ar, why, sizeof why),
                         FAJIT_OK);
        fj_decode_params p;
        memcpy(&p, ar.ptr[0], sizeof p);
        ck_assert_int_eq(p.q_len, 16);
        ck_assert_int_eq(p.total_rows, 400);
        ck_assert_uint_eq(p.cu_seqlens_q, 0x5000);
        if (i == 1) {
            ck_assert_uint_eq(ar.grid[2], 4);
            ck_assert_uint_eq(ar.grid[1], 8u / (unsigned)(fj_dec_pack_default(&dd, &h)));
        }
    }
    /* forced onto a fixed-length prefill: the Hopper launch alone, nothing skipped */
    mix_desc(&dd, 300, 0);
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_MIXED), &fj_family_mixed);
    fj_family_mixed.default_cfg(&dd, &h, &back);
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&back, 0, &dd, &env, &ar, why, sizeof why),
                     FAJIT_OK);
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 0);
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&back, 1, &dd, &env, &ar, why, sizeof why),
                     FAJIT_OK);
    ck_assert_uint_eq(ar.grid[0], 0);
    fj_family_mixed.workspace(&back, &dd, &h, &wm);
    ck_assert_uint_eq(wm.scratch_bytes, 0);

    /* warm: the shipped configurations list the QMAX variants beside the plain ones */
    fj_kcfg sh[16];
    const int ns = fj_family_mixed.shipped(&d, &h, sh, 16);
    ck_assert_int_ge(ns, 1);
    fj_variant vs[256];
    int nv = 0, qmax = 0;
    ck_assert_int_eq(fj_family_variants(&d, &h, 0, vs, &nv, 256), 0);
    for (int i = 0; i < nv; i++)
        qmax += strstr(vs[i].preamble, "FJ_DEC_QMAX") != NULL;
    ck_assert_int_ge(qmax, 2);
}
END_TEST

/* The plan through the API: describe names both launches (the text the GPU test counts). */
START_TEST(mixed_describe)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "", o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx = NULL;
    fajit_attn_desc d;
    char line[2048];
    /* FAJIT_PAGED_PREFILL=decode keeps paged prefill with the decode family; a bad value is
     * refused at context creation; unset or hopper, the Hopper kernel takes it (below) */
    setenv("FAJIT_PAGED_PREFILL", "decode", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    unsetenv("FAJIT_PAGED_PREFILL");
    mix_desc(&d, 300, 1);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strncmp(line, "dec ", 4) == 0 && !strstr(line, "fa3"), "%s", line);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_PAGED_PREFILL", "tensor", 1);
    ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(
        strstr(fajit_errmsg(ctx), "FAJIT_PAGED_PREFILL must be decode or hopper, got 'tensor'"));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_PAGED_PREFILL");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    mix_desc(&d, 300, 1);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa3 bf16 d128 causal") && strstr(line, " paged (default): fa3 ") &&
                      strstr(line, "; then dec bf16 d128") && strstr(line, " qmax (default)") &&
                      strstr(line, "; then dec combine bf16 d128 qmax"), "%s", line);
    mix_desc(&d, 300, 0);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_ptr_null(strstr(line, "qmax"));
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(decode_random_plans)
{
    /* (A100, A6000, H200, B200) */
    static const int cc[][2] = {{80, 108}, {86, 84}, {90, 132}, {100, 148}};
    g_fake_cc = cc[_i][0], g_fake_sms = cc[_i][1];
    fj_cuda fake = dec_fake_device();
    fake.cuLaunchKernelEx = cl_launch_ex;   /* (records the cluster x, then dec_launch_ex) */
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    const fj_target t = fj_target_of(ctx, NULL);
    static const int hds[] = {32, 48, 64, 72, 96, 128, 256}, pss[] = {0, 1, 8, 16, 16, 32, 64, 128, 256};
    static const int lens[] = {1, 100, 1024, 2048, 4096, 8192, 32768, 131072};
    unsigned seed = 2026u + (unsigned)_i, bound_seed = 44u + (unsigned)_i;
    int split_cases = 0, fused = 0, combined = 0, clustered = 0;
    for (int it = 0; it < 1500; it++) {
        void *ptr = (void *)(uintptr_t)0x100000;
        const int small = dec_rnd(&seed) % 4 == 0;   /* a latency-bound step of 1-2 sequences */
        const int hk = 1 + (int)(dec_rnd(&seed) % (small ? 8 : 16));
        const int g = 1 + (int)(dec_rnd(&seed) % 16);
        const int batch = small ? 1 + (int)(dec_rnd(&seed) % 2)
                          : dec_rnd(&seed) % 4 ? 1 + (int)(dec_rnd(&seed) % 48)
                                               : 1 + (int)(dec_rnd(&seed) % 400);
        const int hd = hds[dec_rnd(&seed) % 7], ps = pss[dec_rnd(&seed) % 9];
        const int keys = small ? 512 + (int)(dec_rnd(&seed) % 3584)
                         : dec_rnd(&seed) % 2 ? lens[dec_rnd(&seed) % 8]
                                              : 1 + (int)(dec_rnd(&seed) % 70000);
        const int varlen = ps && !small && dec_rnd(&seed) % 5 == 0;
        int q_len = small ? 1 + (int)(dec_rnd(&seed) % 2)
                    : varlen ? 1 + (int)(dec_rnd(&seed) % 300) : 1 + (int)(dec_rnd(&seed) % 16);
        if (!ps && q_len * g > 64)   /* contiguous: the decode family's decode steps only */
            q_len = 64 / g > 0 ? 64 / g : 1;
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, batch, hk * g, hk, q_len, keys, hd,
                             dec_rnd(&seed) % 2 ? FAJIT_BF16 : FAJIT_F16);
        d.mask = q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        if (ps) {
            d.block_table = (const int32_t *)(uintptr_t)0x3000;
            d.page_size = ps;
            d.block_table_stride = (keys + ps - 1) / ps + (int)(dec_rnd(&seed) % 3);
            d.num_pages = 1 << 22;
            d.seqused_k = (const int32_t *)(uintptr_t)0x4000;
            d.k_row_stride = d.v_row_stride = (int64_t)hk * hd;
        }
        if (varlen) {
            d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
            d.total_q = dec_rnd(&seed) % 2 ? batch * q_len : 0;
            d.q_batch_stride = d.o_batch_stride = 0;
        }
        if (!small && dec_rnd(&seed) % 6 == 0)
            d.num_splits = 1 + (int)(dec_rnd(&seed) % FAJIT_MAX_SPLITS);
        else if (dec_rnd(&bound_seed) % 5 == 0)   /* (its own draws: the cases stay) */
            d.num_splits_max = 1 + (int)(dec_rnd(&bound_seed) % 24);
        ck_assert_msg(fajit_attn_check(ctx, &d) == FAJIT_OK, "case %d: %s", it, fajit_errmsg(ctx));
        fj_kernel kk[2];
        memset(kk, 0, sizeof kk);
        fj_kplan kp;
        memset(&kp, 0, sizeof kp);
        ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &kp.cfg), 0);
        if (kp.cfg.fam == &fj_family_fa3) {   /* paged prefill on sm_90: the Hopper kernel */
            ck_assert(ps && t.sm == 90 && q_len >= FJ_FA3_PAGED_MIN_Q && !varlen &&
                      fj_fa3_page_fit(fj_fa3_of(&kp.cfg)->block_n, ps));
            continue;
        }
        if (kp.cfg.fam == &fj_family_mixed) {   /* varlen paged prefill on sm_90: both */
            ck_assert(ps && t.sm == 90 && q_len >= FJ_FA3_PAGED_MIN_Q && varlen);
            continue;
        }
        ck_assert_ptr_eq(kp.cfg.fam, &fj_family_decode);
        char name[32];
        fj_kcfg_name(&kp.cfg, name);
        int bn, stages, wm, wn;
        ck_assert_int_eq(sscanf(name, "dec:%dx%dm%dn%d", &bn, &stages, &wm, &wn), 4);
        const int hp = strstr(name, "h4") ? 4 : strstr(name, "h2") ? 2 : 1;   /* head packing */
        kp.cfg.fam->kernels(&kp.cfg, &d, &kp.ks);
        kp.k[0] = &kk[0], kp.k[1] = &kk[1];
        if (kp.ks.cluster[0]) {   /* as the H200's probe found: 15 clusters of up to 8 */
            kp.cluster_max[0] = 8;
            set_active(&kp, 15);
            kp.cluster_smem[0] = kp.ks.dyn_smem[0];
        }
        memset(&g_dec, 0, sizeof g_dec);
        memset(&g_dm, 0, sizeof g_dm);
        memset(g_cl.dim, 0, sizeof g_cl.dim);
        ck_assert_msg(fj_kplan_launch(ctx, &kp, &d, NULL) == FAJIT_OK, "case %d %s: %s", it,
                      name, fajit_errmsg(ctx));
        const fj_decode_params q = g_dec.p[0];
        const long long tiles = (keys + bn - 1) / bn;
        const int rows = q_len * g * hp, q_tiles = (rows + 16 * wm - 1) / (16 * wm);
        char what[200];
        snprintf(what, sizeof what, "sm_%d, case %d: %s, %d x %d keys, %d x %d heads, q_len %d%s, "
                 "page %d, num_splits %d: %d splits of %d keys", g_fake_cc, it, name, batch,
                 keys, hk, g, q_len, varlen ? " varlen" : "", ps, d.num_splits, q.splits,
                 q.split_keys);
        ck_assert_msg(q.splits >= 1 && q.splits <= FAJIT_MAX_SPLITS && q.splits <= tiles, "%s",
                      what);
        ck_assert_msg(!d.num_splits || q.splits <= d.num_splits, "%s", what);
        ck_assert_msg(!d.num_splits_max || q.splits <= d.num_splits_max, "%s, at most %d", what,
                      d.num_splits_max);
        /* no starved split: a chosen count that leaves most SMs idle only where each split
         * is already at most 2 key tiles (until 2b1804e, 3 sequences x 1 KV head x 8k keys
         * ran 3 CTAs of 64 tiles on 132 SMs) */
        const long long ctas = (long long)q.splits * q_tiles * (hk / hp) * batch,
                        per = (tiles + q.splits - 1) / q.splits;
        ck_assert_msg(d.num_splits || d.num_splits_max || 2 * ctas >= g_fake_sms || per <= 2,
                      "%s: %lld CTAs of %lld tiles on %d SMs", what, ctas, per, g_fake_sms);
        ck_assert_msg(q.split_keys % bn == 0 && (long long)q.split_keys * q.splits >= keys &&
                      (long long)q.split_keys * (q.splits - 1) < keys, "%s", what);
        const unsigned *grid = g_dec.grid[0];
        ck_assert_msg(q.q_tiles == q_tiles && grid[0] == (unsigned)(q.splits * q_tiles) &&
                      grid[1] == (unsigned)(hk / hp) && grid[2] == (unsigned)batch,
                      "%s: grid %u %u %u", what, grid[0], grid[1], grid[2]);
        ck_assert_msg(g_dec.pdl_launches == (g_fake_cc >= 90 ? g_dec.launches : 0), "%s: %d "
                      "programmatic launches of %d", what, g_dec.pdl_launches, g_dec.launches);
        size_t need;
        ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
        ck_assert_msg(q.cluster == (g_cl.dim[0] != 0) && (!q.cluster || g_fake_cc >= 90),
                      "%s: cluster %d, x %u", what, q.cluster, g_cl.dim[0]);
        if (q.splits == 1) {
            ck_assert_msg(q.part_o == 0 && q.counters == 0 && g_dec.launches == 1, "%s", what);
        } else if (q.cluster) {   /* the splits of a group merge over distributed shared
                                   * memory: no counters, no partials, nothing allocated */
            ck_assert_msg(q.splits <= 8 && g_cl.dim[0] == (unsigned)q.splits &&
                          g_dec.launches == 1 && !q.counters && !q.part_o && !q.part_lse &&
                          !g_dm.allocated, "%s: cluster x %u, %d launches", what, g_cl.dim[0],
                          g_dec.launches);
            ck_assert_msg(need >= 256, "%s: workspace %zu", what, need);   /* (an upper bound) */
            clustered++;
        } else {
            const unsigned long long po = (unsigned long long)q.splits * q.total_rows * d.heads_q *
                                          hd * 4, pl = (unsigned long long)q.splits *
                                          q.total_rows * d.heads_q * 4;
            ck_assert_msg(q.total_rows >= (varlen && d.total_q ? d.total_q : batch * q_len), "%s",
                          what);
            ck_assert_msg(q.part_o && q.part_lse >= q.part_o + po, "%s", what);
            ck_assert_msg(g_dm.allocated - 0x9000000 >= q.part_lse - q.part_o + pl, "%s", what);
            ck_assert_msg(need >= po + pl + (q.counters ? 4 : 0), "%s: workspace %zu", what, need);
            if (q.counters) {   /* the last CTA of each group merges */
                ck_assert_msg(g_dec.launches == 1, "%s", what);
                fused++;
            } else {            /* the combine kernel: a CTA per row */
                ck_assert_msg(g_dec.launches == 2 && g_dec.grid[1][0] == (unsigned)q.total_rows,
                              "%s", what);
                combined++;
            }
        }
        split_cases += q.splits > 1;
        /* a graph replay's new lengths, tables and queries: the same launch */
        fajit_attn_desc e = d;
        e.q = e.o = (void *)(uintptr_t)0x200000;
        if (ps)
            e.block_table = (const int32_t *)(uintptr_t)0x6000,
            e.seqused_k = (const int32_t *)(uintptr_t)0x7000;
        memset(&g_dec, 0, sizeof g_dec);
        ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &e, NULL), FAJIT_OK);
        ck_assert_msg(g_dec.p[0].splits == q.splits && g_dec.p[0].split_keys == q.split_keys &&
                      g_dec.grid[0][0] == (unsigned)(q.splits * q_tiles), "%s: replay", what);
    }
    /* the draw reaches every kind of launch */
    ck_assert_int_gt(split_cases, 300);
    ck_assert_int_gt(fused, 50);
    ck_assert_int_gt(combined, 50);
    ck_assert_int_gt(clustered, g_fake_cc >= 90 ? 20 : -1);   /* (clusters: sm_90+) */
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    g_fake_cc = 90, g_fake_sms = 132;
}
END_TEST

/* num_splits_max: fajit's own split count, capped at the caller's bound. Over decode
 * problems on the fake H200 (one latency-bound sequence to full batches, q_len 1-8, head_dim
 * 64 and 128, 1k-128k keys) and every bound, the launch's count never exceeds the bound, is
 * the free choice wherever the bound is loose, and where it binds is what a forced count of
 * the bound launches; fajit_attn_workspace_size sizes for that count (the free choice's
 * bytes where loose, the forced count's where it binds). A tuned count is capped too, and a
 * bad bound is refused before anything launches. */
START_TEST(decode_splits_bound)
{
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    const fj_target t = fj_target_of(ctx, NULL);
    static const int hds[] = {64, 128}, qs[] = {1, 4, 8};
    static const int batches[] = {1, 2, 3, 8, 16, 40, 64, 100};
    static const int keys[] = {1000, 2048, 4096, 8192, 32768, 131072};
    static const int bounds[] = {1, 2, 3, 4, 7, 8, 12, 16, 32, 64, FAJIT_MAX_SPLITS};
    int loose = 0, binding = 0;
    for (int i = 0; i < 2 * 3 * 8 * 6; i++) {
        void *p = (void *)(uintptr_t)0x100000;
        const int hd = hds[i % 2], q = qs[i / 2 % 3], batch = batches[i / 6 % 8];
        const int sk = keys[i / 48];
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, batch, 32, 8, q, sk, hd, FAJIT_BF16);
        d.mask = q > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = 16, d.block_table_stride = (sk + 15) / 16, d.num_pages = 1 << 22;
        fj_kcfg c;
        char cfg[32];
        ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c), 0);
        fj_kcfg_name(&c, cfg);
        const int free_s = dec_splits_of(ctx, cfg, &d);
        size_t free_ws, ws, forced_ws;
        ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &free_ws), FAJIT_OK);
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            fajit_attn_desc e = d, f = d;
            e.num_splits_max = bounds[b];
            f.num_splits = bounds[b];
            const int s = dec_splits_of(ctx, cfg, &e);
            ck_assert_int_eq(fajit_attn_workspace_size(ctx, &e, &ws), FAJIT_OK);
            char what[160];
            snprintf(what, sizeof what, "%s %d x %d keys, q_len %d, head_dim %d, at most %d: "
                     "%d splits (free %d), %zu B (free %zu)", cfg, batch, sk, q, hd, bounds[b],
                     s, free_s, ws, free_ws);
            ck_assert_msg(s >= 1 && s <= bounds[b], "%s", what);
            ck_assert_msg(ws <= free_ws, "%s", what);
            if (free_s <= bounds[b]) {
                ck_assert_msg(s == free_s && ws == free_ws, "%s", what);
                loose++;
            } else {
                ck_assert_int_eq(fajit_attn_workspace_size(ctx, &f, &forced_ws), FAJIT_OK);
                ck_assert_msg(s == dec_splits_of(ctx, cfg, &f) && ws == forced_ws,
                              "%s: forced %zu B", what, forced_ws);
                binding++;
            }
        }
    }
    ck_assert_msg(loose > 100 && binding > 100, "%d loose, %d binding", loose, binding);
    /* a tuned count (16 splits of one sequence of 32k keys) is capped as well */
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 32, 8, 1, 32768, 128, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.page_size = 16, d.block_table_stride = 2048, d.num_pages = 1 << 22;
    ck_assert_int_eq(dec_splits_of(ctx, "dec:64x3m1n4s20", &d), 20);
    d.num_splits_max = 6;
    ck_assert_int_eq(dec_splits_of(ctx, "dec:64x3m1n4s20", &d), 6);
    char line[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "6 splits") && strstr(line, "at most 6"), "%s", line);
    /* bad bounds: refused by the call itself, nothing launched */
    static const int bad[][2] = {{0, -1}, {0, FAJIT_MAX_SPLITS + 1}, {7, 6}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fajit_attn_desc e = d;
        size_t bytes = 0;
        e.num_splits = bad[i][0], e.num_splits_max = bad[i][1];
        memset(&g_dec, 0, sizeof g_dec);
        ck_assert_int_eq(fajit_attn_fwd(ctx, &e, NULL), FAJIT_INVALID_ARGUMENT);
        ck_assert_int_eq(g_dec.launches, 0);
        ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "num_splits"));
        ck_assert_int_eq(fajit_attn_workspace_size(ctx, &e, &bytes), FAJIT_INVALID_ARGUMENT);
    }
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* fajit_warm_spec compiles, for every shape of a spec at every batch the spec lists, the
 * kernels dispatch picks for it on the target: each key that fajit_cache_explain looks up
 * for a shape is among the keys of warm's list. The llama-3.2-1b-paged preset lists batch 1
 * and 64: at 64 the decode family packs two KV heads into 64-key tiles, a kernel no
 * batch-1 shape asks for. With an NVRTC, the public explain then says "hit" for every kernel
 * of a batch-64 shape once warm's keys are in a cache (entries of empty CUBINs: nothing is
 * compiled). No GPU. */
static int key_in(const fj_key *keys, int n, const fj_key *k)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&keys[i], k, sizeof *k) == 0)
            return 1;
    return 0;
}
START_TEST(warm_spec_every_batch)
{
    static const char *const specs[] = {"llama-3.2-1b-paged", "llama-3-8b-paged"};
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    const int nvrtc = fj_kernel_nvrtc_version(), version = nvrtc > 0 ? nvrtc : 13000;
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        fj_variant *vs = NULL;
        int n = 0;
        ck_assert_msg(fj_spec_warm_variants(ctx, specs[si], "sm_90a", &vs, &n) == FAJIT_OK,
                      "%s", fajit_errmsg(ctx));
        fj_key *keys = malloc((size_t)n * sizeof *keys);
        ck_assert_ptr_nonnull(keys);
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(fj_kernel_key(ctx, &vs[i], "sm_90a", version, &keys[i]), FAJIT_OK);
            if (nvrtc > 0) {   /* a cache that holds what warm compiles */
                fj_entry e;
                memset(&e, 0, sizeof e);
                e.key = keys[i];
                snprintf(e.arch, sizeof e.arch, "sm_90a");
                e.nvrtc_version = nvrtc, e.name = (char *)vs[i].name;
                ck_assert_int_eq(fj_cache_put(ctx->cache, &e), 0);
            }
        }
        fj_spec sp;
        ck_assert_int_eq(fj_spec_load(ctx, specs[si], &sp), FAJIT_OK);
        int batches[2] = {0, 0};
        for (size_t pi = 0; pi < sp.n_problems; pi++) {
            const fj_problem *p = &sp.problems[pi];
            ck_assert_int_gt(p->page_size, 0);
            for (size_t k = 0; k < p->n_shapes; k++) {
                const fj_shape *sh = &p->shapes[k];
                void *ptr = (void *)(uintptr_t)0x100000;
                fajit_attn_desc d;   /* as `fajit-tune cache explain` makes it */
                fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, sh->batch, p->heads_q, p->heads_kv,
                                     sh->seqlen_q, sh->seqlen_k, p->head_dim, p->dtype);
                d.mask = p->mask;
                d.block_table = (const int32_t *)(uintptr_t)0x200000;
                d.page_size = p->page_size;
                d.block_table_stride = (sh->seqlen_k + p->page_size - 1) / p->page_size;
                d.num_pages = (int)(d.block_table_stride * sh->batch);
                fj_kernels ks;
                ck_assert_msg(fj_dispatch_kernels(ctx, "sm_90a", &d, &ks) == FAJIT_OK, "%s",
                              fajit_errmsg(ctx));
                for (int j = 0; j < ks.n; j++) {
                    fj_key want;
                    ck_assert_int_eq(fj_kernel_key(ctx, &ks.v[j], "sm_90a", version, &want),
                                     FAJIT_OK);
                    ck_assert_msg(key_in(keys, n, &want), "%s: %s (sq %d sk %d batch %d) is "
                                  "not among the %d kernels warm compiles", specs[si],
                                  ks.v[j].name, sh->seqlen_q, sh->seqlen_k, sh->batch, n);
                }
                batches[sh->batch == 64]++;
                char text[4096];
                if (nvrtc > 0 && sh->batch == 64) {
                    ck_assert_int_eq(fajit_cache_explain(ctx, "sm_90a", &d, text, sizeof text),
                                     FAJIT_OK);
                    ck_assert_msg(!strstr(text, "miss"), "%s batch 64: %s", specs[si], text);
                    ck_assert_ptr_nonnull(strstr(text, "hit: the key is in the cache"));
                }
            }
        }
        ck_assert_msg(batches[0] && batches[1], "%s: %d shapes at batch 1, %d at 64", specs[si],
                      batches[0], batches[1]);
        fj_spec_free(&sp);
        free(keys);
        free(vs);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

TCase *fj_tcase_decode(void)
{
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, decode_family_host);
    tcase_add_test(tc, decode_loader);
    tcase_add_test(tc, decode_defaults);
    tcase_add_test(tc, decode_split_buckets);
    tcase_add_test(tc, decode_staged_cap);
    tcase_add_test(tc, decode_cluster_merge);
    tcase_add_test(tc, decode_splits_memo);
    tcase_add_test(tc, decode_head_packing);
    tcase_add_loop_test(tc, decode_random_plans, 0, 4);
    tcase_add_test(tc, fa3_paged_dispatch);
    tcase_add_test(tc, mixed_plan);
    tcase_add_test(tc, mixed_describe);
    tcase_add_test(tc, decode_splits_bound);
    tcase_add_test(tc, warm_spec_every_batch);
    return tc;
}
