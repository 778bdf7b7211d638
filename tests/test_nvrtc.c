/* test_nvrtc.c - the `nvrtc` suite: every embedded kernel variant compiles with NVRTC for
 * every supported target, with no GPU. Compile logs are read: no spills, no local memory,
 * no ptxas warning that means serialized wgmma or an ignored setmaxnreg. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/api/internal.h"
#include "../src/families/fa2.h"
#include "../src/families/fa3.h"
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

/* A context on the test's cache directory. */
static fajit_ctx *test_ctx(int device, fajit_policy policy, int64_t cache_max_bytes)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = device;
    o.cache_dir = g_dir;
    o.policy = policy;
    o.cache_max_bytes = cache_max_bytes;
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

static fajit_ctx *compile_ctx(void) { return test_ctx(FAJIT_DEVICE_NONE, FAJIT_POLICY_BLOCKING, 0); }

typedef struct audit {
    int n, max_regs, fa4;   /* fa4: Blackwell-family kernels (sm_100a) */
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
    a->fa4 += strncmp(e->name, "fa4 ", 4) == 0 && strcmp(e->arch, "sm_100a") == 0;
    a->total_ms += e->compile_ms;
    if (e->compile_ms > a->max_ms) {
        a->max_ms = e->compile_ms;
        snprintf(a->worst, sizeof a->worst, "%s [%s]", e->name, e->arch);
    }
    return 0;
}

/* No wgmma serialized for lack of registers (C7512: a performance warning, which some
 * tuning candidates of the kernel without features get; fa3_feature_variants asserts it). */
static int no_serialized_wgmma(void *user, const fj_entry *e)
{
    (void)user;
    ck_assert_msg(!strstr(e->log, "C7512"), "%s [%s]: ptxas warning C7512:\n%s", e->name,
                  e->arch, e->log);
    return 0;
}

/* `fajit-tune warm` for Ampere, Hopper and Blackwell: everything compiles, clean logs,
 * and a second warm finds everything cached. */
