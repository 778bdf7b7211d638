/* test_cache_bundle.c - unit tests of src/cache/bundle.c: export, import, merge, immutable
 * open, corrupt, tampered and foreign bundles, never exporting over a live cache. */
#include "test_cache.h"

/* ---- bundles ---------------------------------------------------------------------- */

static const char k_sig[] = "fwd.bf16.hd128.causal.gqa4";

/* Kernels 1 (sm_80), 2 (sm_90a, with parts), 3 (sm_80); one tuning row per arch. */
static void fill_source(fj_cache *c)
{
    fj_entry e;
    fj_tune_row r;
    for (int s = 1; s <= 3; s++) {
        make_entry(&e, s, 1000 * (size_t)s);
        if (s == 2)
            e.parts = test_parts(k_digest, "f", "P", "O", "sm_90a", 12082, 1);
        ck_assert_int_eq(fj_cache_put(c, &e), 0);
        fj_entry_free(&e);
    }
    make_row(&r, "sm_90a", k_sig, "sq<=1k", "128x64w4s1", 0.25, 1, 1000);
    r.table_json = "{}";
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    make_row(&r, "sm_80", k_sig, "sq<=1k", "128x64w4s1", 0.5, 0, 1000);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
}

/* 1 when seed `s`'s entry is in c with its blob intact, 0 when it misses. */
static int has_seed(fj_cache *c, int s)
{
    fj_entry want, got;
    fj_key k = key_of(s);
    int hit = fj_cache_get(c, &k, &got);
    if (hit) {
        make_entry(&want, s, 1000 * (size_t)s);
        assert_same(&got, &want);
        fj_entry_free(&want);
    }
    fj_entry_free(&got);
    return hit;
}

