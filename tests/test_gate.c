/* test_gate.c - unit tests of the first-use validation gate (src/api/validate.c) through a
 * fake driver: a FAIL verdict quarantines a family (dispatch falls back, down to the
 * reference kernel, and warns once naming it), verdicts are per GPU class, the FAJIT_VALIDATE
 * policy, the LAZY gate never validates inside a CUDA-graph capture, and validation that
 * cannot run records no verdict. The numerics of validation are the gpu suite's
 * (tests/test_gpu_gate.c, validation_gate). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "../src/api/internal.h"
#include "abi_v1.h"

/*------ a fake sm_90a device, and a family on it ------*/

static struct {
    int allocs;                /* cuMemAlloc calls other than the counter ring's */
    int capturing;             /* cuStreamIsCapturing's answer */
    int grant;                 /* 1: every allocation is granted (and counted) */
    size_t alloc_bytes[16];    /* the sizes of the first 16 counted allocations */
} g_fake;

#define RING_BYTES ((size_t)(FJ_COUNTER_SLOTS + FJ_COUNTER_GRAPH_SLOTS) * FJ_COUNTER_SLOT_BYTES)
static CUresult f_init(unsigned f) { (void)f; return 0; }
static CUresult f_count(int *n) { *n = 1; return 0; }
static CUresult f_get(CUdevice *d, int i) { *d = i; return 0; }
static CUresult f_attr(int *v, int a, CUdevice d)
{
    (void)d;
    *v = a == FJ_CU_ATTR_CC_MAJOR ? 9 : a == FJ_CU_ATTR_CC_MINOR ? 0 : 132;
    return 0;
}
static CUresult f_retain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x1; return 0; }
static CUresult f_release(CUdevice d) { (void)d; return 0; }
static CUresult f_name(char *s, int n, CUdevice d)
{
    (void)d;
    snprintf(s, (size_t)n, "Fake GPU");
    return 0;
}
static CUresult f_errname(CUresult r, const char **s) { (void)r; *s = "CUDA_ERROR_FAKE"; return 0; }
static CUresult f_setcur(CUcontext c) { (void)c; return 0; }
static CUresult f_sync(void) { return 0; }
static CUresult f_memset(CUdeviceptr p, unsigned char v, size_t n)
{
    (void)p, (void)v, (void)n;
    return 0;
}
static CUresult f_free(CUdeviceptr p) { (void)p; return 0; }
/* The counter ring is granted; any other allocation (validation's inputs) fails unless
 * g_fake.grant. */
static CUresult f_alloc(CUdeviceptr *p, size_t n)
{
    *p = 0x7000000;
    if (n == RING_BYTES)
        return 0;
    if (g_fake.allocs < 16)
        g_fake.alloc_bytes[g_fake.allocs] = n;
    g_fake.allocs++;
    return g_fake.grant ? 0 : 2;
}
static CUresult f_htod(CUdeviceptr d, const void *p, size_t n)
{
    (void)d, (void)p, (void)n;
    return 0;
}
static CUresult f_capturing(CUstream s, int *status)
{
    (void)s;
    *status = g_fake.capturing;
    return 0;
}

static fj_cuda fake_table(void)
{
    fj_cuda f = {0};
    f.cuInit = f_init, f.cuDeviceGetCount = f_count, f.cuDeviceGet = f_get;
    f.cuDeviceGetAttribute = f_attr, f.cuDevicePrimaryCtxRetain = f_retain;
    f.cuDevicePrimaryCtxRelease = f_release, f.cuDeviceGetName = f_name;
    f.cuGetErrorName = f_errname, f.cuCtxSetCurrent = f_setcur, f.cuCtxSynchronize = f_sync;
    f.cuMemAlloc = f_alloc, f.cuMemsetD8 = f_memset, f.cuMemFree = f_free;
    f.cuStreamIsCapturing = f_capturing;
    f.cuMemcpyHtoD = f_htod;
    f.version = 12080;
    return f;
}

/* "gt": the portable family's kernels under another name, for head_dim 128 on sm_90, ranked
 * above every shipped family (so dispatch picks it first). */
