/* test_cache_kernels.c - unit tests of src/cache/kernels.c: round trip, misses,
 * persistence, a corrupt entry, checksums bound to keys, verify, clear, prune, stats, list,
 * key parts stored with entries. */
#include "test_cache.h"

/* ---- basics ----------------------------------------------------------------------- */

START_TEST(test_round_trip)
{
    char dir[128], want_path[160];
    fj_entry e, got, empty;
    fj_cache_counters k;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    snprintf(want_path, sizeof want_path, "%s/kernels.db", dir);
    ck_assert_str_eq(fj_cache_path(c), want_path);
    ck_assert_int_eq(fj_cache_readonly(c), 0);

    make_entry(&e, 2, 5000);
    int64_t t0 = (int64_t)time(NULL);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_int_ge(got.created, t0);
    ck_assert_int_ge(got.last_used, got.created);
    ck_assert_int_eq(got.hits, 1);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    ck_assert_int_eq(got.hits, 2);
    fj_entry_free(&got);

    /* An empty blob and NULL strings are stored as empty, not as SQL NULL. */
    memset(&empty, 0, sizeof empty);
    empty.key = key_of(99);
    strcpy(empty.arch, "sm_100a");
    ck_assert_int_eq(fj_cache_put(c, &empty), 0);
    ck_assert_int_eq(fj_cache_get(c, &empty.key, &got), 1);
    ck_assert_uint_eq(got.blob_size, 0);
    ck_assert_str_eq(got.name, "");
    ck_assert_str_eq(got.arch, "sm_100a");
    fj_entry_free(&got);

    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.puts, 2);
    ck_assert_uint_eq(k.hits, 3);
    ck_assert_uint_eq(k.misses, 0);
    ck_assert_uint_eq(k.corrupt, 0);
    fj_entry_free(&e);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_miss)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_key unknown = key_of(1234);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 1, 64);
    ck_assert_int_eq(fj_cache_get(c, &unknown, &got), 0);
    ck_assert_ptr_null(got.blob);
    ck_assert_ptr_null(got.name);
    fj_entry_free(&got);   /* harmless on a miss */
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.misses, 1);
    ck_assert_uint_eq(k.hits, 0);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_persistence)
{
    char dir[128], nested[192];
    fj_entry e, got;
    struct stat sb;
    make_dir(dir, sizeof dir);
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);   /* mkdir -p */
    fj_cache *c = open_ok(nested);
    ck_assert_ptr_nonnull(fj_cache_path(c));
    ck_assert_int_eq(stat(nested, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    make_entry(&e, 3, 70000);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    c = open_ok(nested);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_int_eq(got.hits, 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* ---- corruption ------------------------------------------------------------------- */

START_TEST(test_corrupt_entry)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_cache_stats st;
    fj_key key = key_of(5), other = key_of(6);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 5, 1000);
    put_seed(c, 6, 1000);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &key), 0);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    ck_assert_ptr_null(got.blob);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_uint_eq(k.misses, 1);
    /* The bad row is gone; the good one untouched. */
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &key), -1);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(fj_cache_get(c, &other, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* ---- maintenance ------------------------------------------------------------------ */

START_TEST(test_verify)
{
    char dir[128];
    int n = -1;
    fj_cache_counters k;
    fj_key bad = key_of(2);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 500 * (size_t)s);
    ck_assert_int_eq(fj_cache_verify(c, &n), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &bad), 0);
    ck_assert_int_eq(fj_cache_verify(c, &n), 1);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fj_cache_verify(c, &n), 0);
    ck_assert_int_eq(n, 2);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_clear)
{
    char dir[128];
    fj_entry got;
    fj_cache_stats st;
    fj_key key = key_of(1);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 100);
    ck_assert_int_eq(fj_cache_clear(c), 0);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(st.bytes, 0);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    put_seed(c, 1, 100);   /* still usable */
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_prune)
{
    char dir[128];
    fj_entry got;
    fj_cache_stats st;
    int64_t removed = -1, freed = -1;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 5; s++)
        put_seed(c, s, 1000);
    /* loads make 2 and 4 the most recently used (or, within one second, the most hit) */
    for (int s = 2; s <= 4; s += 2) {
        fj_key k = key_of(s);
        ck_assert_int_eq(fj_cache_get(c, &k, &got), 1);
        fj_entry_free(&got);
    }
    ck_assert_int_eq(fj_cache_prune(c, 5000, NULL, &removed, &freed), 0);   /* fits */
    ck_assert_int_eq(removed, 0);
    fj_key keep = key_of(5);
    ck_assert_int_eq(fj_cache_prune(c, 3000, &keep, &removed, &freed), 0);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(freed, 2000);
    for (int s = 1; s <= 5; s++) {
        fj_key k = key_of(s);
        int want = s != 1 && s != 3;
        ck_assert_msg(fj_cache_get(c, &k, &got) == want, "seed %d %s", s,
                      want ? "was pruned" : "was kept");
        if (want)
            fj_entry_free(&got);
    }
    /* `keep` stays even when it alone is over the cap; everything else goes */
    ck_assert_int_eq(fj_cache_prune(c, 10, &keep, &removed, &freed), 0);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(fj_cache_prune(c, 0, NULL, &removed, &freed), 0);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(fj_cache_prune(c, -1, NULL, NULL, NULL), -1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_stats)
{
    char dir[128];
    fj_cache_stats st;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(st.bytes, 0);
    put_seed(c, 1, 100);
    put_seed(c, 2, 300000);
    put_seed(c, 2, 300);   /* replaces */
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 2);
    ck_assert_int_eq(st.bytes, 400);
    ck_assert_int_ge(st.file_bytes, 300000);   /* the big blob went through the WAL */
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

