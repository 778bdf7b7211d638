/* test_unit_fa3_features.c - the Hopper family's model features (softcap, sinks, ALiBi) on
 * the host: dispatch on sm_90a picks fa3 with the feature's tag for contiguous, varlen and
 * paged problems (paged varlen: the mixed family only where the decode family serves the
 * features too), the variant's preamble defines them, and the launch pushes fj_feat_params
 * as its last argument. No GPU. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "../src/families/decode.h"
#include "../src/families/fa3.h"
#include "../src/families/params.h"

static const float *const k_sinks = (const float *)(uintptr_t)0x4000;
static const float *const k_slopes = (const float *)(uintptr_t)0x5000;

/* The feature sets: softcap, sinks, ALiBi, all three; tag: the variant name's suffix. */
static const struct {
    unsigned f;
    const char *tag;
} k_sets[] = {
    {FJ_FEAT_SOFTCAP, " softcap"},
    {FJ_FEAT_SINKS, " sinks"},
    {FJ_FEAT_ALIBI, " alibi"},
    {FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI, " softcap sinks alibi"},
};

static void set_features(fajit_attn_desc *d, unsigned f)
{
    d->softcap = f & FJ_FEAT_SOFTCAP ? 30.f : 0.f;
    d->sinks = f & FJ_FEAT_SINKS ? k_sinks : NULL;
    d->alibi_slopes = f & FJ_FEAT_ALIBI ? k_slopes : NULL;
    d->alibi_batch_stride = f & FJ_FEAT_ALIBI ? 32 : 0;
}

static fajit_ctx *host_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx;
    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    unsetenv("FAJIT_MODEL_FEATURES");
    return ctx;
}

/* A describe line ("fa3 bf16 d128 causal 128x128 o1 p1 s2 softcap (default): ..."): whether
 * it starts with `fam` and has `tag` right before the first " (". */
static int picks(const char *line, const char *fam, const char *tag)
{
    const char *a = line;
    if (strncmp(a, fam, strlen(fam)) != 0)
        return 0;
    const char *e = strstr(a, " (");
    const size_t n = strlen(tag);
    return e && (size_t)(e - a) >= n && strncmp(e - n, tag, n) == 0;
}

