/* cache.c - the cache handle: open and close, the schema and its migrations, the
 * statements every handle prepares, and falling back to memory only. One SQLite file
 * "<dir>/kernels.db" in WAL mode, or an in-memory SQLite database with the same schema
 * when no usable file exists (so both cases share one code path).
 *
 * Locking: every call takes c->mu (the handle is also opened SQLITE_OPEN_FULLMUTEX);
 * between processes SQLite's own file locks and BEGIN IMMEDIATE do the work.
 * A handle must not be used across fork(); open a new one in the child. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <xxhash.h>

#include "cache_int.h"

static void open_dir(fj_cache *c, const char *dir);

/* Test hook, deliberately not in cache.h: nonzero makes fj_cache_open treat an existing
 * file as read-only (tests run as root, where chmod does not stop writes). */
int fj_cache_debug_force_readonly;

static const char *const sql_text[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_GET] = "SELECT arch, nvrtc_version, name, options, blob, blob_size, checksum, log,"
               " compile_ms, regs, smem, spill_bytes, created, last_used, hits, %s"
               " FROM kernels WHERE key = ?1",
    [ST_TOUCH] = "UPDATE kernels SET last_used = ?2, hits = hits + 1 WHERE key = ?1",
    [ST_PUT] = "INSERT OR REPLACE INTO kernels (key, arch, nvrtc_version, name, options,"
               " blob, blob_size, checksum, log, compile_ms, regs, smem, spill_bytes,"
               " created, last_used, hits, parts)"
               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, 0,"
               " ?15)",
    [ST_DEL] = "DELETE FROM kernels WHERE key = ?1",
    [ST_EXISTS] = "SELECT 1 FROM kernels WHERE key = ?1",
    [ST_CORRUPT] = "UPDATE kernels SET blob = ?2 WHERE key = ?1",
    [ST_LEASE_GET] = "SELECT pid, host, token, heartbeat FROM leases WHERE key = ?1",
    [ST_LEASE_SET] = "INSERT OR REPLACE INTO leases (key, pid, host, token, heartbeat)"
                     " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_LEASE_DEL] = "DELETE FROM leases WHERE key = ?1 AND token = ?2",
    [ST_LEASE_DEL_KEY] = "DELETE FROM leases WHERE key = ?1",
    [ST_BEAT] = "UPDATE leases SET heartbeat = ?3 WHERE key = ?1 AND token = ?2",
    [ST_LIST] = "SELECT key, arch, nvrtc_version, name, options, blob_size, log, compile_ms,"
                " regs, smem, spill_bytes, created, last_used, hits, %s"
                " FROM kernels ORDER BY created, key",
    [ST_VERIFY] = "SELECT key, blob, blob_size, checksum FROM kernels",
    [ST_STATS] = "SELECT count(*), coalesce(sum(blob_size), 0) FROM kernels",
    [ST_CLEAR] = "DELETE FROM kernels",
    /* Newest first (last load, then hits, then creation), ?2 (a key to keep) ahead of all:
     * every kernel past the point where the running total of blob sizes exceeds ?1 goes. */
    [ST_PRUNE] = "DELETE FROM kernels WHERE key IN (SELECT key FROM ("
                 " SELECT key, sum(blob_size) OVER (ORDER BY key IS ?2 DESC, last_used DESC,"
                 "  hits DESC, created DESC, key ROWS UNBOUNDED PRECEDING) AS running"
                 " FROM kernels) WHERE running > ?1 AND key IS NOT ?2)",
    [ST_NVRTC_VERSIONS] = "SELECT DISTINCT nvrtc_version FROM kernels WHERE arch = ?1"
                          " ORDER BY nvrtc_version DESC",
    [ST_TUNE_GET] = "SELECT " TUNE_SEL " FROM tuning WHERE " TUNE_KEY,
    [ST_TUNE_PUT] = TUNE_PUT,
    [ST_TUNE_PIN] = "UPDATE tuning SET pinned = ?6 WHERE " TUNE_KEY,
    [ST_TUNE_LIST] = TUNE_LIST,
    [ST_EXPLAIN] = "SELECT key, name, arch, nvrtc_version, options, %s, created FROM kernels",
    [ST_EXPORT_K] = COPY_SELECT,
    [ST_IMPORT_K] = COPY_INSERT,
    [ST_VERDICT_GET] = "SELECT " VERDICT_SEL " FROM verdicts WHERE " VERDICT_KEY,
    [ST_VERDICT_PUT] = VERDICT_PUT,
    [ST_VERDICT_LIST] = VERDICT_LIST,
};

