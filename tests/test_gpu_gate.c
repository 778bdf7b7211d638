/* test_gpu_gate.c - the `gpu` suite's test of the validation gate (program test_gpu,
 * harness gpu_fwd.c; alone: CK_RUN_CASE=gate): every shipped family passes on this GPU, and
 * a broken family is caught, quarantined and never dispatched. */
#include <stdio.h>
#include <string.h>

#include "alias_family.h"
#include "gpu_fwd.h"

/* "broken": the portable family's kernels with a softmax scale 1.25x too large in their
 * parameter block, ranked above every shipped family, so that dispatch would pick it for
 * any problem the portable kernel serves (alias_family.h). The gate must catch it. */
static int br_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return fj_family_fa2.applies(d, t);
}
static const fj_family k_broken;
FJ_ALIAS_HOOKS(br, k_broken)
static fajit_status br_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                            const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    fj_kcfg f = fj_alias_as_fa2(c);
    fajit_attn_desc wrong = *d;
    wrong.softmax_scale *= 1.25f;   /* the bug */
    return fj_family_fa2.launch_args(&f, i, &wrong, env, a, why, n);
}
#define BROKEN_ID 7
static const fj_family k_broken = {
    .name = "broken", .id = BROKEN_ID, .op = FAJIT_OP_FWD, .rank = 50, .cfg_prefix = "broken:",
    .applies = br_applies, FJ_ALIAS_TABLE(br), .launch_args = br_args,
};

typedef struct gate_log {
    int quarantine_warns;
    char quarantine[1024];
} gate_log;

static void gate_sink(void *user, fajit_log_level level, const char *msg)
{
    gate_log *g = user;
    if (level == FAJIT_LOG_WARN && strstr(msg, "is quarantined")) {
        g->quarantine_warns++;
        snprintf(g->quarantine, sizeof g->quarantine, "%s", msg);
    }
}

static fajit_ctx *gate_ctx(const char *dir, fajit_validate_policy v, gate_log *g)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.validate = v;
    o.log = gate_sink, o.log_user = g;
    fajit_ctx *ctx = NULL;
    ck_assert_msg(fajit_ctx_create(&ctx, &o) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    return ctx;
}

static fajit_verdict family_verdict(fajit_ctx *ctx, int family, fajit_verdict_info *vi)
{
    fajit_verdict_info_init(vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)family, vi), FAJIT_OK);
    return vi->verdict;
}

/* Every shipped family passes on this GPU; the broken one is caught, quarantined (in this
 * context, in a new one on the same cache, and lazily in one that never ran fajit_validate),
 * and dispatch falls back to a correct kernel, warning once with its name. */
