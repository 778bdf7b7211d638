/* test_unit_features.c - unit tests of the model features (softcap, sinks, ALiBi) on the
 * host: which family dispatch picks for them and the variant it names, the preamble's
 * defines (only where a feature is on: a problem without features keeps its kernel), the
 * launch's extra parameter block, and the variants a spec's warm compiles for them. The
 * numerics are the gpu suite's (tests/test_gpu_features.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/api/internal.h"
#include "../src/families/params.h"

static fajit_ctx *memory_ctx(fajit_family fam)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    o.family = fam;
    fajit_ctx *ctx = NULL;
    setenv("FAJIT_MODEL_FEATURES", "on", 1);   /* (features_gate tests the default) */
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    unsetenv("FAJIT_MODEL_FEATURES");
    return ctx;
}

static const float *k_dev = (const float *)(uintptr_t)0x20000;   /* never read */

/* A prefill problem with the features of `f` (FJ_FEAT_* bits). */
static fajit_attn_desc feat_desc(unsigned f, int head_dim, fajit_mask mask)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 2, 1000, 1000, head_dim, FAJIT_BF16);
    d.mask = mask;
    if (mask == FAJIT_MASK_WINDOW)
        d.window_left = 128, d.window_right = 0;
    d.softcap = f & FJ_FEAT_SOFTCAP ? 30.f : 0.f;
    d.sinks = f & FJ_FEAT_SINKS ? k_dev : NULL;
    d.alibi_slopes = f & FJ_FEAT_ALIBI ? k_dev : NULL;
    return d;
}

/* Dispatch picks fa2 on sm_80 and the Hopper family on sm_90a for every combination, naming
 * the features in the variant, and fa2 on both when fa2 is forced; the
 * reference kernel (fajit_attn_fwd_reference's) names them too. */
START_TEST(features_dispatch)
{
    fajit_ctx *ctx = memory_ctx(FAJIT_FAMILY_AUTO), *fa2 = memory_ctx(FAJIT_FAMILY_FA2);
    const fj_target t80 = {80, 0, 0, 0, 0, NULL};
    const char *archs[] = {"sm_80", "sm_90a"};
    char line[1024];
    for (unsigned f = 1; f < 8; f++)
        for (int a = 0; a < 2; a++) {
            fajit_attn_desc d = feat_desc(f, 128, FAJIT_MASK_CAUSAL);
            ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
            ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[a], &d, line, sizeof line),
                             FAJIT_OK);
            char tag[64];
            fj_feat_tag(&d, tag, sizeof tag);
            ck_assert_msg(strstr(line, a ? "fa3 bf16 d128 causal" : "fa2 bf16 d128 causal"),
                          "%s", line);
            ck_assert_msg(strstr(line, tag) != NULL, "%s lacks '%s'", line, tag);
            ck_assert_msg((strstr(line, " softcap") != NULL) == !!(f & FJ_FEAT_SOFTCAP) &&
                              (strstr(line, " sinks") != NULL) == !!(f & FJ_FEAT_SINKS) &&
                              (strstr(line, " alibi") != NULL) == !!(f & FJ_FEAT_ALIBI),
                          "%s", line);
            ck_assert_int_eq(fajit_dispatch_describe(fa2, archs[a], &d, line, sizeof line),
                             FAJIT_OK);
            ck_assert_msg(strstr(line, "fa2 bf16 d128 causal") && strstr(line, tag), "%s",
                          line);
            fj_kcfg c;
            fj_kernels k;
            ck_assert(fj_family_ref.applies(&d, &t80));
            fj_family_ref.default_cfg(&d, &t80, &c);
            fj_family_ref.kernels(&c, &d, &k);
            snprintf(line, sizeof line, "ref bf16%s", tag);
            ck_assert_str_eq(k.v[0].name, line);
        }
    /* without features: the names of before */
    fajit_attn_desc d = feat_desc(0, 128, FAJIT_MASK_CAUSAL);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa2 bf16 d128 causal") && !strstr(line, "softcap") &&
                      !strstr(line, "sinks") && !strstr(line, "alibi"), "%s", line);
    fajit_ctx_destroy(ctx);
    fajit_ctx_destroy(fa2);
}
END_TEST

