/* gate_fake.c - see gate_fake.h. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "gate_fake.h"

gate_fake_state gate_fake;

/*------ the driver ------*/

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
 * gate_fake.grant. */
static CUresult f_alloc(CUdeviceptr *p, size_t n)
{
    *p = 0x7000000;
    if (n == RING_BYTES)
        return 0;
    if (gate_fake.allocs < 16)
        gate_fake.alloc_bytes[gate_fake.allocs] = n;
    gate_fake.allocs++;
    return gate_fake.grant ? 0 : 2;
}
static CUresult f_htod(CUdeviceptr d, const void *p, size_t n)
{
    (void)d, (void)p, (void)n;
    return 0;
}
static CUresult f_capturing(CUstream s, int *status)
{
    (void)s;
    *status = gate_fake.capturing;
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

static fj_cuda g_table;

void gate_begin(const fj_family *a, const fj_family *b)
{
    memset(&gate_fake, 0, sizeof gate_fake);
    g_table = fake_table();
    fj_cuda_set_for_testing(&g_table);
    if (a)
        fj_family_register_for_testing(a);
    if (b)
        fj_family_register_for_testing(b);
}

void gate_end(void)
{
    fj_family_register_for_testing(NULL);
    fj_cuda_set_for_testing(NULL);
}

/*------ the test families ------*/

/* gt serves head_dim 128 on sm_90 only */
static int gt_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return t->sm == 90 && d->head_dim == 128 && fj_family_fa2.applies(d, t);
}

FJ_ALIAS_HOOKS(gt, gate_gt)
const fj_family gate_gt = {
    .name = "gt", .id = GATE_GT_ID, .op = FAJIT_OP_FWD, .rank = 100, .cfg_prefix = "gt:",
    .applies = gt_applies, FJ_ALIAS_TABLE(gt),
};

FJ_ALIAS_HOOKS(gn, gate_gn)
const fj_family gate_gn = {
    .name = "gn", .id = 11, .op = FAJIT_OP_FWD, .rank = 101, .cfg_prefix = "gn:",
    .applies = gt_applies, FJ_ALIAS_TABLE(gn),
    .status_note = "compiled and checked but not run on hardware",
};

/*------ contexts, verdicts, problems ------*/

static void sink(void *user, fajit_log_level level, const char *msg)
{
    gate_sink *s = user;
    if (level != FAJIT_LOG_WARN)
        return;
    s->warns++;
    s->quarantine_warns += strstr(msg, "is quarantined") != NULL;
    snprintf(s->last_warn, sizeof s->last_warn, "%s", msg);
}

fajit_ctx *gate_ctx(gate_sink *s, fajit_validate_policy v, fajit_policy policy)
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

void gate_put_verdict_set(fajit_ctx *ctx, const char *family, int pass, int driver,
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

void gate_put_verdict(fajit_ctx *ctx, const char *family, int pass, int driver)
{
    gate_put_verdict_set(ctx, family, pass, driver, "");
}

fajit_attn_desc gate_desc(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 8, 1024, 1024, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    return d;
}

void gate_describe(fajit_ctx *ctx, const fajit_attn_desc *d, char *line, size_t n)
{
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, d, line, n), FAJIT_OK);
}
