/* test_cache_verdicts.c - unit tests of src/cache/verdicts.c: the validation gate's
 * verdicts round trip, are keyed by the whole GPU class and the model-feature set, replace
 * each other, the schema 3 -> 4 migration that adds their table and the 4 -> 5 one that
 * keys them by feature set (old rows kept as feature-free), and bundles carry the set. */
#include "test_cache.h"

static void make_verdict(fj_verdict *v, const char *family, int pass, int64_t created)
{
    memset(v, 0, sizeof *v);
    snprintf(v->gpu_name, sizeof v->gpu_name, "NVIDIA H200");
    snprintf(v->arch, sizeof v->arch, "sm_90a");
    v->sm_count = 132;
    v->driver_version = 13000;
    snprintf(v->fajit_version, sizeof v->fajit_version, "0.1.0");
    snprintf(v->family, sizeof v->family, "%s", family);
    v->pass = pass;
    if (!pass) {
        snprintf(v->failed_case, sizeof v->failed_case, "bf16 hd128 causal b2 h8/8 sq512");
        snprintf(v->error, sizeof v->error, "wrong result: max error 0.5");
    }
    v->created = created;
}

typedef struct { int n; char families[8][16]; } verdict_acc;

static int verdict_cb(void *user, const fj_verdict *v)
{
    verdict_acc *a = user;
    if (a->n < 8)
        snprintf(a->families[a->n], 16, "%s", v->family);
    a->n++;
    return 0;
}

START_TEST(test_verdict_round_trip)
{
    char dir[128];
    fj_verdict v, w, got;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_verdict(&v, "fa3", 0, 0);
    int64_t t0 = (int64_t)time(NULL);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    make_verdict(&w, "fa2", 1, 1234);
    ck_assert_int_eq(fj_cache_verdict_put(c, &w), 0);
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    ck_assert_str_eq(got.family, "fa3");
    ck_assert_str_eq(got.failed_case, v.failed_case);
    ck_assert_str_eq(got.error, v.error);
    ck_assert_int_ge(got.created, t0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_str_eq(got.failed_case, "");
    ck_assert_int_eq(got.created, 1234);
    /* Every part of the class matters: another driver or fajit is not validated. */
    fj_verdict k = v;
    k.driver_version = 13010;
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);
    k = v, snprintf(k.fajit_version, sizeof k.fajit_version, "0.2.0");
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);
    k = v, k.sm_count = 114;
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);
    k = v, snprintf(k.gpu_name, sizeof k.gpu_name, "NVIDIA H100");
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);
    k = v, snprintf(k.family, sizeof k.family, "decode");
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);

    /* A newer verdict replaces the old one. */
    make_verdict(&v, "fa3", 1, 0);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_str_eq(got.error, "");
    verdict_acc acc = {0, {{0}}};
    ck_assert_int_eq(fj_cache_verdict_list(c, NULL, verdict_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 2);
    ck_assert_str_eq(acc.families[0], "fa2");   /* ordered by class, then family */
    ck_assert_str_eq(acc.families[1], "fa3");
    acc.n = 0;
    ck_assert_int_eq(fj_cache_verdict_list(c, "sm_80", verdict_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 0);
    fj_cache_close(c);

    /* Read-only: verdicts are read, a put is refused (the context keeps it in memory). */
    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 1);
    ck_assert_int_eq(fj_cache_verdict_put(c, &w), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "kept in memory only"));
    fj_cache_close(c);

    /* Memory only: the same table, for the handle's life. */
    c = open_ok(NULL);
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 0);
    ck_assert_int_eq(fj_cache_verdict_put(c, &w), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Makes the cache file in `dir` look as fajit with schema 3 left it: no verdicts table. */
static void downgrade_to_3(const char *path)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "DROP TABLE verdicts; UPDATE meta SET v = '3' WHERE"
                                  " k = 'format'; PRAGMA user_version = 3;", NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/* A schema-3 file: read-only it opens with no verdicts (and refuses to store one); writable
 * it is migrated in place, keeping its kernels and tuning rows. */
START_TEST(test_verdict_migrate_3)
{
    char dir[128], path[160];
    fj_entry e, got;
    fj_verdict v, gv;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 31, 700);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);
    downgrade_to_3(path);
    ck_assert_int_eq(file_user_version(path), 3);

    make_verdict(&v, "fa3", 0, 0);
    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &gv), 0);
    verdict_acc acc = {0, {{0}}};
    ck_assert_int_eq(fj_cache_verdict_list(c, NULL, verdict_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 0);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), -1);
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_INFO], "migrated from schema 3 to 5"));
    ck_assert_int_eq(count_aside(dir), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);   /* the kernel is kept */
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &gv), 1);
    fj_cache_close(c);
    ck_assert_int_eq(file_user_version(path), FJ_CACHE_SCHEMA_VERSION);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* Bundles carry verdicts (of the exported target); on import the newer of a class and
 * family wins, whatever the order. */
