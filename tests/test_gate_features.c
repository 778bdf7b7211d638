/* test_gate_features.c - unit tests of the validation gate's verdicts per model-feature
 * set (softcap, sinks, ALiBi, FP8 K/V) through the fake driver of gate_fake.c: a verdict of
 * one set says nothing of another, LAZY and WARM validate the problem's set on first use,
 * fajit_validate and fajit_family_verdict take a set, bundles and lists carry it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi_v1.h"
#include "gate_fake.h"

/*------ model-feature sets ------*/

static fajit_attn_desc with_softcap(void)
{
    fajit_attn_desc d = gate_desc();
    d.softcap = 30.f;
    return d;
}

/* The verdict of family 10 (gt) for features / kv (FAJIT_FEATURE_*). */
static fajit_verdict_info gt_verdict(fajit_ctx *ctx, unsigned features, fajit_kv_dtype kv)
{
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    vi.features = features, vi.kv_dtype = kv;
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_OK);
    return vi;
}

/* A FAIL of (gt, softcap) quarantines gt for softcap problems only, and a FAIL of (gt, no
 * features) for feature-free problems only; describe names the set and the verdict it
 * read; fajit_family_verdict answers per set. */
START_TEST(gate_feature_quarantine)
{
    gate_begin(&gate_gt, NULL);
    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    gate_sink s = {0};
    char line[2048];
    fajit_attn_desc plain = gate_desc(), soft = with_softcap();

    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    gate_put_verdict(ctx, "gt", 1, 12080);
    gate_describe(ctx, &plain, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED") &&
                  strstr(line, "; verdict: gt passed validation on this GPU class (no model "
                               "features)"), "%s", line);
    ck_assert_int_eq(s.quarantine_warns, 0);
    gate_describe(ctx, &soft, line, sizeof line);
    ck_assert_msg(!strstr(line, "gt(") && strstr(line, "fa3 bf16 d128") &&
                  strstr(line, "family gt is QUARANTINED on this GPU class for softcap (failed "
                               "validation at bf16 hd128 causal b2: wrong result") &&
                  strstr(line, "; verdict: none for fa3 on this GPU class for softcap"),
                  "%s", line);
    ck_assert_int_eq(s.quarantine_warns, 1);
    ck_assert_msg(strstr(s.last_warn, "family gt is quarantined for softcap on this GPU (Fake "
                                      "GPU"), "%s", s.last_warn);
    fajit_verdict_info vi = gt_verdict(ctx, FAJIT_FEATURE_SOFTCAP, FAJIT_KV_AS_Q);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_FAIL);
    ck_assert_str_eq(vi.features_name, "softcap");
    ck_assert_uint_eq(vi.features, FAJIT_FEATURE_SOFTCAP);
    vi = gt_verdict(ctx, 0, FAJIT_KV_AS_Q);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_PASS);
    ck_assert_str_eq(vi.features_name, "");
    vi = gt_verdict(ctx, FAJIT_FEATURE_SOFTCAP | FAJIT_FEATURE_SINKS, FAJIT_KV_AS_Q);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);   /* another set */
    ck_assert_str_eq(vi.features_name, "softcap,sinks");
    vi = gt_verdict(ctx, FAJIT_FEATURE_KV_FP8, FAJIT_KV_E5M2);
    ck_assert_str_eq(vi.features_name, "kv_e5m2");
    /* sets that name nothing */
    fajit_verdict_info_init(&vi);
    vi.features = FAJIT_FEATURE_KV_FP8;   /* without kv_dtype */
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_FEATURE_KV_FP8 exactly when"));
    vi.features = 64;
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);

    /* the other way: feature-free FAIL, softcap PASS */
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict(ctx, "gt", 0, 12080);
    gate_put_verdict_set(ctx, "gt", 1, 12080, "softcap");
    gate_describe(ctx, &soft, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED") &&
                  strstr(line, "; verdict: gt passed validation on this GPU class for softcap"),
                  "%s", line);
    gate_describe(ctx, &plain, line, sizeof line);
    ck_assert_msg(strstr(line, "fa3 bf16 d128") && strstr(line, "family gt is QUARANTINED on "
                                                              "this GPU class (failed"),
                  "%s", line);
    fajit_ctx_destroy(ctx);

    /* a tuning row of gt is not used for a set gt is quarantined for */
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.gpu_name, sizeof row.gpu_name, "Fake GPU");
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    row.sm_count = 132;
    fj_desc_signature(&soft, row.signature, sizeof row.signature);
    fj_desc_bucket(&soft, row.sm_count, row.bucket, sizeof row.bucket);
    snprintf(row.config, sizeof row.config, "gt:64x64w4s2");
    ck_assert_int_eq(fj_cache_tune_put(ctx->cache, &row), 0);
    gate_describe(ctx, &soft, line, sizeof line);
    ck_assert_msg(!strstr(line, "gt(") && strstr(line, "(default)"), "%s", line);
    fajit_ctx_destroy(ctx);

    unsetenv("FAJIT_MODEL_FEATURES");
    gate_end();
}
END_TEST

