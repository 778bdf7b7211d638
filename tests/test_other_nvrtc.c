/* test_other_nvrtc.c - kernels another NVRTC made (src/api/kernel.c): a cache warmed with
 * one NVRTC version serves, under STRICT with no compile and no miss, a process that loaded
 * another; the driver is the judge (an entry it refuses is skipped and stays in the cache,
 * then the policy decides); the order other versions are tried in; which NVRTC is loaded
 * and why (src/jit/nvrtc.c). No GPU and no NVRTC needed: a fake driver (a device of compute
 * capability 8.0 whose module loader takes blobs that start with "GOOD") and a stand-in
 * NVRTC of any version. The loader-order tests use the toolkit's NVRTC when installed. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

#define TOOLKIT_NVRTC "/usr/local/cuda/lib64/libnvrtc.so.13"

static const char k_good[] = "GOOD cubin";
static const char k_bad[] = "BAD cubin";
static char g_dir[64];
static int g_launches;

static CUresult o_load(CUmodule *m, const void *img)
{
    if (strncmp(img, "GOOD", 4) != 0)
        return 209;   /* CUDA_ERROR_NO_BINARY_FOR_GPU */
    *m = (CUmodule)malloc(1);
    return 0;
}
static CUresult o_unload(CUmodule m) { free(m); return 0; }
static CUresult o_getfn(CUfunction *f, CUmodule m, const char *n)
{
    (void)n;
    *f = (CUfunction)m;
    return 0;
}
static CUresult o_fattr(int *v, int a, CUfunction f) { (void)a, (void)f; *v = 0; return 0; }
static CUresult o_fset(CUfunction f, int a, int v) { (void)f, (void)a, (void)v; return 0; }
static CUresult o_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                         unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s;
    (void)a, (void)e;
    g_launches++;
    return 0;
}
static CUresult o_errname(CUresult r, const char **s)
{
    *s = r == 209 ? "CUDA_ERROR_NO_BINARY_FOR_GPU" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

/* An A100-like fake: sm_80, so the plain fa2 kernel serves (no TMA, no counters). */
static void install_driver(void)
{
    static fj_cuda fake;
    fake = fake_device_table();
    fake.cuModuleLoadData = o_load, fake.cuModuleUnload = o_unload;
    fake.cuModuleGetFunction = o_getfn, fake.cuFuncGetAttribute = o_fattr;
    fake.cuFuncSetAttribute = o_fset, fake.cuLaunchKernel = o_launch;
    fake.cuGetErrorName = o_errname, fake.cuCtxSetCurrent = f_setcur;
    fake.cuMemAlloc = f_alloc, fake.cuMemsetD8 = f_memset, fake.cuCtxSynchronize = f_sync;
    fake.cuMemFree = f_free;
    g_count = 1, g_fail_get = 0, g_fake_cc = 80, g_fake_sms = 108;
    g_launches = 0;
    fj_cuda_set_for_testing(&fake);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fajit-other-nvrtc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    install_driver();
}

static void teardown(void)
{
    char cmd[128];
    fj_nvrtc_fake_for_testing(0, 0, NULL, 0);
    fj_nvrtc_hide_for_testing(0);
    fj_cuda_set_for_testing(NULL);
    g_fake_cc = 90, g_fake_sms = 132;
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static fajit_ctx *ctx_with(fajit_policy policy)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = g_dir;
    o.policy = policy;
    o.validate = FAJIT_VALIDATE_OFF;
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_str_eq(ctx->arch, "sm_80");
    return ctx;
}

static fajit_attn_desc problem(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 8, 8, 1024, 1024, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    return d;
}

/* The kernels fajit_attn_fwd runs for `d` on the context's device. */
static void kernels_of(fajit_ctx *ctx, const fajit_attn_desc *d, fj_kernels *ks)
{
    fj_target t = fj_target_of(ctx, NULL);
    fj_kcfg c;
    ck_assert_int_eq(fj_kcfg_default(d, &t, FAJIT_FAMILY_AUTO, &c), 0);
    c.fam->kernels(&c, d, ks);
    ck_assert_int_ge(ks->n, 1);
}

/* Stores `v`'s kernel as NVRTC `nvrtc` made it for sm_80, with `blob` for a CUBIN, the
 * way a build host's warm does (options and arch recorded, so explain can compare). */
static void put_as(fajit_ctx *ctx, const fj_variant *v, int nvrtc, const char *blob)
{
    char opts[256];
    fj_entry e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(fj_kernel_key(ctx, v, "sm_80", nvrtc, &e.key), FAJIT_OK);
    snprintf(e.arch, sizeof e.arch, "sm_80");
    fj_nvrtc_options_text("sm_80", opts, sizeof opts);
    e.nvrtc_version = nvrtc;
    e.name = (char *)v->name;
    e.options = opts;
    e.blob = (void *)blob;
    e.blob_size = strlen(blob) + 1;
    e.log = "";
    e.regs = e.smem = e.spill_bytes = -1;
    ck_assert_int_eq(fj_cache_put(ctx->cache, &e), 0);
}

static int has_as(fajit_ctx *ctx, const fj_variant *v, int nvrtc)
{
    fj_key k;
    ck_assert_int_eq(fj_kernel_key(ctx, v, "sm_80", nvrtc, &k), FAJIT_OK);
    return fj_cache_has(ctx->cache, &k);
}

/* Warm with NVRTC 13.0 (build host), serve with 13.2 (a torch wheel's) under STRICT: every
 * kernel comes from the 13.0 entries, with no compile and no miss, and says so. */
START_TEST(strict_serves_another_nvrtc)
{
    fajit_attn_desc d = problem();
    fj_kernels ks;
    fajit_ctx *ctx = ctx_with(FAJIT_POLICY_STRICT);
    kernels_of(ctx, &d, &ks);
    for (int i = 0; i < ks.n; i++)
        put_as(ctx, &ks.v[i], 13000, k_good);
    fajit_ctx_destroy(ctx);

    fj_nvrtc_fake_for_testing(13, 2, NULL, 0);   /* its compiles fail: none may run */
    ck_assert_str_eq(fajit_nvrtc_describe(),
                     "13.2 from fake-libnvrtc.so.13 (a stand-in for tests)");
    ctx = ctx_with(FAJIT_POLICY_STRICT);
    ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.misses, 0);
    ck_assert_uint_eq(c.serving_compiles, 0);
    ck_assert_uint_eq(c.hits_disk, (uint64_t)ks.n);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), (uint64_t)ks.n);
    ck_assert_int_eq(g_launches, 2 * ks.n);

    /* explain: the NVRTC loaded, the exact key's miss, and the entry that serves instead */
    char text[4096];
    ck_assert_int_eq(fajit_cache_explain(ctx, NULL, &d, text, sizeof text), FAJIT_OK);
    ck_assert_msg(strstr(text, "nvrtc 13.2 from fake-libnvrtc.so.13 (a stand-in for tests)"),
                  "%s", text);
    ck_assert_msg(strstr(text, "differs in nvrtc (entry 13000, wanted 13020)"), "%s", text);
    ck_assert_msg(strstr(text, "served: the entry NVRTC 13.0 made"), "%s", text);
    fajit_ctx_destroy(ctx);

    /* a kernel made by this NVRTC is still the first choice */
    ctx = ctx_with(FAJIT_POLICY_STRICT);
    put_as(ctx, &ks.v[0], 13020, k_good);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles + c.misses, 0);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), (uint64_t)ks.n - 1);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The driver refuses the only entry (a CUBIN it cannot run): STRICT misses and names the
 * refusal, BLOCKING compiles with the loaded NVRTC; the refused entry stays in the cache. */