START_TEST(warm_three_targets)
{
    static const char *const archs[] = {"sm_80", "sm_90a", "sm_100a"};
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    static fj_variant vs[1000];
    int per_arch[3];
    for (int i = 0; i < 3; i++)
        per_arch[i] = fj_warm_variants(archs[i], vs, 1000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 3; i++) {
        int compiled = -1, cached = -1;
        fajit_status st = fajit_warm(ctx, archs[i], 0, &compiled, &cached);
        ck_assert_msg(st == FAJIT_OK, "warm %s: %s", archs[i], fajit_errmsg(ctx));
        ck_assert_int_eq(compiled, per_arch[i]);
        ck_assert_int_eq(cached, 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, per_arch[0] + per_arch[1] + per_arch[2]);
    ck_assert_int_gt(per_arch[1], per_arch[0]);   /* sm_90a also has the FA3 kernels */
    ck_assert_int_gt(a.fa4, 0);                    /* sm_100a has the FA4 ones */
    printf("nvrtc: %d kernels for sm_80, sm_90a, sm_100a (%d of them fa4) in %.1f s wall (%.1f s "
           "compiling); max %d registers; slowest %.0f ms: %s\n", a.n, a.fa4,
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
        ck_assert_int_eq(cached, per_arch[i]);
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
                fj_kcfg k;
                fj_kernels ks;
                fajit_attn_desc d;
                memset(&d, 0, sizeof d);
                d.dtype = FAJIT_BF16, d.head_dim = hdims[h], d.mask = (fajit_mask)mask;
                fj_fa2_kcfg(&c, &k);
                k.fam->kernels(&k, &d, &ks);
                int compiled = 0;
                fajit_status st = fj_kernel_warm(ctx, &ks.v[0], archs[a], &compiled);
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

/* The timing harnesses' L2 flush (l2_flush.cu) compiles for every generation, clean. */
START_TEST(l2_flush_compiles)
{
    static const char *const archs[] = {"sm_80", "sm_90a", "sm_100a", "sm_120"};
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    fj_variant v;
    fj_l2_flush_variant(&v);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        int compiled = 0;
        ck_assert_msg(fj_kernel_warm(ctx, &v, archs[a], &compiled) == FAJIT_OK, "%s: %s",
                      archs[a], fajit_errmsg(ctx));
        ck_assert_int_eq(compiled, 1);
    }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, 4);
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



/* Every tuning candidate of the common problems compiles; those the tuner would prune after
 * compiling (spills, local memory, serialization warnings) are counted with their reason. */
typedef struct prune_count {
    int ok, pruned;
} prune_count;

static int classify(void *user, const fj_entry *e)
{
    prune_count *pc = user;
    int regs, smem, spill, stack, bad = e->spill_bytes > 0;
    fj_parse_ptxas_log(e->log, &regs, &smem, &spill, &stack);
    bad |= stack > 0;
    for (size_t i = 0; i < sizeof k_bad_warnings / sizeof k_bad_warnings[0]; i++)
        bad |= strstr(e->log, k_bad_warnings[i]) != NULL;
    if (bad && strncmp(e->name, "ref", 3) != 0) {
        pc->pruned++;
        printf("nvrtc: candidate pruned after compiling: %s [%s]: %d B spills, %d B stack\n",
               e->name, e->arch, e->spill_bytes, stack);
    } else {
        pc->ok++;
    }
    return 0;
}

/* A context with a cache cap keeps the cache under it: each new kernel stays, the least
 * recently used go. */
START_TEST(cache_cap_prunes)
{
    static fj_variant vs[1000];
    ck_assert_int_ge(fj_warm_variants("sm_80", vs, 1000), 3);
    make_dir();
    /* a cap below any kernel: only the newest stays */
    fajit_ctx *ctx = test_ctx(FAJIT_DEVICE_NONE, FAJIT_POLICY_BLOCKING, 1);
    int compiled = 0, cached = 0;
    ck_assert_int_eq(fj_warm_list(ctx, "sm_80", vs, 3, 1, &compiled, &cached), FAJIT_OK);
    ck_assert_int_eq(compiled, 3);
    int64_t entries = 0, bytes = 0, file_bytes = 0;
    ck_assert_int_eq(fajit_cache_stats(ctx, &entries, &bytes, &file_bytes), FAJIT_OK);
    ck_assert_int_eq(entries, 1);
    /* the one kept is the last compiled */
    compiled = cached = 0;
    ck_assert_int_eq(fj_warm_list(ctx, "sm_80", vs + 2, 1, 1, &compiled, &cached), FAJIT_OK);
    ck_assert_int_eq(cached, 1);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* The Hopper kernel's paged variants (FJ_FA3_PAGED) that dispatch picks untuned for paged
 * prefill: every head_dim class, mask and a range of page sizes, and every paged candidate of
 * head_dim 128 causal, compile with clean logs (no spills: the producer's page arithmetic
 * lives in its 32 registers). */
START_TEST(fa3_paged_variants)
{
    static const int hdims[] = {64, 96, 128, 192, 256}, pages[] = {8, 16, 64, 256};
    const fj_target t = {90, 1, 132, 0, 1, NULL};   /* paged prefill on the Hopper kernel (the default) */
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0;
    for (int h = 0; h < 5; h++)
        for (int m = 0; m < 3; m++)
            for (int pi = 0; pi < 4; pi++)
                for (int q = 0; q < 2; q++) {
                    fajit_attn_desc d;
                    void *ptr = (void *)(uintptr_t)0x100000;
                    fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 32, 8, q ? 512 : 8192, 8192,
                                         hdims[h], FAJIT_BF16);
                    d.mask = (fajit_mask)m;
                    d.block_table = (const int32_t *)(uintptr_t)0x3000;
                    d.page_size = pages[pi];
                    d.block_table_stride = 8192 / pages[pi];
                    d.num_pages = 4096;
                    fj_kcfg c[32];
                    int k = 1;
                    ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c[0]), 0);
                    ck_assert_ptr_nonnull(fj_fa3_of(&c[0]));
                    if (hdims[h] == 128 && m == FAJIT_MASK_CAUSAL && pages[pi] == 16)
                        k = c[0].fam->candidates(&d, &t, c, 32);
                    for (int i = 0; i < k; i++) {
                        fj_kernels ks;
                        int compiled;
                        c[i].fam->kernels(&c[i], &d, &ks);
                        fajit_status st = fj_kernel_warm(ctx, &ks.v[0], "sm_90a", &compiled);
                        ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[0].name, fajit_errmsg(ctx));
                        n += compiled;
                    }
                }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, n);
    printf("nvrtc: %d paged Hopper variants compiled, max %d registers, slowest %.0f ms: %s\n",
           n, a.max_regs, a.max_ms, a.worst);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* The Hopper kernel's model-feature variants (softcap, sinks, ALiBi: FJ_SOFTCAP, FJ_SINKS,
 * FJ_ALIBI) that dispatch picks untuned: every head_dim class and mask, contiguous and paged
 * K/V, short and long queries, bf16 and f16, with all three features; each feature alone and
 * every candidate of head_dim 128 causal. Clean logs (audit_entry), and no wgmma serialized
 * (C7512) either. */