/* LAZY for a feature set: a feature-free PASS does not count for softcap (the first softcap
 * dispatch validates gt with softcap on, which here cannot allocate its inputs), a softcap
 * verdict does; a set the gate cannot run (FP8 K/V) is not tried; with FAJIT_MODEL_FEATURES
 * off nothing is validated (the call is refused). */
START_TEST(gate_feature_lazy)
{
    gate_begin(&gate_gt, NULL);
    gate_sink s = {0};
    fajit_attn_desc plain = gate_desc(), soft = with_softcap();
    CUstream stream = (CUstream)0x5;
    memset(&gate_fake, 0, sizeof gate_fake);

    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_UNSUPPORTED);
    ck_assert_int_eq(gate_fake.allocs, 0);
    fajit_ctx_destroy(ctx);

    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    gate_put_verdict(ctx, "gt", 1, 12080);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &plain, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 0);   /* feature-free: validated already */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* softcap: tried */
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated for softcap "
                                      "(FAJIT_CUDA_ERROR: validating gt on bf16 hd128 causal b2 "
                                      "h8/8 sq512 sk512 with softcap: allocating inputs"),
                  "%s", s.last_warn);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* once per context and set */
    ck_assert_int_eq(gt_verdict(ctx, FAJIT_FEATURE_SOFTCAP, FAJIT_KV_AS_Q).verdict,
                     FAJIT_VERDICT_NONE);
    ck_assert_int_eq(gt_verdict(ctx, 0, FAJIT_KV_AS_Q).verdict, FAJIT_VERDICT_PASS);
    fajit_ctx_destroy(ctx);

    ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    gate_put_verdict_set(ctx, "gt", 1, 12080, "softcap");
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* softcap: validated already */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &plain, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 2);   /* feature-free: tried */
    fajit_ctx_destroy(ctx);

    /* with its inputs granted: the problem has the set's features (a buffer of sinks and
     * slopes, 2 x 8 heads, and two descales, fp32), and the reference kernel runs with them too (STRICT:
     * it is not in the cache, which names it) */
    fajit_attn_desc both = with_softcap();
    both.sinks = (const float *)(uintptr_t)0x100000;
    memset(&gate_fake, 0, sizeof gate_fake);
    gate_fake.grant = 1;
    ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &both, stream), FAJIT_CACHE_MISS);
    int feat = 0;
    for (int i = 0; i < gate_fake.allocs && i < 16; i++)
        feat += gate_fake.alloc_bytes[i] == (2 * 8 + 2) * sizeof(float);
    ck_assert_int_eq(feat, 1);
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated for softcap,sinks") &&
                  strstr(s.last_warn, "with softcap,sinks: ") &&
                  strstr(s.last_warn, "ref bf16 softcap sinks for sm_90a"), "%s", s.last_warn);
    fajit_ctx_destroy(ctx);
    memset(&gate_fake, 0, sizeof gate_fake);

    /* under capture, the set is named */
    gate_fake.capturing = 1;
    ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_msg(strstr(s.last_warn, "validation: gt has no verdict for softcap on this GPU "
                                      "class and the stream is being captured"), "%s",
                  s.last_warn);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_MODEL_FEATURES");
    gate_end();
}
END_TEST

/* The default WARM policy for a feature set is its feature-free one: a family with a status
 * note (gn) is validated on first use for the problem's set (though it passed feature-free),
 * one without (gt) never at dispatch; OFF validates nothing, and still quarantines per set. */
