/* test_unit.c - the `unit` suite: no GPU, no NVRTC. Status table, contexts (options,
 * environment, fallbacks, per-thread messages), and main. Descriptor rules in
 * test_unit_desc.c, parameter layouts and tile orders in test_unit_layout.c; error paths
 * through a fake driver table (fake_cuda.c) in test_unit_driver.c, the tuner and the family
 * registry in test_unit_tune.c; the validation gate in test_gate*.c; plus the decode
 * family's host half (test_unit_decode*.c) and the cache tests of test_cache*.c (kernel-key
 * known answers: test_cache_key.c). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit_util.h"

TCase *fj_tcase_desc(void);
TCase *fj_tcase_layout(void);
TCase *fj_tcase_cache(void);
TCase *fj_tcase_spec(void);
TCase *fj_tcase_abi(void);
TCase *fj_tcase_gate(void);
TCase *fj_tcase_gate_features(void);
TCase *fj_tcase_decode(void);
TCase *fj_tcase_features(void);
TCase *fj_tcase_fa3_features(void);
TCase *fj_tcase_other_nvrtc(void);
TCase *fj_tcase_autotune(void);          /* test_unit_tune.c */
void fj_unit_tests_driver(TCase *tc);   /* test_unit_driver.c */

/*------ status table ------*/

START_TEST(status_table)
{
    ck_assert_str_eq(fajit_status_name(FAJIT_OK), "FAJIT_OK");
    ck_assert_str_eq(fajit_status_name(FAJIT_INVALID_ARGUMENT), "FAJIT_INVALID_ARGUMENT");
    ck_assert_str_eq(fajit_status_name(FAJIT_IO_ERROR), "FAJIT_IO_ERROR");
    ck_assert_str_eq(fajit_status_name((fajit_status)999), "FAJIT_UNKNOWN_STATUS");
    ck_assert_str_eq(fajit_strerror(FAJIT_CACHE_MISS),
                     "kernel not in cache and compiling is not allowed (STRICT policy)");
    /* Values are stable: a renumbering breaks every embedder. */
    ck_assert_int_eq(FAJIT_NO_DRIVER, 3);
    ck_assert_int_eq(FAJIT_COMPILE_FAILED, 6);
    ck_assert_int_eq(FAJIT_IO_ERROR, 11);
    ck_assert_int_eq(FAJIT_VALIDATION_FAILED, 12);
    for (int s = 0; s <= FAJIT_VALIDATION_FAILED; s++) {
        ck_assert_str_ne(fajit_status_name((fajit_status)s), "FAJIT_UNKNOWN_STATUS");
        ck_assert_str_ne(fajit_strerror((fajit_status)s), "unknown status code");
    }
    ck_assert_str_eq(fajit_version_string(), FAJIT_VERSION_STRING);
    ck_assert_uint_eq(fajit_version_number(), FAJIT_VERSION_NUMBER);
}
END_TEST

/* FAJIT_LINEINFO: 0 or 1 only; 1 compiles with -lineinfo under other keys (the line tables
 * are other bytes: a kernel compiled without them must never be served for it). */