/* The kernels' preambles: the defines only for the features that are on; the launch gets
 * fj_feat_params as its last argument only then. */
START_TEST(features_preamble)
{
    const fj_target t80 = {80, 0, 0, 0, 0, NULL};
    const fj_family *fams[] = {&fj_family_fa2, &fj_family_ref};
    for (int fi = 0; fi < 2; fi++)
        for (unsigned f = 0; f < 8; f++) {
            fajit_attn_desc d = feat_desc(f, 64, FAJIT_MASK_NONE);
            ck_assert_msg(fams[fi]->applies(&d, &t80), "%s features %u", fams[fi]->name, f);
            fj_kcfg c;
            fams[fi]->default_cfg(&d, &t80, &c);
            fj_kernels k;
            fams[fi]->kernels(&c, &d, &k);
            const char *pre = k.v[0].preamble;
            ck_assert_msg((strstr(pre, "#define FJ_SOFTCAP 1\n") != NULL) ==
                                  !!(f & FJ_FEAT_SOFTCAP) &&
                              (strstr(pre, "#define FJ_SINKS 1\n") != NULL) ==
                                  !!(f & FJ_FEAT_SINKS) &&
                              (strstr(pre, "#define FJ_ALIBI 1\n") != NULL) ==
                                  !!(f & FJ_FEAT_ALIBI),
                          "%s features %u: %s", fams[fi]->name, f, pre);
            if (!f)
                ck_assert_msg(!strstr(pre, "FJ_SOFTCAP") && !strstr(pre, "FJ_SINKS") &&
                                  !strstr(pre, "FJ_ALIBI"), "%s", pre);
            /* the launch: the parameter block, then fj_feat_params when a feature is on */
            fj_args a;
            memset(&a, 0, sizeof a);
            char why[128] = "";
            fj_launch_env env;
            memset(&env, 0, sizeof env);
            ck_assert_int_eq(fams[fi]->launch_args(&c, 0, &d, &env, &a, why, sizeof why),
                             FAJIT_OK);
            ck_assert_int_eq(a.n, f ? 2 : 1);
            ck_assert_uint_eq(a.used, f ? FJ_PARAMS_SIZE + FJ_FEAT_PARAMS_SIZE
                                        : FJ_PARAMS_SIZE);
            if (f) {
                fj_feat_params fp;
                memcpy(&fp, a.ptr[1], sizeof fp);
                ck_assert(fp.softcap == (f & FJ_FEAT_SOFTCAP ? 30.f : 0.f));
                ck_assert(fp.softcap_inv == (f & FJ_FEAT_SOFTCAP ? 1.f / 30.f : 0.f));
                ck_assert_uint_eq(fp.sinks, f & FJ_FEAT_SINKS ? (uintptr_t)k_dev : 0);
                ck_assert_uint_eq(fp.alibi, f & FJ_FEAT_ALIBI ? (uintptr_t)k_dev : 0);
            }
        }
}
END_TEST

/* `warm --spec` with features lists the feature variants of fa2 (sm_80, sm_90a) and ref,
 * and a spec without them none. */