START_TEST(fa3_features_dispatch)
{
    fajit_ctx *ctx = host_ctx();
    void *p = (void *)(uintptr_t)0x100000;
    char line[1024];
    for (size_t s = 0; s < sizeof k_sets / sizeof k_sets[0]; s++) {
        const int dims[] = {64, 128, 256};
        for (int m = 0; m < 2; m++)
            for (int k = 0; k < 3; k++) {
                /* contiguous prefill, causal and unmasked */
                fajit_attn_desc d;
                fajit_attn_desc_init(&d, p, p, p, p, 2, 32, 8, 4096, 4096, dims[k], FAJIT_BF16);
                d.mask = m ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
                set_features(&d, k_sets[s].f);
                ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line),
                                 FAJIT_OK);
                ck_assert_msg(picks(line, "fa3 bf16", k_sets[s].tag), "%s", line);
                /* varlen, the packed row counts given */
                d.cu_seqlens_q = d.cu_seqlens_k = (const int32_t *)(uintptr_t)0x6000;
                d.total_q = d.total_k = 8192;
                ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line),
                                 FAJIT_OK);
                ck_assert_msg(picks(line, "fa3 bf16", k_sets[s].tag), "%s", line);
            }
        /* f16, and a window mask */
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, 1, 16, 16, 2048, 2048, 128, FAJIT_F16);
        d.mask = FAJIT_MASK_WINDOW, d.window_left = 256, d.window_right = 0;
        set_features(&d, k_sets[s].f);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
        ck_assert_msg(picks(line, "fa3 f16 d128 window", k_sets[s].tag), "%s", line);
        /* other targets: not the Hopper kernel */
        line[0] = 0;
        const fajit_status st = fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line);
        ck_assert_msg(st != FAJIT_OK || !strstr(line, "fa3 "), "%s", line);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(fa3_features_paged)
{
    fajit_ctx *ctx = host_ctx();
    const fj_target t = fj_target_of(ctx, "sm_90a");
    void *p = (void *)(uintptr_t)0x100000;
    char line[1024];
    {   /* with a feature, 128-row tiles whose accumulators spilled without one are refused */
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, 2, 32, 8, 4096, 4096, 128, FAJIT_BF16);
        d.mask = FAJIT_MASK_CAUSAL;
        fj_kcfg c;
        fj_fa3_kcfg(&(fj_fa3_config){128, 176, 1, 1, 2}, &c);
        char why[256] = "";
        ck_assert_int_eq(fj_family_fa3.check(&c, &d, &t, why, sizeof why), 0);
        set_features(&d, FJ_FEAT_SINKS);
        ck_assert_int_eq(fj_family_fa3.check(&c, &d, &t, why, sizeof why), -1);
        ck_assert_msg(strstr(why, "a model feature") != NULL, "%s", why);
        /* paged with ALiBi: 128x80 at head_dim 256 (188) spilled 4 bytes, refused */
        fajit_attn_desc e;
        fajit_attn_desc_init(&e, p, p, p, p, 2, 32, 8, 4096, 4096, 256, FAJIT_BF16);
        e.mask = FAJIT_MASK_CAUSAL;
        e.block_table = (const int32_t *)(uintptr_t)0x3000;
        e.block_table_stride = 256, e.page_size = 16, e.num_pages = 1024;
        fj_kcfg c80;
        fj_fa3_kcfg(&(fj_fa3_config){128, 80, 1, 1, 1}, &c80);
        set_features(&e, FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS);
        ck_assert_int_eq(fj_family_fa3.check(&c80, &e, &t, why, sizeof why), 0);
        set_features(&e, FJ_FEAT_ALIBI);
        ck_assert_int_eq(fj_family_fa3.check(&c80, &e, &t, why, sizeof why), -1);
        ck_assert_msg(strstr(why, "<= 186") != NULL, "%s", why);
        fj_kcfg cs[32];
        const int k = fj_family_fa3.candidates(&d, &t, cs, 32);
        ck_assert_int_gt(k, 0);
        for (int i = 0; i < k; i++)
            ck_assert_int_eq(fj_family_fa3.check(&cs[i], &d, &t, why, sizeof why), 0);
    }
    for (size_t s = 0; s < sizeof k_sets / sizeof k_sets[0]; s++) {
        /* chunked prefill over a paged cache, fixed length: the Hopper kernel outranks the
         * decode family */
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, p, p, p, p, 2, 32, 8, 2048, 4096, 128, FAJIT_BF16);
        d.mask = FAJIT_MASK_CAUSAL;
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.block_table_stride = 64, d.page_size = 128, d.num_pages = 1024;
        set_features(&d, k_sets[s].f);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
        ck_assert_msg(picks(line, "fa3 bf16 d128 causal", k_sets[s].tag) &&
                      strstr(line, " paged"), "%s", line);
        /* a varlen paged batch: the mixed family where the decode family serves these
         * features as well (it needs both), else the Hopper kernel over every sequence */
        d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x6000;
        d.seqused_k = (const int32_t *)(uintptr_t)0x7000;
        d.total_q = 2048 + 7;
        d.q_batch_stride = d.o_batch_stride = 0;
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
        fajit_attn_desc dd = d;
        dd.seqlen_q = 1;   /* (the decode launch's rows) */
        if (fj_family_decode.applies(&dd, &t))
            ck_assert_msg(strstr(line, "then dec ") && strstr(line, " qmax"), "%s", line);
        else
            ck_assert_msg(picks(line, "fa3 bf16 d128 causal", k_sets[s].tag) &&
                          strstr(line, " paged"), "%s", line);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The variant: the features' defines after the configuration's (none without features), the
 * tag; the launch: fj_feat_params last, after the tile counter (and the pages). */
static CUresult f3_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                        const unsigned long long *st, const unsigned *b, const unsigned *el,
                        int i, int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)d, (void)st, (void)b, (void)el, (void)i, (void)w;
    (void)l, (void)o;
    memset(m, 0, 128);
    return 0;
}