START_TEST(lineinfo_variable)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    fajit_ctx *plain = NULL, *lined = NULL, *bad = NULL;
    unsetenv("FAJIT_LINEINFO");
    ck_assert_int_eq(fajit_ctx_create(&plain, &o), FAJIT_OK);
    ck_assert_int_eq(plain->lineinfo, 0);
    setenv("FAJIT_LINEINFO", "1", 1);
    ck_assert_int_eq(fajit_ctx_create(&lined, &o), FAJIT_OK);
    ck_assert_int_eq(lined->lineinfo, 1);
    setenv("FAJIT_LINEINFO", "on", 1);
    ck_assert_int_eq(fajit_ctx_create(&bad, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(bad), "FAJIT_LINEINFO must be 0 or 1, got 'on'"));
    unsetenv("FAJIT_LINEINFO");

    fajit_attn_desc d = unit_desc();
    fj_target t = {.sm = 90, .arch_a = 1};
    fj_kcfg c;
    ck_assert_int_eq(fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &c), 0);
    fj_kernels ks;
    c.fam->kernels(&c, &d, &ks);
    fj_key k_plain, k_lined, k_plain2;
    ck_assert_int_eq(fj_kernel_key(plain, &ks.v[0], "sm_90a", 13000, &k_plain), FAJIT_OK);
    ck_assert_int_eq(fj_kernel_key(lined, &ks.v[0], "sm_90a", 13000, &k_lined), FAJIT_OK);
    ck_assert_int_eq(fj_kernel_key(plain, &ks.v[0], "sm_90a", 13000, &k_plain2), FAJIT_OK);
    ck_assert_int_ne(memcmp(&k_plain, &k_lined, sizeof k_plain), 0);
    ck_assert_int_eq(memcmp(&k_plain, &k_plain2, sizeof k_plain), 0);
    fajit_ctx_destroy(plain);
    fajit_ctx_destroy(lined);
    fajit_ctx_destroy(bad);
}
END_TEST

/* Threads sharing a context each read their own last error, never another thread's. */
typedef struct {
    fajit_ctx *ctx;
    int head_dim;
    pthread_barrier_t *bar;
    int ok;
} err_thread;

static void *err_worker(void *arg)
{
    err_thread *t = arg;
    char want[64];
    fajit_attn_desc d = unit_desc();
    d.head_dim = t->head_dim;
    snprintf(want, sizeof want, "got %d", t->head_dim);
    t->ok = 1;
    for (int i = 0; i < 2000; i++) {
        if (i == 0)
            pthread_barrier_wait(t->bar);
        if (fajit_attn_check(t->ctx, &d) == FAJIT_OK ||
            !strstr(fajit_errmsg(t->ctx), want))
            t->ok = 0;
    }
    return NULL;
}