static const fj_family k_gt;
static int gt_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return t->sm == 90 && d->head_dim == 128 && fj_family_fa2.applies(d, t);
}
static void gt_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_family_fa2.default_cfg(d, t, out);
    out->fam = &k_gt;
}
static int gt_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    gt_default(d, t, out);
    return 1;
}
/* The portable family reads only configurations that name it. */
static fj_kcfg as_fa2(const fj_kcfg *c)
{
    fj_kcfg f = *c;
    f.fam = &fj_family_fa2;
    return f;
}
static void gt_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.kernels(&f, d, out);
    for (int i = 0; i < out->n; i++) {
        char was[96];
        snprintf(was, sizeof was, "%s", out->v[i].name);
        snprintf(out->v[i].name, sizeof out->v[i].name, "gt(%.80s)", was);
    }
}
static int gt_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *w,
                    size_t n)
{
    fj_kcfg f = as_fa2(c);
    return fj_family_fa2.check(&f, d, t, w, n);
}
static void gt_name(const fj_kcfg *c, char *out, size_t n)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.cfg_name(&f, out, n);
}
static int gt_parse(const char *s, fj_kcfg *c)
{
    int r = fj_family_fa2.cfg_parse(s, c);
    c->fam = &k_gt;
    return r;
}
static void gt_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                    size_t n)
{
    fj_kcfg f = as_fa2(c);
    fj_family_fa2.describe_grid(&f, d, t, out, n);
}
static const fj_family k_gt = {
    .name = "gt", .id = 10, .op = FAJIT_OP_FWD, .rank = 100, .cfg_prefix = "gt:",
    .applies = gt_applies, .default_cfg = gt_default, .candidates = gt_one, .shipped = gt_one,
    .kernels = gt_kernels, .check = gt_check, .cfg_name = gt_name, .cfg_parse = gt_parse,
    .describe_grid = gt_grid,
};
/* "gn": gt with a status note (as FA4's: compiled, never run on hardware), ranked above it. */
static const fj_family k_gn;
static void gn_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_family_fa2.default_cfg(d, t, out);
    out->fam = &k_gn;
}
static int gn_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    gn_default(d, t, out);
    return 1;
}
static const fj_family k_gn = {
    .name = "gn", .id = 11, .op = FAJIT_OP_FWD, .rank = 101, .cfg_prefix = "gn:",
    .applies = gt_applies, .default_cfg = gn_default, .candidates = gn_one, .shipped = gn_one,
    .kernels = gt_kernels, .check = gt_check, .cfg_name = gt_name, .cfg_parse = gt_parse,
    .describe_grid = gt_grid, .status_note = "compiled and checked but not run on hardware",
};

typedef struct sink_t {
    int warns, quarantine_warns;
    char last_warn[1024];
} sink_t;

static void sink(void *user, fajit_log_level level, const char *msg)
{
    sink_t *s = user;
    if (level != FAJIT_LOG_WARN)
        return;
    s->warns++;
    s->quarantine_warns += strstr(msg, "is quarantined") != NULL;
    snprintf(s->last_warn, sizeof s->last_warn, "%s", msg);
}

static fajit_ctx *fake_ctx(sink_t *s, fajit_validate_policy v, fajit_policy policy)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.log = sink, o.log_user = s;
    o.validate = v;
    o.policy = policy;
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

/* A verdict on `family` for the class of ctx's device (driver as the fake reports it) and
 * the feature set named `features` ("" for none). */
static void put_verdict_set(fajit_ctx *ctx, const char *family, int pass, int driver,
                            const char *features);
static void put_verdict(fajit_ctx *ctx, const char *family, int pass, int driver)
{
    put_verdict_set(ctx, family, pass, driver, "");
}

static void put_verdict_set(fajit_ctx *ctx, const char *family, int pass, int driver,
                            const char *features)
{
    fj_verdict v;
    memset(&v, 0, sizeof v);
    snprintf(v.gpu_name, sizeof v.gpu_name, "%s", ctx->gpu_name);
    snprintf(v.arch, sizeof v.arch, "%s", ctx->arch);
    v.sm_count = ctx->sm_count;
    v.driver_version = driver;
    snprintf(v.fajit_version, sizeof v.fajit_version, "%s", FAJIT_VERSION_STRING);
    snprintf(v.family, sizeof v.family, "%s", family);
    v.pass = pass;
    snprintf(v.failed_case, sizeof v.failed_case, "%s", pass ? "" : "bf16 hd128 causal b2");
    snprintf(v.error, sizeof v.error, "%s", pass ? "" : "wrong result: max error 0.25");
    snprintf(v.features, sizeof v.features, "%s", features);
    ck_assert_int_eq(fj_cache_verdict_put(ctx->cache, &v), 0);
}

