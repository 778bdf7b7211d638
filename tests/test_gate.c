/* test_gate.c - unit tests of the first-use validation gate (src/api/validate.c) through a
 * fake driver (gate_fake.c): a FAIL verdict quarantines a family (dispatch falls back, down
 * to the reference kernel, and warns once naming it), verdicts are per GPU class, the
 * FAJIT_VALIDATE policy, the LAZY gate never validates inside a CUDA-graph capture, and
 * validation that cannot run records no verdict. Verdicts per model-feature set:
 * test_gate_features.c. The numerics of validation are the gpu suite's
 * (tests/test_gpu_gate.c, validation_gate). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate_fake.h"

/* A FAIL verdict for this GPU class: dispatch passes the family over for the next one that
 * applies, down to the reference kernel, and warns once naming the family, case and error;
 * a PASS or another class's FAIL changes nothing. */
START_TEST(gate_quarantine)
{
    gate_begin(&gate_gt, NULL);
    gate_sink s = {0};
    char line[2048];
    fajit_attn_desc d = gate_desc();

    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED"), "%s", line);
    fajit_ctx_destroy(ctx);

    /* a pass, and a fail of another driver: gt still serves */
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict(ctx, "gt", 1, 12080);
    gate_put_verdict(ctx, "fa3", 0, 13000);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2"), "%s", line);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_PASS);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA3, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);   /* that fail was another class's */
    ck_assert_int_eq(vi.driver_version, 12080);
    ck_assert_str_eq(vi.gpu_name, "Fake GPU");
    ck_assert_int_eq(s.quarantine_warns, 0);
    fajit_ctx_destroy(ctx);

    /* gt failed here: fa3 serves, the plan line says why, the warning comes once */
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict(ctx, "gt", 0, 12080);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "fa3 bf16 d128") && !strstr(line, "gt(") &&
                  strstr(line, "family gt is QUARANTINED on this GPU class (failed validation "
                                "at bf16 hd128 causal b2: wrong result: max error 0.25)"),
                  "%s", line);
    ck_assert_int_eq(s.quarantine_warns, 1);
    ck_assert_msg(strstr(s.last_warn, "family gt is quarantined on this GPU (Fake GPU, sm_90a, "
                                      "132 SMs, driver 12080): it failed validation on bf16 "
                                      "hd128 causal b2: wrong result: max error 0.25"),
                  "%s", s.last_warn);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_int_eq(s.quarantine_warns, 1);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_FAIL);
    ck_assert_str_eq(vi.family_name, "gt");
    ck_assert_str_eq(vi.failed_case, "bf16 hd128 causal b2");
    ck_assert_str_eq(vi.error, "wrong result: max error 0.25");
    /* naming the device's own target is the device (as for tuning rows) */
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa3 bf16 d128"), "%s", line);
    fajit_ctx_destroy(ctx);

    /* a real dispatch (STRICT: it stops at the missing kernel, which names the choice) */
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.policy = FAJIT_POLICY_STRICT;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_CACHE_MISS);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "gt(fa2 bf16 d128"), "%s", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    gate_put_verdict(ctx, "gt", 0, 12080);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_CACHE_MISS);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "fa3 bf16 d128") && !strstr(fajit_errmsg(ctx), "gt("),
                  "%s", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);

    /* a tuning row whose winner is a quarantined family's is not used */
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.gpu_name, sizeof row.gpu_name, "Fake GPU");
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    row.sm_count = 132;
    fj_desc_signature(&d, row.signature, sizeof row.signature);
    fj_desc_bucket(&d, row.sm_count, row.bucket, sizeof row.bucket);
    snprintf(row.config, sizeof row.config, "gt:64x64w4s2");
    for (int fail = 0; fail < 2; fail++) {
        ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
        ck_assert_int_eq(fj_cache_tune_put(ctx->cache, &row), 0);
        gate_put_verdict(ctx, "gt", !fail, 12080);
        gate_describe(ctx, &d, line, sizeof line);
        if (fail)
            ck_assert_msg(strstr(line, "fa3 bf16 d128") && strstr(line, "(default)"), "%s", line);
        else
            ck_assert_msg(strstr(line, "gt(fa2 bf16 d128 causal 64x64 w4 s2) (tuned)"), "%s", line);
        fajit_ctx_destroy(ctx);
    }

    /* gt, fa3 and fa2 failed: the reference kernel serves */
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict(ctx, "gt", 0, 12080);
    gate_put_verdict(ctx, "fa3", 0, 12080);
    gate_put_verdict(ctx, "fa2", 0, 12080);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "ref ") && !strstr(line, "fa3 bf16") && !strstr(line, "fa2 bf16"),
                  "%s", line);
    fajit_ctx_destroy(ctx);

    /* forcing a quarantined family falls back as forcing one that does not apply does */
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.family = FAJIT_FAMILY_FA3;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    gate_put_verdict(ctx, "fa3", 0, 12080);
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2") && strstr(line, "family fa3 is QUARANTINED"), "%s", line);
    fajit_ctx_destroy(ctx);

    gate_end();
}
END_TEST

