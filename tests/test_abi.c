/* test_abi.c - the binary interface, in the `unit` suite: context pointers that are not
 * live contexts (destroyed, garbage, NULL) are refused at every entry point. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/api/internal.h"

TCase *fj_tcase_abi(void);

static fajit_ctx *none_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

static fajit_attn_desc fake_desc(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 2, 100, 130, 64, FAJIT_BF16);
    return d;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/*------ context pointers that are not live contexts ------*/

static int on_entry(void *user, const fajit_cache_entry *e)
{
    (void)user, (void)e;
    return 0;
}

/* Every public entry point taking a context refuses `c` without reading through it. */
static void all_refuse(fajit_ctx *c)
{
    const fajit_status bad = FAJIT_INVALID_ARGUMENT;
    fajit_attn_desc d = fake_desc();
    char buf[256];
    int a = 0, b = 0;
    int64_t x = 0, y = 0, z = 0;
    fajit_sysinfo si;
    fajit_device_info di;
    fajit_tune_opts to;
    fajit_tune_result tr;
    fajit_tune_opts_init(&to);
    if (c)   /* (NULL is a valid "no context" here) */
        ck_assert_int_eq(fajit_attn_check(c, &d), bad);
    ck_assert_int_eq(fajit_attn_fwd(c, &d, NULL), bad);
    ck_assert_int_eq(fajit_attn_fwd_reference(c, &d, NULL), bad);
    ck_assert_int_eq(fajit_dispatch_describe(c, "sm_90a", &d, buf, sizeof buf), bad);
    ck_assert_int_eq(fajit_cache_explain(c, "sm_90a", &d, buf, sizeof buf), bad);
    ck_assert_int_eq(fajit_warm(c, "sm_80", 1, &a, &b), bad);
    ck_assert_int_eq(fajit_warm_spec(c, "llama-3-8b", "sm_80", 1, &a, &b), bad);
    ck_assert_int_eq(fajit_tune(c, &d, &to, &tr), bad);
    ck_assert_int_eq(fajit_tune_spec(c, "llama-3-8b", &to, NULL, NULL), bad);
    ck_assert_int_eq(fajit_sysinfo_get(c, &si), bad);
    if (c)   /* device_info_get takes NULL: no context */
        ck_assert_int_eq(fajit_device_info_get(c, 0, &di), bad);
    ck_assert_int_eq(fajit_cache_list(c, on_entry, NULL), bad);
    ck_assert_int_eq(fajit_cache_verify(c, &a, &b), bad);
    ck_assert_int_eq(fajit_cache_clear(c), bad);
    ck_assert_int_eq(fajit_cache_stats(c, &x, &y, &z), bad);
    ck_assert_int_eq(fajit_cache_prune(c, 0, &x, &y), bad);
    ck_assert_int_eq(fajit_cache_export(c, "/tmp/fajit-abi-never.db", NULL, &a, &b), bad);
    ck_assert_int_eq(fajit_cache_import(c, "/tmp/fajit-abi-never.db", &a, &b, &a), bad);
    fajit_counters k;
    memset(&k, 0xff, sizeof k);
    fajit_counters_get(c, &k);
    ck_assert_uint_eq(k.calls, 0);
    ck_assert_uint_eq(k.fallback_launches, 0);
    if (c) {
        ck_assert_ptr_nonnull(strstr(fajit_errmsg(c), "not a live fajit context"));
        ck_assert_ptr_nonnull(strstr(fajit_compile_log(c), "not a live fajit context"));
    } else {
        ck_assert_str_eq(fajit_errmsg(c), "no context");
        ck_assert_str_eq(fajit_compile_log(c), "");
    }
    fajit_ctx_destroy(c);   /* a no-op */
}

START_TEST(ctx_destroyed)
{
    fajit_ctx *ctx = none_ctx();
    ck_assert(fj_ctx_live(ctx));
    fajit_attn_desc d = fake_desc();
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    fajit_ctx_destroy(ctx);
    /* No context is created from here on, so no new one can take the freed address. */
    ck_assert(!fj_ctx_live(ctx));
    all_refuse(ctx);
    fajit_ctx_destroy(ctx);   /* a second destroy is a no-op too */
}
END_TEST

