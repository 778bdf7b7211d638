/* bundle.c - fleet bundles: export (one self-contained file, written beside its target
 * and renamed over it), import (all or nothing; order-independent, so a merge is a fresh
 * cache, imports, an export). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache_int.h"

/* ---- bundles ---------------------------------------------------------------------- */

enum { COPY_OK, COPY_PRESENT, COPY_CORRUPT, COPY_STALE, COPY_ERROR };

/* Copies the kernel row at `src` (COPY_SELECT's columns, from a file of `schema`) through
 * `dst` (COPY_INSERT), after checking its key and blob. A kernel of a file of schema < 3
 * is of cache format 1: never hit again, not copied (COPY_STALE). */
static int copy_kernel(sqlite3_stmt *src, int schema, sqlite3_stmt *dst)
{
    const void *blob;
    size_t n;
    int rc;

    if (schema < 3)
        return COPY_STALE;
    if (sqlite3_column_type(src, 0) != SQLITE_BLOB || sqlite3_column_bytes(src, 0) != 16)
        return COPY_CORRUPT;
    blob = sqlite3_column_blob(src, 5);
    n = (size_t)sqlite3_column_bytes(src, 5);
    if (n && !blob)
        return COPY_ERROR;   /* out of memory */
    if (!fj_blob_ok(schema, sqlite3_column_blob(src, 0), blob, n, sqlite3_column_int64(src, 6),
                    sqlite3_column_int64(src, 7)))
        return COPY_CORRUPT;
    for (int i = 0; i < N_COPY_COLS; i++)
        sqlite3_bind_value(dst, i + 1, sqlite3_column_value(src, i));
    rc = sqlite3_step(dst);
    done(dst);
    if (rc != SQLITE_DONE)
        return COPY_ERROR;
    return sqlite3_changes(sqlite3_db_handle(dst)) > 0 ? COPY_OK : COPY_PRESENT;
}

static void note_err(char *why, size_t n, const char *what, sqlite3 *db)
{
    if (!why[0])
        snprintf(why, n, "%s: %s", what, db ? sqlite3_errmsg(db) : strerror(errno));
}

/* Opens `path` for reading without blocking (a FIFO with no writer, a device) and without
 * making it the controlling terminal; -1 with errno when it cannot. */
static int open_peek(const char *path, struct stat *sb)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd != -1 && fstat(fd, sb) == -1) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Whether the regular file at `path` is a fajit bundle or cache file (of any schema up to
 * ours): an SQLite file whose user_version is one of ours and that has the meta and kernels
 * tables. */
static int is_bundle_file(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t ver = 0, objects = 0;
    int yes = 0;
    char *uri = fj_cache_uri(path, "?mode=ro");
    if (uri && sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) == SQLITE_OK
        && fj_cache_read_version(db, &ver, &objects) == SQLITE_OK && ver >= 1
        && ver <= FJ_CACHE_SCHEMA_VERSION
        && sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                              " AND name IN ('meta', 'kernels')", -1, &st, NULL) == SQLITE_OK
        && sqlite3_step(st) == SQLITE_ROW)
        yes = sqlite3_column_int(st, 0) == 2;
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(uri);
    return yes;
}

/* Why export must not replace `path`, or NULL (into why, n bytes). Never: anything but a
 * regular file (a FIFO, a device, a directory: opened without blocking and checked, never
 * replaced); the cache's own file, -wal or -shm (the same inode, however it is spelled or
 * linked); a live cache of anyone's, an SQLite file in WAL mode (header bytes 18 and 19
 * are 2; a bundle never is). Unless FJ_EXPORT_FORCE: a regular file that is neither empty
 * nor a fajit bundle. Nothing there: NULL. */
