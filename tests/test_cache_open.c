/* test_cache_open.c - unit tests of src/cache/cache.c: corrupt and foreign files, newer
 * schemas, read-only and memory-only modes, symbolic links, directory modes, schema
 * migration (the test speaks SQL itself to build files of the old schemas). */
#include "test_cache.h"

START_TEST(test_corrupt_file)
{
    char dir[128], path[160], junk[8192];
    fj_entry e, got;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = "this is not an SQLite database. "[i % 32];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);

    fj_cache *c = open_ok(dir);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(count_aside(dir), 1);
    ck_assert_int_ge(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "corrupt"));
    ck_assert_ptr_nonnull(fj_cache_set_aside(c));   /* verify reports the loss */
    ck_assert_ptr_nonnull(strstr(fj_cache_set_aside(c), "kernels.db.corrupt-"));
    make_entry(&e, 8, 2048);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    c = open_ok(dir);   /* the fresh file is a good one */
    ck_assert_int_eq(count_aside(dir), 1);
    ck_assert_ptr_null(fj_cache_set_aside(c));
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    fj_entry_free(&e);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Damage inside the file (not its header): SQLite reports it while reading; a miss. */
START_TEST(test_corrupt_page)
{
    char dir[128], path[160], junk[4096];
    struct stat sb;
    fj_entry got;
    fj_cache_counters k;
    fj_key key = key_of(15);
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 15, 40000);   /* about ten overflow pages at the end of the file */
    fj_cache_close(c);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_ge(sb.st_size, 10 * 4096);
    memset(junk, 0xff, sizeof junk);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ne(fd, -1);
    for (off_t off = sb.st_size - 3 * 4096; off < sb.st_size; off += 4096)
        ck_assert_int_eq(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    close(fd);

    c = open_ok(dir);   /* header and schema are intact: the file is kept */
    ck_assert_ptr_nonnull(fj_cache_path(c));
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    ck_assert_ptr_null(got.blob);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_uint_eq(k.misses, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Damage inside a file whose header and schema are intact, as SQLite finds it while
 * running a statement: 0, the page-type byte of the kernels table's root page; 1, the
 * file one byte short; 2, the page-type byte of an index's root page, which only an
 * integrity check reads (verify runs one). */
static void damage(const char *path, int kind)
{
    const char *table = kind == 2 ? "kernels_last_used" : "kernels";
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t root = 0;
    struct stat sb;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                                        -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    root = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    ck_assert_int_eq(stat(path, &sb), 0);
    if (kind == 1) {
        ck_assert_int_eq(truncate(path, sb.st_size - 1), 0);
        return;
    }
    unsigned char seven = 7;
    int fd = open(path, O_WRONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pwrite(fd, &seven, 1, (root - 1) * 4096), 1);
    close(fd);
}

static int count_entry(void *user, const fj_entry *e)
{
    (void)e;
    ++*(int *)user;
    return 0;
}

/* Damage inside the file found by any statement sets the file aside and opens a fresh one
 * (the same inode check as at open); verify's integrity check finds what the statements do
 * not read. Afterwards stats, list, verify, clear and puts work. */
START_TEST(test_damage_inside)
{
    char dir[128], path[160];
    const int kind = _i;
    fj_cache_stats st;
    fj_entry e;
    int n = 0, checked = -1;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    for (int i = 0; i < 40; i++)
        put_seed(c, 100 + i, 3000 + 97 * i);
    fj_cache_close(c);
    damage(path, kind);

    c = open_ok(dir);
    ck_assert_ptr_null(fj_cache_set_aside(c));   /* the header is fine: opened as it is */
    if (kind == 2) {   /* the statements never read the index: verify's check does */
        ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
        ck_assert_int_eq(st.entries, 40);
        ck_assert_int_eq(fj_cache_verify(c, &checked), 0);
        ck_assert_int_eq(checked, 0);
    } else {
        ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);   /* on the fresh file */
        ck_assert_int_eq(st.entries, 0);
    }
    ck_assert_ptr_nonnull(fj_cache_set_aside(c));
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(count_aside(dir), 1);
    ck_assert_int_eq(fj_cache_list(c, count_entry, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(fj_cache_verify(c, &checked), 0);
    ck_assert_int_eq(fj_cache_clear(c), 0);
    make_entry(&e, 7, 5000);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    ck_assert_int_eq(fj_cache_has(c, &e.key), 1);
    fj_entry_free(&e);
    fj_cache_close(c);

    c = open_ok(dir);   /* the fresh file is sound */
    ck_assert_ptr_null(fj_cache_set_aside(c));
    ck_assert_int_eq(fj_cache_verify(c, &checked), 0);
    ck_assert_int_eq(checked, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* A file from a newer fajit is left alone: memory only, with a warning. */
START_TEST(test_newer_version)
{
    char dir[128], path[160];
    unsigned char v[4] = { 0, 0, 0, 99 }, back[4];
    fj_entry got;
    fj_key key = key_of(9);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 9, 256);
    fj_cache_close(c);
    /* user_version is the big-endian 32-bit word at offset 60 of the file header. */
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    int fd = open(path, O_RDWR);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pwrite(fd, v, 4, 60), 4);
    close(fd);

    c = open_ok(dir);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_ge(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "newer"));
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    put_seed(c, 9, 256);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    ck_assert_int_eq(count_aside(dir), 0);
    fd = open(path, O_RDONLY);
    ck_assert_int_eq(pread(fd, back, 4, 60), 4);
    close(fd);
    ck_assert_mem_eq(back, v, 4);
    rm_rf(dir);
}
END_TEST

/* ---- read-only and memory-only ---------------------------------------------------- */

START_TEST(test_readonly)
{
    char dir[128], path[160];
    fj_entry e, got;
    fj_cache_counters k;
    fj_key fresh = key_of(77);
    int n_checked = -1;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 4, 3000);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    /* root ignores modes, so there the test hook stands in for them. */
    if (geteuid() == 0) {
        fj_cache_debug_force_readonly = 1;
    } else {
        ck_assert_int_eq(chmod(path, 0444), 0);
        ck_assert_int_eq(chmod(dir, 0555), 0);
    }
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);

    int64_t t0 = ms_now();
    ck_assert_int_eq(fj_cache_lease(c, &fresh, 5000, &got), 0);   /* at once */
    ck_assert_int_lt(ms_now() - t0, 500);
    int info0 = log_count(FJ_LOG_INFO);
    put_seed(c, 77, 10);
    put_seed(c, 78, 10);
    ck_assert_int_eq(log_count(FJ_LOG_INFO), info0 + 1);   /* said once */
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.put_skipped, 2);
    ck_assert_uint_eq(k.puts, 0);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);
    ck_assert_int_eq(fj_cache_clear(c), -1);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &e.key), -1);
    ck_assert_int_eq(fj_cache_verify(c, &n_checked), 0);
    ck_assert_int_eq(n_checked, 1);
    fj_cache_close(c);

    chmod(dir, 0755);
    chmod(path, 0644);
    c = open_ok(dir);   /* writable again: nothing was persisted */
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);
    fj_cache_close(c);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* The real detection (access() on the file and the directory), without the hook. Root
 * ignores modes, so there a child drops to uid/gid 65534 first. Returns 0 when fine. */
