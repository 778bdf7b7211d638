/* test_nvrtc_policies.c - the `nvrtc` suite's compile policies through a fake driver: real
 * NVRTC compiles, fake launches (blocking, background and strict policies, warm specs served
 * under STRICT), the host cost of a warm decode call and of packed-head plans (TCase
 * "hostcost"), and threads warming one memory-only context (TCase "memory"). Helpers shared
 * with test_nvrtc.c in test_nvrtc.h. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/families/fa2.h"
#include "../src/families/fa3.h"
#include "test_nvrtc.h"

/*------ compile policies through a fake driver: real compiles, fake launches ------*/

static struct {
    int launches;
    unsigned grid_x, threads, smem;
} g_fake;

static CUresult fk_ok0(void) { return 0; }
static CUresult fk_init(unsigned f) { (void)f; return 0; }
static CUresult fk_count(int *n) { *n = 1; return 0; }
static CUresult fk_get(CUdevice *d, int i) { *d = i; return 0; }
static CUresult fk_attr(int *v, int a, CUdevice d)
{
    (void)d;
    *v = a == FJ_CU_ATTR_CC_MAJOR ? 9 : a == FJ_CU_ATTR_CC_MINOR ? 0
       : a == FJ_CU_ATTR_MAX_SMEM_OPTIN ? 232448 : 132;
    return 0;
}
static CUresult fk_name(char *s, int n, CUdevice d) { (void)d; snprintf(s, (size_t)n, "Fake H200"); return 0; }
static CUresult fk_retain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x10; return 0; }
static CUresult fk_release(CUdevice d) { (void)d; return 0; }
static CUresult fk_setcur(CUcontext c) { (void)c; return 0; }
static CUresult fk_load(CUmodule *m, const void *img)
{
    if (memcmp(img, "\177ELF", 4) != 0)
        return 200;   /* CUDA_ERROR_INVALID_IMAGE */
    *m = (CUmodule)malloc(1);
    return 0;
}
static CUresult fk_unload(CUmodule m) { free(m); return 0; }
static CUresult fk_getfn(CUfunction *f, CUmodule m, const char *name) { (void)name; *f = (CUfunction)m; return 0; }
static CUresult fk_fattr(int *v, int a, CUfunction f) { (void)f; *v = a == FJ_CU_FUNC_ATTR_NUM_REGS ? 128 : 0; return 0; }
static CUresult fk_fset(CUfunction f, int a, int v) { (void)f, (void)a, (void)v; return 0; }
static CUresult fk_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e)
{
    (void)f, (void)gy, (void)gz, (void)by, (void)bz, (void)s, (void)a, (void)e;
    g_fake.launches++;
    g_fake.grid_x = gx, g_fake.threads = bx, g_fake.smem = smem;
    return 0;
}
static CUresult fk_errname(CUresult r, const char **s) { (void)r; *s = "CUDA_ERROR_FAKE"; return 0; }
/* the dynamic tile schedule's counters (src/api/ctx.c) */
static CUresult fk_alloc(CUdeviceptr *p, size_t n) { (void)n; *p = 0x7000000; return 0; }
static CUresult fk_memset(CUdeviceptr p, unsigned char v, size_t n) { (void)p, (void)v, (void)n; return 0; }
static CUresult fk_free(CUdeviceptr p) { (void)p; return 0; }
static CUresult fk_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                        const unsigned long long *s, const unsigned *b, const unsigned *e, int i,
                        int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)d, (void)s, (void)b, (void)e, (void)i, (void)w, (void)l, (void)o;
    memset(m, 0, 128);
    return 0;
}

/* What a launch of configuration c for d looks like: threads and grid.x. */
static void expected_launch(const fj_kcfg *c, const fajit_attn_desc *d, unsigned *threads,
                            unsigned *grid_x)
{
    fj_kernels ks;
    c->fam->kernels(c, d, &ks);
    *threads = (unsigned)ks.threads[0];
    if (fj_fa3_of(c)) {
        fj_attn_params p;
        unsigned grid[3];
        fj_params_from_desc(d, &p);
        fj_fa3_launch_shape(fj_fa3_of(c), &p, 132, grid, threads);
        *grid_x = grid[0];
    } else {
        const int bm = fj_fa2_of(c) ? fj_fa2_of(c)->block_m : 1;
        *grid_x = (unsigned)((d->seqlen_q + bm - 1) / bm);
    }
}