START_TEST(fa3_feature_variants)
{
    static const int hdims[] = {64, 96, 128, 192, 256};
    const fj_target t = {90, 1, 132, 0, 1, NULL};
    const float *const stand_in = (const float *)(uintptr_t)256;
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0;
    for (int h = 0; h < 5; h++)
        for (int m = 0; m < 3; m++)
            for (int paged = 0; paged < 2; paged++)
                for (int q = 0; q < 4; q++)   /* (q & 1: short queries, q & 2: f16) */
                    for (int f = 0; f < 4; f++) {
                        const int one = hdims[h] == 128 && m == FAJIT_MASK_CAUSAL && !paged;
                        if (f < 3 && (!one || q & 2))   /* each alone: head_dim 128 causal */
                            continue;
                        fajit_attn_desc d;
                        void *ptr = (void *)(uintptr_t)0x100000;
                        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 32, 8, q & 1 ? 512 : 8192,
                                             8192, hdims[h], q & 2 ? FAJIT_F16 : FAJIT_BF16);
                        d.mask = (fajit_mask)m;
                        if (paged) {
                            d.block_table = (const int32_t *)(uintptr_t)0x3000;
                            d.page_size = 16, d.block_table_stride = 8192 / 16;
                            d.num_pages = 4096;
                        }
                        d.softcap = f == 0 || f == 3 ? 30.f : 0.f;
                        d.sinks = f == 1 || f == 3 ? stand_in : NULL;
                        d.alibi_slopes = f == 2 || f == 3 ? stand_in : NULL;
                        fj_kcfg c[32];
                        int k = 1;
                        ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c[0]), 0);
                        ck_assert_ptr_nonnull(fj_fa3_of(&c[0]));
                        if (one && f == 3 && q == 0)
                            k = c[0].fam->candidates(&d, &t, c, 32);
                        for (int i = 0; i < k; i++) {
                            fj_kernels ks;
                            int compiled;
                            c[i].fam->kernels(&c[i], &d, &ks);
                            fajit_status st = fj_kernel_warm(ctx, &ks.v[0], "sm_90a", &compiled);
                            ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[0].name,
                                          fajit_errmsg(ctx));
                            n += compiled;
                        }
                    }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, n);
    ck_assert_int_eq(fj_cache_list(ctx->cache, no_serialized_wgmma, NULL), 0);
    printf("nvrtc: %d Hopper feature variants compiled, max %d registers, slowest %.0f ms: %s\n",
           n, a.max_regs, a.max_ms, a.worst);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

/* The mixed plan's kernels (varlen paged batches on sm_90a): the paged Hopper kernel and the
 * decode split and combine steps in their FJ_DEC_QMAX variant, for each head_dim, dtype,
 * mask and a few page sizes and head ratios: clean logs, no spills (audit_entry). */