START_TEST(fa3_features_kernel_args)
{
    fj_cuda cu = fake_device_table();
    cu.cuTensorMapEncodeTiled = f3_tmap;
    fj_launch_env env;
    memset(&env, 0, sizeof env);
    env.cu = &cu, env.sm_count = 132, env.sm = 90;
    void *p = (void *)(uintptr_t)0x100000;
    fj_kcfg c;
    fj_fa3_kcfg(&(fj_fa3_config){128, 128, 1, 1, 2}, &c);
    for (int paged = 0; paged < 2; paged++)
        for (size_t s = 0; s <= sizeof k_sets / sizeof k_sets[0]; s++) {
            const unsigned f = s < sizeof k_sets / sizeof k_sets[0] ? k_sets[s].f : 0u;
            fajit_attn_desc d;
            fajit_attn_desc_init(&d, p, p, p, p, 2, 32, 8, 2048, 4096, 128, FAJIT_BF16);
            d.mask = FAJIT_MASK_CAUSAL;
            if (paged) {
                d.block_table = (const int32_t *)(uintptr_t)0x3000;
                d.block_table_stride = 64, d.page_size = 128, d.num_pages = 1024;
            }
            set_features(&d, f);
            fj_kernels ks;
            fj_family_fa3.kernels(&c, &d, &ks);
            const char *pre = ks.v[0].preamble;
            ck_assert_int_eq(strstr(pre, "#define FJ_SOFTCAP 1\n") != NULL,
                             (f & FJ_FEAT_SOFTCAP) != 0);
            ck_assert_int_eq(strstr(pre, "#define FJ_SINKS 1\n") != NULL,
                             (f & FJ_FEAT_SINKS) != 0);
            ck_assert_int_eq(strstr(pre, "#define FJ_ALIBI 1\n") != NULL,
                             (f & FJ_FEAT_ALIBI) != 0);
            ck_assert_int_eq(strstr(pre, "FJ_KV_FP8") != NULL, 0);
            if (!f)   /* exactly the configuration's preamble: the kernel of before */
                ck_assert_msg(pre[strlen(pre) - 1] == '\n' &&
                                  !strstr(pre, "SOFTCAP") && !strstr(pre, "SINKS") &&
                                  !strstr(pre, "ALIBI"), "%s", pre);
            else
                ck_assert_msg(strstr(ks.v[0].name, k_sets[s].tag) != NULL, "%s",
                              ks.v[0].name);

            fj_args a;
            memset(&a, 0, sizeof a);
            char why[256] = "";
            ck_assert_int_eq(fj_family_fa3.launch_args(&c, 0, &d, &env, &a, why, sizeof why),
                             FAJIT_OK);
            const int base = 5 + paged;   /* params, 3 maps, counter[, pages] */
            ck_assert_int_eq(a.n, base + (f != 0));
            fj_attn_params ap;   /* softcap: FA3's scales (tanh of scale/cap * s, cap's exp2) */
            memcpy(&ap, a.ptr[0], sizeof ap);
            if (f & FJ_FEAT_SOFTCAP) {
                ck_assert(ap.scale == d.softmax_scale / d.softcap);
                ck_assert(ap.scale_log2 == d.softcap * 1.4426950408889634f);
            } else {
                ck_assert(ap.scale == d.softmax_scale);
                ck_assert(ap.scale_log2 == d.softmax_scale * 1.4426950408889634f);
            }
            if (f) {
                fj_feat_params fp;
                memcpy(&fp, a.ptr[a.n - 1], sizeof fp);
                ck_assert(fp.sinks == (fj_u64)(uintptr_t)d.sinks);
                ck_assert(fp.alibi == (fj_u64)(uintptr_t)d.alibi_slopes);
                ck_assert(fp.alibi_batch_stride == d.alibi_batch_stride);
                ck_assert(fp.softcap == d.softcap);
                ck_assert(fp.softcap_inv == (d.softcap > 0.f ? 1.f / d.softcap : 0.f));
            }
        }
}
END_TEST

TCase *fj_tcase_fa3_features(void)
{
    TCase *tc = tcase_create("fa3_features");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fa3_features_dispatch);
    tcase_add_test(tc, fa3_features_paged);
    tcase_add_test(tc, fa3_features_kernel_args);
    return tc;
}