/* Waits up to 60 s for the context's first background compile to end; *c: the counters. */
static void wait_background_compile(fajit_ctx *ctx, fajit_counters *c)
{
    for (int i = 0; i < 1200; i++) {
        fajit_counters_get(ctx, c);
        if (c->background_compiles == 1)
            return;
        usleep(50 * 1000);
    }
}

static fajit_ctx *policy_ctx(fajit_policy policy) { return test_ctx(0, policy, 0); }

/* The fake H200's driver table: modules load (ELF checked), launches are recorded. */
static fj_cuda fake_h200(void)
{
    fj_cuda fake = {0};
    fake.cuInit = fk_init;
    fake.cuDeviceGetCount = fk_count;
    fake.cuDeviceGet = fk_get;
    fake.cuDeviceGetAttribute = fk_attr;
    fake.cuDeviceGetName = fk_name;
    fake.cuDevicePrimaryCtxRetain = fk_retain;
    fake.cuDevicePrimaryCtxRelease = fk_release;
    fake.cuCtxSetCurrent = fk_setcur;
    fake.cuModuleLoadData = fk_load;
    fake.cuModuleUnload = fk_unload;
    fake.cuModuleGetFunction = fk_getfn;
    fake.cuFuncGetAttribute = fk_fattr;
    fake.cuFuncSetAttribute = fk_fset;
    fake.cuLaunchKernel = fk_launch;
    fake.cuGetErrorName = fk_errname;
    fake.cuCtxSynchronize = (CUresult(*)(void))fk_ok0;
    fake.cuTensorMapEncodeTiled = fk_tmap;
    fake.cuMemAlloc = fk_alloc;
    fake.cuMemsetD8 = fk_memset;
    fake.cuMemFree = fk_free;
    return fake;
}

