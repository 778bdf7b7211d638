/* test_unit_decode.c - the decode family's host half in the `unit` suite (no GPU): its
 * descriptions, launches through the fake device of fake_cuda.h (splits, workspace,
 * programmatic dependent launch), the sm_90 defaults per split class, plan buckets, the
 * split memo and bound, and the staged-merge cap. The cluster merge, the loaders and random
 * plans are in test_unit_decode_launch.c; head packing, the Hopper family's paged prefill,
 * the mixed plan and warm specs in test_unit_decode_plans.c. All in the TCase "decode"
 * (CK_RUN_CASE=decode); the shared fake device is declared in test_unit_decode.h. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_unit_decode.h"

/* t with the decode family's options `loader` and `pack` (held in *o) */
fj_target dec_target(fj_target t, fj_fopts *o, int loader, int pack)
{
    memset(o, 0, sizeof *o);
    fj_dec_opts *d = (fj_dec_opts *)(void *)o->b[FAJIT_FAMILY_DECODE];
    d->loader = loader, d->pack = pack;
    t.fopts = o;
    return t;
}

dec_record g_dec;
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
CUresult dec_launch_ex(const fj_cu_launch_config *c, CUfunction f, void **a, void **e)
{
    for (unsigned i = 0; i < c->num_attrs; i++)
        g_dec.pdl_launches += c->attrs[i].id == FJ_CU_LAUNCH_ATTR_PDL && c->attrs[i].v.value == 1;
    return dec_launch(f, c->grid_x, c->grid_y, c->grid_z, c->block_x, c->block_y, c->block_z,
                      c->smem, c->stream, a, e);
}

/* The splits that a launch of configuration `cfg` (a tuning-row name) takes for d through
 * ctx's fake device: the launch must succeed. */
int dec_splits_of(fajit_ctx *ctx, const char *cfg, const fajit_attn_desc *d)
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
fj_cuda dec_fake_device(void)
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
fajit_ctx *fake_ctx(void)
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

TCase *fj_tcase_decode(void)
{
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, decode_family_host);
    tcase_add_test(tc, decode_defaults);
    tcase_add_test(tc, decode_split_buckets);
    tcase_add_test(tc, decode_staged_cap);
    tcase_add_test(tc, decode_splits_memo);
    tcase_add_test(tc, decode_splits_bound);
    fj_decode_tests_launch(tc);
    fj_decode_tests_plans(tc);
    return tc;
}