START_TEST(gate_feature_warm_off)
{
    gate_begin(&gate_gt, &gate_gn);
    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    gate_sink s = {0};
    fajit_attn_desc soft = with_softcap();
    CUstream stream = (CUstream)0x5;
    memset(&gate_fake, 0, sizeof gate_fake);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    gate_put_verdict(ctx, "gn", 1, 12080);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);
    ck_assert_msg(strstr(s.last_warn, "validation: gn could not be validated for softcap"),
                  "%s", s.last_warn);
    fajit_ctx_destroy(ctx);
    fj_family_register_for_testing(NULL);
    fj_family_register_for_testing(&gate_gt);
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* gt: no note, not validated at dispatch */
    fajit_ctx_destroy(ctx);
    ctx = gate_ctx(&s, FAJIT_VALIDATE_OFF, FAJIT_POLICY_STRICT);
    gate_put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "fa3 bf16 d128") && !strstr(fajit_errmsg(ctx), "gt("),
                  "%s", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_MODEL_FEATURES");
    gate_end();
}
END_TEST

/* fajit_validate of a feature set: the report names it, a set that names nothing is refused
 * before anything runs; the problems have the features on (head_dim_v: V and O of half the
 * head_dim). */
START_TEST(gate_feature_validate_api)
{
    gate_begin(NULL, NULL);
    gate_sink s = {0};
    memset(&gate_fake, 0, sizeof gate_fake);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    fajit_validation_report rep;
    fajit_validation_report_init(&rep);
    rep.features = FAJIT_FEATURE_SINKS;
    rep.kv_dtype = FAJIT_KV_E4M3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(gate_fake.allocs, 0);
    /* head_dim_v: the cases with V and O of half the head_dim (the first fa3 takes) */
    rep.features = FAJIT_FEATURE_HEAD_DIM_V, rep.kv_dtype = FAJIT_KV_AS_Q;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "validating fa3 on bf16 hd128 causal b2 h8/8 sq512 "
                                            "sk512 dv64 with head_dim_v: allocating inputs"),
                  "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(gate_fake.allocs, 1);
    memset(&gate_fake, 0, sizeof gate_fake);
    /* FP8 K/V: the decode family's cases, K and V of one byte each */
    rep.features = FAJIT_FEATURE_SINKS | FAJIT_FEATURE_KV_FP8, rep.kv_dtype = FAJIT_KV_E4M3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_DECODE, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "validating decode on bf16 hd128 decode paged(16) "
                                            "gqa4 b3 h32/8 sq1 sk1500 with sinks,kv_e4m3: "
                                            "allocating inputs"), "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(gate_fake.allocs, 1);
    fajit_ctx_destroy(ctx);
    /* granted: q, then K as FP8 (1504 keys x 8 heads x 128, 3 sequences: one byte each),
     * its twin in bf16 for the reference, V and its twin; the reference kernel reads the
     * twin, as bf16 (STRICT: it is not in the cache, which names it) */
    memset(&gate_fake, 0, sizeof gate_fake);
    gate_fake.grant = 1;
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    rep.features = FAJIT_FEATURE_KV_FP8, rep.kv_dtype = FAJIT_KV_E5M2;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_DECODE, &rep), FAJIT_CACHE_MISS);
    const size_t nk = (size_t)3 * 1504 * 8 * 128;
    ck_assert_uint_eq(gate_fake.alloc_bytes[0], (size_t)3 * 32 * 128 * 2);
    ck_assert_uint_eq(gate_fake.alloc_bytes[1], nk);
    ck_assert_uint_eq(gate_fake.alloc_bytes[2], 2 * nk);
    ck_assert_uint_eq(gate_fake.alloc_bytes[3], nk);
    ck_assert_uint_eq(gate_fake.alloc_bytes[4], 2 * nk);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "with kv_e5m2: ref bf16 for sm_90a"), "%s",
                  fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    memset(&gate_fake, 0, sizeof gate_fake);
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    fajit_validation_report_init(&rep);
    rep.features = FAJIT_FEATURE_SOFTCAP | FAJIT_FEATURE_ALIBI;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "validating fa3 on bf16 hd128 causal b2 h8/8 sq512 "
                                            "sk512 with softcap,alibi: allocating inputs"),
                  "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(gate_fake.allocs, 1);
    /* a report of the first sized layout: feature-free */
    fajit_validation_report_init_sized(&rep, FAJIT_VALIDATION_REPORT_SIZE_V1);
    rep.features = 0x7fff;   /* beyond its struct_size: never read */
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "sq512 sk512: allocating inputs"), "%s",
                  fajit_errmsg(ctx));
    ck_assert_uint_eq(rep.features, 0x7fff);   /* nor written */
    fajit_ctx_destroy(ctx);
    gate_end();
}
END_TEST