typedef struct { int calls, stop_after, bad; size_t sizes; } list_acc;

static int list_cb(void *user, const fj_entry *e)
{
    list_acc *a = user;
    char want[32];
    int seed = (int)(e->blob_size / 10);
    fj_key k = key_of(seed);
    snprintf(want, sizeof want, "ref f16 #%d", seed);
    a->calls++;
    a->sizes += e->blob_size;
    if (e->blob || strcmp(e->name, want) != 0 || memcmp(e->key.b, k.b, 16) != 0
        || e->nvrtc_version != 12080 + seed || e->regs != 128)
        a->bad++;
    return a->stop_after && a->calls >= a->stop_after;
}

START_TEST(test_list)
{
    char dir[128];
    list_acc a = { 0, 0, 0, 0 };
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 10 * (size_t)s);   /* size encodes the seed for list_cb */
    ck_assert_int_eq(fj_cache_list(c, list_cb, &a), 0);
    ck_assert_int_eq(a.calls, 3);
    ck_assert_int_eq(a.bad, 0);
    ck_assert_uint_eq(a.sizes, 60);

    list_acc stop = { 0, 1, 0, 0 };
    ck_assert_int_eq(fj_cache_list(c, list_cb, &stop), 0);
    ck_assert_int_eq(stop.calls, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

static int count_parts_cb(void *user, const fj_entry *e)
{
    *(int *)user += e->parts != NULL;
    return 0;
}

START_TEST(test_parts_round_trip)
{
    char dir[128];
    fj_entry e, plain, got;
    int n_parts = 0;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 21, 100);
    e.parts = test_parts(k_digest, "f", "P", "-O3", "sm_90a", 13000, 1);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    make_entry(&plain, 22, 100);   /* parts NULL: accepted, read back as NULL */
    ck_assert_int_eq(fj_cache_put(c, &plain), 0);
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    ck_assert_str_eq(got.parts, e.parts);
    fj_entry_free(&got);
    ck_assert_ptr_null(got.parts);
    ck_assert_int_eq(fj_cache_get(c, &plain.key, &got), 1);
    ck_assert_ptr_null(got.parts);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_list(c, count_parts_cb, &n_parts), 0);
    ck_assert_int_eq(n_parts, 1);
    fj_cache_close(c);
    fj_entry_free(&e);
    fj_entry_free(&plain);
    rm_rf(dir);
}
END_TEST

/* A blob's checksum covers its key: blob and checksum moved together to another row of
 * the file read as corrupt (get misses, verify finds both), not as the other kernel. */
START_TEST(test_checksum_binds_key)
{
    char dir[128], path[160];
    fj_entry got;
    fj_cache_counters k;
    fj_key k1 = key_of(1), k3 = key_of(3);
    int checked = 0;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 1, 2048);
    put_seed(c, 3, 2048);
    put_seed(c, 5, 2048);
    fj_cache_close(c);
    swap_blobs(path, &k1, &k3);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_get(c, &k1, &got), 0);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_int_eq(fj_cache_verify(c, &checked), 1);   /* k3; k1 went at the get */
    ck_assert_int_eq(checked, 2);
    ck_assert_int_eq(fj_cache_has(c, &k3), 0);
    fj_key k5 = key_of(5);
    ck_assert_int_eq(fj_cache_get(c, &k5, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_kernels(TCase *tc)
{
    tcase_add_test(tc, test_checksum_binds_key);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_miss);
    tcase_add_test(tc, test_persistence);
    tcase_add_test(tc, test_corrupt_entry);
    tcase_add_test(tc, test_verify);
    tcase_add_test(tc, test_clear);
    tcase_add_test(tc, test_prune);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_parts_round_trip);
}