START_TEST(mixed_variants)
{
    static const int hdims[] = {64, 128, 256}, pages[] = {16, 64}, groups[] = {1, 4};
    const fj_target t = {90, 1, 132, 0, 1, NULL};   /* paged prefill on the Hopper kernel (the default) */
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0, qmax = 0;
    for (int h = 0; h < 3; h++)
        for (int dt = 0; dt < 2; dt++)
            for (int m = 0; m < 3; m++)
                for (int pi = 0; pi < 2; pi++)
                    for (int g = 0; g < 2; g++) {
                        fajit_attn_desc d;
                        void *ptr = (void *)(uintptr_t)0x100000;
                        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 8 * groups[g], 8, 512,
                                             8192, hdims[h], (fajit_dtype)dt);
                        d.mask = (fajit_mask)m;
                        d.block_table = (const int32_t *)(uintptr_t)0x3000;
                        d.page_size = pages[pi];
                        d.block_table_stride = 8192 / pages[pi];
                        d.num_pages = 4096;
                        d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
                        d.total_q = 1024;
                        fj_kcfg c;
                        ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c), 0);
                        ck_assert_str_eq(c.fam->name, "mixed");
                        fj_kernels ks;
                        c.fam->kernels(&c, &d, &ks);
                        ck_assert_int_eq(ks.n, 3);
                        for (int i = 0; i < ks.n; i++) {
                            int compiled;
                            fajit_status st = fj_kernel_warm(ctx, &ks.v[i], "sm_90a", &compiled);
                            ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[i].name,
                                          fajit_errmsg(ctx));
                            n += compiled;
                            qmax += compiled && strstr(ks.v[i].name, " qmax") != NULL;
                        }
                    }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, n);
    ck_assert_int_gt(qmax, 0);
    printf("nvrtc: %d mixed-plan variants compiled (%d decode QMAX), max %d registers, slowest "
           "%.0f ms: %s\n", n, qmax, a.max_regs, a.max_ms, a.worst);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

START_TEST(candidate_spaces)
{
    static const char *const archs[] = {"sm_80", "sm_90a", "sm_100a"};
    static const int hdims[] = {64, 128, 256};
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0;
    for (int a = 0; a < 3; a++)
        for (int h = 0; h < 3; h++)
            for (int mask = 0; mask < 2; mask++) {
                fajit_attn_desc d;
                memset(&d, 0, sizeof d);
                d.dtype = FAJIT_BF16, d.head_dim = hdims[h], d.mask = (fajit_mask)mask;
                fj_kcfg c[48];
                const fj_target t = {fj_arch_sm(archs[a]), fj_arch_is_a(archs[a]), 0, 0, 0, NULL};
                int k = fj_kcfg_candidates(&d, &t, c, 48);
                ck_assert_int_ge(k, 1);
                for (int i = 0; i < k; i++) {
                    fj_kernels ks;
                    int compiled;
                    if (c[i].fam == &fj_family_fa4)
                        continue;   /* every fa4 candidate: test_nvrtc_sm100.c */
                    c[i].fam->kernels(&c[i], &d, &ks);
                    fajit_status st = fj_kernel_warm(ctx, &ks.v[0], archs[a], &compiled);
                    ck_assert_msg(st == FAJIT_OK, "%s: %s", archs[a], fajit_errmsg(ctx));
                    n++;
                }
            }
    prune_count pc = {0, 0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, classify, &pc), 0);
    printf("nvrtc: %d candidate compiles for sm_80, sm_90a, sm_100a (hdim 64/128/256, none/causal): "
           "%d distinct kernels, %d usable, %d pruned with a reason\n", n, pc.ok + pc.pruned,
           pc.ok, pc.pruned);
    ck_assert_int_gt(pc.ok, 0);
    fajit_ctx_destroy(ctx);
    remove_dir();
}
END_TEST

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

int main(void)
{
    Suite *s = suite_create("nvrtc");
    TCase *tc = tcase_create("nvrtc");
    tcase_set_timeout(tc, 2400);
    tcase_add_test(tc, embedded_sources);
    tcase_add_test(tc, compile_error_is_reported);
    tcase_add_test(tc, warm_three_targets);
    tcase_add_test(tc, fa2_every_generation);
    tcase_add_test(tc, l2_flush_compiles);
    tcase_add_test(tc, candidate_spaces);
    tcase_add_test(tc, fa3_paged_variants);
    tcase_add_test(tc, fa3_feature_variants);
    tcase_add_test(tc, mixed_variants);
    tcase_add_test(tc, cache_cap_prunes);
    tcase_add_test(tc, policies_with_fake_driver);
    tcase_add_test(tc, warm_spec_serves_strict);
    suite_add_tcase(s, tc);
    TCase *th = tcase_create("hostcost");   /* alone: CK_RUN_CASE=hostcost */
    tcase_set_timeout(th, 600);
    tcase_add_test(th, decode_warm_call);
    tcase_add_test(th, decode_pack_plans);
    suite_add_tcase(s, th);
    TCase *tm = tcase_create("memory");   /* alone: CK_RUN_CASE=memory */
    tcase_set_timeout(tm, 600);
    tcase_add_test(tm, memory_warm_threads);
    suite_add_tcase(s, tm);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