static int count_prefix(const char *dir, const char *prefix)
{
    int n = 0;
    struct dirent *d;
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    while ((d = readdir(dp)) != NULL)
        n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
    closedir(dp);
    return n;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

START_TEST(test_export_import)
{
    char dir[128], src[160], dst[160], bundle[160], side[200];
    unsigned char hdr[2];
    fj_bundle_stats st;
    fj_entry got;
    fj_tune_row r;
    fj_key k2 = key_of(2);
    make_dir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(dst, sizeof dst, "%s/dst", dir);
    snprintf(bundle, sizeof bundle, "%s/fleet.fjb", dir);
    fj_cache *a = open_ok(src);
    fill_source(a);
    ck_assert_int_eq(has_seed(a, 2), 1);
    ck_assert_int_eq(has_seed(a, 2), 1);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_int_eq(st.corrupt, 0);

    /* One self-contained file in rollback-journal mode (header bytes 18, 19 = 1), with
     * nothing beside it. */
    int fd = open(bundle, O_RDONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pread(fd, hdr, 2, 18), 2);
    close(fd);
    ck_assert_int_eq(hdr[0], 1);
    ck_assert_int_eq(hdr[1], 1);
    snprintf(side, sizeof side, "%s-journal", bundle);
    ck_assert(!exists(side));
    snprintf(side, sizeof side, "%s-wal", bundle);
    ck_assert(!exists(side));
    ck_assert_int_eq(count_prefix(dir, "fleet.fjb"), 1);   /* no temporary file left */
    ck_assert_int_eq(file_user_version(bundle), FJ_CACHE_SCHEMA_VERSION);

    fj_cache *b = open_ok(dst);
    ck_assert_int_eq(fj_cache_import(b, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.kernels_present, 0);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_int_eq(st.rows_kept, 0);
    ck_assert_int_eq(st.corrupt, 0);
    ck_assert_int_eq(fj_cache_get(b, &k2, &got), 1);
    ck_assert_ptr_nonnull(got.parts);
    ck_assert_ptr_nonnull(strstr(got.parts, "nvrtc=12082"));
    ck_assert_int_eq(got.hits, 1);   /* its own count: the source's 2 are not exported */
    fj_entry_free(&got);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    ck_assert_int_eq(fj_cache_tune_get(b, "NVIDIA H200", "sm_90a", 132, k_sig, "sq<=1k", &r),
                     1);
    ck_assert_str_eq(r.table_json, "{}");
    ck_assert_int_eq(r.pinned, 1);
    ck_assert_int_eq(r.created, 1000);
    fj_tune_row_free(&r);

    /* Importing again changes nothing. */
    ck_assert_int_eq(fj_cache_import(b, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 0);
    ck_assert_int_eq(st.kernels_present, 3);
    ck_assert_int_eq(st.rows, 0);
    ck_assert_int_eq(st.rows_kept, 2);

    /* A target without kernels fails and leaves the existing bundle as it was. */
    struct stat before, after;
    ck_assert_int_eq(stat(bundle, &before), 0);
    ck_assert_int_eq(fj_cache_export(a, bundle, "sm_100a", 0, &st), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "no usable kernel of target sm_100a"));
    ck_assert_int_eq(stat(bundle, &after), 0);
    ck_assert_int_eq(after.st_ino, before.st_ino);

    /* Filtered by target, over an existing bundle, into a memory-only cache. */
    ck_assert_int_eq(fj_cache_export(a, bundle, "sm_90a", 0, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(st.rows, 1);
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(has_seed(m, 2), 1);
    ck_assert_int_eq(has_seed(m, 1), 0);
    ck_assert_int_eq(fj_cache_tune_get(m, "NVIDIA H200", "sm_80", 132, k_sig, "sq<=1k", &r),
                     0);
    fj_cache_close(m);
    fj_cache_close(b);
    fj_cache_close(a);
    rm_rf(dir);
}
END_TEST

/* Offset of the first run of `n` bytes equal to `ch` in the file, or -1. */
static off_t find_run(const char *path, int ch, size_t n)
{
    static unsigned char buf[1 << 16];
    int fd = open(path, O_RDONLY);
    ssize_t got;
    size_t run = 0;
    off_t at = 0;
    if (fd == -1)
        return -1;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++, at++) {
            run = buf[i] == ch ? run + 1 : 0;
            if (run == n) {
                close(fd);
                return at - (off_t)n + 1;
            }
        }
    }
    close(fd);
    return -1;
}

START_TEST(test_import_corrupt)
{
    char dir[128], bundle[160];
    fj_bundle_stats st;
    fj_entry e, got;
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    fj_cache *a = open_ok(NULL);
    fill_source(a);
    make_entry(&e, 30, 3000);
    memset(e.blob, 'Z', e.blob_size);   /* findable in the file */
    ck_assert_int_eq(fj_cache_put(a, &e), 0);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(st.kernels, 4);
    fj_cache_close(a);

    /* Damage one byte of that blob inside the file: SQLite cannot tell, the checksum can. */
    off_t at = find_run(bundle, 'Z', 256);
    ck_assert_int_ge(at, 0);
    int fd = open(bundle, O_WRONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pwrite(fd, "z", 1, at + 100), 1);
    close(fd);

    fj_cache *b = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(b, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.corrupt, 1);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "corrupt"));
    ck_assert_int_eq(fj_cache_get(b, &e.key, &got), 0);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    fj_cache_close(b);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

START_TEST(test_bundle_readonly)
{
    char dir[128], bundle[160], tier[160], junk[200];
    fj_bundle_stats st;
    fj_cache_counters k;
    fj_entry e, got;
    fj_tune_row r;
    fj_key fresh = key_of(50);
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    snprintf(tier, sizeof tier, "%s/tier", dir);
    fj_cache *a = open_ok(NULL);
    fill_source(a);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(mkdir(tier, 0755), 0);
    snprintf(junk, sizeof junk, "%s/kernels.db", tier);   /* a bundle as a cache dir */
    ck_assert_int_eq(fj_cache_export(a, junk, NULL, 0, &st), 0);
    fj_cache_close(a);
    ck_assert_int_eq(chmod(bundle, 0444), 0);

    fj_cache *b = NULL;
    ck_assert_int_eq(fj_cache_open_bundle(&b, bundle, log_cb, NULL), 0);
    ck_assert_int_eq(fj_cache_readonly(b), 1);
    ck_assert_str_eq(fj_cache_path(b), bundle);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    ck_assert_int_eq(fj_cache_tune_get(b, "NVIDIA H200", "sm_90a", 132, k_sig, "sq<=1k", &r),
                     1);
    fj_tune_row_free(&r);
    make_entry(&e, 50, 10);
    ck_assert_int_eq(fj_cache_put(b, &e), 0);   /* skipped, as for any read-only cache */
    ck_assert_int_eq(fj_cache_get(b, &fresh, &got), 0);
    ck_assert_int_eq(fj_cache_lease(b, &fresh, 5000, &got), 0);
    make_row(&r, "sm_90a", k_sig, "sq<=1k", "x", 0.1, 1, 0);
    ck_assert_int_eq(fj_cache_tune_put(b, &r), -1);
    fj_cache_counters_get(b, &k);
    ck_assert_uint_eq(k.put_skipped, 1);
    ck_assert_uint_eq(k.hits, 3);
    fj_cache_close(b);
    fj_entry_free(&e);

    fj_cache_debug_force_readonly = 1;
    b = open_ok(tier);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(b), 1);
    ck_assert_int_eq(has_seed(b, 2), 1);
    fj_cache_close(b);

    /* Missing, and not an SQLite file: -1, *out NULL, a warning. */
    snprintf(junk, sizeof junk, "%s/missing.fjb", dir);
    b = (fj_cache *)1;
    ck_assert_int_eq(fj_cache_open_bundle(&b, junk, log_cb, NULL), -1);
    ck_assert_ptr_null(b);
    snprintf(junk, sizeof junk, "%s/junk.fjb", dir);
    int fd = open(junk, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, "not a database, not at all, not even close......", 48), 48);
    close(fd);
    int warn0 = log_count(FJ_LOG_WARN);
    ck_assert_int_eq(fj_cache_open_bundle(&b, junk, log_cb, NULL), -1);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), warn0 + 1);
    chmod(bundle, 0644);
    rm_rf(dir);
}
END_TEST