static fajit_attn_desc hd128_causal(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 8, 1024, 1024, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    return d;
}

static void describe(fajit_ctx *ctx, const fajit_attn_desc *d, char *line, size_t n)
{
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, d, line, n), FAJIT_OK);
}

/*------ the tests ------*/

/* A FAIL verdict for this GPU class: dispatch passes the family over for the next one that
 * applies, down to the reference kernel, and warns once naming the family, case and error;
 * a PASS or another class's FAIL changes nothing. */
START_TEST(gate_quarantine)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    sink_t s = {0};
    char line[2048];
    fajit_attn_desc d = hd128_causal();

    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED"), "%s", line);
    fajit_ctx_destroy(ctx);

    /* a pass, and a fail of another driver: gt still serves */
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict(ctx, "gt", 1, 12080);
    put_verdict(ctx, "fa3", 0, 13000);
    describe(ctx, &d, line, sizeof line);
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
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict(ctx, "gt", 0, 12080);
    describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "fa3 bf16 d128") && !strstr(line, "gt(") &&
                  strstr(line, "family gt is QUARANTINED on this GPU class (failed validation "
                                "at bf16 hd128 causal b2: wrong result: max error 0.25)"),
                  "%s", line);
    ck_assert_int_eq(s.quarantine_warns, 1);
    ck_assert_msg(strstr(s.last_warn, "family gt is quarantined on this GPU (Fake GPU, sm_90a, "
                                      "132 SMs, driver 12080): it failed validation on bf16 "
                                      "hd128 causal b2: wrong result: max error 0.25"),
                  "%s", s.last_warn);
    describe(ctx, &d, line, sizeof line);
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
    put_verdict(ctx, "gt", 0, 12080);
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
        ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
        ck_assert_int_eq(fj_cache_tune_put(ctx->cache, &row), 0);
        put_verdict(ctx, "gt", !fail, 12080);
        describe(ctx, &d, line, sizeof line);
        if (fail)
            ck_assert_msg(strstr(line, "fa3 bf16 d128") && strstr(line, "(default)"), "%s", line);
        else
            ck_assert_msg(strstr(line, "gt(fa2 bf16 d128 causal 64x64 w4 s2) (tuned)"), "%s", line);
        fajit_ctx_destroy(ctx);
    }

    /* gt, fa3 and fa2 failed: the reference kernel serves */
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict(ctx, "gt", 0, 12080);
    put_verdict(ctx, "fa3", 0, 12080);
    put_verdict(ctx, "fa2", 0, 12080);
    describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "ref ") && !strstr(line, "fa3 bf16") && !strstr(line, "fa2 bf16"),
                  "%s", line);
    fajit_ctx_destroy(ctx);

    /* forcing a quarantined family falls back as forcing one that does not apply does */
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.family = FAJIT_FAMILY_FA3;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    put_verdict(ctx, "fa3", 0, 12080);
    describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2") && strstr(line, "family fa3 is QUARANTINED"), "%s", line);
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
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
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    sink_t s = {0};
    fajit_attn_desc d = hd128_causal();
    CUstream stream = (CUstream)0x5;

    memset(&g_fake, 0, sizeof g_fake);
    g_fake.capturing = 1;
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 0);
    ck_assert_msg(strstr(s.last_warn, "validation: gt has no verdict on this GPU class and the "
                                      "stream is being captured into a CUDA graph: it "
                                      "dispatches unvalidated"), "%s", s.last_warn);
    fajit_ctx_destroy(ctx);

    g_fake.capturing = 0;
    for (int v = FAJIT_VALIDATE_WARM; v <= FAJIT_VALIDATE_OFF; v++) {
        ctx = fake_ctx(&s, (fajit_validate_policy)v, FAJIT_POLICY_STRICT);
        ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
        ck_assert_int_eq(g_fake.allocs, 0);
        fajit_ctx_destroy(ctx);
    }

    ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* it tried: the first case's inputs */
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated (FAJIT_CUDA_ERROR: "
                                      "validating gt on "
                                      "bf16 hd128 causal b2 h8/8 sq512 sk512: allocating "
                                      "inputs"), "%s", s.last_warn);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, (fajit_family)10, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* tried once per context */
    fajit_ctx_destroy(ctx);

    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* A family with a status note (FA4: never run on hardware) is validated on first use under the
 * default WARM policy too, not under OFF; plan output carries the note. */