START_TEST(refused_entry_falls_back_per_policy)
{
    fajit_attn_desc d = problem();
    fj_kernels ks;
    fajit_ctx *ctx = ctx_with(FAJIT_POLICY_STRICT);
    kernels_of(ctx, &d, &ks);
    for (int i = 0; i < ks.n; i++)
        put_as(ctx, &ks.v[i], 13000, k_bad);
    fajit_ctx_destroy(ctx);

    fj_nvrtc_fake_for_testing(13, 2, k_good, sizeof k_good);
    ctx = ctx_with(FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_CACHE_MISS);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "policy STRICT forbids compiling; run fajit-tune warm; "
                                            "the driver refused 1 entry of another NVRTC (the "
                                            "last, NVRTC 13.0's: CUDA_ERROR_NO_BINARY_FOR_GPU "
                                            "(209))"), "%s", fajit_errmsg(ctx));
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.misses, 1);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), 0);
    ck_assert_int_eq(g_launches, 0);
    for (int i = 0; i < ks.n; i++)
        ck_assert(has_as(ctx, &ks.v[i], 13000));
    fajit_ctx_destroy(ctx);

    ctx = ctx_with(FAJIT_POLICY_BLOCKING);
    ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, (uint64_t)ks.n);
    ck_assert_uint_eq(c.serving_compiles, (uint64_t)ks.n);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), 0);
    for (int i = 0; i < ks.n; i++) {
        ck_assert(has_as(ctx, &ks.v[i], 13000));   /* kept */
        ck_assert(has_as(ctx, &ks.v[i], 13020));   /* and this NVRTC's beside it */
    }
    fajit_ctx_destroy(ctx);

    /* STRICT now takes this NVRTC's own entries */
    ctx = ctx_with(FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.hits_disk, (uint64_t)ks.n);
    ck_assert_uint_eq(c.compiles + c.misses + fajit_hits_other_nvrtc(ctx), 0);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The nearest version that the driver takes serves: 13.1 (nearest below 13.2) is refused and
 * kept, 13.0 serves; 13.5 (newer) is not reached. Without NVRTC the newest that loads serves
 * (the same rule: every version counts as older). */