static const char *unsafe_target(const fj_cache *c, const char *path, unsigned flags,
                                 char *why, size_t n)
{
    static const char *const suffix[] = { "", "-wal", "-shm" };
    static const char magic[16] = "SQLite format 3";
    unsigned char head[20];
    struct stat a, b;
    int fd = open_peek(path, &b);

    if (fd == -1 && errno == ENOENT)
        return NULL;   /* nothing there to replace (or a dangling link: rename replaces it) */
    if (fd == -1 && (stat(path, &b) == -1 || !S_ISREG(b.st_mode) || !(flags & FJ_EXPORT_FORCE))) {
        snprintf(why, n, "cannot read it to check that it is a bundle (%s)", strerror(errno));
        return why;
    }
    if (!S_ISREG(b.st_mode)) {
        close(fd);
        return S_ISDIR(b.st_mode) ? "it is a directory"
                                  : "it is not a regular file (a FIFO, a device or a socket)";
    }
    for (int i = 0; c->path && i < 3; i++) {
        char own[4200];
        snprintf(own, sizeof own, "%s%s", c->path, suffix[i]);
        if (stat(own, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            if (fd != -1)
                close(fd);
            return "it is this cache's own file";
        }
    }
    ssize_t got = fd == -1 ? 0 : read(fd, head, sizeof head);
    if (fd != -1)
        close(fd);
    if (got == (ssize_t)sizeof head && memcmp(head, magic, 16) == 0 && head[18] == 2
        && head[19] == 2)
        return "it is a live cache (an SQLite file in WAL mode; bundles never are)";
    if ((flags & FJ_EXPORT_FORCE) || b.st_size == 0 || is_bundle_file(path))
        return NULL;
    return "it is neither empty nor a fajit bundle (export replaces only those unless forced)";
}

/* Copies every row of `src` (bound, stepped and reset here) into the bundle: kernels
 * through copy_kernel, tuning rows as they are. Returns the last step's code. */
static int export_rows(sqlite3_stmt *src, int schema, const char *arch, sqlite3_stmt *ins,
                       int kernels, fj_bundle_stats *st)
{
    int step;
    if (arch)
        sqlite3_bind_text(src, 1, arch, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(src)) == SQLITE_ROW) {
        int r = COPY_OK;
        if (kernels) {
            r = copy_kernel(src, schema, ins);
        } else {
            for (int i = 0; i < N_TUNE_COLS; i++)
                sqlite3_bind_value(ins, i + 1, sqlite3_column_value(src, i));
            if (sqlite3_step(ins) != SQLITE_DONE)
                r = COPY_ERROR;
            done(ins);
        }
        if (r == COPY_ERROR)
            break;   /* step stays SQLITE_ROW: the bundle's side failed */
        st->corrupt += r == COPY_CORRUPT;
        st->kernels_stale += r == COPY_STALE;
        *(kernels ? &st->kernels : &st->rows) += r == COPY_OK;
    }
    done(src);
    return step;
}

/* Copies the verdicts of `src` (VERDICT_LIST, bound and reset here) into the bundle. */
static int export_verdicts(sqlite3_stmt *src, const char *arch, sqlite3_stmt *ins,
                           fj_bundle_stats *st)
{
    int step;
    if (arch)
        sqlite3_bind_text(src, 1, arch, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(src)) == SQLITE_ROW) {
        for (int i = 0; i < N_VERDICT_COLS; i++)
            sqlite3_bind_value(ins, i + 1, sqlite3_column_value(src, i));
        int rc = sqlite3_step(ins);
        done(ins);
        if (rc != SQLITE_DONE)
            break;   /* step stays SQLITE_ROW: the bundle's side failed */
        st->verdicts++;
    }
    done(src);
    return step;
}

/* Writes the bundle of `arch` (NULL = all) into the new file `tmp`, committed and closed;
 * the caller holds c->mu. 0, or -1 with why filled. */