static int readonly_checks(const char *dir, const fj_entry *e)
{
    fj_cache *c = NULL;
    fj_entry got;
    fj_cache_counters k;
    int rc = 0;
    if (fj_cache_open(&c, dir, NULL, NULL) != 0)
        return 1;
    if (!fj_cache_readonly(c) || !fj_cache_path(c))
        rc = 2;
    else if (fj_cache_get(c, &e->key, &got) != 1 || !same_blob(&got, e))
        rc = 3;
    else if (fj_cache_put(c, e) != 0)
        rc = 4;
    fj_entry_free(&got);
    fj_cache_counters_get(c, &k);
    if (!rc && (k.put_skipped != 1 || k.hits != 1))
        rc = 5;
    fj_cache_close(c);
    return rc;
}

START_TEST(test_readonly_modes)
{
    char dir[128], path[160];
    fj_entry e;
    int rc;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 14, 1500);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);
    ck_assert_int_eq(chmod(path, 0444), 0);
    ck_assert_int_eq(chmod(dir, 0555), 0);
    ck_assert_int_eq(chmod(g_root, 0711), 0);   /* traversable by the unprivileged child */
    if (geteuid() == 0) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            if (setgroups(0, NULL) == -1 || setgid(65534) == -1 || setuid(65534) == -1)
                _exit(77);   /* cannot drop privileges here: nothing to check */
            _exit(readonly_checks(dir, &e));
        }
        rc = wait_child(pid);
        if (rc == 77)
            rc = 0;
    } else {
        rc = readonly_checks(dir, &e);
    }
    chmod(g_root, 0700);
    ck_assert_int_eq(rc, 0);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