START_TEST(features_spec_warm)
{
    char path[] = "/tmp/fj_feat_spec.XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "[model f]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
                       "mask = causal\nprefill = 1k\nsoftcap = yes\nsinks = yes\nalibi = yes\n"
                       "[model g]\ndtype = f16\nhead_dim = 64\nheads_q = 8\nheads_kv = 8\n"
                       "mask = none\nprefill = 1k\n";
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    fajit_ctx *ctx = memory_ctx(FAJIT_FAMILY_AUTO);
    const char *archs[] = {"sm_80", "sm_90a"};
    for (int a = 0; a < 2; a++) {
        fj_variant *vs = NULL;
        int n = 0;
        ck_assert_int_eq(fj_spec_warm_variants(ctx, path, archs[a], &vs, &n), FAJIT_OK);
        int fa2_feat = 0, ref_feat = 0, plain = 0;
        for (int i = 0; i < n; i++) {
            const char *nm = vs[i].name;
            const int feat = strstr(nm, " softcap sinks alibi") != NULL;
            fa2_feat += feat && strncmp(nm, "fa2 bf16 d128 causal", 20) == 0 &&
                        strstr(vs[i].preamble, "#define FJ_ALIBI 1\n");
            ref_feat += feat && strncmp(nm, "ref bf16", 8) == 0;
            plain += strncmp(nm, "fa2 f16 d64 none", 16) == 0 && !strstr(nm, "softcap") &&
                     !strstr(vs[i].preamble, "FJ_SOFTCAP");
            if (strncmp(nm, "fa2 f16", 7) == 0)   /* the featureless problem stays so */
                ck_assert_msg(!strstr(nm, "softcap"), "%s", nm);
        }
        ck_assert_msg(fa2_feat >= 1 && ref_feat == 1 && plain >= 1,
                      "%s: %d fa2 feature variants, %d ref, %d plain of %d", archs[a],
                      fa2_feat, ref_feat, plain, n);
        free(vs);
    }
    fajit_ctx_destroy(ctx);
    unlink(path);
}
END_TEST

/* A family serves the features its GPU tests have passed with (fj_family.ran_features) as
 * any other problem; any other feature only with FAJIT_MODEL_FEATURES=on: UNSUPPORTED
 * naming the family and just those features. A bad value refused at context creation. */
START_TEST(features_gate)
{
    fj_family fam = fj_family_fa2;   /* fa2, outranking every family, with softcap not run */
    fam.rank = 1000;
    fam.ran_features = FJ_FEAT_SINKS | FJ_FEAT_ALIBI;
    fj_family_register_for_testing(&fam);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    unsetenv("FAJIT_MODEL_FEATURES");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_attn_desc d = feat_desc(FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS, 128, FAJIT_MASK_CAUSAL);
    char line[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line),
                     FAJIT_UNSUPPORTED);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "the fa2 kernels with softcap are compiled "
                         "but have not run on a GPU yet") &&
                      strstr(fajit_errmsg(ctx), "FAJIT_MODEL_FEATURES=on"),
                  "%s", fajit_errmsg(ctx));
    d.softcap = 0.f;   /* sinks alone: run on a GPU, served */
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    d.sinks = NULL;    /* no feature: served as ever */
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_MODEL_FEATURES", "on", 1);   /* on: softcap served too */
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    d.softcap = 30.f;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    fajit_ctx_destroy(ctx);
    fj_family_register_for_testing(NULL);
    /* the shipped families serve what they ran with, without the variable: head_dim_v
     * != head_dim too (fa2 on sm_80, dv <= d) */
    unsetenv("FAJIT_MODEL_FEATURES");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    d.head_dim_v = 64;
    d.v_head_stride = d.o_head_stride = 64;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strncmp(line, "fa2 ", 4) == 0 && strstr(line, " dv64"), "%s", line);
    d.head_dim_v = 0;
    fajit_ctx_destroy(ctx);
    fajit_ctx *bad = NULL;
    setenv("FAJIT_MODEL_FEATURES", "yes", 1);
    ck_assert_int_eq(fajit_ctx_create(&bad, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fajit_errmsg(bad), "FAJIT_MODEL_FEATURES must be off or on, got "
                         "'yes'"), "%s", fajit_errmsg(bad));
    unsetenv("FAJIT_MODEL_FEATURES");
    fajit_ctx_destroy(bad);
}
END_TEST