START_TEST(gate_noted_family_warm)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    fj_family_register_for_testing(&k_gn);
    sink_t s = {0};
    fajit_attn_desc d = hd128_causal();
    CUstream stream = (CUstream)0x5;
    memset(&g_fake, 0, sizeof g_fake);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_OFF, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 0);
    char line[2048];
    describe(ctx, &d, line, sizeof line);
    ck_assert_msg(strstr(line, "; note: family gn is compiled and checked but not run on "
                               "hardware"), "%s", line);
    fajit_ctx_destroy(ctx);
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* it tried: the first case's inputs */
    ck_assert_msg(strstr(s.last_warn, "validation: gn could not be validated"), "%s",
                  s.last_warn);
    fajit_ctx_destroy(ctx);
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* An imported PASS for a family with a status note (FA4: never run on hardware) is not
 * taken: the family is still validated on its first use on the GPU class. A PASS of a
 * family without a note, and a FAIL of either, are taken. */
START_TEST(gate_imported_pass_noted)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    fj_family_register_for_testing(&k_gn);
    sink_t s = {0};
    char dir[] = "/tmp/fajit-gate-XXXXXX", bundle[64], bundle2[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(bundle, sizeof bundle, "%s/pass.fjb", dir);
    snprintf(bundle2, sizeof bundle2, "%s/fail.fjb", dir);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    put_verdict(ctx, "gn", 1, 12080);
    put_verdict(ctx, "gt", 1, 12080);
    ck_assert_int_eq(fajit_cache_export(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    put_verdict(ctx, "gn", 0, 12080);
    ck_assert_int_eq(fajit_cache_export(ctx, bundle2, NULL, NULL, NULL), FAJIT_OK);
    fajit_ctx_destroy(ctx);

    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_cache_import(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    ck_assert_int_eq(fj_verdict_state(ctx, &k_gt, 0, NULL), FJ_VS_PASS);
    fajit_attn_desc d = hd128_causal();
    memset(&g_fake, 0, sizeof g_fake);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, (CUstream)0x5), FAJIT_CACHE_MISS);
    ck_assert_msg(g_fake.allocs == 1, "gn was not validated on first use (%d allocations): "
                  "the imported PASS counted as its validation", g_fake.allocs);
    fajit_ctx_destroy(ctx);

    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    fajit_bundle_report r;
    fajit_bundle_report_init(&r);
    ck_assert_int_eq(fajit_cache_import_bundle(ctx, bundle, &r), FAJIT_OK);
    ck_assert_int_eq(r.verdicts, 1);
    ck_assert_int_eq(r.verdicts_refused, 1);
    ck_assert_int_eq(fajit_cache_import_bundle(ctx, bundle2, &r), FAJIT_OK);
    ck_assert_int_eq(r.verdicts, 1);   /* the FAIL of gn is taken */
    ck_assert_int_eq(r.verdicts_kept + r.verdicts_replaced, 1);   /* gt's, of one time */
    ck_assert_int_eq(fj_verdict_state(ctx, &k_gn, 0, NULL), FJ_VS_FAIL);
    fajit_ctx_destroy(ctx);
    unlink(bundle);
    unlink(bundle2);
    ck_assert_int_eq(rmdir(dir), 0);
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* fajit_validate's arguments and a run that cannot allocate its inputs. */
START_TEST(gate_validate_api)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    sink_t s = {0};
    memset(&g_fake, 0, sizeof g_fake);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_REF, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "other than the reference kernel"));
    ck_assert_int_eq(fajit_validate(ctx, (fajit_family)77, NULL), FAJIT_INVALID_ARGUMENT);
    fajit_validation_report rep;
    fajit_validation_report_init(&rep);
    rep.struct_size = 3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "fajit_validation_report.struct_size"));
    ck_assert_int_eq(g_fake.allocs, 0);
    fajit_validation_report_init(&rep);
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "FAJIT_CUDA_ERROR: validating fa3 on bf16 hd128 "
                                            "causal b2 h8/8 sq512 sk512: allocating inputs") &&
                  strstr(fajit_errmsg(ctx), "(no verdict recorded)"), "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(g_fake.allocs, 1);
    fajit_verdict_info vi;
    fajit_verdict_info_init(&vi);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA3, &vi), FAJIT_OK);
    ck_assert_int_eq(vi.verdict, FAJIT_VERDICT_NONE);
    vi.struct_size = 8;
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_FA3, &vi), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_family_verdict(ctx, FAJIT_FAMILY_AUTO, &vi), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
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
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    sink_t s = {0};
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict(ctx, "fa3", 0, 12080);
    put_verdict(ctx, "fa3", 1, 13000);
    put_verdict(ctx, "decode", 1, 13000);
    int n = 0;
    ck_assert_int_eq(fajit_verdict_list(ctx, count_verdicts, &n), FAJIT_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fajit_verdict_list(ctx, NULL, &n), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/*------ model-feature sets ------*/

static fajit_attn_desc with_softcap(void)
{
    fajit_attn_desc d = hd128_causal();
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
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    sink_t s = {0};
    char line[2048];
    fajit_attn_desc plain = hd128_causal(), soft = with_softcap();

    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    put_verdict(ctx, "gt", 1, 12080);
    describe(ctx, &plain, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED") &&
                  strstr(line, "; verdict: gt passed validation on this GPU class (no model "
                               "features)"), "%s", line);
    ck_assert_int_eq(s.quarantine_warns, 0);
    describe(ctx, &soft, line, sizeof line);
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
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict(ctx, "gt", 0, 12080);
    put_verdict_set(ctx, "gt", 1, 12080, "softcap");
    describe(ctx, &soft, line, sizeof line);
    ck_assert_msg(strstr(line, "gt(fa2 bf16 d128") && !strstr(line, "QUARANTINED") &&
                  strstr(line, "; verdict: gt passed validation on this GPU class for softcap"),
                  "%s", line);
    describe(ctx, &plain, line, sizeof line);
    ck_assert_msg(strstr(line, "fa3 bf16 d128") && strstr(line, "family gt is QUARANTINED on "
                                                              "this GPU class (failed"),
                  "%s", line);
    fajit_ctx_destroy(ctx);

    /* a tuning row of gt is not used for a set gt is quarantined for */
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.gpu_name, sizeof row.gpu_name, "Fake GPU");
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    row.sm_count = 132;
    fj_desc_signature(&soft, row.signature, sizeof row.signature);
    fj_desc_bucket(&soft, row.sm_count, row.bucket, sizeof row.bucket);
    snprintf(row.config, sizeof row.config, "gt:64x64w4s2");
    ck_assert_int_eq(fj_cache_tune_put(ctx->cache, &row), 0);
    describe(ctx, &soft, line, sizeof line);
    ck_assert_msg(!strstr(line, "gt(") && strstr(line, "(default)"), "%s", line);
    fajit_ctx_destroy(ctx);

    unsetenv("FAJIT_MODEL_FEATURES");
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* LAZY for a feature set: a feature-free PASS does not count for softcap (the first softcap
 * dispatch validates gt with softcap on, which here cannot allocate its inputs), a softcap
 * verdict does; a set the gate cannot run (FP8 K/V) is not tried; with FAJIT_MODEL_FEATURES
 * off nothing is validated (the call is refused). */
START_TEST(gate_feature_lazy)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    sink_t s = {0};
    fajit_attn_desc plain = hd128_causal(), soft = with_softcap();
    CUstream stream = (CUstream)0x5;
    memset(&g_fake, 0, sizeof g_fake);

    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_UNSUPPORTED);
    ck_assert_int_eq(g_fake.allocs, 0);
    fajit_ctx_destroy(ctx);

    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    put_verdict(ctx, "gt", 1, 12080);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &plain, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 0);   /* feature-free: validated already */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* softcap: tried */
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated for softcap "
                                      "(FAJIT_CUDA_ERROR: validating gt on bf16 hd128 causal b2 "
                                      "h8/8 sq512 sk512 with softcap: allocating inputs"),
                  "%s", s.last_warn);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* once per context and set */
    ck_assert_int_eq(gt_verdict(ctx, FAJIT_FEATURE_SOFTCAP, FAJIT_KV_AS_Q).verdict,
                     FAJIT_VERDICT_NONE);
    ck_assert_int_eq(gt_verdict(ctx, 0, FAJIT_KV_AS_Q).verdict, FAJIT_VERDICT_PASS);
    fajit_ctx_destroy(ctx);

    ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    put_verdict_set(ctx, "gt", 1, 12080, "softcap");
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* softcap: validated already */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &plain, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 2);   /* feature-free: tried */
    fajit_ctx_destroy(ctx);

    /* with its inputs granted: the problem has the set's features (a buffer of sinks and
     * slopes, 2 x 8 heads, and two descales, fp32), and the reference kernel runs with them too (STRICT:
     * it is not in the cache, which names it) */
    fajit_attn_desc both = with_softcap();
    both.sinks = (const float *)(uintptr_t)0x100000;
    memset(&g_fake, 0, sizeof g_fake);
    g_fake.grant = 1;
    ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &both, stream), FAJIT_CACHE_MISS);
    int feat = 0;
    for (int i = 0; i < g_fake.allocs && i < 16; i++)
        feat += g_fake.alloc_bytes[i] == (2 * 8 + 2) * sizeof(float);
    ck_assert_int_eq(feat, 1);
    ck_assert_msg(strstr(s.last_warn, "validation: gt could not be validated for softcap,sinks") &&
                  strstr(s.last_warn, "with softcap,sinks: ") &&
                  strstr(s.last_warn, "ref bf16 softcap sinks for sm_90a"), "%s", s.last_warn);
    fajit_ctx_destroy(ctx);
    memset(&g_fake, 0, sizeof g_fake);

    /* under capture, the set is named */
    g_fake.capturing = 1;
    ctx = fake_ctx(&s, FAJIT_VALIDATE_LAZY, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_msg(strstr(s.last_warn, "validation: gt has no verdict for softcap on this GPU "
                                      "class and the stream is being captured"), "%s",
                  s.last_warn);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_MODEL_FEATURES");
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* The default WARM policy for a feature set is its feature-free one: a family with a status
 * note (gn) is validated on first use for the problem's set (though it passed feature-free),
 * one without (gt) never at dispatch; OFF validates nothing, and still quarantines per set. */
START_TEST(gate_feature_warm_off)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    fj_family_register_for_testing(&k_gn);
    setenv("FAJIT_MODEL_FEATURES", "on", 1);
    sink_t s = {0};
    fajit_attn_desc soft = with_softcap();
    CUstream stream = (CUstream)0x5;
    memset(&g_fake, 0, sizeof g_fake);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    put_verdict(ctx, "gn", 1, 12080);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);
    ck_assert_msg(strstr(s.last_warn, "validation: gn could not be validated for softcap"),
                  "%s", s.last_warn);
    fajit_ctx_destroy(ctx);
    fj_family_register_for_testing(NULL);
    fj_family_register_for_testing(&k_gt);
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);   /* gt: no note, not validated at dispatch */
    fajit_ctx_destroy(ctx);
    ctx = fake_ctx(&s, FAJIT_VALIDATE_OFF, FAJIT_POLICY_STRICT);
    put_verdict_set(ctx, "gt", 0, 12080, "softcap");
    ck_assert_int_eq(fajit_attn_fwd(ctx, &soft, stream), FAJIT_CACHE_MISS);
    ck_assert_int_eq(g_fake.allocs, 1);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "fa3 bf16 d128") && !strstr(fajit_errmsg(ctx), "gt("),
                  "%s", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_MODEL_FEATURES");
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* fajit_validate of a feature set: the report names it, a set that names nothing or that
 * the gate cannot run is refused before anything runs; the problems have the features on. */