START_TEST(errmsg_per_thread)
{
    fajit_ctx *ctx = unit_memory_ctx();
    ck_assert_str_eq(fajit_errmsg(ctx), "");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    err_thread a = {ctx, 7, &bar, 0}, b = {ctx, 264, &bar, 0};
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, err_worker, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, err_worker, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&bar);
    ck_assert_msg(a.ok && b.ok, "a thread read another thread's message");
    ck_assert_str_eq(fajit_errmsg(ctx), "");   /* this thread failed nothing */
    /* a thread keeps its last failure per context */
    fajit_ctx *other = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    d.head_dim = 7;
    ck_assert_int_ne(fajit_attn_check(ctx, &d), FAJIT_OK);
    d.head_dim = 264;
    ck_assert_int_ne(fajit_attn_check(other, &d), FAJIT_OK);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 7"));
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(other), "got 264"));
    fajit_ctx_destroy(other);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(arch_names)
{
    ck_assert_int_eq(fj_arch_sm("sm_80"), 80);
    ck_assert_int_eq(fj_arch_sm("sm_90a"), 90);
    ck_assert_int_eq(fj_arch_sm("sm_100a"), 100);
    ck_assert_int_eq(fj_arch_sm("sm_120"), 120);
    ck_assert_int_eq(fj_arch_sm("sm_90x"), -1);
    ck_assert_int_eq(fj_arch_sm("compute_90"), -1);
    ck_assert_int_eq(fj_arch_sm(""), -1);
    ck_assert_int_eq(fj_arch_sm(NULL), -1);
    fajit_ctx *ctx = unit_memory_ctx();
    ck_assert_int_eq(fajit_warm(ctx, "sm_9O", 1, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 'sm_9O'"));
    ck_assert_int_eq(fajit_warm(ctx, "sm_75", 1, NULL, NULL), FAJIT_UNSUPPORTED);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ contexts: options, environment, fallbacks ------*/

typedef struct log_sink {
    int n;
    char last[512];
} log_sink;

static void sink(void *user, fajit_log_level level, const char *msg)
{
    log_sink *s = user;
    (void)level;
    s->n++;
    snprintf(s->last, sizeof s->last, "%s", msg);
}

START_TEST(ctx_options)
{
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(NULL, NULL), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(NULL);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    ck_assert_int_eq(o.device, 0);
    ck_assert_int_eq(o.policy, FAJIT_POLICY_BLOCKING);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    o.policy = (fajit_policy)5;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "policy must be"));
    fajit_ctx_destroy(ctx);

    o.policy = FAJIT_POLICY_BLOCKING;
    setenv("FAJIT_POLICY", "sometimes", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "got 'sometimes'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_POLICY", "strict", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.policy, FAJIT_POLICY_STRICT);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_POLICY");
    setenv("FAJIT_FAMILY", "fa5", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_FAMILY must be auto, fa2, fa3, decode, fa4, mixed, got 'fa5'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_FAMILY", "ref", 1);   /* the oracle is not a dispatch choice */
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_FAMILY", "FA2", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.family, FAJIT_FAMILY_FA2);
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_FAMILY");
    o.cache_max_bytes = -5;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cache_max_bytes must be >= 0 (0: no cap), got -5"));
    fajit_ctx_destroy(ctx);
    o.cache_max_bytes = 0;
    setenv("FAJIT_CACHE_MAX_MB", "64k", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "FAJIT_CACHE_MAX_MB must be a whole number of MiB >= 0 (0: no cap), got '64k'"));
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_CACHE_MAX_MB", "64", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.cache_max_bytes, 64ll << 20);
    ck_assert_int_eq(fajit_cache_prune(ctx, -1, NULL, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_cache_prune(ctx, 0, NULL, NULL), FAJIT_OK);   /* memory cache */
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_CACHE_MAX_MB");
}
END_TEST

START_TEST(ctx_cache_location)
{
    char dir[] = "/tmp/fajit-unit-XXXXXX", want[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    fajit_sysinfo si;
    fajit_ctx *ctx;

    /* FAJIT_CACHE_DIR beats XDG_CACHE_HOME; the option beats both */
    setenv("XDG_CACHE_HOME", dir, 1);
    unsetenv("FAJIT_CACHE_DIR");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    snprintf(want, sizeof want, "%s/fajit/", dir);
    ck_assert_ptr_nonnull(si.cache_path);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    snprintf(want, sizeof want, "%s/env", dir);
    setenv("FAJIT_CACHE_DIR", want, 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    snprintf(want, sizeof want, "%s/opt", dir);
    o.cache_dir = want;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_int_eq(strncmp(si.cache_path, want, strlen(want)), 0);
    fajit_ctx_destroy(ctx);

    /* nothing set at all: memory only, with a warning through the log callback */
    unsetenv("FAJIT_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("HOME");
    log_sink s = {0};
    o.cache_dir = NULL;
    o.log = sink;
    o.log_user = &s;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_sysinfo_get(ctx, &si);
    ck_assert_ptr_null(si.cache_path);
    ck_assert_int_ge(s.n, 1);
    ck_assert_ptr_nonnull(strstr(s.last, "memory only"));
    fajit_ctx_destroy(ctx);
    if (home) {
        setenv("HOME", home, 1);
        free(home);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("unit");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, status_table);
    tcase_add_test(tc, errmsg_per_thread);
    tcase_add_test(tc, lineinfo_variable);
    tcase_add_test(tc, arch_names);
    tcase_add_test(tc, ctx_options);
    tcase_add_test(tc, ctx_cache_location);
    fj_unit_tests_driver(tc);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, fj_tcase_desc());
    suite_add_tcase(s, fj_tcase_layout());
    suite_add_tcase(s, fj_tcase_autotune());
    suite_add_tcase(s, fj_tcase_cache());
    suite_add_tcase(s, fj_tcase_spec());
    suite_add_tcase(s, fj_tcase_abi());
    suite_add_tcase(s, fj_tcase_gate());
    suite_add_tcase(s, fj_tcase_gate_features());
    suite_add_tcase(s, fj_tcase_decode());
    suite_add_tcase(s, fj_tcase_features());
    suite_add_tcase(s, fj_tcase_fa3_features());
    suite_add_tcase(s, fj_tcase_other_nvrtc());
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