/* head_dim_v != head_dim: the reference kernel serves it on every target (FJ_HEAD_DIM_V in
 * its preamble, the tag in its name, no extra launch argument), fa2 where dv <= d (else the
 * reference kernel), the decode family not at all (so paged decode is UNSUPPORTED naming the
 * feature); a spec's warm lists the variants of ref, fa2 and, on sm_90a, fa3. */
START_TEST(features_head_dim_v)
{
    const fj_target t80 = {80, 0, 0, 0, 0, NULL};
    fajit_attn_desc d = feat_desc(0, 192, FAJIT_MASK_CAUSAL);
    d.head_dim_v = 128;
    d.v_head_stride = d.o_head_stride = 128;
    d.v_row_stride = 128 * 2, d.o_row_stride = 128 * 8;
    d.v_batch_stride = 128 * 2 * 1000, d.o_batch_stride = 128 * 8 * 1000;
    ck_assert_uint_eq(fj_features(&d), FJ_FEAT_HDIM_V);
    ck_assert(fj_family_ref.applies(&d, &t80));
    fj_kcfg c;
    fj_family_ref.default_cfg(&d, &t80, &c);
    fj_kernels k;
    fj_family_ref.kernels(&c, &d, &k);
    ck_assert_str_eq(k.v[0].preamble, "#define FJ_DTYPE 1\n#define FJ_HEAD_DIM_V 128\n");
    ck_assert_str_eq(k.v[0].name, "ref bf16 dv128");
    fj_args a;
    memset(&a, 0, sizeof a);
    char why[128] = "";
    fj_launch_env env;
    memset(&env, 0, sizeof env);
    ck_assert_int_eq(fj_family_ref.launch_args(&c, 0, &d, &env, &a, why, sizeof why), FAJIT_OK);
    ck_assert_int_eq(a.n, 1);   /* compiled in: no fj_feat_params */
    /* with sinks too: both, the tag in fj_feat_tag's order */
    d.sinks = k_dev;
    fj_family_ref.kernels(&c, &d, &k);
    ck_assert_str_eq(k.v[0].name, "ref bf16 sinks dv128");
    d.sinks = NULL;
    /* dv == d: no feature, the kernel of dv 0 */
    fajit_attn_desc e = feat_desc(0, 128, FAJIT_MASK_CAUSAL), e0 = e;
    e.head_dim_v = 128;
    ck_assert_uint_eq(fj_features(&e), 0);
    fj_kernels k1, k0;
    fj_family_ref.kernels(&c, &e, &k1);
    fj_family_ref.kernels(&c, &e0, &k0);
    ck_assert_str_eq(k1.v[0].preamble, k0.v[0].preamble);
    ck_assert_str_eq(k1.v[0].name, "ref bf16");

    fajit_ctx *ctx = memory_ctx(FAJIT_FAMILY_AUTO), *fa2 = memory_ctx(FAJIT_FAMILY_FA2);
    char line[1024];
    const char *archs[] = {"sm_80", "sm_90", "sm_100a"};
    for (int i = 0; i < 3; i++) {
        /* AUTO: fa2 (sm_90 without the a, sm_100a: no fa3, fa4 takes no head_dim_v) */
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[i], &d, line, sizeof line), FAJIT_OK);
        ck_assert_msg(strncmp(line, "fa2 bf16 d192 causal ", 21) == 0 && strstr(line, " dv128"),
                      "%s", line);
        ck_assert_int_eq(fajit_dispatch_describe(fa2, archs[i], &d, line, sizeof line), FAJIT_OK);
        ck_assert_msg(strncmp(line, "fa2 bf16 d192 causal ", 21) == 0 && strstr(line, " dv128"),
                      "%s", line);
        /* dv > d: the reference kernel, fa2 forced too */
        fajit_attn_desc w = feat_desc(0, 64, FAJIT_MASK_CAUSAL);
        w.head_dim_v = 128;
        w.v_head_stride = w.o_head_stride = 128;
        w.v_row_stride = 128 * 2, w.o_row_stride = 128 * 8;
        w.v_batch_stride = 128 * 2 * 1000, w.o_batch_stride = 128 * 8 * 1000;
        ck_assert_int_eq(fajit_dispatch_describe(fa2, archs[i], &w, line, sizeof line), FAJIT_OK);
        ck_assert_msg(strncmp(line, "ref bf16 dv128", 14) == 0, "%s", line);
    }
    /* fa2's variant: FJ_HEAD_DIM_V after the configuration's defines, the tag, no extra
     * launch argument */
    fj_family_fa2.default_cfg(&d, &t80, &c);
    fj_family_fa2.kernels(&c, &d, &k);
    ck_assert_msg(strstr(k.v[0].preamble, "#define FJ_HEAD_DIM 192\n") &&
                      strstr(k.v[0].preamble, "#define FJ_HEAD_DIM_V 128\n"), "%s",
                  k.v[0].preamble);
    memset(&a, 0, sizeof a);
    ck_assert_int_eq(fj_family_fa2.launch_args(&c, 0, &d, &env, &a, why, sizeof why), FAJIT_OK);
    ck_assert_int_eq(a.n, 1);
    /* paged decode (the decode family's): not served */
    fajit_attn_desc g = d;
    g.seqlen_q = 1, g.q_batch_stride = 192 * 8, g.o_batch_stride = 128 * 8;
    g.k_batch_stride = g.v_batch_stride = 0;
    g.block_table = (const int32_t *)(uintptr_t)0x30000;
    g.page_size = 16, g.block_table_stride = 63, g.num_pages = 200;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fajit_dispatch_describe(ctx, archs[i], &g, line, sizeof line),
                         FAJIT_UNSUPPORTED);
        ck_assert_msg(strstr(fajit_errmsg(ctx), "no kernel family of this fajit serves paged "
                             "K/V with head_dim_v != head_dim on sm_"), "%s", fajit_errmsg(ctx));
    }
    fajit_ctx_destroy(fa2);

    char path[] = "/tmp/fj_dv_spec.XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "[model mla]\ndtype = bf16\nhead_dim = 192\nhead_dim_v = 128\n"
                       "heads_q = 16\nheads_kv = 16\nmask = causal\nprefill = 1k, 8k\n";
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    const char *warch[] = {"sm_80", "sm_90a"};
    for (int i = 0; i < 2; i++) {
        fj_variant *vs = NULL;
        int n = 0, refs = 0, fa3 = 0, fa2n = 0;
        ck_assert_int_eq(fj_spec_warm_variants(ctx, path, warch[i], &vs, &n), FAJIT_OK);
        for (int j = 0; j < n; j++) {
            ck_assert_msg(strstr(vs[j].name, " dv128") &&
                              strstr(vs[j].preamble, "#define FJ_HEAD_DIM_V 128\n"),
                          "%s", vs[j].name);
            refs += strncmp(vs[j].name, "ref ", 4) == 0;
            fa3 += strncmp(vs[j].name, "fa3 bf16 d192 causal ", 21) == 0;
            fa2n += strncmp(vs[j].name, "fa2 bf16 d192 causal ", 21) == 0;
        }
        ck_assert_int_eq(refs, 1);
        ck_assert_int_gt(fa2n, 0);
        ck_assert_msg(i ? fa3 > 1 : fa3 == 0, "%s: %d fa3 variants", warch[i], fa3);
        free(vs);
    }
    unlink(path);
    fajit_ctx_destroy(ctx);
}
END_TEST

TCase *fj_tcase_features(void)
{
    TCase *tc = tcase_create("features");
    tcase_add_test(tc, features_gate);
    tcase_add_test(tc, features_dispatch);
    tcase_add_test(tc, features_preamble);
    tcase_add_test(tc, features_spec_warm);
    tcase_add_test(tc, features_head_dim_v);
    return tc;
}