static int write_bundle(fj_cache *c, const char *tmp, const char *arch, fj_bundle_stats *st,
                        char *why, size_t n)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *ins_k = NULL, *ins_t = NULL, *ins_v = NULL;
    int rc = -1, step;

    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL)
            != SQLITE_OK
        || sqlite3_exec(db, "PRAGMA journal_mode = DELETE; BEGIN", NULL, NULL, NULL)
            != SQLITE_OK
        || fj_cache_write_schema(db) != SQLITE_OK
        || sqlite3_prepare_v2(db, COPY_INSERT, -1, &ins_k, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, TUNE_PUT, -1, &ins_t, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, VERDICT_PUT, -1, &ins_v, NULL) != SQLITE_OK) {
        note_err(why, n, tmp, db);
        goto out;
    }
    step = export_rows(c->st[ST_EXPORT_K], c->schema, arch, ins_k, 1, st);
    if (step == SQLITE_DONE)
        step = export_rows(c->st[ST_TUNE_LIST], c->schema, arch, ins_t, 0, st);
    if (step == SQLITE_DONE && c->st[ST_VERDICT_LIST])   /* (none before schema 4) */
        step = export_verdicts(c->st[ST_VERDICT_LIST], arch, ins_v, st);
    if (step != SQLITE_DONE) {
        if (step == SQLITE_ROW)
            note_err(why, n, tmp, db);
        else
            note_err(why, n, "reading the cache", c->db);
        goto out;
    }
    /* A bundle asked for one target and holding nothing of it (no kernel, tuning row or
     * validation verdict) would carry nothing. */
    if (arch && st->kernels == 0 && st->rows == 0 && st->verdicts == 0) {
        snprintf(why, n, "the cache holds no usable kernel of target %s", arch);
        goto out;
    }
    sqlite3_finalize(ins_k);
    sqlite3_finalize(ins_t);
    sqlite3_finalize(ins_v);
    ins_k = ins_t = ins_v = NULL;
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_close(db) != SQLITE_OK) {
        note_err(why, n, tmp, db);
        goto out;
    }
    db = NULL;
    rc = 0;
out:
    sqlite3_finalize(ins_k);
    sqlite3_finalize(ins_t);
    sqlite3_finalize(ins_v);
    sqlite3_close(db);   /* NULL: no-op */
    return rc;
}

int fj_cache_export(fj_cache *c, const char *path, const char *arch, unsigned flags,
                    fj_bundle_stats *st_out)
{
    fj_bundle_stats st;
    char *tmp = NULL, *journal = NULL, why[512] = "";
    const char *unsafe;
    int rc = -1;
    size_t n;

    memset(&st, 0, sizeof st);
    if (st_out)
        *st_out = st;
    if (!c || !path || !*path)
        return -1;
    if ((unsafe = unsafe_target(c, path, flags, why, sizeof why)) != NULL) {
        fj_cache_say(c, FJ_LOG_WARN, "not exporting onto %s: %s", path, unsafe);
        return -1;
    }
    /* Written beside the target, then renamed over it. */
    n = strlen(path) + 40;
    tmp = malloc(n);
    journal = malloc(n);
    if (!tmp || !journal) {
        free(tmp);
        free(journal);
        return -1;
    }
    snprintf(tmp, n, "%s.tmp-%016llx", path, (unsigned long long)fj_cache_token());
    snprintf(journal, n, "%s-journal", tmp);
    unlink(tmp);
    unlink(journal);

    pthread_mutex_lock(&c->mu);
    if (write_bundle(c, tmp, arch, &st, why, sizeof why) != 0)
        goto out;
    if (rename(tmp, path) == -1) {
        note_err(why, sizeof why, path, NULL);
        goto out;
    }
    rc = 0;
    if (st.corrupt)
        fj_cache_say(c, FJ_LOG_WARN, "export to %s: %d corrupt kernels skipped", path,
                     st.corrupt);
    if (st.kernels_stale)
        fj_cache_say(c, FJ_LOG_INFO, "export to %s: %d kernels of an older cache format "
                     "skipped", path, st.kernels_stale);
    fj_cache_say(c, FJ_LOG_INFO, "exported %d kernels, %d tuning rows and %d verdicts to %s",
                 st.kernels, st.rows, st.verdicts, path);
out:
    if (rc != 0)
        fj_cache_say(c, FJ_LOG_WARN, "export to %s failed (%s)", path, why);
    fj_cache_unlock(c);
    if (rc != 0) {
        unlink(tmp);
        unlink(journal);
    }
    free(tmp);
    free(journal);
    if (st_out && rc == 0)
        *st_out = st;
    return rc;
}

/* Opens a bundle (or another cache's file) read-only: plainly first, which also sees a
 * live WAL; immutable when that fails (a WAL-mode file on read-only media). */