START_TEST(nearest_loadable_version_serves)
{
    fajit_attn_desc d = problem();
    fj_kernels ks;
    fajit_ctx *ctx = ctx_with(FAJIT_POLICY_STRICT);
    kernels_of(ctx, &d, &ks);
    for (int i = 0; i < ks.n; i++) {
        put_as(ctx, &ks.v[i], 13010, k_bad);
        put_as(ctx, &ks.v[i], 13000, k_good);
        put_as(ctx, &ks.v[i], 13050, k_bad);
    }
    fajit_ctx_destroy(ctx);

    fj_nvrtc_fake_for_testing(13, 2, NULL, 0);
    ctx = ctx_with(FAJIT_POLICY_STRICT);
    ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles + c.misses, 0);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), (uint64_t)ks.n);
    for (int i = 0; i < ks.n; i++)
        ck_assert(has_as(ctx, &ks.v[i], 13010) && has_as(ctx, &ks.v[i], 13050));
    fajit_ctx_destroy(ctx);

    /* no NVRTC: 13.5 first (refused), then 13.1 (refused), then 13.0 */
    fj_nvrtc_fake_for_testing(0, 0, NULL, 0);
    fj_nvrtc_hide_for_testing(1);
    ck_assert_str_eq(fajit_nvrtc_describe(), "not loaded: NVRTC hidden (test)");
    ctx = ctx_with(FAJIT_POLICY_BLOCKING);
    ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles + c.misses, 0);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(ctx), (uint64_t)ks.n);
    char text[4096];
    ck_assert_int_eq(fajit_cache_explain(ctx, NULL, &d, text, sizeof text), FAJIT_OK);
    ck_assert_msg(strstr(text, "nvrtc not loaded: NVRTC hidden (test)"), "%s", text);
    ck_assert_msg(strstr(text, "served: the entry NVRTC 13.5 made"), "%s", text);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(serve_order)
{
    int v[] = {13000, 13020, 13010, 13100, 12080, 13030, 13010};
    int n = fj_kernel_serve_order(13020, v, 7);
    const int want[] = {13010, 13000, 12080, 13030, 13100};
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(v[i], want[i]);
    int w[] = {12080, 13100, 13000};
    ck_assert_int_eq(fj_kernel_serve_order(0, w, 3), 3);   /* no NVRTC: newest first */
    ck_assert(w[0] == 13100 && w[1] == 13000 && w[2] == 12080);
    int x[] = {12000};
    ck_assert_int_eq(fj_kernel_serve_order(12000, x, 1), 0);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(NULL), 0);
}
END_TEST