/* Tuning rows of two bundles in conflict: the merge does not depend on the order. */
static void put_row(fj_cache *c, const char *bucket, const char *config, double ms, int pin,
                    int64_t created)
{
    fj_tune_row r;
    make_row(&r, "sm_90a", k_sig, bucket, config, ms, pin, created);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
}

static void check_merged(fj_cache *m)
{
    ck_assert_str_eq(config_of(m, k_sig, "X"), "bx");   /* pinned beats newer */
    ck_assert_str_eq(config_of(m, k_sig, "Y"), "by");   /* newer */
    ck_assert_str_eq(config_of(m, k_sig, "Z"), "bz");   /* same age: faster */
    ck_assert_str_eq(config_of(m, k_sig, "W"), "aw");   /* pinned beats newer and faster */
    ck_assert_str_eq(config_of(m, k_sig, "V"), "av");   /* only in one */
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(m, s), 1);
}

START_TEST(test_merge)
{
    char dir[128], pa[160], pb[160], pm[160], m1dir[160];
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(pa, sizeof pa, "%s/a.fjb", dir);
    snprintf(pb, sizeof pb, "%s/b.fjb", dir);
    snprintf(pm, sizeof pm, "%s/merged.fjb", dir);
    snprintf(m1dir, sizeof m1dir, "%s/m1", dir);

    fj_cache *a = open_ok(NULL), *b = open_ok(NULL);
    put_seed(a, 1, 1000);
    put_seed(a, 2, 2000);
    put_seed(b, 2, 2000);
    put_seed(b, 3, 3000);
    put_row(a, "X", "ax", 2.0, 0, 100);
    put_row(b, "X", "bx", 3.0, 1, 50);
    put_row(a, "Y", "ay", 1.0, 0, 100);
    put_row(b, "Y", "by", 1.5, 0, 200);
    put_row(a, "Z", "az", 1.0, 0, 100);
    put_row(b, "Z", "bz", 0.5, 0, 100);
    put_row(a, "W", "aw", 9.0, 1, 100);
    put_row(b, "W", "bw", 1.0, 0, 300);
    put_row(a, "V", "av", 1.0, 0, 100);
    ck_assert_int_eq(fj_cache_export(a, pa, NULL, 0, NULL), 0);
    ck_assert_int_eq(fj_cache_export(b, pb, NULL, 0, NULL), 0);
    fj_cache_close(a);
    fj_cache_close(b);

    fj_cache *m1 = open_ok(m1dir), *m2 = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m1, pa, NULL, &st), 0);
    ck_assert_int_eq(fj_cache_import(m1, pb, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(st.kernels_present, 1);
    ck_assert_int_eq(st.rows, 3);        /* X, Y, Z taken from b */
    ck_assert_int_eq(st.rows_kept, 1);   /* W */
    ck_assert_int_eq(fj_cache_import(m2, pb, NULL, NULL), 0);
    ck_assert_int_eq(fj_cache_import(m2, pa, NULL, NULL), 0);
    check_merged(m1);
    check_merged(m2);

    /* The merged bundle carries the same. */
    ck_assert_int_eq(fj_cache_export(m1, pm, NULL, 0, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 5);
    fj_cache *m3 = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m3, pm, NULL, NULL), 0);
    check_merged(m3);
    fj_cache_close(m3);
    fj_cache_close(m2);
    fj_cache_close(m1);
    rm_rf(dir);
}
END_TEST