/* The oldest schema a statement can be prepared on: the ones that write a column an older
 * file lacks (kernels.parts: 2, tuning.op: 3, verdicts.features: 5). */
static int min_schema(int id)
{
    if (id == ST_VERDICT_PUT)
        return 5;
    if (id == ST_VERDICT_GET || id == ST_VERDICT_LIST)
        return 4;   /* an older read-only file simply holds no verdicts */
    return id == ST_TUNE_PUT ? 3 : id == ST_PUT || id == ST_IMPORT_K ? 2 : 1;
}

static int is_tuning_stmt(int id)
{
    return id == ST_TUNE_GET || id == ST_TUNE_PUT || id == ST_TUNE_PIN || id == ST_TUNE_LIST;
}

static int is_verdict_stmt(int id)
{
    return id == ST_VERDICT_GET || id == ST_VERDICT_PUT || id == ST_VERDICT_LIST;
}

/* The verdicts of the first-use validation gate (src/api/validate.c), one per GPU class,
 * family and model-feature set ('' for none: every verdict of schema 4). Schema 4's table
 * had no features column (VERDICTS_TABLE_4); 4 -> 5 rebuilds it, since a primary key
 * cannot be altered. */
#define VERDICTS_COLUMNS                                                                 \
    " gpu_name TEXT, arch TEXT, sm_count INTEGER, driver_version INTEGER,"              \
    " fajit_version TEXT, family TEXT, pass INTEGER NOT NULL, failed_case TEXT NOT NULL," \
    " error TEXT NOT NULL, created INTEGER NOT NULL,"
#define VERDICTS_TABLE_4                                                                 \
    "CREATE TABLE verdicts (" VERDICTS_COLUMNS                                           \
    " PRIMARY KEY (gpu_name, arch, sm_count, driver_version, fajit_version, family));"
#define VERDICTS_TABLE_AS(name)                                                          \
    "CREATE TABLE " name " (" VERDICTS_COLUMNS " features TEXT NOT NULL DEFAULT '',"      \
    " PRIMARY KEY (gpu_name, arch, sm_count, driver_version, fajit_version, family,"     \
    " features));"
#define VERDICTS_TABLE VERDICTS_TABLE_AS("verdicts")

/* Schema FJ_CACHE_SCHEMA_VERSION (5). Older files are brought up to it by migrations[]. */
static const char schema_sql[] =
    "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT);"
    "CREATE TABLE kernels ("
    " key BLOB PRIMARY KEY, arch TEXT NOT NULL, nvrtc_version INTEGER NOT NULL,"
    " name TEXT NOT NULL, options TEXT NOT NULL, blob BLOB NOT NULL,"
    " blob_size INTEGER NOT NULL, checksum INTEGER NOT NULL, log TEXT NOT NULL,"
    " compile_ms REAL, regs INTEGER, smem INTEGER, spill_bytes INTEGER,"
    " created INTEGER, last_used INTEGER, hits INTEGER NOT NULL DEFAULT 0, parts TEXT);"
    "CREATE INDEX kernels_last_used ON kernels (last_used);"
    "CREATE TABLE tuning ("
    " gpu_name TEXT, arch TEXT, sm_count INTEGER, signature TEXT, bucket TEXT,"
    " config TEXT, time_ms REAL, table_json TEXT, pinned INTEGER, fajit_version TEXT,"
    " nvrtc_version INTEGER, created INTEGER, op TEXT NOT NULL DEFAULT '',"
    " PRIMARY KEY (gpu_name, arch, sm_count, signature, bucket));"
    "CREATE TABLE leases ("
    " key BLOB PRIMARY KEY, pid INTEGER, host TEXT, token INTEGER, heartbeat INTEGER);"
    VERDICTS_TABLE;

