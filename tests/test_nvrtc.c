/* test_nvrtc.c - the `nvrtc` suite: every embedded kernel variant compiles with NVRTC for
 * every supported target, with no GPU. Compile logs are read: no spills, no local memory,
 * no ptxas warning that means serialized wgmma or an ignored setmaxnreg. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/api/internal.h"
#include "../src/autotune/fa2_config.h"
#include "embedded.h"

static char g_dir[64];
static const char *const k_bad_warnings[] = {"C7508", "C7510", "C7511", "C7515", "C7519"};

static void make_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fajit-nvrtc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static fajit_ctx *compile_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = g_dir;
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

typedef struct audit {
    int n, max_regs;
    double max_ms, total_ms;
    char worst[256];
} audit;

static int audit_entry(void *user, const fj_entry *e)
{
    audit *a = user;
    a->n++;
    ck_assert_msg(e->spill_bytes == 0, "%s [%s]: %d bytes of spills", e->name, e->arch,
                  e->spill_bytes);
    ck_assert_msg(e->regs > 0 && e->regs <= 255, "%s [%s]: %d registers", e->name, e->arch,
                  e->regs);
    int regs, smem, spill, stack;
    ck_assert_ptr_nonnull(e->log);
    fj_parse_ptxas_log(e->log, &regs, &smem, &spill, &stack);
    ck_assert_msg(stack <= 0, "%s [%s]: %d bytes of stack (local memory):\n%s", e->name,
                  e->arch, stack, e->log);
    for (size_t i = 0; i < sizeof k_bad_warnings / sizeof k_bad_warnings[0]; i++)
        ck_assert_msg(!strstr(e->log, k_bad_warnings[i]), "%s [%s]: ptxas warning %s:\n%s",
                      e->name, e->arch, k_bad_warnings[i], e->log);
    if (e->regs > a->max_regs)
        a->max_regs = e->regs;
    a->total_ms += e->compile_ms;
    if (e->compile_ms > a->max_ms) {
        a->max_ms = e->compile_ms;
        snprintf(a->worst, sizeof a->worst, "%s [%s]", e->name, e->arch);
    }
    return 0;
}

/* `fajit-tune warm` for Ampere, Hopper and Blackwell: everything compiles, clean logs,
 * and a second warm finds everything cached. */
START_TEST(warm_three_targets)
{
    static const char *const archs[] = {"sm_80", "sm_90a", "sm_100a"};
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    fj_variant vs[256];
    int per_arch = fj_warm_variants(80, vs, 256);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 3; i++) {
        int compiled = -1, cached = -1;
        fajit_status st = fajit_warm(ctx, archs[i], 0, &compiled, &cached);
        ck_assert_msg(st == FAJIT_OK, "warm %s: %s", archs[i], fajit_errmsg(ctx));
        ck_assert_int_eq(compiled, per_arch);
        ck_assert_int_eq(cached, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, 3 * per_arch);
    printf("nvrtc: %d kernels for sm_80, sm_90a, sm_100a in %.1f s wall (%.1f s compiling); "
           "max %d registers; slowest %.0f ms: %s\n", a.n,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, a.total_ms / 1e3,
           a.max_regs, a.max_ms, a.worst);
    /* A compile-time budget per kernel: a hand-written kernel must stay far from this. */
    ck_assert_msg(a.max_ms < 60000, "%s took %.0f ms to compile", a.worst, a.max_ms);
    fajit_ctx_destroy(ctx);

    /* A new context (as a new process would) finds every kernel in the cache. */
    ctx = compile_ctx();
    for (int i = 0; i < 3; i++) {
        int compiled = -1, cached = -1;
        ck_assert_int_eq(fajit_warm(ctx, archs[i], 1, &compiled, &cached), FAJIT_OK);
        ck_assert_int_eq(compiled, 0);
        ck_assert_int_eq(cached, per_arch);
    }
    fajit_counters c;
    fajit_counters_get(ctx, &c);
    ck_assert_uint_eq(c.compiles, 0);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* The portable FA2 kernel on the other targets it serves (Ampere/Ada/Hopper as plain sm_90,
 * Blackwell datacenter and consumer): the default configurations compile without spills. */
START_TEST(fa2_every_generation)
{
    static const char *const archs[] = {"sm_86", "sm_89", "sm_90", "sm_100", "sm_120"};
    static const int hdims[] = {64, 128, 256};
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++)
        for (size_t h = 0; h < 3; h++)
            for (int mask = 0; mask < 2; mask++) {
                fj_fa2_config c = fj_fa2_default(fj_arch_sm(archs[a]), hdims[h], mask);
                char why[256];
                ck_assert_msg(fj_fa2_check(&c, hdims[h], fj_arch_sm(archs[a]), why, sizeof why) == 0,
                              "default config invalid for %s d%d: %s", archs[a], hdims[h], why);
                fj_variant v;
                fj_variant_fa2(&v, &c, FJ_DT_BF16, hdims[h], mask);
                int compiled = 0;
                fajit_status st = fj_kernel_warm(ctx, &v, archs[a], &compiled);
                ck_assert_msg(st == FAJIT_OK, "%s: %s", archs[a], fajit_errmsg(ctx));
                n++;
            }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, n);
    printf("nvrtc: FA2 defaults for sm_86, sm_89, sm_90, sm_100, sm_120: %d kernels, max %d "
           "registers\n", n, a.max_regs);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* A broken source reports NVRTC's error and keeps the whole log. */