START_TEST(test_bundle_errors)
{
    char dir[128], path[160], other[160];
    fj_bundle_stats st;
    sqlite3 *db = NULL;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 1, 1000);

    /* Never over the cache's own file, never into a missing directory. */
    ck_assert_int_eq(fj_cache_export(c, path, NULL, 0, &st), -1);
    snprintf(other, sizeof other, "%s/no/such/dir/b.fjb", dir);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, 0, &st), -1);
    ck_assert_int_eq(has_seed(c, 1), 1);

    /* Missing, junk, someone else's SQLite file, a newer schema: -1, nothing imported. */
    snprintf(other, sizeof other, "%s/missing.fjb", dir);
    ck_assert_int_eq(fj_cache_import(c, other, NULL, &st), -1);
    snprintf(other, sizeof other, "%s/junk.fjb", dir);
    int fd = open(other, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(fd);
    ck_assert_int_eq(fj_cache_import(c, other, NULL, &st), -1);
    snprintf(other, sizeof other, "%s/foreign.db", dir);
    ck_assert_int_eq(sqlite3_open(other, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(fj_cache_import(c, other, NULL, &st), -1);
    snprintf(other, sizeof other, "%s/newer.fjb", dir);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, 0, &st), 0);
    unsigned char v[4] = { 0, 0, 0, 99 };
    fd = open(other, O_WRONLY);
    ck_assert_int_eq(pwrite(fd, v, 4, 60), 4);
    close(fd);
    ck_assert_int_eq(fj_cache_import(c, other, NULL, &st), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "not a fajit bundle"));
    fj_cache_close(c);

    /* Into a read-only cache. */
    snprintf(other, sizeof other, "%s/good.fjb", dir);
    c = open_ok(NULL);
    put_seed(c, 2, 2000);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, 0, NULL), 0);
    fj_cache_close(c);
    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_import(c, other, NULL, &st), -1);
    ck_assert_int_eq(has_seed(c, 2), 0);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Swapping blob and checksum between two rows of a bundle is corruption: import skips
 * both, an immutable open misses both. */