START_TEST(ctx_garbage)
{
    int on_stack[64];
    memset(on_stack, 0x5a, sizeof on_stack);
    fajit_ctx *g = (fajit_ctx *)(void *)on_stack;
    ck_assert(!fj_ctx_live(g));
    all_refuse(g);
    all_refuse((fajit_ctx *)(uintptr_t)1);
    all_refuse((fajit_ctx *)(uintptr_t)0xdeadbeef0ull);
    /* A live context's bytes copied elsewhere are not a context either. */
    fajit_ctx *ctx = none_ctx();
    fajit_ctx *copy = malloc(sizeof *copy);
    memcpy(copy, ctx, sizeof *copy);
    ck_assert(!fj_ctx_live(copy));
    all_refuse(copy);
    free(copy);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(ctx_null)
{
    ck_assert(!fj_ctx_live(NULL));
    all_refuse(NULL);
    fajit_attn_desc d = fake_desc();
    ck_assert_int_eq(fajit_attn_check(NULL, &d), FAJIT_OK);   /* NULL: no context, checks run */
}
END_TEST

/* Many contexts created and destroyed in an interleaved order: each is live exactly
 * between its create and destroy (the registry's tombstones are reclaimed: many more
 * create/destroy cycles than it has slots). */
START_TEST(ctx_registry_churn)
{
    enum { N = 64 };
    fajit_ctx *live[N] = {0};
    unsigned seed = 12345;
    for (int round = 0; round < 6000; round++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % N);
        if (live[i]) {
            ck_assert(fj_ctx_live(live[i]));
            fajit_ctx_destroy(live[i]);
            live[i] = NULL;
        } else {
            live[i] = none_ctx();
        }
        if (round % 97 == 0)
            for (int j = 0; j < N; j++)
                if (live[j])
                    ck_assert(fj_ctx_live(live[j]));
    }
    for (int j = 0; j < N; j++)
        fajit_ctx_destroy(live[j]);
}
END_TEST

typedef struct hammer {
    fajit_ctx *ctx;
    _Atomic int stop;
    long checks, failures;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    long n = 0, bad = 0;
    while (!atomic_load(&h->stop) || n < 100000) {
        bad += !fj_ctx_live(h->ctx);
        n++;
    }
    h->checks = n, h->failures = bad;
    return NULL;
}

/* Lookups are lock-free: a live context stays live for threads checking it while other
 * contexts come and go. */
START_TEST(ctx_registry_concurrent)
{
    fajit_ctx *ctx = none_ctx();
    hammer h[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        h[i] = (hammer){.ctx = ctx};
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int r = 0; r < 300; r++) {
        fajit_ctx *a = none_ctx(), *b = none_ctx();
        fajit_ctx_destroy(a);
        ck_assert(fj_ctx_live(b));
        fajit_ctx_destroy(b);
    }
    for (int i = 0; i < 3; i++)
        atomic_store(&h[i].stop, 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(h[i].failures, 0);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The cost of the check on fajit_attn_fwd's path (printed; the bound only catches a lock
 * or a system call creeping in, on a loaded machine or under sanitizers). */
START_TEST(ctx_check_cost)
{
    fajit_ctx *ctx = none_ctx(), *others[16];
    for (int i = 0; i < 16; i++)
        others[i] = none_ctx();
    const long n = 10 * 1000 * 1000;
    long live = 0;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        __asm__ volatile("" : : "r"(ctx) : "memory");
        live += fj_ctx_live(ctx);
    }
    double ns = (now_s() - t0) / (double)n * 1e9;
    ck_assert_int_eq(live, n);
    fajit_attn_desc d = fake_desc();
    const long m = 1000 * 1000;
    long fails = 0;
    t0 = now_s();
    for (long i = 0; i < m; i++)   /* (no ck_assert inside: each one writes to a pipe) */
        fails += fajit_attn_check(ctx, &d) != FAJIT_OK;
    double ns_check = (now_s() - t0) / (double)m * 1e9;
    ck_assert_int_eq(fails, 0);
    printf("test_abi: fj_ctx_live %.2f ns/call (10M calls, 17 live contexts); "
           "fajit_attn_check (ctx + descriptor) %.1f ns/call\n", ns, ns_check);
    ck_assert_msg(ns < 500, "fj_ctx_live takes %.1f ns", ns);
    for (int i = 0; i < 16; i++)
        fajit_ctx_destroy(others[i]);
    fajit_ctx_destroy(ctx);
}
END_TEST

TCase *fj_tcase_abi(void)
{
    TCase *tc = tcase_create("abi");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ctx_destroyed);
    tcase_add_test(tc, ctx_garbage);
    tcase_add_test(tc, ctx_null);
    tcase_add_test(tc, ctx_registry_churn);
    tcase_add_test(tc, ctx_registry_concurrent);
    tcase_add_test(tc, ctx_check_cost);
    return tc;
}