START_TEST(test_memory_only)
{
    char dir[128], file[160], bad[192];
    fj_entry e, got;
    fj_cache_stats st;
    make_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/plain", dir);
    snprintf(bad, sizeof bad, "%s/plain/sub", dir);   /* mkdir fails: ENOTDIR */
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    close(fd);

    fj_cache *c = open_ok(bad);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "memory only"));
    make_entry(&e, 12, 777);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(st.bytes, 777);
    ck_assert_int_eq(st.file_bytes, 0);
    fj_cache_close(c);

    /* dir == NULL: memory only by request, so no warning. */
    c = open_ok(NULL);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 0);
    fj_cache_close(c);
    fj_cache_close(NULL);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST


/* The file layout of schema 1 (fajit 0.1.0), as it shipped; schema 2 added kernels.parts.
 * Both held kernels of cache format 1 (checksum of the blob alone). */
static const char v1_schema[] =
    "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT);"
    "CREATE TABLE kernels ("
    " key BLOB PRIMARY KEY, arch TEXT NOT NULL, nvrtc_version INTEGER NOT NULL,"
    " name TEXT NOT NULL, options TEXT NOT NULL, blob BLOB NOT NULL,"
    " blob_size INTEGER NOT NULL, checksum INTEGER NOT NULL, log TEXT NOT NULL,"
    " compile_ms REAL, regs INTEGER, smem INTEGER, spill_bytes INTEGER,"
    " created INTEGER, last_used INTEGER, hits INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX kernels_last_used ON kernels (last_used);"
    "CREATE TABLE tuning ("
    " gpu_name TEXT, arch TEXT, sm_count INTEGER, signature TEXT, bucket TEXT,"
    " config TEXT, time_ms REAL, table_json TEXT, pinned INTEGER, fajit_version TEXT,"
    " nvrtc_version INTEGER, created INTEGER,"
    " PRIMARY KEY (gpu_name, arch, sm_count, signature, bucket));"
    "CREATE TABLE leases ("
    " key BLOB PRIMARY KEY, pid INTEGER, host TEXT, token INTEGER, heartbeat INTEGER);"
    "INSERT INTO meta VALUES ('format', '1'), ('created', '0');"
    "PRAGMA user_version = 1;";
static const char v2_delta[] =
    "ALTER TABLE kernels ADD COLUMN parts TEXT;"
    "UPDATE meta SET v = '2' WHERE k = 'format';"
    "PRAGMA user_version = 2;";

/* The tuning rows of an old file: signature, bucket, config, pinned. */
static const char *const old_rows[][4] = {
    { "fwd.bf16.hd128.causal.gqa4", "sq<=1k", "128x64w4s1", "1" },
    { "fwd.f16.hd64.none.gqa1", "sq=1,sk<=4k", "64x64w4s2", "0" },
    { "fwd", "sq<=512", "64x32w4s1", "0" },   /* no dot: the whole signature is the op */
};
#define N_OLD_ROWS 3

/* A cache file (wal = 1) or bundle (journal DELETE) of schema `ver` (1 or 2) holding
 * kernel `e` and old_rows, as that fajit wrote them. */
