/* test_unit_fa3_features.c - the Hopper family's model features (softcap, sinks, ALiBi) on
 * the host: dispatch on sm_90a picks fa3 with the feature's tag for contiguous, varlen and
 * paged problems (paged varlen: the mixed family only where the decode family serves the
 * features too), the variant's preamble defines them, and the launch pushes fj_feat_params
 * as its last argument. head_dim_v != head_dim (192 / 128): dispatch, the configurations
 * (those of dv 0 unchanged where dv == d), the preamble and V's tensor map. No GPU. */
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

/* head_dim_v != head_dim (DeepSeek's 192 / 128): a problem with V and O of dv columns,
 * packed as fajit_attn_desc_init lays them out. */
static fajit_attn_desc dv_desc(int hd, int dv, fajit_dtype dt, fajit_mask mask, int sq, int sk)
{
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 16, 16, sq, sk, hd, dt);
    d.mask = mask;
    d.head_dim_v = dv;
    d.v_head_stride = d.o_head_stride = dv;
    d.v_row_stride = (int64_t)dv * 16, d.o_row_stride = (int64_t)dv * 16;
    d.v_batch_stride = (int64_t)dv * 16 * sk, d.o_batch_stride = (int64_t)dv * 16 * sq;
    return d;
}

/* Dispatch on sm_90a: the Hopper kernel with FJ_HEAD_DIM_V for 192 / 128 (both dtypes, with
 * and without the causal mask, contiguous, varlen, paged prefill) and other dv <= d that are
 * multiples of 16; the portable kernel where dv is not a multiple of 16, the reference kernel
 * where dv > d. */
