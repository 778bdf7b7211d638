/* test_nvrtc.c - the `nvrtc` suite: every embedded kernel variant compiles with NVRTC for
 * every supported target, with no GPU. Compile logs are read: no spills, no local memory,
 * no ptxas warning that means serialized wgmma or an ignored setmaxnreg. The compile
 * policies through a fake driver and the TCases "hostcost" and "memory" are in
 * test_nvrtc_policies.c. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/families/fa2.h"
#include "../src/families/fa3.h"
#include "embedded.h"
#include "test_nvrtc.h"

char g_dir[64];
static const char *const k_bad_warnings[] = {"C7508", "C7510", "C7511", "C7515", "C7519"};

void make_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fajit-nvrtc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A context on the test's cache directory. */
fajit_ctx *test_ctx(int device, fajit_policy policy, int64_t cache_max_bytes)
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

fajit_ctx *compile_ctx(void) { return test_ctx(FAJIT_DEVICE_NONE, FAJIT_POLICY_BLOCKING, 0); }

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

/* head_dim_v != head_dim (FJ_HEAD_DIM_V): DeepSeek's 192 / 128 on the Hopper kernel as
 * dispatch picks it untuned (bf16 and f16, every mask, contiguous and paged K/V with pages
 * of 16 and 128, short and long queries, with softcap, sinks and ALiBi too) and every tuning
 * candidate of bf16 causal and unmasked; 128 / 64 and 256 / 128; the portable kernel's
 * defaults on sm_80 and sm_90; the reference kernel for sm_80 and sm_90a. Clean logs
 * (audit_entry), no wgmma serialized (C7512). */
START_TEST(head_dim_v_variants)
{
    const fj_target t = {90, 1, 132, 0, 1, NULL};
    const float *const stand_in = (const float *)(uintptr_t)256;
    make_dir();
    fajit_ctx *ctx = compile_ctx();
    int n = 0;
    static const int dims[][2] = {{192, 128}, {128, 64}, {256, 128}};
    for (int h = 0; h < 3; h++)
        for (int m = 0; m < 3; m++)
            for (int paged = 0; paged < 3; paged++)
                for (int q = 0; q < 4; q++)   /* (q & 1: short queries, q & 2: f16) */
                    for (int f = 0; f < 2; f++) {
                        if (h > 0 && (paged == 2 || q & 2 || f))
                            continue;   /* (the other shapes: the plain variants) */
                        const int hd = dims[h][0], dv = dims[h][1];
                        fajit_attn_desc d;
                        void *ptr = (void *)(uintptr_t)0x100000;
                        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 16, 16, q & 1 ? 512 : 8192,
                                             8192, hd, q & 2 ? FAJIT_F16 : FAJIT_BF16);
                        d.mask = (fajit_mask)m;
                        d.head_dim_v = dv;
                        d.v_head_stride = d.o_head_stride = dv;
                        d.v_row_stride = d.o_row_stride = 16 * dv;
                        if (paged) {
                            d.block_table = (const int32_t *)(uintptr_t)0x3000;
                            d.page_size = paged == 1 ? 16 : 128;
                            d.block_table_stride = 8192 / d.page_size;
                            d.num_pages = 4 * (int)d.block_table_stride;
                        }
                        d.softcap = f ? 30.f : 0.f;
                        d.sinks = d.alibi_slopes = f ? stand_in : NULL;
                        fj_kcfg c[32];
                        int k = 1;
                        ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c[0]), 0);
                        ck_assert_ptr_nonnull(fj_fa3_of(&c[0]));
                        if (h == 0 && m < 2 && !paged && !f && q == 0)
                            k = c[0].fam->candidates(&d, &t, c, 32);
                        for (int i = 0; i < k; i++) {
                            fj_kernels ks;
                            int compiled;
                            c[i].fam->kernels(&c[i], &d, &ks);
                            ck_assert_msg(strstr(ks.v[0].preamble, "FJ_HEAD_DIM_V"), "%s",
                                          ks.v[0].preamble);
                            fajit_status st = fj_kernel_warm(ctx, &ks.v[0], "sm_90a", &compiled);
                            ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[0].name,
                                          fajit_errmsg(ctx));
                            n += compiled;
                        }
                    }
    /* the portable kernel's defaults on sm_80 and sm_90: 192 / 128 in both dtypes and every
     * mask, 128 / 64 and 128 / 72 causal */
    static const int dims2[][2] = {{192, 128}, {128, 64}, {128, 72}};
    const char *const arch2[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++)
        for (int h = 0; h < 3; h++)
            for (int m = 0; m < 3; m++)
                for (int dt = 0; dt < 2; dt++) {
                    if (h > 0 && (m != FAJIT_MASK_CAUSAL || dt))
                        continue;
                    const fj_target t2 = {a ? 90 : 80, 0, 132, 0, 0, NULL};
                    fajit_attn_desc d;
                    void *ptr = (void *)(uintptr_t)0x100000;
                    fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 16, 16, 4096, 4096,
                                         dims2[h][0], (fajit_dtype)dt);
                    d.mask = (fajit_mask)m;
                    d.head_dim_v = dims2[h][1];
                    fj_kcfg c;
                    fj_kernels ks;
                    int compiled;
                    ck_assert_int_eq(fj_kcfg_default(&d, &t2, FAJIT_FAMILY_AUTO, &c), 0);
                    ck_assert_ptr_nonnull(fj_fa2_of(&c));
                    c.fam->kernels(&c, &d, &ks);
                    ck_assert_msg(strstr(ks.v[0].preamble, "FJ_HEAD_DIM_V"), "%s",
                                  ks.v[0].preamble);
                    fajit_status st = fj_kernel_warm(ctx, &ks.v[0], arch2[a], &compiled);
                    ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[0].name, fajit_errmsg(ctx));
                    n += compiled;
                }
    /* the reference kernel */
    const fj_target tr = {80, 0, 108, 0, 0, NULL};
    for (int a = 0; a < 2; a++)
        for (int dt = 0; dt < 2; dt++) {
            fajit_attn_desc d;
            void *ptr = (void *)(uintptr_t)0x100000;
            fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 1, 16, 16, 512, 512, 192,
                                 (fajit_dtype)dt);
            d.head_dim_v = 128;
            fj_kcfg c;
            fj_kernels ks;
            int compiled;
            fj_family_ref.default_cfg(&d, &tr, &c);
            fj_family_ref.kernels(&c, &d, &ks);
            fajit_status st = fj_kernel_warm(ctx, &ks.v[0], a ? "sm_90a" : "sm_80", &compiled);
            ck_assert_msg(st == FAJIT_OK, "%s: %s", ks.v[0].name, fajit_errmsg(ctx));
            n += compiled;
        }
    audit a = {0};
    ck_assert_int_eq(fj_cache_list(ctx->cache, audit_entry, &a), 0);
    ck_assert_int_eq(a.n, n);
    ck_assert_int_eq(fj_cache_list(ctx->cache, no_serialized_wgmma, NULL), 0);
    printf("nvrtc: %d head_dim_v variants compiled, max %d registers, slowest %.0f ms: %s\n",
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
    tcase_add_test(tc, head_dim_v_variants);
    tcase_add_test(tc, mixed_variants);
    tcase_add_test(tc, cache_cap_prunes);
    fj_nvrtc_tests_policies(tc);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, fj_tcase_hostcost());
    suite_add_tcase(s, fj_tcase_memory());
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