START_TEST(test_bundle_swapped_blobs)
{
    char dir[128], bundle[160];
    fj_bundle_stats st;
    fj_entry got;
    fj_cache_counters k;
    fj_key k1 = key_of(1), k3 = key_of(3), k5 = key_of(5);
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    fj_cache *a = open_ok(NULL);
    put_seed(a, 1, 1500);
    put_seed(a, 3, 1500);
    put_seed(a, 5, 1500);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, 0, &st), 0);
    fj_cache_close(a);
    swap_blobs(bundle, &k1, &k3);

    fj_cache *b = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(b, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.corrupt, 2);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(fj_cache_has(b, &k1) + fj_cache_has(b, &k3), 0);
    ck_assert_int_eq(fj_cache_has(b, &k5), 1);
    fj_cache_close(b);

    ck_assert_int_eq(fj_cache_open_bundle(&b, bundle, log_cb, NULL), 0);
    ck_assert_int_eq(fj_cache_get(b, &k1, &got), 0);
    ck_assert_int_eq(fj_cache_get(b, &k3, &got), 0);
    ck_assert_int_eq(fj_cache_get(b, &k5, &got), 1);
    fj_entry_free(&got);
    fj_cache_counters_get(b, &k);
    ck_assert_uint_eq(k.corrupt, 2);
    int checked = 0;
    ck_assert_int_eq(fj_cache_verify(b, &checked), 2);   /* read-only: reported, kept */
    ck_assert_int_eq(checked, 3);
    fj_cache_close(b);
    rm_rf(dir);
}
END_TEST

/* Export (and so merge, which ends in one) never replaces a live cache: its own file or
 * -wal by any name, another handle's file, another process's (WAL mode) file. */
START_TEST(test_export_not_over_live_cache)
{
    char dir[128], sub[160], path[200], wal[210], alias[200], bundle[160];
    fj_bundle_stats st;
    fj_entry got;
    make_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/live", dir);
    snprintf(path, sizeof path, "%s/kernels.db", sub);
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(alias, sizeof alias, "%s/alias.db", dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    fj_cache *live = open_ok(sub);
    put_seed(live, 1, 700);
    ck_assert_int_eq(access(wal, F_OK), 0);
    ck_assert_int_eq(link(path, alias), 0);

    /* A merge's cache (a fresh one elsewhere) exporting onto the live file. */
    fj_cache *m = open_ok(NULL);
    put_seed(m, 2, 700);
    ck_assert_int_eq(fj_cache_export(m, path, NULL, 0, &st), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "live cache"));
    ck_assert_int_eq(fj_cache_export(m, alias, NULL, 0, &st), -1);
    /* The cache onto its own file, its -wal, a hard link to it. */
    ck_assert_int_eq(fj_cache_export(live, path, NULL, 0, &st), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "own file"));
    ck_assert_int_eq(fj_cache_export(live, wal, NULL, 0, &st), -1);
    ck_assert_int_eq(fj_cache_export(live, alias, NULL, 0, &st), -1);
    /* A bundle may be replaced. */
    ck_assert_int_eq(fj_cache_export(live, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(fj_cache_export(m, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    fj_cache_close(m);

    fj_key k1 = key_of(1), k2 = key_of(2);
    ck_assert_int_eq(fj_cache_get(live, &k1, &got), 1);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_has(live, &k2), 0);
    fj_cache_close(live);
    live = open_ok(sub);
    ck_assert_int_eq(fj_cache_get(live, &k1, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(live);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_bundle(TCase *tc)
{
    tcase_add_test(tc, test_bundle_swapped_blobs);
    tcase_add_test(tc, test_export_not_over_live_cache);
    tcase_add_test(tc, test_export_import);
    tcase_add_test(tc, test_import_corrupt);
    tcase_add_test(tc, test_bundle_readonly);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_bundle_errors);
}