/* migrations[v] takes a file from schema v to v + 1 (user_version and meta are set after).
 * 2 -> 3 also deletes every kernel: they are all of cache format 1, whose keys can no
 * longer be made and whose checksums do not cover their keys (cache.h). */
static const char *const migrations[FJ_CACHE_SCHEMA_VERSION] = {
    [1] = "ALTER TABLE kernels ADD COLUMN parts TEXT;",
    [2] = "ALTER TABLE tuning ADD COLUMN op TEXT NOT NULL DEFAULT '';"
          "UPDATE tuning SET op = " OP_FROM_SIGNATURE ";"
          "DELETE FROM kernels; DELETE FROM leases;",
    [3] = VERDICTS_TABLE_4,
    [4] = VERDICTS_TABLE_AS("verdicts_5")
          "INSERT INTO verdicts_5 (" VERDICT_COLS ") SELECT " VERDICT_BASE ", '' FROM verdicts;"
          "DROP TABLE verdicts; ALTER TABLE verdicts_5 RENAME TO verdicts;",
};

/* ---- small helpers ---------------------------------------------------------------- */


#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void fj_cache_say(const fj_cache *c, int level, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    if (!c->log)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->log(c->log_user, level, msg);
}


/* Unique per acquisition, across threads, processes and hosts. */
uint64_t fj_cache_token(void)
{
    static _Atomic uint64_t seq;
    uint64_t t = 0;
    if (getrandom(&t, sizeof t, 0) != (ssize_t)sizeof t) {
        struct { struct timespec ts; pid_t pid; uint64_t n; void *p; } mix;
        memset(&mix, 0, sizeof mix);
        clock_gettime(CLOCK_REALTIME, &mix.ts);
        mix.pid = getpid();
        mix.n = ++seq;
        mix.p = &t;
        t = XXH3_64bits(&mix, sizeof mix);
    }
    return t ? t : 1;
}

/* mkdir -p with mode 0700 (the cache is private to its user unless made otherwise); an
 * existing directory is fine and keeps its mode. */
static int mkdir_p(const char *dir)
{
    char *p, *tmp = dup_str(dir);
    int rc = -1;
    if (!tmp)
        return -1;
    for (p = tmp + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char was = *p;
            *p = '\0';
            if (mkdir(tmp, 0700) == -1 && errno != EEXIST)
                goto out;
            *p = was;
            if (was == '\0')
                break;
        }
    }
    {
        struct stat sb;
        if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
            rc = 0;
        else
            errno = ENOTDIR;
    }
out:
    free(tmp);
    return rc;
}


/* "file:<path percent-encoded><query>" for SQLITE_OPEN_URI; query is "?immutable=1"
 * or "?mode=ro". */
char *fj_cache_uri(const char *path, const char *query)
{
    size_t n = strlen(path), nq = strlen(query) + 1;
    char *u = malloc(5 + 3 * n + nq), *q = u;
    if (!u)
        return NULL;
    q += sprintf(q, "file:");
    for (const unsigned char *s = (const unsigned char *)path; *s; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')
            || strchr("/-._~", *s))
            *q++ = (char)*s;
        else
            q += sprintf(q, "%%%02X", *s);
    }
    memcpy(q, query, nq);
    return u;
}

/* ---- open ------------------------------------------------------------------------- */

static void close_db(fj_cache *c)
{
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(c->st[i]);
        c->st[i] = NULL;
    }
    sqlite3_close_v2(c->db);
    c->db = NULL;
}

/* The format version and the number of schema objects, from one snapshot: read apart,
 * another process could create the schema in between and make a new file look foreign. */
