/* test_gpu_decode_graph.c - the decode tests of CUDA-graph replay and dependent launches
 * (harness: gpu_decode.h): a captured decode step replayed with new queries, block tables and
 * lengths (graph_replay), a mixed prefill and decode batch replayed with new splits of its
 * rows (mixed_graph_replay), and the block table and lengths rewritten by a kernel right
 * before a call launched as its dependent (pdl_rewrite, sm_90+). */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_decode.h"

/*------ 4. graph_replay ------*/

/* Driver graph entry points the library does not use, looked up for this test. */
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
static struct {
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*begin)(CUstream, int);
    CUresult (*end)(CUstream, CUgraph *);
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*exec_destroy)(CUgraphExec);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*instantiate_flags)(CUgraphExec *, CUgraph, unsigned long long);
    /* drivers before 11.4: cuGraphInstantiate_v2 (error node, log buffer) */
    CUresult (*instantiate_log)(CUgraphExec *, CUgraph, void *, char *, size_t);
} G;

/* NULL when every entry point is there, else the name of a missing one. */
static const char *graph_api(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return "libcuda.so.1 (not loaded)";
    static const char *const names[] = {"cuStreamCreate", "cuStreamDestroy_v2",
                                        "cuStreamSynchronize", "cuStreamBeginCapture_v2",
                                        "cuStreamEndCapture", "cuGraphLaunch",
                                        "cuGraphExecDestroy", "cuGraphDestroy"};
    void *slots[sizeof names / sizeof names[0]];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slots[i] = dlsym(h, names[i])))
            return names[i];
    memcpy(&G.stream_create, &slots[0], sizeof(void *));
    memcpy(&G.stream_destroy, &slots[1], sizeof(void *));
    memcpy(&G.stream_sync, &slots[2], sizeof(void *));
    memcpy(&G.begin, &slots[3], sizeof(void *));
    memcpy(&G.end, &slots[4], sizeof(void *));
    memcpy(&G.launch, &slots[5], sizeof(void *));
    memcpy(&G.exec_destroy, &slots[6], sizeof(void *));
    memcpy(&G.graph_destroy, &slots[7], sizeof(void *));
    void *p = dlsym(h, "cuGraphInstantiateWithFlags");
    if (p) {
        memcpy(&G.instantiate_flags, &p, sizeof p);
        return NULL;
    }
    if (!(p = dlsym(h, "cuGraphInstantiate_v2")))
        return "cuGraphInstantiateWithFlags";
    memcpy(&G.instantiate_log, &p, sizeof p);
    return NULL;
}

static CUresult graph_instantiate(CUgraphExec *exec, CUgraph graph)
{
    if (G.instantiate_flags)
        return G.instantiate_flags(exec, graph, 0);
    char log[256];
    return G.instantiate_log(exec, graph, NULL, log, sizeof log);
}

/* New contents for the same device buffers: lengths (one empty and one full sequence in
 * the first replay), a new page permutation, new queries. */
static void new_step(dbufs *B, int replay)
{
    randomize_used(B);
    if (replay == 0)
        B->used[0] = 0, B->used[B->c.batch - 1] = B->c.seqlen_k;
    assign_pages(B);
    randomize_q(B);
    upload_dynamic(B);
}

/* Captures one call into a graph on `s`, then replays it `replays` times with new inputs,
 * each checked against the reference. */