START_TEST(validation_gate)
{
    char dir[64], lazy_dir[64], line[2048];
    tmp_dir(dir, sizeof dir, "gate");
    tmp_dir(lazy_dir, sizeof lazy_dir, "gate-lazy");
    gate_log g = {0};
    fajit_validation_report rep;
    fajit_verdict_info vi;
    tc c;
    tune_case(&c);
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, c.batch, c.hq, c.hkv, c.sq, c.sk, c.d, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;

    fajit_ctx *ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    fajit_validation_report_init(&rep);
    double t0 = now_s();
    fajit_status st = fajit_validate(ctx, FAJIT_FAMILY_AUTO, &rep);
    printf("gate: shipped families on %s: %d validated, %d failed, %d cases, %.1f s (%s)\n",
           ctx->arch, rep.families, rep.failed, rep.cases, now_s() - t0,
           st ? fajit_errmsg(ctx) : "ok");
    ck_assert_msg(st == FAJIT_OK && rep.failed == 0, "%s", fajit_errmsg(ctx));
    static const int shipped[] = {FAJIT_FAMILY_FA2, FAJIT_FAMILY_FA3, FAJIT_FAMILY_DECODE};
    for (int i = 0; i < 3; i++) {
        int want = shipped[i] != FAJIT_FAMILY_FA3 || ctx->cc == 90;
        fajit_verdict v = family_verdict(ctx, shipped[i], &vi);
        printf("gate: %-6s %s\n", fajit_family_name((fajit_family)shipped[i]),
               v == FAJIT_VERDICT_PASS ? "PASS" : v == FAJIT_VERDICT_FAIL ? "FAIL" : "none");
        ck_assert_int_eq(v, want ? FAJIT_VERDICT_PASS : FAJIT_VERDICT_NONE);
    }
    ck_assert_int_eq(rep.families, ctx->cc == 90 ? 3 : 2);
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(&k_broken);
    ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "broken(fa2"), "before validation: %s", line);
    fajit_validation_report_init(&rep);
    st = fajit_validate(ctx, (fajit_family)BROKEN_ID, &rep);
    printf("gate: broken family: %s; case %s: %s\n", fajit_status_name(st), rep.failed_case,
           rep.error);
    ck_assert_int_eq(st, FAJIT_VALIDATION_FAILED);
    ck_assert_int_eq(rep.failed, 1);
    ck_assert_int_eq(rep.first_failed, BROKEN_ID);
    ck_assert_ptr_nonnull(strstr(rep.error, "wrong result"));
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "broken"));
    ck_assert_int_eq(family_verdict(ctx, BROKEN_ID, &vi), FAJIT_VERDICT_FAIL);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    printf("gate: plan now: %s\n", line);
    ck_assert_msg(!strstr(line, "broken(") && strstr(line, "family broken is QUARANTINED"),
                  "%s", line);
    check_against_reference(ctx, &c);   /* the fallback computes the right thing */
    printf("gate: warning: %s\n", g.quarantine);
    ck_assert_int_eq(g.quarantine_warns, 1);
    ck_assert_msg(strstr(g.quarantine, "family broken is quarantined") &&
                  strstr(g.quarantine, rep.failed_case) && strstr(g.quarantine, "wrong result"),
                  "%s", g.quarantine);
    fajit_ctx_destroy(ctx);

    /* the verdict persists: a new context on the cache never dispatches it */
    g.quarantine_warns = 0;
    ctx = gate_ctx(dir, FAJIT_VALIDATE_WARM, &g);
    check_against_reference(ctx, &c);
    ck_assert_int_eq(g.quarantine_warns, 1);
    fajit_ctx_destroy(ctx);

    /* LAZY on a cache without broken's verdict: the first call validates it, catches it, falls
     * back. (The shipped families' verdicts are copied over so that only broken is validated
     * here: their kernels would all compile again in this cache.) */
    g.quarantine_warns = 0;
    ctx = gate_ctx(lazy_dir, FAJIT_VALIDATE_LAZY, &g);
    for (int i = 0; i < 3; i++) {
        fj_verdict v;
        memset(&v, 0, sizeof v);
        snprintf(v.gpu_name, sizeof v.gpu_name, "%s", ctx->gpu_name);
        snprintf(v.arch, sizeof v.arch, "%s", ctx->arch);
        v.sm_count = ctx->sm_count;
        v.driver_version = ctx->cu->version;
        snprintf(v.fajit_version, sizeof v.fajit_version, "%s", FAJIT_VERSION_STRING);
        snprintf(v.family, sizeof v.family, "%s", fajit_family_name((fajit_family)shipped[i]));
        v.pass = 1;
        ck_assert_int_eq(fj_cache_verdict_put(ctx->cache, &v), 0);
    }
    t0 = now_s();
    check_against_reference(ctx, &c);
    printf("gate: lazy: first call validated broken in %.1f s\n", now_s() - t0);
    ck_assert_int_eq(family_verdict(ctx, BROKEN_ID, &vi), FAJIT_VERDICT_FAIL);
    printf("gate: lazy: broken %s at %s\n", vi.verdict == FAJIT_VERDICT_FAIL ? "FAIL" : "?",
           vi.failed_case);
    ck_assert_int_eq(g.quarantine_warns, 1);
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(NULL);
    rm_dir(dir);
    rm_dir(lazy_dir);
}
END_TEST

void gpu_gate_case(Suite *s)
{
    gpu_harness_add(s, "gate", validation_gate, 900);
}