START_TEST(policies_with_fake_driver)
{
    fj_cuda fake = fake_h200();
    fj_cuda_set_for_testing(&fake);
    make_dir();

    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 1, 16, 16, 4096, 4096, 128, FAJIT_BF16);
    d.mask = FAJIT_MASK_CAUSAL;
    fj_kcfg dc, cand[48], tuned;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg_default(&d, &h200, FAJIT_FAMILY_AUTO, &dc);
    ck_assert_ptr_nonnull(fj_fa3_of(&dc));   /* sm_90a, hdim 128: the Hopper kernel */
    int n = fj_kcfg_candidates(&d, &h200, cand, 48);
    unsigned dt, dg, tt = 0, tg = 0;
    expected_launch(&dc, &d, &dt, &dg);
    tuned = dc;
    for (int i = 1; i < n && tt == 0; i++) {   /* a candidate that launches differently */
        unsigned ct, cg;
        expected_launch(&cand[i], &d, &ct, &cg);
        if (ct != dt || cg != dg)
            tuned = cand[i], tt = ct, tg = cg;
    }
    ck_assert_msg(tt != 0, "no candidate with another launch shape than the default");
    fajit_counters c;

    /* STRICT on an empty cache: a clear error, no compile, no launch. */
    fajit_ctx *ctx = policy_ctx(FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_CACHE_MISS);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "fajit-tune warm"));
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.misses, 1);
    ck_assert_int_eq(g_fake.launches, 0);
    fajit_ctx_destroy(ctx);

    /* BLOCKING: the default compiles on the calling thread, then launches. */
    ctx = policy_ctx(FAJIT_POLICY_BLOCKING);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.serving_compiles, 1);
    ck_assert_int_eq(g_fake.launches, 1);
    ck_assert_uint_eq(g_fake.threads, dt);
    ck_assert_uint_eq(g_fake.grid_x, dg);
    fajit_ctx_destroy(ctx);

    /* A tuning row for this GPU class names another configuration. */
    fj_cache *cache;
    fj_cache_open(&cache, g_dir, NULL, NULL);
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.gpu_name, sizeof row.gpu_name, "Fake H200");
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    row.sm_count = 132;
    fj_desc_signature(&d, row.signature, sizeof row.signature);
    fj_desc_bucket(&d, row.sm_count, row.bucket, sizeof row.bucket);
    fj_kcfg_name(&tuned, row.config);
    row.time_ms = 1.0;
    ck_assert_int_eq(fj_cache_tune_put(cache, &row), 0);
    fj_cache_close(cache);

    /* FALLBACK: the default (cached) launches at once; the tuned one compiles in the
     * background and is swapped in. The caller never compiles. */
    ctx = policy_ctx(FAJIT_POLICY_FALLBACK);
    char line[512];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &d, line, sizeof line), FAJIT_OK);
    ck_assert_ptr_nonnull(strstr(line, "(tuned)"));
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.threads, dt);   /* the default ran */
    ck_assert_uint_eq(g_fake.grid_x, dg);
    wait_background_compile(ctx, &c);
    ck_assert_uint_eq(c.background_compiles, 1);
    ck_assert_uint_eq(c.serving_compiles, 0);
    ck_assert_uint_eq(c.fallback_launches, 1);
    usleep(20 * 1000);   /* the swap follows the counter */
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.threads, tt);   /* the tuned one ran */
    ck_assert_uint_eq(g_fake.grid_x, tg);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.fallback_launches, 1);
    fajit_ctx_destroy(ctx);

    /* STRICT now finds the tuned kernel in the cache. */
    ctx = policy_ctx(FAJIT_POLICY_STRICT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.threads, tt);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.hits_disk, 1);
    /* The same shape with GQA 4 has no tuning row: its own plan, the default kernel. */
    fajit_attn_desc d4 = d;
    d4.heads_kv = 4;
    d4.k_head_stride = d4.v_head_stride = d.k_head_stride;
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d4, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.threads, dt);
    ck_assert_uint_eq(g_fake.grid_x, dg);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);   /* and back */
    ck_assert_uint_eq(g_fake.threads, tt);
    fajit_ctx_destroy(ctx);

    /* FALLBACK without a tuning row: a short prefill whose own default (hdim 256 causal:
     * 128x64, grid) is not compiled runs the cached long-sequence default (128x80, dynamic
     * order) at once and swaps its own in when the background compile ends. */
    fajit_attn_desc dl, ds;
    fajit_attn_desc_init(&dl, p, p, p, p, 1, 16, 16, 4096, 4096, 256, FAJIT_BF16);
    dl.mask = FAJIT_MASK_CAUSAL;
    ds = dl;
    ds.seqlen_q = ds.seqlen_k = 512;
    fj_kcfg kl, ks;
    fj_kcfg_default(&dl, &h200, FAJIT_FAMILY_AUTO, &kl);
    fj_kcfg_default(&ds, &h200, FAJIT_FAMILY_AUTO, &ks);
    ck_assert_msg(!fj_kcfg_same(&kl, &ks), "one default for both lengths");
    ctx = policy_ctx(FAJIT_POLICY_BLOCKING);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &dl, NULL), FAJIT_OK);
    unsigned long_smem = g_fake.smem;
    fajit_ctx_destroy(ctx);
    ctx = policy_ctx(FAJIT_POLICY_FALLBACK);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &ds, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.smem, long_smem);   /* the stand-in ran */
    wait_background_compile(ctx, &c);
    ck_assert_uint_eq(c.background_compiles, 1);
    ck_assert_uint_eq(c.serving_compiles, 0);
    usleep(20 * 1000);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &ds, NULL), FAJIT_OK);
    ck_assert_uint_ne(g_fake.smem, long_smem);   /* its own default now */
    fajit_ctx_destroy(ctx);

    /* A machine without NVRTC serves what the cache holds (a pre-warmed bundle) and says
     * clearly what it cannot compile. */
    fj_nvrtc_hide_for_testing(1);
    ctx = policy_ctx(FAJIT_POLICY_BLOCKING);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_fake.threads, tt);
    ck_assert_uint_eq(g_fake.grid_x, tg);
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.hits_disk, 1);
    fajit_attn_desc d64 = d;
    d64.head_dim = 64;
    ck_assert_int_eq(fajit_attn_fwd(ctx, &d64, NULL), FAJIT_NO_NVRTC);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "is not in the cache for sm_90a (made by 1 NVRTC "
                                            "version there) and cannot be compiled"),
                  "%s", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    fj_nvrtc_hide_for_testing(0);

    fj_cuda_set_for_testing(NULL);
    remove_dir();
}
END_TEST

/* `fajit-tune warm --spec` compiles what serving that spec needs: a STRICT context then
 * serves every shape of it, in every length class of the Hopper defaults, with no compile. */