/* Feature-set verdicts through the public API: listed with their set, carried by bundles,
 * a verdict of an unknown set is a bad row; a fajit_verdict_info of the first sized layout
 * asks for the feature-free verdict and gets nothing past its size. */
static int keep_softcap(void *user, const fajit_verdict_info *v)
{
    fajit_verdict_info *out = user;
    if (strcmp(v->features_name, "softcap,sinks") == 0)
        *out = *v;
    return 0;
}

static int bad_set(void *user, const fajit_verdict_info *v, const char *why)
{
    int *n = user;
    *n += strcmp(v->features_name, "softcap,bogus") == 0 && strstr(why, "feature set") != NULL;
    return 0;
}

START_TEST(gate_feature_bundle_list)
{
    gate_begin(&gate_gt, NULL);
    gate_sink s = {0};
    char dir[] = "/tmp/fajit-gate-XXXXXX", bundle[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(bundle, sizeof bundle, "%s/sets.fjb", dir);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    gate_put_verdict(ctx, "gt", 1, 12080);
    gate_put_verdict_set(ctx, "gt", 0, 12080, "softcap,sinks");
    ck_assert_int_eq(fajit_cache_export(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    fajit_ctx_destroy(ctx);

    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    fajit_bundle_report r;
    fajit_bundle_report_init(&r);
    ck_assert_int_eq(fajit_cache_import_bundle(ctx, bundle, &r), FAJIT_OK);
    ck_assert_int_eq(r.verdicts, 2);
    fajit_verdict_info vi;
    memset(&vi, 0, sizeof vi);
    ck_assert_int_eq(fajit_verdict_list(ctx, keep_softcap, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_FAIL);
    ck_assert_uint_eq(vi.features, FAJIT_FEATURE_SOFTCAP | FAJIT_FEATURE_SINKS);
    ck_assert_int_eq(gt_verdict(ctx, FAJIT_FEATURE_SOFTCAP | FAJIT_FEATURE_SINKS,
                                FAJIT_KV_AS_Q).verdict, FAJIT_VERDICT_FAIL);
    ck_assert_int_eq(gt_verdict(ctx, 0, FAJIT_KV_AS_Q).verdict, FAJIT_VERDICT_PASS);

    /* the first sized layout, in a block of exactly its size (ASan sees a write past it) */
    abi_v1_verdict_info *old = malloc(sizeof *old);
    fajit_verdict_info_init_sized((fajit_verdict_info *)old, sizeof *old);
    ck_assert_uint_eq(old->struct_size, FAJIT_VERDICT_INFO_SIZE_V1);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, (fajit_verdict_info *)old),
                     FAJIT_OK);
    ck_assert_int_eq(old->verdict, FAJIT_VERDICT_PASS);
    free(old);

    int n_checked = 0, n_bad = 0, named = 0;
    gate_put_verdict_set(ctx, "gt", 1, 12080, "softcap,bogus");
    gate_put_verdict_set(ctx, "fa3", 1, 12080, "sinks,softcap");   /* not the one spelling */
    ck_assert_int_eq(fajit_cache_verify_verdicts(ctx, bad_set, &named, &n_checked, &n_bad),
                     FAJIT_OK);
    ck_assert_int_eq(n_checked, 4);
    ck_assert_int_eq(n_bad, 2);   /* (gt is registered: a family of this fajit here) */
    ck_assert_int_eq(named, 1);
    fajit_ctx_destroy(ctx);
    unlink(bundle);
    ck_assert_int_eq(rmdir(dir), 0);
    gate_end();
}
END_TEST

TCase *fj_tcase_gate_features(void)
{
    TCase *tc = tcase_create("gate-features");
    tcase_add_test(tc, gate_feature_quarantine);
    tcase_add_test(tc, gate_feature_lazy);
    tcase_add_test(tc, gate_feature_warm_off);
    tcase_add_test(tc, gate_feature_validate_api);
    tcase_add_test(tc, gate_feature_bundle_list);
    return tc;
}
