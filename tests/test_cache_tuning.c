/* test_cache_tuning.c - unit tests of src/cache/tuning.c: tuning rows round trip and
 * pinning. */
#include "test_cache.h"

/* ---- tuning rows ------------------------------------------------------------------ */

static void assert_same_row(const fj_tune_row *got, const fj_tune_row *want)
{
    ck_assert_str_eq(got->gpu_name, want->gpu_name);
    ck_assert_str_eq(got->arch, want->arch);
    ck_assert_int_eq(got->sm_count, want->sm_count);
    ck_assert_str_eq(got->signature, want->signature);
    ck_assert_str_eq(got->bucket, want->bucket);
    ck_assert_str_eq(got->config, want->config);
    ck_assert_double_eq(got->time_ms, want->time_ms);
    ck_assert_str_eq(got->table_json, want->table_json ? want->table_json : "");
    ck_assert_int_eq(got->pinned, want->pinned);
    ck_assert_str_eq(got->fajit_version, want->fajit_version);
    ck_assert_int_eq(got->nvrtc_version, want->nvrtc_version);
}

typedef struct { int n, stop_after; char first[64]; } tune_acc;

static int tune_list_cb(void *user, const fj_tune_row *r)
{
    tune_acc *a = user;
    if (a->n++ == 0)
        snprintf(a->first, sizeof a->first, "%s", r->bucket);
    return a->stop_after && a->n >= a->stop_after;
}

START_TEST(test_tune_round_trip)
{
    char dir[128];
    fj_tune_row r, r2, got;
    tune_acc acc = { 0, 0, "" }, stop = { 0, 1, "" };
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_row(&r, "sm_90a", "fwd.bf16.hd128.causal.gqa4", "sq<=2k", "128x64w4s1", 0.8125, 0, 0);
    r.table_json = "{\"128x64w4s1\": 0.8125, \"64x64w4s1\": 0.9}";
    int64_t t0 = (int64_t)time(NULL);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    make_row(&r2, "sm_90a", "fwd.bf16.hd128.causal.gqa4", "sq<=1k", "64x64w4s1", 0.5, 0, 1234);
    ck_assert_int_eq(fj_cache_tune_put(c, &r2), 0);   /* table_json NULL: stored as "" */
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, r.sm_count, r.signature,
                                       r.bucket, &got), 1);
    assert_same_row(&got, &r);
    ck_assert_int_ge(got.created, t0);
    fj_tune_row_free(&got);
    ck_assert_ptr_null(got.table_json);
    ck_assert_int_eq(fj_cache_tune_get(c, r2.gpu_name, r2.arch, r2.sm_count, r2.signature,
                                       r2.bucket, &got), 1);
    assert_same_row(&got, &r2);
    ck_assert_int_eq(got.created, 1234);
    fj_tune_row_free(&got);
    /* Every part of the key matters. */
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, r.sm_count, r.signature,
                                       "sq<=4k", &got), 0);
    ck_assert_ptr_null(got.table_json);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, 114, r.signature, r.bucket,
                                       &got), 0);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, "sm_100a", r.sm_count, r.signature,
                                       r.bucket, &got), 0);
    ck_assert_int_eq(fj_cache_tune_list(c, tune_list_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 2);
    ck_assert_str_eq(acc.first, "sq<=1k");   /* ordered by key */
    ck_assert_int_eq(fj_cache_tune_list(c, tune_list_cb, &stop), 0);
    ck_assert_int_eq(stop.n, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_tune_pin)
{
    char dir[128];
    static const char sig[] = "fwd.bf16.hd128.causal.gqa4", b[] = "sq<=4k";
    fj_tune_row r;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_row(&r, "sm_90a", sig, b, "a", 1.0, 0, 0);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 1), 1);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, "sq<=8k", 1), 0);

    make_row(&r, "sm_90a", sig, b, "b", 0.5, 0, 0);   /* faster, but not pinned */
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 1);
    ck_assert_str_eq(config_of(c, sig, b), "a");
    make_row(&r, "sm_90a", sig, b, "c", 2.0, 1, 0);   /* pinned replaces pinned */
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_str_eq(config_of(c, sig, b), "c");
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 0), 1);
    make_row(&r, "sm_90a", sig, b, "d", 3.0, 0, 0);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_str_eq(config_of(c, sig, b), "d");
    fj_cache_close(c);

    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), -1);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 1), -1);
    ck_assert_str_eq(config_of(c, sig, b), "d");
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_tuning(TCase *tc)
{
    tcase_add_test(tc, test_tune_round_trip);
    tcase_add_test(tc, test_tune_pin);
}