START_TEST(warm_spec_serves_strict)
{
    make_dir();
    char spec[300];
    snprintf(spec, sizeof spec, "%s/spec.txt", g_dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[model t]\ndtype = bf16\nhead_dim = 64\nheads_q = 4\nheads_kv = 2\n"
               "mask = causal\nprefill = 512, %d, %d\n", 2 * FJ_FA3_SHORT_SEQ,
            2 * FJ_FA3_LONG_SEQ);
    fclose(f);
    fajit_ctx *ctx = compile_ctx();
    int compiled = 0, cached = 0;
    ck_assert_msg(fajit_warm_spec(ctx, spec, "sm_90a", 0, &compiled, &cached) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    ck_assert_int_gt(compiled, 3);
    fajit_ctx_destroy(ctx);

    fj_cuda fake = fake_h200();
    fj_cuda_set_for_testing(&fake);
    ctx = policy_ctx(FAJIT_POLICY_STRICT);
    const int lens[] = {512, 2 * FJ_FA3_SHORT_SEQ, 2 * FJ_FA3_LONG_SEQ};
    for (int i = 0; i < 3; i++) {
        fajit_attn_desc d;
        void *p = (void *)(uintptr_t)0x100000;
        fajit_attn_desc_init(&d, p, p, p, p, 1, 4, 2, lens[i], lens[i], 64, FAJIT_BF16);
        d.mask = FAJIT_MASK_CAUSAL;
        ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "seqlen %d: %s", lens[i],
                      fajit_errmsg(ctx));
    }
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.misses, 0);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    remove_dir();
}
END_TEST

/* A warm decode step's host side: the public call on a fake H200 (real kernels, compiled
 * once; launches, allocations and the cluster probe faked), with the driver calls each warm
 * call makes counted and its host time printed. Per warm call: one launch, no compile, no
 * cache lookup; stream-ordered scratch only where the splits' partials go through memory:
 * none for one split or a cluster merge, one allocation and one free for the last-CTA
 * merge. The last problem's longest sequence grows by a key a call (a server without
 * graphs), so the split rule runs for every call there. */