/* NVRTC is loaded once per process: these run only in Check's forked test processes. */
static int forked(void) { return !getenv("CK_FORK") || strcmp(getenv("CK_FORK"), "no") != 0; }

/* An NVRTC the process already loaded (as torch loads its wheel's) is the one used, and
 * describe names the file and the rule; FAJIT_NVRTC_PATH is named as the rule when set. */
START_TEST(loader_order_named)
{
    if (!forked() || access(TOOLKIT_NVRTC, R_OK) != 0)
        return;
    unsetenv("FAJIT_NVRTC_PATH");
    void *h = dlopen(TOOLKIT_NVRTC, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    const char *line = fajit_nvrtc_describe();
    ck_assert_msg(strstr(line, " (already loaded in the process)")
                  && strstr(line, "libnvrtc.so.13"), "%s", line);
    ck_assert_msg(strstr(line, " from /"), "%s", line);   /* the loader's full path */
}
END_TEST

START_TEST(loader_env_named)
{
    if (!forked() || access(TOOLKIT_NVRTC, R_OK) != 0)
        return;
    setenv("FAJIT_NVRTC_PATH", TOOLKIT_NVRTC, 1);
    const char *line = fajit_nvrtc_describe();
    ck_assert_msg(strstr(line, " from " TOOLKIT_NVRTC " (FAJIT_NVRTC_PATH)"), "%s", line);
    unsetenv("FAJIT_NVRTC_PATH");
}
END_TEST

/* Warm exists to fill the cache: kernels it compiled but could not save (a put failing as
 * on a full disk or a damaged file) make it fail, with the count, not return OK. */
extern int fj_cache_debug_fail_puts;
START_TEST(warm_fails_when_puts_fail)
{
    char spec[128];
    snprintf(spec, sizeof spec, "%s/t.spec", g_dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model t]\ndtype = bf16\nhead_dim = 64\nheads_q = 1\nheads_kv = 1\n"
          "mask = none\nprefill = 512\n", f);
    fclose(f);
    fj_nvrtc_fake_for_testing(13, 2, k_good, sizeof k_good);
    fajit_ctx *ctx = ctx_with(FAJIT_POLICY_BLOCKING);
    int compiled = -1, cached = -1;
    fj_cache_debug_fail_puts = 1;
    fajit_status st = fajit_warm_spec(ctx, spec, "sm_80", 1, &compiled, &cached);
    fj_cache_debug_fail_puts = 0;
    ck_assert_msg(st == FAJIT_CACHE_ERROR, "%s: %s", fajit_status_name(st), fajit_errmsg(ctx));
    ck_assert_int_gt(compiled, 0);
    char want[96];
    snprintf(want, sizeof want, "%d of the %d kernels compiled for sm_80 could not be saved",
             compiled, compiled);
    ck_assert_msg(strstr(fajit_errmsg(ctx), want), "%s", fajit_errmsg(ctx));
    /* saved this time: OK */
    ck_assert_int_eq(fajit_warm_spec(ctx, spec, "sm_80", 1, &compiled, &cached), FAJIT_OK);
    fajit_ctx_destroy(ctx);
}
END_TEST

TCase *fj_tcase_other_nvrtc(void)
{
    TCase *tc = tcase_create("other_nvrtc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, strict_serves_another_nvrtc);
    tcase_add_test(tc, refused_entry_falls_back_per_policy);
    tcase_add_test(tc, nearest_loadable_version_serves);
    tcase_add_test(tc, serve_order);
    tcase_add_test(tc, loader_order_named);
    tcase_add_test(tc, loader_env_named);
    tcase_add_test(tc, warm_fails_when_puts_fail);
    return tc;
}