static void write_old_file(const char *path, int ver, int wal, const fj_entry *e)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    if (wal)
        ck_assert_int_eq(sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL),
                         SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, v1_schema, NULL, NULL, NULL), SQLITE_OK);
    if (ver >= 2)
        ck_assert_int_eq(sqlite3_exec(db, v2_delta, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO kernels (key, arch, nvrtc_version,"
                                        " name, options, blob, blob_size, checksum, log,"
                                        " compile_ms, regs, smem, spill_bytes, created,"
                                        " last_used, hits) VALUES (?1, ?2, ?3, ?4, ?5,"
                                        " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 7, 7, 0)",
                                        -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_blob(st, 1, e->key.b, 16, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, e->arch, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, e->nvrtc_version);
    sqlite3_bind_text(st, 4, e->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, e->options, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 6, e->blob, (int)e->blob_size, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)e->blob_size);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)XXH3_64bits(e->blob, e->blob_size));
    sqlite3_bind_text(st, 9, e->log, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 10, e->compile_ms);
    sqlite3_bind_int(st, 11, e->regs);
    sqlite3_bind_int(st, 12, e->smem);
    sqlite3_bind_int(st, 13, e->spill_bytes);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO tuning VALUES ('NVIDIA H200',"
                                        " 'sm_90a', 132, ?1, ?2, ?3, 0.5, '[]', ?4, '0.1.0',"
                                        " 12080, 100)", -1, &st, NULL), SQLITE_OK);
    for (int i = 0; i < N_OLD_ROWS; i++) {
        for (int j = 0; j < 4; j++)
            sqlite3_bind_text(st, j + 1, old_rows[i][j], -1, SQLITE_STATIC);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/* Every row of old_rows is in `c`, with its op and pin. */
static void check_old_rows(fj_cache *c)
{
    for (int i = 0; i < N_OLD_ROWS; i++) {
        fj_tune_row r;
        ck_assert_int_eq(fj_cache_tune_get(c, "NVIDIA H200", "sm_90a", 132, old_rows[i][0],
                                           old_rows[i][1], &r), 1);
        ck_assert_str_eq(r.config, old_rows[i][2]);
        ck_assert_str_eq(r.op, "fwd");
        ck_assert_int_eq(r.pinned, old_rows[i][3][0] == '1');
        ck_assert_int_eq(r.created, 100);
        fj_tune_row_free(&r);
    }
}

static int count_rows_cb(void *user, const fj_tune_row *r)
{
    ck_assert_str_eq(r->op, "fwd");
    ++*(int *)user;
    return 0;
}

/* The op column as stored in the file (not as derived on reading). */
static int stored_ops_fwd(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK
        && sqlite3_prepare_v2(db, "SELECT count(*) FROM tuning WHERE op = 'fwd'", -1, &st,
                              NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* A file of schema 1 or 2 (_i): read as it is when read-only (its format-1 kernel left in
 * place, verified by the old checksum rule, not exported; tuning rows read with their op
 * taken from the signature); an old bundle imports its tuning rows and skips its kernel;
 * a writable file is migrated in place (not set aside): every tuning row kept with its op
 * stored, the format-1 kernel deleted. */
START_TEST(test_migrate_old)
{
    const int ver = _i;
    char dir[128], path[160], bundle[160], old_bundle[160];
    fj_entry e, e2, got;
    fj_bundle_stats st;
    fj_cache_stats cs;
    int n = 0, checked = 0;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    snprintf(bundle, sizeof bundle, "%s/new.fjb", dir);
    snprintf(old_bundle, sizeof old_bundle, "%s/old.fjb", dir);
    make_entry(&e, 23, 3000);
    write_old_file(path, ver, 1, &e);
    write_old_file(old_bundle, ver, 0, &e);
    ck_assert_int_eq(file_user_version(path), ver);

    fj_cache_debug_force_readonly = 1;
    fj_cache *c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);   /* no key of format 2 is e.key */
    assert_same(&got, &e);
    ck_assert_ptr_null(got.parts);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_verify(c, &checked), 0);
    ck_assert_int_eq(checked, 1);
    ck_assert_int_eq(fj_cache_stats_get(c, &cs), 0);
    ck_assert_int_eq(cs.entries, 1);
    check_old_rows(c);
    ck_assert_int_eq(fj_cache_tune_list(c, count_rows_cb, &n), 0);
    ck_assert_int_eq(n, N_OLD_ROWS);
    ck_assert_int_eq(fj_cache_export(c, bundle, NULL, 0, &st), 0);
    ck_assert_int_eq(st.kernels, 0);
    ck_assert_int_eq(st.kernels_stale, 1);
    ck_assert_int_eq(st.rows, N_OLD_ROWS);
    fj_cache_close(c);

    /* Imports: the exported bundle, an old bundle, the old cache file itself. */
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m, old_bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 0);
    ck_assert_int_eq(st.kernels_stale, 1);
    ck_assert_int_eq(st.rows, N_OLD_ROWS);
    check_old_rows(m);
    ck_assert_int_eq(fj_cache_has(m, &e.key), 0);
    ck_assert_int_eq(fj_cache_import(m, path, NULL, &st), 0);
    ck_assert_int_eq(st.kernels_stale, 1);
    ck_assert_int_eq(st.rows_kept, N_OLD_ROWS);
    fj_cache_close(m);
    m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.rows, N_OLD_ROWS);
    ck_assert_int_eq(st.kernels + st.kernels_stale, 0);
    check_old_rows(m);
    fj_cache_close(m);
    ck_assert_int_eq(file_user_version(path), ver);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(count_aside(dir), 0);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_INFO], "migrated"));
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_INFO], "1 kernels of cache format 1 "
                                                          "dropped"));
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 0);
    ck_assert_int_eq(fj_cache_stats_get(c, &cs), 0);
    ck_assert_int_eq(cs.entries, 0);
    check_old_rows(c);
    make_entry(&e2, 24, 500);
    e2.parts = test_parts(k_digest, "f", "P", "O", "sm_90a", 13000, FJ_CACHE_FORMAT_VERSION);
    ck_assert_int_eq(fj_cache_put(c, &e2), 0);
    fj_cache_close(c);   /* checkpoints the WAL into the file */
    ck_assert_int_eq(file_user_version(path), FJ_CACHE_SCHEMA_VERSION);
    ck_assert_int_eq(stored_ops_fwd(path), N_OLD_ROWS);

    c = open_ok(dir);   /* a second open finds the current schema: nothing more to do */
    ck_assert_int_eq(fj_cache_get(c, &e2.key, &got), 1);
    ck_assert_str_eq(got.parts, e2.parts);
    fj_entry_free(&got);
    check_old_rows(c);
    fj_cache_close(c);
    fj_entry_free(&e);
    fj_entry_free(&e2);
    rm_rf(dir);
}
END_TEST