START_TEST(fa3_head_dim_v_dispatch)
{
    fajit_ctx *ctx = host_ctx();
    char line[1024];
    for (int dt = 0; dt < 2; dt++)
        for (int m = 0; m < 2; m++) {
            const fajit_mask mask = m ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
            fajit_attn_desc d = dv_desc(192, 128, (fajit_dtype)dt, mask, 4096, 4096);
            ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
            char want[64];
            snprintf(want, sizeof want, "fa3 %s d192 %s 128x128 ", dt ? "bf16" : "f16",
                     m ? "causal" : "none");
            ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line),
                             FAJIT_OK);
            ck_assert_msg(strstr(line, want) == line && picks(line, "fa3", " dv128"), "%s",
                          line);
            /* varlen */
            fajit_attn_desc v = d;
            v.cu_seqlens_q = v.cu_seqlens_k = (const int32_t *)(uintptr_t)0x6000;
            v.total_q = v.total_k = 8192;
            ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &v, line, sizeof line),
                             FAJIT_OK);
            ck_assert_msg(picks(line, "fa3", " dv128"), "%s", line);
            /* paged prefill (pages of 16, 64, 128), fixed length and varlen: the Hopper kernel
             * (the decode family, and so the mixed one, does not take head_dim_v) */
            const int ps[] = {16, 64, 128};
            for (int i = 0; i < 3; i++) {
                fajit_attn_desc g = dv_desc(192, 128, (fajit_dtype)dt, mask, 2048, 4096);
                g.k_batch_stride = g.v_batch_stride = 0;
                g.block_table = (const int32_t *)(uintptr_t)0x3000;
                g.page_size = ps[i], g.block_table_stride = 4096 / ps[i];
                g.num_pages = 2 * 4096 / ps[i];
                ck_assert_int_eq(fajit_attn_check(ctx, &g), FAJIT_OK);
                ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &g, line, sizeof line),
                                 FAJIT_OK);
                ck_assert_msg(picks(line, "fa3", " paged dv128"), "%s", line);
                g.cu_seqlens_q = (const int32_t *)(uintptr_t)0x6000;
                g.seqused_k = (const int32_t *)(uintptr_t)0x7000;
                g.total_q = 2048 + 7;
                g.q_batch_stride = g.o_batch_stride = 0;
                ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &g, line, sizeof line),
                                 FAJIT_OK);
                ck_assert_msg(picks(line, "fa3", " paged dv128"), "%s", line);
            }
        }
    /* other dv <= d, multiples of 16: the Hopper kernel with its head_dim's tile */
    const int ok[][2] = {{128, 64}, {256, 128}, {64, 32}, {192, 64}};
    for (int i = 0; i < 4; i++) {
        fajit_attn_desc d = dv_desc(ok[i][0], ok[i][1], FAJIT_BF16, FAJIT_MASK_CAUSAL, 1000, 1000);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
        char tag[16];
        snprintf(tag, sizeof tag, " dv%d", ok[i][1]);
        ck_assert_msg(picks(line, "fa3", tag), "%s", line);
    }
    /* not a multiple of 16: the portable kernel; dv > d: the reference kernel */
    const int ref[][2] = {{128, 72}, {64, 128}, {192, 200}};
    for (int i = 0; i < 3; i++) {
        fajit_attn_desc d = dv_desc(ref[i][0], ref[i][1], FAJIT_BF16, FAJIT_MASK_NONE, 1000, 1000);
        ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
        char tag[16];
        snprintf(tag, sizeof tag, " dv%d", ref[i][1]);
        ck_assert_msg(picks(line, i ? "ref" : "fa2", tag), "%s", line);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The configurations: with dv 0 or d exactly those of before (defaults, candidates, shared
 * memory); with 192 / 128 FA3's 128x128, V's stages of 128 columns in the shared memory, O's
 * accumulators of dv / 2 registers in the check, and candidates that all pass it. */
START_TEST(fa3_head_dim_v_configs)
{
    const int seqs[] = {0, 1, 512, 1500, 4096, 16384};
    for (int hd = 16; hd <= 256; hd += 16)
        for (int m = 0; m < 3; m++)
            for (int s = 0; s < 6; s++) {
                fj_fa3_config a[32], b[32], c[32];
                const int na = fj_fa3_candidates(hd, m, seqs[s], a, 32);
                ck_assert_int_eq(fj_fa3_candidates_v(hd, 0, m, seqs[s], b, 32), na);
                ck_assert_int_eq(fj_fa3_candidates_v(hd, hd, m, seqs[s], c, 32), na);
                ck_assert(!memcmp(a, b, sizeof a[0] * (size_t)na));
                ck_assert(!memcmp(a, c, sizeof a[0] * (size_t)na));
                const fj_fa3_config d0 = fj_fa3_default(hd, m, seqs[s]);
                const fj_fa3_config d1 = fj_fa3_default_v(hd, hd, m, seqs[s]);
                ck_assert(!memcmp(&d0, &d1, sizeof d0));
                for (int i = 0; i < na; i++) {
                    ck_assert_uint_eq(fj_fa3_smem_bytes_v(&a[i], hd, hd),
                                      fj_fa3_smem_bytes(&a[i], hd));
                    ck_assert_int_eq(fj_fa3_check_v(&a[i], hd, 0, 90, NULL, 0),
                                     fj_fa3_check(&a[i], hd, 90, NULL, 0));
                }
            }
    char why[256];
    for (int m = 0; m < 3; m++)
        for (int s = 0; s < 6; s++) {
            const fj_fa3_config d = fj_fa3_default_v(192, 128, m, seqs[s]);
            ck_assert_int_eq(d.block_m, 128);
            ck_assert_int_eq(d.block_n, m == FJ_MASK_WINDOW ? 112 : 128);   /* (FA3's) */
            ck_assert_int_eq(fj_fa3_check_v(&d, 192, 128, 90, why, sizeof why), 0);
            fj_fa3_config c[32];
            const int n = fj_fa3_candidates_v(192, 128, m, seqs[s], c, 32);
            ck_assert_int_gt(n, 1);
            ck_assert(!memcmp(&c[0], &d, sizeof d));
            for (int i = 0; i < n; i++) {
                ck_assert_int_eq(fj_fa3_check_v(&c[i], 192, 128, 90, why, sizeof why), 0);
                ck_assert_int_le(c[i].block_n, 128);   /* 128x144 up: over 227 KiB */
            }
        }
    const fj_fa3_config t128 = {128, 128, 1, 1, 0}, t144 = {128, 144, 1, 1, 0};
    ck_assert_uint_eq(fj_fa3_smem_bytes_v(&t128, 192, 128),
                      3 * 128 * (128 + 2 * 128) + 2 * 128 * (2 * 128) + 1344);
    ck_assert_int_eq(fj_fa3_check_v(&t144, 192, 128, 90, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "head_dim_v 128") != NULL, "%s", why);
    /* 192x96: 48 + 72 accumulator registers per thread, over 3 warpgroups' 130 */
    const fj_fa3_config t192 = {192, 96, 1, 0, 0};
    ck_assert_int_eq(fj_fa3_check_v(&t192, 192, 128, 90, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "(head_dim_v/2 + 3*block_n/4)") != NULL, "%s", why);
    ck_assert_int_eq(fj_fa3_check_v(&t128, 192, 200, 90, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "head_dim_v must be a multiple of 16 in 16..head_dim (192), got "
                         "200") != NULL, "%s", why);
    ck_assert_int_eq(fj_fa3_check_v(&t128, 128, 72, 90, NULL, 0), -1);
    ck_assert_int_eq(fj_fa3_candidates_v(128, 72, 1, 0, (fj_fa3_config[32]){{0}}, 32), 0);
}
END_TEST

/* The variant and its launch: FJ_HEAD_DIM_V in the preamble only where dv != d (dv == d
 * gives the preamble of dv 0 byte for byte), the shared memory of fj_fa3_smem_bytes_v, V's
 * tensor map of dv columns (contiguous and paged), O's strides those of the descriptor. */
static unsigned long long g_tm_cols[8];
static int g_tm_n;
static CUresult f3_tmap_cols(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                             const unsigned long long *st, const unsigned *b, const unsigned *el,
                             int i, int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)st, (void)b, (void)el, (void)i, (void)w, (void)l, (void)o;
    g_tm_cols[g_tm_n++ % 8] = d[0];
    memset(m, 0, 128);
    return 0;
}

