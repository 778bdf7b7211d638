/* test_gpu_serving.c - the `gpu` suite's tests of what a server meets (program test_gpu,
 * harness gpu_fwd.c): a launch inside CUDA-graph capture and its replays, a second process
 * on the same cache directory (with and without NVRTC) that compiles nothing, and the host
 * costs of a cold compile, a disk hit and a warm call. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/families/fa3.h"
#include "gpu_fwd.h"

/*------ CUDA graphs ------*/

/* Graph entry points the library does not use, looked up for this test. */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
static struct {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*begin)(CUstream, int);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*memset_async)(CUdeviceptr, unsigned char, size_t, CUstream);
} G;

static int graph_api(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 0;
    static const char *const names[] = {
        "cuStreamCreate", "cuStreamDestroy_v2", "cuStreamSynchronize", "cuStreamBeginCapture_v2",
        "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy",
        "cuGraphDestroy", "cuMemsetD8Async"};
    void **f = (void **)&G;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(f[i] = dlsym(h, names[i])))
            return 0;
    return 1;
}

/* A launch inside CUDA-graph capture (global mode, the strictest), as a server captures its
 * decode step: the kernel's first use is inside the capture (its module load must not break
 * it), and it is the dynamically scheduled Hopper kernel (hd128 causal: its default at every
 * length), whose tile counters must exist before (no synchronize at a launch) and whose last
 * claim resets the counter so that every replay computes the whole output. Three captured
 * launches (three counter slots), three replays; each replay's O and LSE equal a plain
 * launch's bit for bit (a tile's result does not depend on which CTA claimed it). */
START_TEST(graph_capture)
{
    fajit_ctx *ctx = new_ctx(g_cache_dir);
    if (strcmp(ctx->arch, "sm_90a") != 0) {
        printf("graph capture: skipped on %s (the dynamic schedule is sm_90a's)\n", ctx->arch);
        fajit_ctx_destroy(ctx);
        return;
    }
    ck_assert_msg(atomic_load(&ctx->counters) != 0, "no tile counters after context creation");
    ck_assert_msg(graph_api(), "libcuda lacks a graph entry point");
    tc c = {.batch = 2, .hq = 8, .hkv = 2, .sq = 1000, .sk = 1000, .d = 128,
            .dtype = FJ_DT_BF16, .mask = FAJIT_MASK_CAUSAL};
    snprintf(c.text, sizeof c.text, "graph b2 hq8 hkv2 sq1000 d128 bf16 causal");
    g_rng = g_seed ^ 0x9e3779b9u;
    bufs B;
    setup(&c, &B);
    fj_kcfg cfg;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg_default(&B.desc, &h200, FAJIT_FAMILY_AUTO, &cfg);
    ck_assert_msg(fj_fa3_of(&cfg) && fj_fa3_of(&cfg)->persistent == 2,
                  "the case no longer takes the dynamic schedule: pick another");
    size_t nq = (size_t)(B.rows_q * B.row_q) + 8, nl = (size_t)c.hq * c.batch * c.sq + 1;
    uint16_t *want = malloc(nq * 2), *got = malloc(nq * 2);
    float *want_l = malloc(nl * 4), *got_l = malloc(nl * 4);

    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = FAJIT_OK;
    for (int i = 0; i < 3 && st == FAJIT_OK; i++)
        st = fajit_attn_fwd(ctx, &B.desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "launch inside capture: %s", fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec;
    CU(G.instantiate(&exec, graph, 0));

    /* the plain launch: the expected output */
    CU(cu->cuMemsetD8(B.o, 0xff, nq * 2));
    CU(cu->cuMemsetD8(B.lse, 0xff, nl * 4));
    ck_assert_msg(fajit_attn_fwd(ctx, &B.desc, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    CU(G.stream_sync(s));
    CU(cu->cuMemcpyDtoH(want, B.o, nq * 2));
    CU(cu->cuMemcpyDtoH(want_l, B.lse, nl * 4));
    for (int rep = 0; rep < 3; rep++) {
        CU(G.memset_async(B.o, 0xff, nq * 2, s));   /* NaN: a tile left out shows */
        CU(G.memset_async(B.lse, 0xff, nl * 4, s));
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        CU(cu->cuMemcpyDtoH(got, B.o, nq * 2));
        CU(cu->cuMemcpyDtoH(got_l, B.lse, nl * 4));
        ck_assert_msg(memcmp(got, want, nq * 2) == 0 && memcmp(got_l, want_l, nl * 4) == 0,
                      "replay %d differs from a plain launch", rep);
    }
    /* and the plain launch itself is right (the reference kernel as the oracle) */
    check_against_reference(ctx, &c);
    printf("graph capture: 3 launches captured, 3 replays equal to a plain launch\n");
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
    CU(G.stream_destroy(s));
    free(want), free(got), free(want_l), free(got_l);
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ processes, timings ------*/

/* A second process with the same cache directory finds every kernel without compiling;
 * so does a third without NVRTC (it cannot know the NVRTC version in the keys). */
START_TEST(cache_across_processes)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --second-process %s", (int)getpid(), g_cache_dir);
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "second process failed (%d)", rc);
    snprintf(cmd, sizeof cmd, "FAJIT_NVRTC_PATH=none /proc/%d/exe --second-process %s",
             (int)getpid(), g_cache_dir);
    rc = system(cmd);
    ck_assert_msg(rc == 0, "second process without NVRTC failed (%d)", rc);
}
END_TEST

/* The child of cache_across_processes (test_gpu --second-process DIR). */
int gpu_second_process(const char *dir)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.policy = FAJIT_POLICY_STRICT;  /* a miss would be an error, not a compile */
    fajit_ctx *ctx = NULL;
    if (fajit_ctx_create(&ctx, &o) != FAJIT_OK) {
        fprintf(stderr, "second process: %s\n", fajit_errmsg(ctx));
        return 1;
    }
    CUdeviceptr buf;
    cu->cuMemAlloc(&buf, 1 << 20);
    int bad = 0;
    for (int dt = 0; dt < 2; dt++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, (void *)buf, (void *)buf, (void *)buf, (void *)(buf + 4096), 1,
                             1, 1, 16, 16, 128, (fajit_dtype)dt);
        cu->cuMemsetD8(buf, 0, 4096);
        fajit_status st = fajit_attn_fwd_reference(ctx, &d, NULL);
        if (st != FAJIT_OK) {
            fprintf(stderr, "second process: %s\n", fajit_errmsg(ctx));
            bad = 1;
        }
    }
    cu->cuCtxSynchronize();
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    const char *nv = getenv("FAJIT_NVRTC_PATH");
    printf("second process%s: %llu disk hits, %llu compiles, %llu misses\n",
           nv && strcmp(nv, "none") == 0 ? " (no NVRTC)" : "", (unsigned long long)c.hits_disk,
           (unsigned long long)c.compiles, (unsigned long long)c.misses);
    cu->cuMemFree(buf);
    fajit_ctx_destroy(ctx);
    return bad || c.compiles != 0 || c.hits_disk < 2;
}