static struct {
    int launches, clusters, allocs, frees;
    unsigned grid_y;
    int heads_kv;
} g_warm;
static CUresult fk_launch_ex(const fj_cu_launch_config *c, CUfunction f, void **a, void **e)
{
    (void)f, (void)e;
    g_warm.launches++;
    if (c->grid_y)   /* the last launch's KV heads in the grid and the parameters (decode) */
        g_warm.grid_y = c->grid_y, g_warm.heads_kv = ((const fj_decode_params *)a[0])->heads_kv;
    for (unsigned i = 0; i < c->num_attrs; i++)
        g_warm.clusters +=
            c->attrs[i].id == FJ_CU_LAUNCH_ATTR_CLUSTER && c->attrs[i].v.dim[0] > 1;
    return 0;
}
static CUresult fk_alloc_async(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)n, (void)s;
    g_warm.allocs++;
    *p = 0x9000000;
    return 0;
}
static CUresult fk_free_async(CUdeviceptr p, CUstream s)
{
    (void)p, (void)s;
    g_warm.frees++;
    return 0;
}
static CUresult fk_capturing(CUstream s, int *st) { (void)s; *st = 0; return 0; }
/* as the H200 answered for the decode kernel at one CTA per SM: 15 clusters of up to 8 */
static CUresult fk_clusters(int *n, CUfunction f, const fj_cu_launch_config *c)
{
    (void)f;
    unsigned x = 1;
    for (unsigned i = 0; i < c->num_attrs; i++)
        if (c->attrs[i].id == FJ_CU_LAUNCH_ATTR_CLUSTER)
            x = c->attrs[i].v.dim[0];
    *n = x <= 8 ? 15 : 0;
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The fake H200 of the decode host tests: launches, stream-ordered allocations, the capture
 * query and the cluster probe faked. */
static fj_cuda decode_fake(void)
{
    fj_cuda fake = fake_h200();
    fake.cuLaunchKernelEx = fk_launch_ex;
    fake.cuMemAllocAsync = fk_alloc_async, fake.cuMemFreeAsync = fk_free_async;
    fake.cuStreamIsCapturing = fk_capturing;
    fake.cuOccupancyMaxActiveClusters = fk_clusters;
    return fake;
}

START_TEST(decode_warm_call)
{
    fj_cuda fake = decode_fake();
    fj_cuda_set_for_testing(&fake);
    make_dir();
    fajit_ctx *ctx = policy_ctx(FAJIT_POLICY_BLOCKING);
    static const struct { int batch, keys, allocs, cluster, grow; const char *what; } k[] = {
        {1, 2048, 0, 1, 0, "1 x 2k (8 splits, cluster merge)"},
        {4, 16384, 1, 0, 0, "4 x 16k (splits, last-CTA merge)"},
        {64, 16384, 0, 0, 0, "64 x 16k (one split)"},
        {4, 12000, 1, 0, 1, "4 x 12k growing by a key a call (no graph)"},
    };
    enum { CALLS = 20000 };
    char line[512] = "";
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        fajit_attn_desc d;
        void *p = (void *)(uintptr_t)0x100000;
        fajit_attn_desc_init(&d, p, p, p, p, k[i].batch, 32, 8, 1, k[i].keys, 128, FAJIT_BF16);
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.block_table_stride = (k[i].keys + 1024) / 16, d.page_size = 16, d.num_pages = 1 << 20;
        d.seqused_k = (const int32_t *)(uintptr_t)0x4000;
        d.k_row_stride = d.v_row_stride = 8 * 128;
        ck_assert_msg(fajit_attn_fwd(ctx, &d, NULL) == FAJIT_OK, "%s: %s", k[i].what,
                      fajit_errmsg(ctx));   /* compiles (split step, combine) */
        fajit_counters c0, c1;
        fajit_counters_get(ctx, &c0);
        memset(&g_warm, 0, sizeof g_warm);
        const double t0 = now_us();
        for (int n = 0; n < CALLS; n++) {
            d.seqlen_k = k[i].keys + (k[i].grow ? n % 1024 : 0);
            if (fajit_attn_fwd(ctx, &d, NULL) != FAJIT_OK)
                ck_abort_msg("%s: warm call %d: %s", k[i].what, n, fajit_errmsg(ctx));
        }
        const double us = (now_us() - t0) / CALLS;
        fajit_counters_get(ctx, &c1);
        ck_assert_uint_eq(c1.compiles, c0.compiles);
        ck_assert_uint_eq(c1.hits_disk, c0.hits_disk);
        ck_assert_uint_eq(c1.misses, c0.misses);
        ck_assert_uint_eq(c1.calls - c0.calls, CALLS);
        ck_assert_msg(g_warm.launches == CALLS &&
                      g_warm.clusters == (k[i].cluster ? CALLS : 0) &&
                      g_warm.allocs == k[i].allocs * CALLS && g_warm.frees == g_warm.allocs,
                      "%s: per %d calls %d launches, %d in clusters, %d allocations, %d frees",
                      k[i].what, CALLS, g_warm.launches, g_warm.clusters, g_warm.allocs,
                      g_warm.frees);
        ck_assert_msg(us < 500, "%s: %.1f us of host time per warm call", k[i].what, us);
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s %.2f us", i ? ", " : "",
                 k[i].what, us);
    }
    printf("test_nvrtc: a warm paged decode call's host side (fake driver, %d calls each): "
           "%s\n", CALLS, line);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    remove_dir();
}
END_TEST

/* Threads warming one memory-only context (no cache file): its leases make each kernel
 * compile once (issue 21 item 7: 151 compiles for 19 kernels before). The one thread that
 * compiles a kernel counts it as compiled, the others as cached. */
typedef struct mem_warm {
    fajit_ctx *ctx;
    const char *spec;
    int compiled, cached;
    fajit_status st;
} mem_warm;

static void *mem_warm_thread(void *arg)
{
    mem_warm *w = arg;
    w->st = fajit_warm_spec(w->ctx, w->spec, "sm_80", 1, &w->compiled, &w->cached);
    return NULL;
}

/* Head packing (FAJIT_DECODE_HEAD_PACK): a plan made for K/V heads side by side in multiples
 * of 4 packs them (the real kernel compiled, launched on the fake H200: 2 CTAs of 4 heads
 * along y at head_dim 32 where the batch fills the SMs); the same problem with the heads
 * spaced apart, or 6 or 5 heads, must not reuse that plan: each gets its own (2, 1). Forced
 * to 2 the context packs 2; off, none. */