START_TEST(gate_feature_validate_api)
{
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    sink_t s = {0};
    memset(&g_fake, 0, sizeof g_fake);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    fajit_validation_report rep;
    fajit_validation_report_init(&rep);
    rep.features = FAJIT_FEATURE_SINKS;
    rep.kv_dtype = FAJIT_KV_E4M3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(g_fake.allocs, 0);
    rep.features = FAJIT_FEATURE_HEAD_DIM_V, rep.kv_dtype = FAJIT_KV_AS_Q;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_DECODE, &rep), FAJIT_UNSUPPORTED);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "cannot run problems with head_dim_v yet (asked: "
                                            "head_dim_v)"), "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(g_fake.allocs, 0);
    /* FP8 K/V: the decode family's cases, K and V of one byte each */
    rep.features = FAJIT_FEATURE_SINKS | FAJIT_FEATURE_KV_FP8, rep.kv_dtype = FAJIT_KV_E4M3;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_DECODE, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "validating decode on bf16 hd128 decode paged(16) "
                                            "gqa4 b3 h32/8 sq1 sk1500 with sinks,kv_e4m3: "
                                            "allocating inputs"), "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(g_fake.allocs, 1);
    fajit_ctx_destroy(ctx);
    /* granted: q, then K as FP8 (1504 keys x 8 heads x 128, 3 sequences: one byte each),
     * its twin in bf16 for the reference, V and its twin; the reference kernel reads the
     * twin, as bf16 (STRICT: it is not in the cache, which names it) */
    memset(&g_fake, 0, sizeof g_fake);
    g_fake.grant = 1;
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    rep.features = FAJIT_FEATURE_KV_FP8, rep.kv_dtype = FAJIT_KV_E5M2;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_DECODE, &rep), FAJIT_CACHE_MISS);
    const size_t nk = (size_t)3 * 1504 * 8 * 128;
    ck_assert_uint_eq(g_fake.alloc_bytes[0], (size_t)3 * 32 * 128 * 2);
    ck_assert_uint_eq(g_fake.alloc_bytes[1], nk);
    ck_assert_uint_eq(g_fake.alloc_bytes[2], 2 * nk);
    ck_assert_uint_eq(g_fake.alloc_bytes[3], nk);
    ck_assert_uint_eq(g_fake.alloc_bytes[4], 2 * nk);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "with kv_e5m2: ref bf16 for sm_90a"), "%s",
                  fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    memset(&g_fake, 0, sizeof g_fake);
    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_BLOCKING);
    fajit_validation_report_init(&rep);
    rep.features = FAJIT_FEATURE_SOFTCAP | FAJIT_FEATURE_ALIBI;
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "validating fa3 on bf16 hd128 causal b2 h8/8 sq512 "
                                            "sk512 with softcap,alibi: allocating inputs"),
                  "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(g_fake.allocs, 1);
    /* a report of the first sized layout: feature-free */
    fajit_validation_report_init_sized(&rep, FAJIT_VALIDATION_REPORT_SIZE_V1);
    rep.features = 0x7fff;   /* beyond its struct_size: never read */
    ck_assert_int_eq(fajit_validate(ctx, FAJIT_FAMILY_FA3, &rep), FAJIT_CUDA_ERROR);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "sq512 sk512: allocating inputs"), "%s",
                  fajit_errmsg(ctx));
    ck_assert_uint_eq(rep.features, 0x7fff);   /* nor written */
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
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
    fj_cuda fake = fake_table();
    fj_cuda_set_for_testing(&fake);
    fj_family_register_for_testing(&k_gt);
    sink_t s = {0};
    char dir[] = "/tmp/fajit-gate-XXXXXX", bundle[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(bundle, sizeof bundle, "%s/sets.fjb", dir);
    fajit_ctx *ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
    put_verdict(ctx, "gt", 1, 12080);
    put_verdict_set(ctx, "gt", 0, 12080, "softcap,sinks");
    ck_assert_int_eq(fajit_cache_export(ctx, bundle, NULL, NULL, NULL), FAJIT_OK);
    fajit_ctx_destroy(ctx);

    ctx = fake_ctx(&s, FAJIT_VALIDATE_WARM, FAJIT_POLICY_STRICT);
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
    put_verdict_set(ctx, "gt", 1, 12080, "softcap,bogus");
    put_verdict_set(ctx, "fa3", 1, 12080, "sinks,softcap");   /* not the one spelling */
    ck_assert_int_eq(fajit_cache_verify_verdicts(ctx, bad_set, &named, &n_checked, &n_bad),
                     FAJIT_OK);
    ck_assert_int_eq(n_checked, 4);
    ck_assert_int_eq(n_bad, 2);   /* (gt is registered: a family of this fajit here) */
    ck_assert_int_eq(named, 1);
    fajit_ctx_destroy(ctx);
    unlink(bundle);
    ck_assert_int_eq(rmdir(dir), 0);
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

TCase *fj_tcase_gate(void)
{
    TCase *tc = tcase_create("gate");
    tcase_add_test(tc, gate_feature_quarantine);
    tcase_add_test(tc, gate_feature_lazy);
    tcase_add_test(tc, gate_feature_warm_off);
    tcase_add_test(tc, gate_feature_validate_api);
    tcase_add_test(tc, gate_feature_bundle_list);
    tcase_add_test(tc, gate_quarantine);
    tcase_add_test(tc, gate_policy_option);
    tcase_add_test(tc, gate_lazy_capture);
    tcase_add_test(tc, gate_noted_family_warm);
    tcase_add_test(tc, gate_imported_pass_noted);
    tcase_add_test(tc, gate_validate_api);
    tcase_add_test(tc, gate_verdict_list);
    return tc;
}