/* FAJIT_VALIDATE and the option. */
START_TEST(gate_policy_option)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    ck_assert_int_eq(o.validate, FAJIT_VALIDATE_WARM);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    static const char *const names[] = {"warm", "off", "LAZY"};
    for (int i = 0; i < 3; i++) {
        setenv("FAJIT_VALIDATE", names[i], 1);
        ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
        ck_assert_int_eq(ctx->opts.validate, i);
        fajit_ctx_destroy(ctx);
    }
    setenv("FAJIT_VALIDATE", "always", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_VALIDATE must be warm, off or lazy, "
                                                    "got 'always'"));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_VALIDATE");
    o.validate = (fajit_validate_policy)3;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "validate must be WARM (0), OFF (1) or "
                                                    "LAZY (2), got 3"));
    fajit_ctx_destroy(ctx);
    o.validate = FAJIT_VALIDATE_LAZY;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    /* without a device: nothing to validate on, no class to read verdicts of */
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_AUTO, NULL), FAJIT_NO_DEVICE);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA2, &vi), FAJIT_NO_DEVICE);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* LAZY: the first dispatch of an unvalidated family validates it, except while the stream
 * is being captured (then it runs unvalidated, logged); validation that cannot run (here:
 * its inputs cannot be allocated) records no verdict and is not retried; WARM and OFF never
 * validate at dispatch. STRICT keeps dispatch from compiling: each call ends in CACHE_MISS
 * after the gate. */
START_TEST(gate_lazy_capture)
{
    gate_begin(&gate_gt, NULL);
    gate_sink s = {0};
    fajit_attn_desc d = gate_desc();
    CUstream stream = (CUstream)0x5;

    memset(&gate_fake, 0, sizeof gate_fake);
    gate_fake.capturing = 1;
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 0);
    ck_assert_msg(strstr(s.last_warn, "validation: gt has no verdict on this GPU class and the "
                                      "stream is being captured into a CUDA graph: it "
                                      "dispatches unvalidated"), "%s", s.last_warn);
    fajit_ctx_destroy(ctx);

    gate_fake.capturing = 0;
    for (int v = FAJIT_VALIDATE_WARM; v <= FAJIT_VALIDATE_OFF; v++) {
        ctx = gate_ctx(&s, (fajit_validate_policy)v, FAJIT_POLICY_STRICT);
        ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
        ck_assert_int_eq(gate_fake.allocs, 0);
        fajit_ctx_destroy(ctx);
    }

    ctx = gate_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* it tried: the first case's inputs */
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated (FAJIT_CUDA_ERROR: "
                                      "validating gt on "
                                      "bf16 hd128 causal b2 h8/8 sq512 sk512: allocating "
                                      "inputs"), "%s", s.last_warn);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* tried once per context */
    fajit_ctx_destroy(ctx);

    gate_end();
}
END_TEST

/* A family with a status note (FA4: never run on hardware) is validated on first use under the
 * default WARM policy too, not under OFF; plan output carries the note. */
START_TEST(gate_noted_family_warm)
{
    gate_begin(&gate_gt, &gate_gn);
    gate_sink s = {0};
    fajit_attn_desc d = gate_desc();
    CUstream stream = (CUstream)0x5;
    memset(&gate_fake, 0, sizeof gate_fake);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_OFF, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 0);
    char line[2048];
    gate_describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "; note: family gn is compiled and checked but not run on "
                               "hardware"), "%s", line);
    fajit_ctx_destroy(ctx);
    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(gate_fake.allocs, 1);   /* it tried: the first case's inputs */
    ck_assert_msg(strstr(s.last_warn, "validation: gn could not be validated"), "%s",
                  s.last_warn);
    fajit_ctx_destroy(ctx);
    gate_end();
}
END_TEST

/* An imported PASS for a family with a status note (FA4: never run on hardware) is not
 * taken: the family is still validated on its first use on the GPU class. A PASS of a
 * family without a note, and a FAIL of either, are taken. */