START_TEST(decode_pack_plans)
{
    fj_cuda fake = decode_fake();
    fj_cuda_set_for_testing(&fake);
    make_dir();
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 64, 32, 8, 1, 16384, 32, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 1024, d.page_size = 16, d.num_pages = 1 << 17;
    static const struct {
        const char *pack;
        int heads_kv;
        int64_t head_stride;
        unsigned grid_y;
    } k[] = {
        {"auto", 8, 32, 2},   /* side by side: 4 heads per CTA */
        {"auto", 8, 64, 8},   /* spaced apart (row stride 8 x 64): one */
        {"auto", 8, 32, 2},   /* the first plan again */
        {"auto", 6, 32, 3},   /* 6 heads: 3 CTAs of 2 */
        {"auto", 5, 32, 5},   /* 5 heads: one per CTA */
        {"2", 8, 32, 4},
        {"off", 8, 32, 8},
    };
    fajit_ctx *ctx = NULL;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!i || strcmp(k[i].pack, k[i - 1].pack)) {   /* (read at the context's creation) */
            if (ctx)
                fajit_ctx_destroy(ctx);
            setenv("FAJIT_DECODE_HEAD_PACK", k[i].pack, 1);
            ctx = policy_ctx(FAJIT_POLICY_BLOCKING);
        }
        fajit_attn_desc e = d;
        e.heads_kv = k[i].heads_kv, e.heads_q = 4 * k[i].heads_kv;
        e.k_head_stride = e.v_head_stride = k[i].head_stride;
        e.k_row_stride = e.v_row_stride = k[i].heads_kv * k[i].head_stride;
        e.q_row_stride = e.o_row_stride = e.heads_q * 32;
        e.q_batch_stride = e.o_batch_stride = e.q_row_stride;
        memset(&g_warm, 0, sizeof g_warm);
        ck_assert_msg(fajit_attn_fwd(ctx, &e, NULL) == FAJIT_OK, "%zu: %s", i, fajit_errmsg(ctx));
        ck_assert_msg(g_warm.grid_y == k[i].grid_y && g_warm.heads_kv == (int)k[i].grid_y,
                      "%zu: grid y %u, heads_kv %d, want %u", i, g_warm.grid_y, g_warm.heads_kv,
                      k[i].grid_y);
    }
    unsetenv("FAJIT_DECODE_HEAD_PACK");
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    remove_dir();
}
END_TEST

START_TEST(memory_warm_threads)
{
    enum { N = 4 };
    make_dir();
    char spec[300];
    snprintf(spec, sizeof spec, "%s/spec.txt", g_dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[model t]\ndtype = bf16\nhead_dim = 64\nheads_q = 1\nheads_kv = 1\n"
               "mask = none\nprefill = 512\n");
    fclose(f);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";   /* memory only */
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    mem_warm w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        w[i] = (mem_warm){.ctx = ctx, .spec = spec};
        ck_assert_int_eq(pthread_create(&t[i], NULL, mem_warm_thread, &w[i]), 0);
    }
    int compiled = 0, cached = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(w[i].st == FAJIT_OK, "thread %d: %s", i, fajit_status_name(w[i].st));
        compiled += w[i].compiled, cached += w[i].cached;
    }
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    const int kernels = w[0].compiled + w[0].cached;
    ck_assert_int_gt(kernels, 3);
    ck_assert_int_eq(compiled, kernels);
    ck_assert_int_eq(cached, (N - 1) * kernels);
    ck_assert_uint_eq(c.compiles, (uint64_t)kernels);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

void fj_nvrtc_tests_policies(TCase *tc)
{
    tcase_add_test(tc, policies_with_fake_driver);
    tcase_add_test(tc, warm_spec_serves_strict);
}

TCase *fj_tcase_hostcost(void)
{
    TCase *th = tcase_create("hostcost");   /* alone: CK_RUN_CASE=hostcost */
    tcase_set_timeout(th, 600);
    tcase_add_test(th, decode_warm_call);
    tcase_add_test(th, decode_pack_plans);
    return th;
}

TCase *fj_tcase_memory(void)
{
    TCase *tm = tcase_create("memory");   /* alone: CK_RUN_CASE=memory */
    tcase_set_timeout(tm, 600);
    tcase_add_test(tm, memory_warm_threads);
    return tm;
}