static int open_source(const char *path, sqlite3 **db, int64_t *ver, char *why, size_t n)
{
    static const char *const query[] = { "?mode=ro", "?immutable=1" };
    int64_t objects = 0;
    int rc = SQLITE_CANTOPEN;

    for (int i = 0; i < 2; i++) {
        char *uri = fj_cache_uri(path, query[i]);
        if (!uri)
            return SQLITE_NOMEM;
        rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout(*db, BUSY_TIMEOUT_MS);
            rc = fj_cache_read_version(*db, ver, &objects);
        }
        if (rc == SQLITE_OK)
            return rc;
        why[0] = '\0';
        note_err(why, n, path, *db);
        sqlite3_close(*db);
        *db = NULL;
        if (is_corrupt_rc(rc))
            break;
    }
    return rc;
}

/* Copies the kernels of `sel_k` (COPY_SELECT of a file of `schema`) and the tuning rows of
 * `sel_t` into the cache, in its transaction, by import's rules. Returns the last step's
 * code (SQLITE_ROW: the cache's side failed). */
static int import_rows(fj_cache *c, sqlite3_stmt *sel_k, sqlite3_stmt *sel_t, int schema,
                       fj_bundle_stats *st)
{
    int step;
    while ((step = sqlite3_step(sel_k)) == SQLITE_ROW) {
        int r = copy_kernel(sel_k, schema, c->st[ST_IMPORT_K]);
        if (r == COPY_ERROR)
            break;
        st->kernels_stale += r == COPY_STALE;
        st->kernels += r == COPY_OK;
        st->kernels_present += r == COPY_PRESENT;
        st->corrupt += r == COPY_CORRUPT;
    }
    while (step == SQLITE_DONE) {
        fj_tune_row row;
        if ((step = sqlite3_step(sel_t)) != SQLITE_ROW)
            break;
        int r = fj_tune_read(sel_t, &row) == 0 ? fj_tune_store(c, &row, row.created, 1) : -1;
        fj_tune_row_free(&row);
        if (r < 0)
            break;
        st->rows += r == 0;
        st->rows_kept += r == 1;
        step = SQLITE_DONE;
    }
    return step;
}

static int in_list(const char *const *names, const char *s)
{
    for (; names && *names; names++)
        if (strcmp(*names, s) == 0)
            return 1;
    return 0;
}

/* Merges the verdicts of `sel` (VERDICT_LIST of the bundle) into the cache, in its
 * transaction: the winner of fj_verdict_store's order stays; a PASS of a family in
 * `local_pass` is not taken. Returns the last step's code (SQLITE_ROW: the cache's side
 * failed). */
static int import_verdicts(fj_cache *c, sqlite3_stmt *sel, const char *const *local_pass,
                           fj_bundle_stats *st)
{
    int step;
    while ((step = sqlite3_step(sel)) == SQLITE_ROW) {
        fj_verdict v;
        fj_verdict_read(sel, &v);
        if (v.pass && in_list(local_pass, v.family)) {
            st->verdicts_refused++;
            continue;
        }
        int r = fj_verdict_store(c, &v, 1);
        if (r < 0)
            break;
        st->verdicts += r == 0;
        st->verdicts_kept += r == 1;
        st->verdicts_replaced += r == 2;
    }
    return step;
}

/* The verdicts of a source file of schema `ver` >= 4 (VERDICT_LIST; before schema 5 every
 * verdict is feature-free: features read as ''). */