START_TEST(compile_error_is_reported)
{
    char why[512], err[512];
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    ck_assert_msg(nv != NULL, "%s", why);
    const char *text = "extern \"C\" __global__ void k(int *p) { p[0] = undefined_name; }\n";
    fj_src src = {"broken.cu", text, strlen(text)};
    fj_compile_out out;
    int rc = fj_nvrtc_compile(nv, "", &src, NULL, 0, "sm_90a", NULL, &out, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(out.cubin);
    ck_assert_ptr_nonnull(strstr(err, "sm_90a"));
    ck_assert_ptr_nonnull(strstr(out.log, "undefined_name"));
    ck_assert_ptr_nonnull(strstr(out.log, "broken.cu"));
    fj_compile_out_free(&out);

    /* A good one yields a CUBIN (ELF) and parsed resource figures. */
    text = "extern \"C\" __global__ void k(int *p) { p[threadIdx.x] = 1; }\n";
    fj_src good = {"good.cu", text, strlen(text)};
    rc = fj_nvrtc_compile(nv, "", &good, NULL, 0, "sm_80", NULL, &out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_gt(out.cubin_size, 4);
    ck_assert_mem_eq(out.cubin, "\177ELF", 4);
    ck_assert_int_gt(out.regs, 0);
    ck_assert_int_eq(out.spill_bytes, 0);
    fj_compile_out_free(&out);
}
END_TEST

/* Every embedded source is what the build embedded: the digest and the text agree. */
START_TEST(embedded_sources)
{
    ck_assert_int_ge(fj_embedded_count, 4);
    ck_assert_ptr_nonnull(fj_embedded_find("fajit_params.h"));
    ck_assert_ptr_nonnull(fj_embedded_find("attn_ref.cu"));
    ck_assert_ptr_nonnull(fj_embedded_find("attn_fwd_sm80.cu"));
    ck_assert_ptr_null(fj_embedded_find("nope.cu"));
    for (int i = 0; i < fj_embedded_count; i++) {
        const fj_embedded *e = &fj_embedded_sources[i];
        ck_assert_uint_eq(strlen(e->text), e->len);
        /* Self-contained: device code includes only embedded files (fajit_params.h has a
         * host-only <stdint.h> branch, which NVRTC never sees). */
        size_t n = strlen(e->name);
        if (strcmp(e->name + n - 3, ".cu") == 0 || strcmp(e->name + n - 4, ".cuh") == 0)
            ck_assert_msg(!strstr(e->text, "#include <"), "%s includes a system header",
                          e->name);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nvrtc");
    TCase *tc = tcase_create("nvrtc");
    tcase_set_timeout(tc, 2400);
    tcase_add_test(tc, embedded_sources);
    tcase_add_test(tc, compile_error_is_reported);
    tcase_add_test(tc, warm_three_targets);
    tcase_add_test(tc, fa2_every_generation);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