/* A kernels.db (or -wal) that is a symbolic link, dangling or not, is not followed: memory
 * only, with a warning naming it, and nothing created where it points. */
START_TEST(test_symlink_db)
{
    char dir[128], sub[160], db[200], target[200], other[160], side[210];
    make_dir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/c", dir);
    snprintf(db, sizeof db, "%s/kernels.db", sub);
    snprintf(target, sizeof target, "%s/elsewhere.db", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_int_eq(symlink(target, db), 0);   /* dangling */

    fj_cache *c = open_ok(sub);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "symbolic link"));
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], db));
    put_seed(c, 1, 100);   /* memory only still works */
    fj_cache_close(c);
    ck_assert_int_eq(access(target, F_OK), -1);

    /* A link to a real cache file: not followed either, also when read-only. */
    snprintf(other, sizeof other, "%s/o", dir);
    c = open_ok(other);
    put_seed(c, 2, 100);
    fj_cache_close(c);
    unlink(db);
    snprintf(target, sizeof target, "%s/kernels.db", other);
    ck_assert_int_eq(symlink(target, db), 0);
    c = open_ok(sub);
    ck_assert_ptr_null(fj_cache_path(c));
    fj_cache_close(c);
    fj_cache_debug_force_readonly = 1;
    c = open_ok(sub);
    fj_cache_debug_force_readonly = 0;
    ck_assert_ptr_null(fj_cache_path(c));
    fj_cache_close(c);

    /* The -wal beside a plain file. */
    unlink(db);
    snprintf(side, sizeof side, "%s-wal", db);
    ck_assert_int_eq(symlink("/nonexistent/fj-wal", side), 0);
    c = open_ok(sub);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], side));
    fj_cache_close(c);
    unlink(side);
    c = open_ok(sub);
    ck_assert_str_eq(fj_cache_path(c), db);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Directories the cache creates are private (0700); existing ones keep their mode. */
START_TEST(test_dir_mode)
{
    char dir[128], a[160], b[200];
    struct stat sb;
    make_dir(dir, sizeof dir);
    ck_assert_int_eq(chmod(dir, 0755), 0);
    snprintf(a, sizeof a, "%s/new", dir);
    snprintf(b, sizeof b, "%s/new/fajit", dir);
    mode_t old = umask(0);   /* the mode must not depend on a permissive umask */
    fj_cache *c = open_ok(b);
    umask(old);
    ck_assert_ptr_nonnull(fj_cache_path(c));
    fj_cache_close(c);
    ck_assert_int_eq(stat(a, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0700);
    ck_assert_int_eq(stat(b, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0700);
    ck_assert_int_eq(stat(dir, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 07777, 0755);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_open(TCase *tc)
{
    tcase_add_test(tc, test_symlink_db);
    tcase_add_test(tc, test_dir_mode);
    tcase_add_test(tc, test_corrupt_file);
    tcase_add_test(tc, test_corrupt_page);
    tcase_add_loop_test(tc, test_damage_inside, 0, 3);
    tcase_add_test(tc, test_newer_version);
    tcase_add_test(tc, test_readonly);
    tcase_add_test(tc, test_readonly_modes);
    tcase_add_test(tc, test_memory_only);
    tcase_add_loop_test(tc, test_migrate_old, 1, 3);
}