START_TEST(test_verdict_bundle)
{
    char dir[128], bundle[160], old_bundle[160];
    fj_verdict v, w, got;
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/fleet.fjb", dir);
    snprintf(old_bundle, sizeof old_bundle, "%s/old.fjb", dir);
    fj_cache *c = open_ok(NULL);
    make_verdict(&v, "fa3", 0, 2000);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    make_verdict(&w, "fa2", 1, 2000);
    snprintf(w.arch, sizeof w.arch, "sm_80");
    ck_assert_int_eq(fj_cache_verdict_put(c, &w), 0);
    ck_assert_int_eq(fj_cache_export(c, bundle, "sm_90a", 0, &st), 0);
    ck_assert_int_eq(st.verdicts, 1);
    fj_cache_close(c);
    c = open_ok(NULL);
    make_verdict(&v, "fa3", 1, 1000);   /* an older pass of the same class */
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    ck_assert_int_eq(fj_cache_export(c, old_bundle, NULL, 0, &st), 0);
    fj_cache_close(c);

    for (int order = 0; order < 2; order++) {
        c = open_ok(NULL);
        ck_assert_int_eq(fj_cache_import(c, order ? bundle : old_bundle, NULL, &st), 0);
        ck_assert_int_eq(st.verdicts, 1);
        ck_assert_int_eq(fj_cache_import(c, order ? old_bundle : bundle, NULL, &st), 0);
        ck_assert_int_eq(st.verdicts, 0);   /* the older one loses */
        ck_assert_int_eq(st.verdicts_replaced, order ? 0 : 1);
        ck_assert_int_eq(st.verdicts_kept, order ? 1 : 0);
        ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
        ck_assert_int_eq(got.pass, 0);
        ck_assert_int_eq(got.created, 2000);
        ck_assert_str_eq(got.error, "wrong result: max error 0.5");
        ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 0);   /* not exported: sm_80 */
        fj_cache_close(c);
    }
    rm_rf(dir);
}
END_TEST

/* A verdict dated in the future does not beat every later one: `created` is capped at the
 * import, so a verdict imported after it (here a FAIL, itself capped at its own import, the
 * same second or later) wins; between verdicts of the same time FAIL wins, whatever the
 * order. (Round 0 imports the forged PASS first only: imported after the FAIL, a PASS capped
 * at a later second is rightly the newer one.) */