START_TEST(fa3_head_dim_v_kernel_args)
{
    fj_cuda cu = fake_device_table();
    cu.cuTensorMapEncodeTiled = f3_tmap_cols;
    fj_launch_env env;
    memset(&env, 0, sizeof env);
    env.cu = &cu, env.sm_count = 132, env.sm = 90;
    fj_kcfg c;
    fj_fa3_kcfg(&(fj_fa3_config){128, 128, 1, 1, 0}, &c);
    for (int paged = 0; paged < 2; paged++) {
        fajit_attn_desc d = dv_desc(192, 128, FAJIT_BF16, FAJIT_MASK_CAUSAL, 2048, 4096);
        if (paged) {
            d.k_batch_stride = d.v_batch_stride = 0;
            d.block_table = (const int32_t *)(uintptr_t)0x3000;
            d.block_table_stride = 64, d.page_size = 128, d.num_pages = 1024;
        }
        fj_kernels ks;
        fj_family_fa3.kernels(&c, &d, &ks);
        ck_assert_msg(strstr(ks.v[0].preamble, "#define FJ_HEAD_DIM 192\n") &&
                          strstr(ks.v[0].preamble, "#define FJ_HEAD_DIM_V 128\n"),
                      "%s", ks.v[0].preamble);
        ck_assert_int_eq(ks.dyn_smem[0],
                         (int)fj_fa3_smem_bytes_v(fj_fa3_of(&c), 192, 128));
        ck_assert_msg(strstr(ks.v[0].name, paged ? " paged dv128" : "o1 p1 s0 dv128"), "%s",
                      ks.v[0].name);
        fj_args a;
        memset(&a, 0, sizeof a);
        char why[256] = "";
        g_tm_n = 0;
        ck_assert_int_eq(fj_family_fa3.launch_args(&c, 0, &d, &env, &a, why, sizeof why),
                         FAJIT_OK);
        ck_assert_int_eq(g_tm_n, 3);   /* Q, K of 192 columns, V of 128 */
        ck_assert_uint_eq(g_tm_cols[0], 192);
        ck_assert_uint_eq(g_tm_cols[1], 192);
        ck_assert_uint_eq(g_tm_cols[2], 128);
        ck_assert_int_eq(a.n, 5 + paged);   /* no fj_feat_params: head_dim_v is compiled in */
        fj_attn_params ap;
        memcpy(&ap, a.ptr[0], sizeof ap);
        ck_assert(ap.o_row_stride == 128 * 16 && ap.o_head_stride == 128 && ap.head_dim == 192);
        /* dv == d: the kernel of dv 0 */
        fajit_attn_desc e = dv_desc(128, 128, FAJIT_BF16, FAJIT_MASK_CAUSAL, 2048, 4096), e0 = e;
        e0.head_dim_v = 0;
        fj_kernels k1, k0;
        fj_family_fa3.kernels(&c, &e, &k1);
        fj_family_fa3.kernels(&c, &e0, &k0);
        ck_assert_str_eq(k1.v[0].preamble, k0.v[0].preamble);
        ck_assert_str_eq(k1.v[0].name, k0.v[0].name);
        ck_assert_int_eq(k1.dyn_smem[0], k0.dyn_smem[0]);
        ck_assert_ptr_null(strstr(k0.v[0].preamble, "FJ_HEAD_DIM_V"));
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
    tcase_add_test(tc, fa3_head_dim_v_dispatch);
    tcase_add_test(tc, fa3_head_dim_v_configs);
    tcase_add_test(tc, fa3_head_dim_v_kernel_args);
    return tc;
}