static int prepare_verdicts(sqlite3 *db, int64_t ver, sqlite3_stmt **sel)
{
    const char *col = ver >= 5 ? VERDICT_FEATURES : "''";
    char *sql = sqlite3_mprintf(VERDICT_LIST, col, col);
    int rc = sql ? sqlite3_prepare_v2(db, sql, -1, sel, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    return rc;
}

/* Whether `path` cannot be a bundle to read: it cannot be opened, or it is no regular
 * file (a FIFO would block SQLite's open, a device would be read without end); why says it. */
static int source_unreadable(const char *path, char *why, size_t n)
{
    struct stat sb;
    int fd = open_peek(path, &sb);
    if (fd == -1) {
        note_err(why, n, path, NULL);
        return 1;
    }
    close(fd);
    if (!S_ISREG(sb.st_mode))
        snprintf(why, n, "%s: not a regular file (a FIFO, a device, a directory or a socket)",
                 path);
    return !S_ISREG(sb.st_mode);
}

int fj_cache_import(fj_cache *c, const char *path, const char *const *local_pass,
                    fj_bundle_stats *st_out)
{
    fj_bundle_stats st;
    sqlite3 *db = NULL;
    sqlite3_stmt *sel_k = NULL, *sel_t = NULL, *sel_v = NULL;
    char *sql = NULL, *sql_t = NULL, why[512] = "";
    int64_t ver = 0;
    int rc = -1, step = SQLITE_DONE, locked = 0, in_txn = 0;

    memset(&st, 0, sizeof st);
    if (st_out)
        *st_out = st;
    if (!c || !path)
        return -1;
    if (source_unreadable(path, why, sizeof why))
        ;   /* why says it */
    else if (open_source(path, &db, &ver, why, sizeof why) != SQLITE_OK)
        ;   /* why says it */
    else if (ver < 1 || ver > FJ_CACHE_SCHEMA_VERSION)
        snprintf(why, sizeof why, "%s: not a fajit bundle of schema 1..%d (user_version "
                 "%lld)", path, FJ_CACHE_SCHEMA_VERSION, (long long)ver);
    else if (!(sql = sqlite3_mprintf(COPY_SELECT, ver >= 2 ? "parts" : "NULL"))
             || sqlite3_prepare_v2(db, sql, -1, &sel_k, NULL) != SQLITE_OK
             || !(sql_t = sqlite3_mprintf(TUNE_LIST, ver >= 3 ? OP_COL : OP_FROM_SIGNATURE))
             || sqlite3_prepare_v2(db, sql_t, -1, &sel_t, NULL) != SQLITE_OK
             || (ver >= 4 && prepare_verdicts(db, ver, &sel_v) != SQLITE_OK))
        note_err(why, sizeof why, path, db);
    if (why[0])
        goto out;

    pthread_mutex_lock(&c->mu);
    locked = 1;
    if (c->readonly) {
        snprintf(why, sizeof why, "%s is read-only", c->path);
        goto out;
    }
    if (exec1(c, ST_BEGIN) != SQLITE_DONE) {
        note_err(why, sizeof why, "the cache", c->db);
        goto out;
    }
    in_txn = 1;
    step = import_rows(c, sel_k, sel_t, (int)ver, &st);
    if (step == SQLITE_DONE && sel_v)
        step = import_verdicts(c, sel_v, local_pass, &st);
    if (step != SQLITE_DONE) {
        if (step == SQLITE_ROW)   /* stopped by the cache's side */
            note_err(why, sizeof why, "the cache", c->db);
        else
            note_err(why, sizeof why, path, db);
        goto out;
    }
    if (exec1(c, ST_COMMIT) != SQLITE_DONE) {
        note_err(why, sizeof why, "the cache", c->db);
        goto out;
    }
    in_txn = 0;
    rc = 0;
    if (st.corrupt)
        fj_cache_say(c, FJ_LOG_WARN, "import of %s: %d corrupt kernels skipped", path,
                     st.corrupt);
    if (st.kernels_stale)
        fj_cache_say(c, FJ_LOG_INFO, "import of %s: %d kernels of an older cache format "
                     "skipped (they compile again when needed)", path, st.kernels_stale);
    fj_cache_say(c, FJ_LOG_INFO, "imported from %s: %d kernels (%d already here), %d tuning "
                 "rows (%d kept as they were), verdicts: %d added, %d replaced, %d kept, %d "
                 "refused", path, st.kernels, st.kernels_present, st.rows, st.rows_kept,
                 st.verdicts, st.verdicts_replaced, st.verdicts_kept, st.verdicts_refused);
out:
    if (in_txn)
        exec1(c, ST_ROLLBACK);
    if (rc != 0)
        fj_cache_say(c, FJ_LOG_WARN, "import failed, nothing imported (%s)", why);
    if (locked)
        fj_cache_unlock(c);
    sqlite3_finalize(sel_k);
    sqlite3_finalize(sel_t);
    sqlite3_finalize(sel_v);
    sqlite3_free(sql);
    sqlite3_free(sql_t);
    sqlite3_close(db);
    if (st_out && rc == 0)
        *st_out = st;
    return rc;
}