START_TEST(test_verdict_import_rule)
{
    char dir[128], a[160], b[160];
    fj_verdict v, got;
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    for (int round = 0; round < 2; round++) {
        /* round 0: forged PASS in 2100 vs a FAIL imported after it; round 1: PASS and FAIL
         * of one past time (2023: not capped, so equal whatever the clock) */
        const int64_t pass_at = round ? 1700000000 : 4102444800;
        const int64_t fail_at = round ? 1700000000 : 4102444800 + 1;
        snprintf(a, sizeof a, "%s/pass%d.fjb", dir, round);
        snprintf(b, sizeof b, "%s/fail%d.fjb", dir, round);
        fj_cache *c = open_ok(NULL);
        make_verdict(&v, "fa4", 1, pass_at);
        ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
        ck_assert_int_eq(fj_cache_export(c, a, NULL, 0, &st), 0);
        fj_cache_close(c);
        c = open_ok(NULL);
        make_verdict(&v, "fa4", 0, fail_at);
        ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
        ck_assert_int_eq(fj_cache_export(c, b, NULL, 0, &st), 0);
        fj_cache_close(c);
        for (int order = 0; order < (round ? 2 : 1); order++) {
            c = open_ok(NULL);
            ck_assert_int_eq(fj_cache_import(c, order ? b : a, NULL, &st), 0);
            ck_assert_int_eq(fj_cache_import(c, order ? a : b, NULL, &st), 0);
            ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
            ck_assert_msg(got.pass == 0, "round %d order %d: PASS kept", round, order);
            ck_assert_int_le(got.created, (int64_t)time(NULL));
            fj_cache_close(c);
        }
    }
    rm_rf(dir);
}
END_TEST

/* The feature set is a part of the key: a verdict of "softcap" and a feature-free one of
 * the same class and family are two rows, each replaced only by its own; listed in order. */