/* Host-side costs of the three ways to get a kernel, printed for the closing note. */
static void time_path(const char *label, fwd_fn fwd)
{
    char dir[] = "/tmp/fajit-gpu-timing-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    CUdeviceptr buf;
    CU(cu->cuMemAlloc(&buf, 1 << 20));
    CU(cu->cuMemsetD8(buf, 0, 1 << 20));
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, (void *)buf, (void *)buf, (void *)buf, (void *)(buf + 65536), 1, 1,
                         1, 64, 64, 128, FAJIT_BF16);

    fajit_ctx *ctx = new_ctx(dir);
    double t0 = now_s();
    ck_assert_int_eq(fwd(ctx, &d, NULL), FAJIT_OK);
    double cold = now_s() - t0;
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 1);
    double nvrtc_s = c.compile_seconds;
    CU(cu->cuCtxSynchronize());
    fajit_ctx_destroy(ctx);

    ctx = new_ctx(dir);
    t0 = now_s();
    ck_assert_int_eq(fwd(ctx, &d, NULL), FAJIT_OK);
    double disk = now_s() - t0;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    ck_assert_uint_eq(c.hits_disk, 1);
    CU(cu->cuCtxSynchronize());

    /* Host time of the calls only: batches small enough that the launch queue never
     * fills (a full queue makes launches wait for the GPU), synchronized between. */
    enum { BATCH = 100, BATCHES = 100, N = BATCH * BATCHES };
    double in_calls = 0;
    for (int r = 0; r < BATCHES; r++) {
        t0 = now_s();
        for (int i = 0; i < BATCH; i++)
            fwd(ctx, &d, NULL);
        in_calls += now_s() - t0;
        CU(cu->cuCtxSynchronize());
    }
    double per_call = in_calls / N;
    /* The launch of the same kernel without dispatch (plan lookup, validation), for
     * comparison; for the sm_90a kernel it includes encoding the TMA descriptors. */
    fj_plan *pl = NULL;
    for (int b = 0; b < FJ_PLAN_BUCKETS && !pl; b++)
        pl = ctx->plans[b];
    ck_assert_ptr_nonnull(pl);
    const fj_kplan *p = atomic_load(&pl->launch);
    double in_launch = 0;
    for (int r = 0; r < BATCHES; r++) {
        t0 = now_s();
        for (int i = 0; i < BATCH; i++)
            fj_kplan_launch(ctx, p, &d, NULL);
        in_launch += now_s() - t0;
        CU(cu->cuCtxSynchronize());
    }
    double bare = in_launch / N;
    printf("timing %-9s cold compile+load+launch %7.1f ms (NVRTC %6.1f ms) | "
           "SQLite hit+load+launch %6.2f ms | warm call %5.2f us (launch alone %5.2f us)\n",
           label, cold * 1e3, nvrtc_s * 1e3, disk * 1e3, per_call * 1e6, bare * 1e6);
    fajit_ctx_destroy(ctx);
    cu->cuMemFree(buf);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(timings)
{
    time_path("reference", fajit_attn_fwd_reference);
    time_path("fast", fajit_attn_fwd);
}
END_TEST

void gpu_serving_tests(TCase *tc)
{
    tcase_add_test(tc, cache_across_processes);
    tcase_add_test(tc, timings);
}

void gpu_graph_case(Suite *s)
{
    gpu_harness_add(s, "graph", graph_capture, 600);
}