START_TEST(gate_imported_pass_noted)
{
    gate_begin(&gate_gt, &gate_gn);
    gate_sink s = {0};
    char dir[] = "/tmp/fajit-gate-XXXXXX", bundle[64], bundle2[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(bundle, sizeof bundle, "%s/pass.fjb", dir);
    snprintf(bundle2, sizeof bundle2, "%s/fail.fjb", dir);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    gate_put_verdict(ctx, "gn", 1, 12080);
    gate_put_verdict(ctx, "gt", 1, 12080);
    ck_assert_int_eq(fajit_cache_export(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    gate_put_verdict(ctx, "gn", 0, 12080);
    ck_assert_int_eq(fajit_cache_export(ctx, bundle2, NULL, NULL, NULL), FAJIT_OK);
    fajit_ctx_destroy(ctx);

    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_cache_import(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    ck_assert_int_eq(fj_verdict_state(ctx, &gate_gt, 0, NULL), FJ_VS_PASS);
    fajit_attn_desc d = gate_desc();
    memset(&gate_fake, 0, sizeof gate_fake);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, (CUstream)0x5), FAJIT_CACHE_MISS);
    ck_assert_msg(gate_fake.allocs == 1, "gn was not validated on first use (%d allocations): "
                  "the imported PASS counted as its validation", gate_fake.allocs);
    fajit_ctx_destroy(ctx);

    ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    fajit_bundle_report r;
    fajit_bundle_report_init(&r);
    ck_assert_int_eq(fajit_cache_import_bundle(ctx, bundle, &r), FAJIT_OK);
    ck_assert_int_eq(r.verdicts, 1);
    ck_assert_int_eq(r.verdicts_refused, 1);
    ck_assert_int_eq(fajit_cache_import_bundle(ctx, bundle2, &r), FAJIT_OK);
    ck_assert_int_eq(r.verdicts, 1);   /* the FAIL of gn is taken */
    ck_assert_int_eq(r.verdicts_kept + r.verdicts_replaced, 1);   /* gt's, of one time */
    ck_assert_int_eq(fj_verdict_state(ctx, &gate_gn, 0, NULL), FJ_VS_FAIL);
    fajit_ctx_destroy(ctx);
    unlink(bundle);
    unlink(bundle2);
    ck_assert_int_eq(rmdir(dir), 0);
    gate_end();
}
END_TEST

/* fajit_validate's arguments and a run that cannot allocate its inputs. */
START_TEST(gate_validate_api)
{
    gate_begin(NULL, NULL);
    gate_sink s = {0};
    memset(&gate_fake, 0, sizeof gate_fake);
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_REF, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "other than the reference kernel"));
    ck_assert_int_eq(fajit_validate(ctx, (fajit_family)77, NULL), FAJIT_INVALID_ARGUMENT);
    fajit_validation_report rep;
    fajit_validation_report_init(&rep);
    rep.struct_size = 3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "fajit_validation_report.struct_size"));
    ck_assert_int_eq(gate_fake.allocs, 0);
    fajit_validation_report_init(&rep);
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "FAJIT_CUDA_ERROR: validating fa3 on bf16 hd128 "
                                            "causal b2 h8/8 sq512 sk512: allocating inputs") &&
                  strstr(fajit_errmsg(ctx), "(no verdict recorded)"), "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(gate_fake.allocs, 1);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA3, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);
    vi.struct_size = 8;
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA3, &vi), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_AUTO, &vi), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    gate_end();
}
END_TEST

/* fajit_verdict_list: every class's verdicts, with this library's family values. */
static int count_verdicts(void *user, const fajit_verdict_info *v)
{
    int *n = user;
    ck_assert_uint_eq(v->struct_size, sizeof *v);
    if (strcmp(v->family_name, "fa3") == 0)
        ck_assert_int_eq(v->family, FAJIT_FAMILY_FA3);
    (*n)++;
    return 0;
}

START_TEST(gate_verdict_list)
{
    gate_begin(NULL, NULL);
    gate_sink s = {0};
    fajit_ctx *ctx = gate_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    gate_put_verdict(ctx, "fa3", 0, 12080);
    gate_put_verdict(ctx, "fa3", 1, 13000);
    gate_put_verdict(ctx, "decode", 1, 13000);
    int n = 0;
    ck_assert_int_eq(fajit_verdict_list(ctx, count_verdicts, &n), FAJIT_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fajit_verdict_list(ctx, NULL, &n), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    gate_end();
}
END_TEST

TCase *fj_tcase_gate(void)
{
    TCase *tc = tcase_create("gate");
    tcase_add_test(tc, gate_quarantine);
    tcase_add_test(tc, gate_policy_option);
    tcase_add_test(tc, gate_lazy_capture);
    tcase_add_test(tc, gate_noted_family_warm);
    tcase_add_test(tc, gate_imported_pass_noted);
    tcase_add_test(tc, gate_validate_api);
    tcase_add_test(tc, gate_verdict_list);
    return tc;
}