START_TEST(test_verdict_features_key)
{
    char dir[128];
    fj_verdict plain, soft, got;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_verdict(&plain, "fa3", 1, 1000);
    make_verdict(&soft, "fa3", 0, 1000);
    snprintf(soft.features, sizeof soft.features, "softcap");
    ck_assert_int_eq(fj_cache_verdict_put(c, &plain), 0);
    ck_assert_int_eq(fj_cache_verdict_put(c, &soft), 0);
    fj_cache_close(c);
    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_verdict_get(c, &plain, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_str_eq(got.features, "");
    ck_assert_int_eq(fj_cache_verdict_get(c, &soft, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    ck_assert_str_eq(got.features, "softcap");
    fj_verdict k = soft;
    snprintf(k.features, sizeof k.features, "softcap,sinks");
    ck_assert_int_eq(fj_cache_verdict_get(c, &k, &got), 0);
    /* a new PASS of the softcap set leaves the feature-free verdict alone, and back */
    make_verdict(&k, "fa3", 1, 2000);
    snprintf(k.features, sizeof k.features, "softcap");
    ck_assert_int_eq(fj_cache_verdict_put(c, &k), 0);
    make_verdict(&k, "fa3", 0, 2000);
    ck_assert_int_eq(fj_cache_verdict_put(c, &k), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &soft, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_int_eq(fj_cache_verdict_get(c, &plain, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    verdict_acc acc = {0, {{0}}};
    ck_assert_int_eq(fj_cache_verdict_list(c, NULL, verdict_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 2);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Makes the cache file at `path` look as fajit with schema 4 left it: verdicts keyed by
 * class and family only, no features column. */
static void downgrade_to_4(const char *path)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE v4 (gpu_name TEXT, arch TEXT, sm_count "
                                  "INTEGER, driver_version INTEGER, fajit_version TEXT, family "
                                  "TEXT, pass INTEGER NOT NULL, failed_case TEXT NOT NULL, error"
                                  " TEXT NOT NULL, created INTEGER NOT NULL, PRIMARY KEY "
                                  "(gpu_name, arch, sm_count, driver_version, fajit_version, "
                                  "family)); INSERT INTO v4 SELECT gpu_name, arch, sm_count, "
                                  "driver_version, fajit_version, family, pass, failed_case, "
                                  "error, created FROM verdicts; DROP TABLE verdicts; ALTER "
                                  "TABLE v4 RENAME TO verdicts; UPDATE meta SET v = '4' WHERE "
                                  "k = 'format'; PRAGMA user_version = 4;", NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/* A schema-4 file keeps its verdicts, as feature-free ones: read-only (read as they are,
 * no put), migrated in place when writable (then a feature set is a row of its own), and
 * imported from a schema-4 bundle. */
START_TEST(test_verdict_migrate_4)
{
    char dir[128], path[160], bundle[160];
    fj_verdict v, soft, got;
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    snprintf(bundle, sizeof bundle, "%s/old.fjb", dir);
    fj_cache *c = open_ok(dir);
    make_verdict(&v, "fa3", 0, 1500);
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    fj_cache_close(c);
    downgrade_to_4(path);
    ck_assert_int_eq(file_user_version(path), 4);
    make_verdict(&soft, "fa3", 1, 0);
    snprintf(soft.features, sizeof soft.features, "softcap");

    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    ck_assert_str_eq(got.features, "");
    ck_assert_str_eq(got.error, "wrong result: max error 0.5");
    ck_assert_int_eq(fj_cache_verdict_get(c, &soft, &got), 0);
    verdict_acc acc = {0, {{0}}};
    ck_assert_int_eq(fj_cache_verdict_list(c, NULL, verdict_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 1);
    ck_assert_int_eq(fj_cache_verdict_put(c, &soft), -1);
    fj_cache_close(c);

    /* a copy of the schema-4 file, as a bundle */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cp %s %s", path, bundle);
    ck_assert_int_eq(system(cmd), 0);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_INFO], "migrated from schema 4 to 5"));
    ck_assert_int_eq(count_aside(dir), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    ck_assert_int_eq(got.created, 1500);
    ck_assert_str_eq(got.failed_case, v.failed_case);
    ck_assert_int_eq(fj_cache_verdict_put(c, &soft), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &soft, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);   /* still there, still FAIL */
    ck_assert_int_eq(got.pass, 0);
    fj_cache_close(c);
    ck_assert_int_eq(file_user_version(path), FJ_CACHE_SCHEMA_VERSION);

    c = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(c, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.verdicts, 1);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_str_eq(got.features, "");
    ck_assert_int_eq(got.pass, 0);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Bundles carry the feature set: two verdicts of one class and family, feature-free and
 * "softcap,kv_e4m3", export and import as two, each keeping its own result. */
START_TEST(test_verdict_bundle_features)
{
    char dir[128], bundle[160];
    fj_verdict v, w, got;
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/fleet.fjb", dir);
    fj_cache *c = open_ok(NULL);
    make_verdict(&v, "decode", 1, 3000);
    make_verdict(&w, "decode", 0, 3000);
    snprintf(w.features, sizeof w.features, "softcap,kv_e4m3");
    ck_assert_int_eq(fj_cache_verdict_put(c, &v), 0);
    ck_assert_int_eq(fj_cache_verdict_put(c, &w), 0);
    ck_assert_int_eq(fj_cache_export(c, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(st.verdicts, 2);
    fj_cache_close(c);
    c = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(c, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.verdicts, 2);
    ck_assert_int_eq(fj_cache_verdict_get(c, &v, &got), 1);
    ck_assert_int_eq(got.pass, 1);
    ck_assert_str_eq(got.features, "");
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    ck_assert_str_eq(got.features, "softcap,kv_e4m3");
    fj_cache_close(c);
    ck_assert_int_eq(fj_cache_open_bundle(&c, bundle, NULL, NULL), 0);
    ck_assert_int_eq(fj_cache_verdict_get(c, &w, &got), 1);
    ck_assert_int_eq(got.pass, 0);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_verdicts(TCase *tc)
{
    tcase_add_test(tc, test_verdict_features_key);
    tcase_add_test(tc, test_verdict_migrate_4);
    tcase_add_test(tc, test_verdict_bundle_features);
    tcase_add_test(tc, test_verdict_import_rule);
    tcase_add_test(tc, test_verdict_bundle);
    tcase_add_test(tc, test_verdict_round_trip);
    tcase_add_test(tc, test_verdict_migrate_3);
}
