/* test_unit_decode_launch.c - the decode family's launches through the fake device (no
 * GPU; helpers in test_unit_decode.h): the cluster merge's probe and launch, the two K/V
 * loaders and the TMA maps they encode, and random decode problems on four fake GPUs that
 * must keep the kernel's launch contract. Part of the unit suite's TCase "decode". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_unit_decode.h"

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

void fj_decode_tests_launch(TCase *tc)
{
    tcase_add_test(tc, decode_loader);
    tcase_add_test(tc, decode_cluster_merge);
    tcase_add_loop_test(tc, decode_random_plans, 0, 4);
}