static void capture_and_replay(fajit_ctx *ctx, dbufs *B, CUstream s, int replays, const char *what)
{
    /* warm outside the capture (the kernel loaded, the plan's workspace in place) */
    ck_assert_msg(launch(ctx, B, s) == FAJIT_OK, "%s, plain launch: %s", what, fajit_errmsg(ctx));
    fetch(B);
    check_against_reference(B, what);

    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = fajit_attn_fwd(ctx, &B->desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "%s, launch inside capture: %s", what, fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec = NULL;
    CU(graph_instantiate(&exec, graph));
    for (int rep = 0; rep < replays; rep++) {
        new_step(B, rep);
        poison_outputs(B);   /* (after the copies: both land before the replay) */
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        fetch(B);
        char name[160];
        snprintf(name, sizeof name, "%s, replay %d", what, rep);
        verdict v = check_against_reference(B, name);
        printf("graph_replay: %s: ok (err %.3g, row-relative %.3g, LSE %.3g; used[0..2] %d %d "
               "%d)\n", name, v.err, v.rowrel, v.lse_err, B->used[0], B->used[1], B->used[2]);
    }
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
}

START_TEST(graph_replay)
{
    const char *missing = graph_api();
    if (missing) {
        printf("graph_replay: skipped: the driver lacks %s\n", missing);
        return;
    }
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x6a2a9ull);
    dcase c = {.batch = 8, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 4096, .paged = 1,
               .page_size = 16, .use_seqused = 1, .full_table = 1, .spare = 16,
               .num_splits = 0, .want_lse = 1};
    dbufs B;
    setup(&B, &c, NULL);
    char buf[1024];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("graph_replay: %s\n", buf);
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));

    /* with the caller's workspace: the graph owns no fajit memory */
    size_t bytes = 0;
    ck_assert_msg(fajit_attn_workspace_size(ctx, &B.desc, &bytes) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    printf("graph_replay: workspace %zu bytes\n", bytes);
    if (bytes) {
        CUdeviceptr ws = dalloc((bytes + 255) / 256 * 256);
        ck_assert_msg(ws % 256 == 0, "cuMemAlloc returned a pointer not 256-byte aligned");
        CU(cu->cuMemsetD8(ws, 0, (bytes + 255) / 256 * 256));
        B.desc.workspace = (void *)ws;
        B.desc.workspace_bytes = bytes;
        capture_and_replay(ctx, &B, s, 5, "caller workspace");
        B.desc.workspace = NULL, B.desc.workspace_bytes = 0;
        CU(cu->cuCtxSynchronize());
        CU(cu->cuMemFree(ws));
    } else {
        printf("graph_replay: the plan needs no workspace (no split): caller-workspace capture "
               "skipped\n");
    }
    /* with the context's scratch (stream-ordered allocation inside the graph) */
    capture_and_replay(ctx, &B, s, 2, "context scratch");
    /* TMA loads where they fit: the tensor maps are kernel parameters baked into the graph
     * (addresses and shapes only), while seqused_k and the block table change */
    fajit_ctx *tctx = new_ctx_tma(0);
    ck_assert_int_eq(fajit_dispatch_describe(tctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("graph_replay: %s\n", buf);
    capture_and_replay(tctx, &B, s, 2, "TMA loads, context scratch");
    fajit_ctx_destroy(tctx);

    CU(G.stream_destroy(s));
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 4a. mixed_graph_replay ------*/

/* A new split of the same query rows over the sequences (the launch shape, fixed at
 * capture, depends on their total, the batch and the longest sequence, `cap` rows, only):
 * replay 0 empties some sequences (a smaller batch) and moves rows between the long ones;
 * later ones draw a random split of prefill sequences and decode rows, none over `cap`. */
static void new_mixed_split(dbufs *B, int replay, int cap)
{
    const int n = B->c.batch, total = (int)B->rows;
    int q[MAXB] = {0}, left = total;
    if (replay == 0) {   /* {0, 1, 0, cap, 1, 16, 0, rest} */
        const int fixed[MAXB] = {0, 1, 0, cap, 1, 16, 0, 0};
        memcpy(q, fixed, sizeof q);
        for (int b = 0; b < n; b++)
            left -= q[b];
    } else {
        for (int b = 0; b < n && left > 0; b++) {
            const int hi = left < cap ? left : cap;
            q[b] = rnd() % 2 ? urange(0, 16 < hi ? 16 : hi) : urange(0, hi);
            left -= q[b];
        }
    }
    for (int b = n - 1; b >= 0 && left > 0; b--) {   /* the rest where there is room */
        const int add = cap - q[b] < left ? cap - q[b] : left;
        q[b] += add, left -= add;
    }
    ck_assert_int_eq(left, 0);
    B->cuq[0] = 0;
    for (int b = 0; b < n; b++) {
        B->c.qlens[b] = q[b];
        B->cuq[b + 1] = B->cuq[b] + q[b];
    }
    CU(cu->cuMemcpyHtoD(B->d_cuq, B->cuq, sizeof B->cuq));
}

/* vLLM's unified step as one captured call: chunked-prefill sequences and decode rows of
 * one varlen batch over the paged cache (the mixed plan on sm_90a: the Hopper kernel, then
 * the decode kernel), replayed with other query splits (no sequence over the longest at
 * capture), fewer sequences, other key lengths and new pages, each against the oracle. */
START_TEST(mixed_graph_replay)
{
    const char *missing = graph_api();
    if (missing) {
        printf("mixed_graph_replay: skipped: the driver lacks %s\n", missing);
        return;
    }
    fajit_ctx *ctx = new_ctx_paged_hopper();
    reseed(g_seed ^ 0x4d1c3ull);
    dcase c = {.batch = 8, .hkv = 4, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .varlen = 1,
               .qlens = {512, 1, 1, 300, 1, 16, 1, 1}, .give_total_q = 1, .paged = 1,
               .page_size = 16, .seqlen_k = 2048, .use_seqused = 1, .full_table = 1,
               .spare = 16, .want_lse = 1};
    dbufs B;
    setup(&B, &c, NULL);
    char buf[2048];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
    printf("mixed_graph_replay: %s\n", buf);
    fajit_device_info di;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &di), FAJIT_OK);
    if (di.cc_major == 9 && di.cc_minor == 0)
        ck_assert_msg(strstr(buf, "fa3 ") && strstr(buf, "then dec "), "not the mixed plan: %s",
                      buf);
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    ck_assert_msg(launch(ctx, &B, s) == FAJIT_OK, "plain launch: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "mixed, before capture");
    CU(G.begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */));
    fajit_status st = fajit_attn_fwd(ctx, &B.desc, s);
    CUgraph graph = NULL;
    CUresult r = G.end(s, &graph);
    ck_assert_msg(st == FAJIT_OK, "launch inside capture: %s", fajit_errmsg(ctx));
    CU(r);
    CUgraphExec exec = NULL;
    CU(graph_instantiate(&exec, graph));
    for (int rep = 0; rep < 6; rep++) {
        new_mixed_split(&B, rep, c.qlens[0]);   /* (the longest at capture) */
        new_step(&B, rep);
        poison_outputs(&B);
        CU(G.launch(exec, s));
        CU(G.stream_sync(s));
        fetch(&B);
        char name[160];
        snprintf(name, sizeof name, "mixed, replay %d", rep);
        verdict v = check_against_reference(&B, name);
        printf("mixed_graph_replay: %s: ok (err %.3g, LSE %.3g; q[0..3] %d %d %d %d, used[0..3] "
               "%d %d %d %d)\n", name, v.err, v.lse_err, B.c.qlens[0], B.c.qlens[1],
               B.c.qlens[2], B.c.qlens[3], B.used[0], B.used[1], B.used[2], B.used[3]);
    }
    CU(G.exec_destroy(exec));
    CU(G.graph_destroy(graph));
    CU(G.stream_destroy(s));
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 4b. pdl_rewrite ------*/

/* One CTA that lets the next kernel launch at once, waits `ns` nanoseconds, then copies a
 * new block table and new lengths into place: a decode step launched after it as a
 * dependent (programmatic dependent launch, sm_90+) can be resident while the old ones are
 * still there (its launch follows this grid's trigger, not its end), and must use the new
 * ones (nothing it reads before its wait on this grid may come from memory this grid
 * writes). A lab run (2026-12-05) measured reading the lengths and first page ids early and checking
 * them after the wait as slower (dev/decode/NOTES.md); this keeps any such idea honest. */
static const char k_writer_src[] =
    "extern \"C\" __global__ void fj_test_writer(int *bt, const int *bt_new, int n_bt,\n"
    "                                            int *used, const int *used_new, int n_used,\n"
    "                                            unsigned long long ns)\n"
    "{\n"
    "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "    unsigned long long t0, t;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "    do {\n"
    "        asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "    } while (t - t0 < ns);\n"
    "    for (int i = threadIdx.x; i < n_bt; i += blockDim.x)\n"
    "        bt[i] = bt_new[i];\n"
    "    for (int i = threadIdx.x; i < n_used; i += blockDim.x)\n"
    "        used[i] = used_new[i];\n"
    "}\n";

START_TEST(pdl_rewrite)
{
    fajit_ctx *ctx = new_ctx(0);
    if (ctx->cc < 90) {
        printf("pdl_rewrite: skipped: no dependent launches before sm_90\n");
        fajit_ctx_destroy(ctx);
        return;
    }
    char why[512], err[512];
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    ck_assert_msg(nv != NULL, "%s", why);
    fj_src src = {"writer.cu", k_writer_src, strlen(k_writer_src)};
    fj_compile_out out;
    ck_assert_msg(fj_nvrtc_compile(nv, "", &src, NULL, 0, ctx->arch, NULL, &out, err,
                                   sizeof err) == 0, "%s\n%s", err, out.log);
    fj_module wm;
    CU(fj_module_load(cu, out.cubin, "fj_test_writer", &wm));
    fj_compile_out_free(&out);
    const char *missing = graph_api();   /* (its stream entry points) */
    ck_assert_msg(missing == NULL, "the driver lacks %s", missing ? missing : "");
    CUstream s;
    CU(G.stream_create(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    /* batch 1 x q_len 1 (16 splits merged by the last CTA at 4k, 8 in a cluster at 2k),
     * q_len 4 (causal: each row's keys move with the length), batch 2 x 16k (a split per
     * CTA of 2k keys), ps16 and ps1 (an id per row) */
    static const struct { int batch, q_len, seqlen_k, page_size; } shapes[] = {
        {1, 1, 4096, 16}, {1, 1, 2048, 16}, {1, 4, 4096, 16}, {2, 1, 16384, 16}, {1, 1, 4096, 1}};
    reseed(g_seed ^ 0x5bec5bull);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        dcase c = {.batch = shapes[i].batch, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = shapes[i].q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                   .q_len = shapes[i].q_len, .seqlen_k = shapes[i].seqlen_k, .paged = 1,
                   .page_size = shapes[i].page_size, .use_seqused = 1, .full_table = 1,
                   .spare = 16, .num_splits = 0, .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        char line[1024];
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, line, sizeof line),
                         FAJIT_OK);
        printf("pdl_rewrite: %s\n", line);
        ck_assert_msg(launch(ctx, &B, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));   /* (warm) */
        fetch(&B);
        check_against_reference(&B, "pdl_rewrite, before the writer");
        const size_t n_bt = (size_t)c.batch * (size_t)B.bt_stride;
        CUdeviceptr bt_new = dalloc(sizeof(int32_t) * n_bt);
        CUdeviceptr used_new = dalloc(sizeof(int32_t) * (size_t)c.batch);
        for (int step = 0; step < 3; step++) {
            /* the next step's lengths and pages (the host copies the reference reads),
             * staged: the device still holds the old ones */
            randomize_used(&B);
            if (step == 0) {   /* the longest, and (batch 2) a third of it */
                B.used[0] = c.seqlen_k;
                if (c.batch > 1)
                    B.used[1] = c.seqlen_k / 3;
            }
            assign_pages(&B);
            CU(cu->cuMemcpyHtoD(bt_new, B.bt, sizeof(int32_t) * n_bt));
            CU(cu->cuMemcpyHtoD(used_new, B.used, sizeof(int32_t) * (size_t)c.batch));
            poison_outputs(&B);
            int nb = (int)n_bt, nu = c.batch;
            unsigned long long ns = 20000;   /* 20 us: time for the decode CTAs to launch */
            void *args[] = {&B.d_bt, &bt_new, &nb, &B.d_used, &used_new, &nu, &ns};
            const unsigned grid[3] = {1, 1, 1};
            CU(fj_launch(cu, wm.fn, grid, 128, 0, s, args, 0, 0));
            ck_assert_msg(fajit_attn_fwd(ctx, &B.desc, s) == FAJIT_OK, "%s", fajit_errmsg(ctx));
            fetch(&B);
            char name[160];
            snprintf(name, sizeof name, "pdl_rewrite, %d x %d keys, q_len %d, ps%d, step %d",
                     c.batch, c.seqlen_k, c.q_len, c.page_size, step);
            verdict v = check_against_reference(&B, name);
            printf("pdl_rewrite: %s: ok (err %.3g, LSE %.3g; used %d .. %d)\n", name, v.err,
                   v.lse_err, B.used[0], B.used[c.batch - 1]);
        }
        CU(cu->cuMemFree(bt_new));
        CU(cu->cuMemFree(used_new));
        teardown(&B);
    }
    CU(G.stream_destroy(s));
    CU(cu->cuModuleUnload(wm.module));
    fajit_ctx_destroy(ctx);
}
END_TEST

void gpu_decode_graph_cases(Suite *s)
{
    gpu_harness_add(s, "graph_replay", graph_replay, 600);
    gpu_harness_add(s, "mixed_graph_replay", mixed_graph_replay, 600);
    gpu_harness_add(s, "pdl_rewrite", pdl_rewrite, 600);
}