int fj_cache_read_version(sqlite3 *db, int64_t *ver, int64_t *objects)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT (SELECT user_version FROM pragma_user_version),"
                                " (SELECT count(*) FROM sqlite_master)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *ver = sqlite3_column_int64(st, 0);
            *objects = sqlite3_column_int64(st, 1);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Sets user_version and the meta row "format" to the current schema version. */
static int stamp_version(sqlite3 *db)
{
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta VALUES ('format', '%d');"
             "PRAGMA user_version = %d;", FJ_CACHE_SCHEMA_VERSION, FJ_CACHE_SCHEMA_VERSION);
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* The current schema, in the caller's transaction on an empty database. */
int fj_cache_write_schema(sqlite3 *db)
{
    char sql[96];
    int rc = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES ('created', '%lld');",
             (long long)time(NULL));
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? stamp_version(db) : rc;
}

/* Kernel rows in the file, inside the caller's transaction; -1 on error. */
static int64_t count_kernels(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM kernels", -1, &st, NULL) == SQLITE_OK
        && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Creates the schema in an empty file, or migrates a file of an older schema. Under
 * BEGIN IMMEDIATE, reading the version again inside, so that of two processes opening
 * the same file at once only one creates or migrates it. */
static int create_or_migrate(fj_cache *c)
{
    int64_t ver = 0, objects = 0, dropped = 0;
    int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = fj_cache_read_version(c->db, &ver, &objects);
    if (rc == SQLITE_OK && ver == 0 && objects == 0) {
        rc = fj_cache_write_schema(c->db);
    } else if (rc == SQLITE_OK && ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION) {
        dropped = ver < 3 ? count_kernels(c->db) : 0;
        for (int64_t v = ver; rc == SQLITE_OK && v < FJ_CACHE_SCHEMA_VERSION; v++)
            rc = sqlite3_exec(c->db, migrations[v], NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = stamp_version(c->db);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    else if (ver >= 3 && ver < FJ_CACHE_SCHEMA_VERSION)
        fj_cache_say(c, FJ_LOG_INFO, "cache file migrated from schema %lld to %d (%s); every "
                     "kernel, tuning row and verdict kept", (long long)ver,
                     FJ_CACHE_SCHEMA_VERSION, ver < 4 ? "a table of validation verdicts added"
                     : "validation verdicts keyed by model-feature set too");
    else if (ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION)
        fj_cache_say(c, FJ_LOG_INFO, "cache file migrated from schema %lld to %d; %lld "
                     "kernels of cache format 1 dropped (every key changed: they compile "
                     "again when needed), tuning rows kept", (long long)ver,
                     FJ_CACHE_SCHEMA_VERSION, (long long)dropped);
    return rc;
}

static int prepare_all(fj_cache *c)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (c->schema < min_schema(i))
            continue;
        const char *col = is_tuning_stmt(i)    ? (c->schema >= 3 ? OP_COL : OP_FROM_SIGNATURE)
                          : is_verdict_stmt(i) ? (c->schema >= 5 ? VERDICT_FEATURES : "''")
                                               : (c->schema >= 2 ? "parts" : "NULL");
        char *sql = sqlite3_mprintf(sql_text[i], col, col);
        if (!sql)
            return SQLITE_NOMEM;
        int rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &c->st[i],
                                    NULL);
        sqlite3_free(sql);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* Checks the version (creating the schema in a new writable file, migrating an older
 * one) and prepares every statement. The file is "corrupt" (to be set aside) when SQLite
 * says so or when it is not ours at all. An older read-only file is read as it is. */
static int check_schema(fj_cache *c, int writable)
{
    int64_t ver = 0, objects = 0;
    int rc = fj_cache_read_version(c->db, &ver, &objects);
    if (rc == SQLITE_OK && writable
        && ((ver == 0 && objects == 0) || (ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION))) {
        rc = create_or_migrate(c);
        if (rc == SQLITE_OK)   /* ours, or whoever created or migrated it first */
            rc = fj_cache_read_version(c->db, &ver, &objects);
    }
    if (rc != SQLITE_OK)
        return is_corrupt_rc(rc) ? OPEN_CORRUPT : OPEN_FAIL;
    if (ver > FJ_CACHE_SCHEMA_VERSION)
        return OPEN_NEWER;
    if (ver < 1)
        return OPEN_CORRUPT;
    c->schema = (int)ver;
    rc = prepare_all(c);
    if (rc != SQLITE_OK)
        return rc == SQLITE_ERROR || is_corrupt_rc(rc) ? OPEN_CORRUPT : OPEN_FAIL;
    return OPEN_OK;
}

static int open_writable(fj_cache *c, const char *path)
{
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    int rc = sqlite3_open_v2(path, &c->db, flags, NULL);
    if (rc != SQLITE_OK)
        return is_corrupt_rc(rc) ? OPEN_CORRUPT : OPEN_FAIL;
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    /* The first statement that reads the header: garbage shows up here as NOTADB.
     * BUSY (another process switching the mode at the same moment) is not fatal:
     * WAL is persistent in the file, so this connection follows once it is set. */
    rc = sqlite3_exec(c->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
    if (is_corrupt_rc(rc))
        return OPEN_CORRUPT;
    /* In WAL, NORMAL cannot corrupt the file; it only drops fsync on each commit. */
    sqlite3_exec(c->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    return check_schema(c, 1);
}

/* Renames a corrupt file (and its -wal) aside and drops its -shm. Under flock on the
 * directory, and only if `path` is still the inode we found bad, so that two processes
 * noticing the same corruption do not set aside each other's fresh file. */
static int set_aside(fj_cache *c, const char *dir, const char *path, const struct stat *bad)
{
    char aside[4096], side[4096];
    struct stat now;
    int rc = -1, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1 || flock(fd, LOCK_EX) == -1)
        goto out;
    if (stat(path, &now) == -1 || now.st_ino != bad->st_ino || now.st_dev != bad->st_dev) {
        rc = 0;   /* already handled by someone else */
        goto out;
    }
    snprintf(aside, sizeof aside, "%s.corrupt-%lld", path, (long long)time(NULL));
    for (int i = 1; access(aside, F_OK) == 0 && i < 100; i++)
        snprintf(aside, sizeof aside, "%s.corrupt-%lld.%d", path, (long long)time(NULL), i);
    if (rename(path, aside) == -1)
        goto out;
    snprintf(side, sizeof side, "%s-wal", path);
    if (access(side, F_OK) == 0) {
        char wal[4200];
        snprintf(wal, sizeof wal, "%s-wal", aside);
        if (rename(side, wal) == -1)
            unlink(side);
    }
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    fj_cache_say(c, FJ_LOG_WARN, "%s is corrupt or not a fajit cache; moved to %s, "
                 "starting a fresh cache", path, aside);
    free(c->aside);   /* kept for verify, which must not call the loss a clean cache */
    c->aside = dup_str(aside);
    rc = 0;
out:
    if (fd != -1)
        close(fd);   /* releases the flock */
    return rc;
}

static int open_readonly(fj_cache *c, const char *path)
{
    const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX;
    char *uri = fj_cache_uri(path, "?immutable=1");
    int rc;
    if (!uri)
        return OPEN_FAIL;
    rc = sqlite3_open_v2(uri, &c->db, flags, NULL);
    free(uri);
    if (rc != SQLITE_OK)
        return is_corrupt_rc(rc) ? OPEN_CORRUPT : OPEN_FAIL;
    return check_schema(c, 0);
}

static int open_memory(fj_cache *c)
{
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(":memory:", &c->db, flags, NULL) != SQLITE_OK
        || check_schema(c, 1) != OPEN_OK) {
        close_db(c);
        return -1;
    }
    return 0;
}

static const char *const open_why[] = { "", "corrupt or not a fajit cache",
                                        "made by a newer fajit", "unusable" };

/* immutable=1 never reads the WAL: a bundle must be checkpointed first. */
static void warn_unread_wal(const fj_cache *c, const char *path)
{
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (file_size(wal) > 0)
        fj_cache_say(c, FJ_LOG_WARN, "%s is read-only and its -wal is ignored; "
                     "entries not checkpointed into the file are not seen", path);
}

/* The first of `path`, its -wal and its -shm that is a symbolic link (dangling or not),
 * written to buf; 0 when none is. SQLite would follow it and create or write the file
 * wherever it points. */
static int find_link(const char *path, char *buf, size_t n)
{
    static const char *const suffix[] = { "", "-wal", "-shm" };
    struct stat sb;
    for (int i = 0; i < 3; i++) {
        snprintf(buf, n, "%s%s", path, suffix[i]);
        if (lstat(buf, &sb) == 0 && S_ISLNK(sb.st_mode))
            return 1;
    }
    return 0;
}

/* Creates `path` as an empty file if there is none, never through a symbolic link (one
 * put there after find_link looked: ELOOP). SQLite then opens a plain file. 0, or -1 for
 * a link; other errors are left for SQLite to report. */
static int create_nofollow(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd == -1)
        return errno == ELOOP ? -1 : 0;
    close(fd);
    return 0;
}

/* Leaves c->db open on the file (c->path set), or closed (memory only, warning said). */
static void open_dir(fj_cache *c, const char *dir)
{
    const char *const *why = open_why;
    struct stat sb;
    size_t n = strlen(dir);
    int exists, writable, r = OPEN_FAIL;
    char *path = malloc(n + sizeof "/kernels.db"), link[4200];

    if (!path)
        return;
    snprintf(path, n + sizeof "/kernels.db", "%s/kernels.db", dir);
    if (n == 0 || mkdir_p(dir) == -1) {
        fj_cache_say(c, FJ_LOG_WARN, "cannot use directory '%s' (%s); using memory only",
                     dir, n ? strerror(errno) : "empty path");
        goto out;
    }
    if (find_link(path, link, sizeof link)) {
        fj_cache_say(c, FJ_LOG_WARN, "%s is a symbolic link, which the cache does not "
                     "follow; using memory only", link);
        goto out;
    }
    exists = access(path, F_OK) == 0;
    writable = !fj_cache_debug_force_readonly && access(dir, W_OK) == 0
               && (!exists || access(path, W_OK) == 0);
    if (!writable) {
        if (exists && (r = open_readonly(c, path)) == OPEN_OK) {
            c->readonly = 1;
            fj_cache_say(c, FJ_LOG_DEBUG, "%s is read-only; opened immutable", path);
            warn_unread_wal(c, path);
        } else {
            fj_cache_say(c, FJ_LOG_WARN, "%s is not writable and %s; using memory only",
                         exists ? path : dir, exists ? why[r] : "holds no cache");
        }
        goto out;
    }
    /* A corrupt file is set aside and the open tried again (more than once in case
     * another process raced us with another bad file). */
    for (int attempt = 0; attempt < 3; attempt++) {
        memset(&sb, 0, sizeof sb);
        if (create_nofollow(path) == -1) {
            fj_cache_say(c, FJ_LOG_WARN, "%s is a symbolic link, which the cache does not "
                         "follow; using memory only", path);
            r = OPEN_FAIL;
            goto out;
        }
        stat(path, &sb);
        r = open_writable(c, path);
        if (r != OPEN_CORRUPT)
            break;
        close_db(c);
        if (set_aside(c, dir, path, &sb) == -1) {
            fj_cache_say(c, FJ_LOG_WARN, "%s is corrupt and cannot be moved aside (%s); "
                         "using memory only", path, strerror(errno));
            goto out;
        }
    }
    if (r != OPEN_OK)
        fj_cache_say(c, FJ_LOG_WARN, "%s is %s%s; using memory only", path, why[r],
                     r == OPEN_NEWER ? " (left untouched)" : "");
out:
    if (c->db && r == OPEN_OK) {
        c->path = path;
        c->file_st = sb;
    } else {
        close_db(c);
        c->readonly = 0;
        free(path);
    }
}

static fj_cache *cache_new(fj_cache_log_fn log, void *log_user)
{
    pthread_condattr_t ca;
    fj_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->log = log;
    c->log_user = log_user;
    if (gethostname(c->host, sizeof c->host - 1) == -1)
        strcpy(c->host, "?");
    pthread_mutex_init(&c->mu, NULL);
    /* Monotonic, so heartbeats keep their pace when the wall clock jumps. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->hb_cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

int fj_cache_open(fj_cache **out, const char *dir, fj_cache_log_fn log, void *log_user)
{
    fj_cache *c;

    if (!out)
        return -1;
    *out = NULL;
    c = cache_new(log, log_user);
    if (!c)
        return -1;
    if (dir)
        open_dir(c, dir);
    if (!c->db && open_memory(c) == -1) {
        fj_cache_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

int fj_cache_open_bundle(fj_cache **out, const char *path, fj_cache_log_fn log,
                         void *log_user)
{
    fj_cache *c;
    int r = OPEN_FAIL, err = 0;

    if (!out)
        return -1;
    *out = NULL;
    if (!path || !(c = cache_new(log, log_user)))
        return -1;
    if (access(path, R_OK) == -1)
        err = errno;
    else if ((r = open_readonly(c, path)) == OPEN_OK && (c->path = dup_str(path)) == NULL)
        err = ENOMEM;
    if (err || r != OPEN_OK) {
        fj_cache_say(c, FJ_LOG_WARN, "cannot open bundle %s: %s", path,
                     err ? strerror(err) : open_why[r]);
        fj_cache_close(c);
        return -1;
    }
    c->readonly = 1;
    warn_unread_wal(c, path);
    *out = c;
    return 0;
}

/* The file is damaged inside (a statement returned SQLITE_CORRUPT or SQLITE_NOTADB): set
 * aside under the same flock and inode check as at open, then the directory opened again
 * (a fresh file, or memory only when that fails). The path string stays the same pointer
 * while a file is open: callers may hold fj_cache_path's. */
static void recover(fj_cache *c)
{
    char *path = c->path, *dir = dup_str(path);
    const size_t n = strlen(path ? path : ""), tail = sizeof "/kernels.db" - 1;
    c->damaged = 0;
    if (!path || c->readonly || !dir || n < tail) {
        free(dir);
        return;   /* memory or a bundle: nothing to set aside */
    }
    dir[n - tail] = '\0';
    fj_cache_say(c, FJ_LOG_WARN, "%s is damaged inside (%s); setting it aside", path,
                 sqlite3_errmsg(c->db));
    close_db(c);
    c->path = NULL;
    c->ctr.set_aside++;
    if (set_aside(c, dir, path, &c->file_st) == 0)
        open_dir(c, dir);
    else
        fj_cache_say(c, FJ_LOG_WARN, "%s is damaged and cannot be moved aside (%s); using "
                     "memory only", path, strerror(errno));
    if (c->path) {
        free(c->path);
        c->path = path;
    } else {
        free(c->stale_path);
        c->stale_path = path;
        if (open_memory(c) == -1)
            fj_cache_say(c, FJ_LOG_ERROR, "cannot open a memory-only cache either");
    }
    free(dir);
}

int fj_cache_unlock(fj_cache *c)
{
    int recovered = c->damaged && c->db;
    if (recovered)
        recover(c);
    pthread_mutex_unlock(&c->mu);
    return recovered;
}

void fj_cache_close(fj_cache *c)
{
    if (!c)
        return;
    if (c->close_leases)
        c->close_leases(c);
    close_db(c);
    pthread_cond_destroy(&c->hb_cv);
    pthread_mutex_destroy(&c->mu);
    free(c->held);
    free(c->aside);
    free(c->path);
    free(c->stale_path);
    free(c);
}

const char *fj_cache_path(const fj_cache *c) { return c ? c->path : NULL; }
int fj_cache_readonly(const fj_cache *c) { return c ? c->readonly : 0; }
const char *fj_cache_set_aside(const fj_cache *c) { return c ? c->aside : NULL; }

void fj_cache_counters_get(fj_cache *c, fj_cache_counters *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    *out = c->ctr;
    pthread_mutex_unlock(&c->mu);
}
