/* cache.c - the persistent kernel cache: one SQLite file "<dir>/kernels.db" in WAL mode,
 * or an in-memory SQLite database with the same schema when no usable file exists (so
 * both cases share one code path). The only file that includes sqlite3.h. Also: tuning
 * rows, bundles (export/import) and explaining misses.
 *
 * Locking: every call takes c->mu (the handle is also opened SQLITE_OPEN_FULLMUTEX);
 * between processes SQLite's own file locks and BEGIN IMMEDIATE do the work.
 * One compile per key: a row in `leases` names its owner (pid, host, random token) and
 * carries a heartbeat that a background thread refreshes while this cache holds leases.
 * A handle must not be used across fork(); open a new one in the child. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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

#include "cache.h"

#define BUSY_TIMEOUT_MS 5000
#define POLL_MS 10          /* lease wait: sleep between attempts */
#define HEARTBEAT_MS 1000

/* Test hook, deliberately not in cache.h: nonzero makes fj_cache_open treat an existing
 * file as read-only (tests run as root, where chmod does not stop writes). */
int fj_cache_debug_force_readonly;

/* Statements prepared once per handle. Preparing them all at open doubles as a schema
 * check: a file whose tables do not match fails here and is treated as unknown.
 * "%s" stands for the kernels.parts column: "parts", or "NULL" in a read-only file of
 * schema 1 (which cannot be migrated); statements that write parts are then not
 * prepared (a read-only handle never writes). */
enum {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
    ST_GET, ST_TOUCH, ST_PUT, ST_DEL, ST_EXISTS, ST_CORRUPT,
    ST_LEASE_GET, ST_LEASE_SET, ST_LEASE_DEL, ST_LEASE_DEL_KEY, ST_BEAT,
    ST_LIST, ST_VERIFY, ST_STATS, ST_CLEAR, ST_PRUNE, ST_NVRTC_VERSIONS,
    ST_TUNE_GET, ST_TUNE_PUT, ST_TUNE_PIN, ST_TUNE_LIST,
    ST_EXPLAIN, ST_EXPORT_K, ST_IMPORT_K,
    ST_COUNT
};

/* Kernel columns copied by export and import, in this order, then parts (column 14). */
#define COPY_COLS "key, arch, nvrtc_version, name, options, blob, blob_size, checksum, log," \
                  " compile_ms, regs, smem, spill_bytes, created"
#define COPY_SELECT "SELECT " COPY_COLS ", %s FROM kernels WHERE ?1 IS NULL OR arch = ?1" \
                    " ORDER BY key"
#define COPY_INSERT "INSERT OR IGNORE INTO kernels (" COPY_COLS ", last_used, hits, parts)" \
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14," \
                    " ?14, 0, ?15)"
#define N_COPY_COLS 15
/* Tuning columns, in the order of fj_tune_row. */
#define TUNE_COLS "gpu_name, arch, sm_count, signature, bucket, config, time_ms, table_json," \
                  " pinned, fajit_version, nvrtc_version, created"
#define TUNE_KEY "gpu_name = ?1 AND arch = ?2 AND sm_count = ?3 AND signature = ?4" \
                 " AND bucket = ?5"
#define TUNE_LIST "SELECT " TUNE_COLS " FROM tuning WHERE ?1 IS NULL OR arch = ?1" \
                  " ORDER BY gpu_name, arch, sm_count, signature, bucket"
#define TUNE_PUT "INSERT OR REPLACE INTO tuning (" TUNE_COLS ")" \
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
#define N_TUNE_COLS 12

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
    [ST_TUNE_GET] = "SELECT " TUNE_COLS " FROM tuning WHERE " TUNE_KEY,
    [ST_TUNE_PUT] = TUNE_PUT,
    [ST_TUNE_PIN] = "UPDATE tuning SET pinned = ?6 WHERE " TUNE_KEY,
    [ST_TUNE_LIST] = TUNE_LIST,
    [ST_EXPLAIN] = "SELECT key, name, arch, nvrtc_version, options, %s, created FROM kernels",
    [ST_EXPORT_K] = COPY_SELECT,
    [ST_IMPORT_K] = COPY_INSERT,
};

static int writes_parts(int id) { return id == ST_PUT || id == ST_IMPORT_K; }

/* Schema FJ_CACHE_SCHEMA_VERSION (2). Older files are brought up to it by migrations[]. */
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
    " nvrtc_version INTEGER, created INTEGER,"
    " PRIMARY KEY (gpu_name, arch, sm_count, signature, bucket));"
    "CREATE TABLE leases ("
    " key BLOB PRIMARY KEY, pid INTEGER, host TEXT, token INTEGER, heartbeat INTEGER);";

/* migrations[v] takes a file from schema v to v + 1 (user_version and meta are set after). */
static const char *const migrations[FJ_CACHE_SCHEMA_VERSION] = {
    [1] = "ALTER TABLE kernels ADD COLUMN parts TEXT;",
};

typedef struct held_lease {
    fj_key key;
    uint64_t token;
    pthread_t thread;   /* who asked; lets fj_cache_lease_release find its own */
} held_lease;

struct fj_cache {
    pthread_mutex_t mu;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    char *path;           /* "<dir>/kernels.db"; NULL = memory only */
    int readonly;
    int has_parts;        /* kernels.parts exists (schema >= 2) */
    int told_readonly;    /* the INFO line about skipped puts is said once */
    fj_cache_log_fn log;
    void *log_user;
    fj_cache_counters ctr;
    char host[256];

    held_lease *held;     /* leases this handle owns */
    size_t n_held, cap_held;
    pthread_t hb;
    pthread_cond_t hb_cv;
    int hb_started, hb_stop;
};

enum { OPEN_OK, OPEN_CORRUPT, OPEN_NEWER, OPEN_FAIL };
enum { LEASE_OURS, LEASE_PUBLISHED, LEASE_WAIT, LEASE_ERROR };

/* ---- small helpers ---------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void say(const fj_cache *c, int level, const char *fmt, ...)
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

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static int is_corrupt_rc(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s ? s : "", n);
    return p;
}

/* Unique per acquisition, across threads, processes and hosts. */
static uint64_t new_token(void)
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

/* Resets and unbinds a statement, ending any read it holds open. */
static void done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

static int exec1(fj_cache *c, int id)
{
    int rc = sqlite3_step(c->st[id]);
    done(c->st[id]);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

static int bind_key(sqlite3_stmt *st, int i, const fj_key *k)
{
    return sqlite3_bind_blob(st, i, k->b, (int)sizeof k->b, SQLITE_TRANSIENT);
}

static int64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* mkdir -p with mode 0755; an existing directory is fine. */
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
            if (mkdir(tmp, 0755) == -1 && errno != EEXIST)
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
static char *file_uri(const char *path, const char *query)
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
static int read_version(sqlite3 *db, int64_t *ver, int64_t *objects)
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
static int write_schema(sqlite3 *db)
{
    char sql[96];
    int rc = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES ('created', '%lld');",
             (long long)time(NULL));
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? stamp_version(db) : rc;
}

/* Creates the schema in an empty file, or migrates a file of an older schema. Under
 * BEGIN IMMEDIATE, reading the version again inside, so that of two processes opening
 * the same file at once only one creates or migrates it. */
static int create_or_migrate(fj_cache *c)
{
    int64_t ver = 0, objects = 0;
    int rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = read_version(c->db, &ver, &objects);
    if (rc == SQLITE_OK && ver == 0 && objects == 0) {
        rc = write_schema(c->db);
    } else if (rc == SQLITE_OK && ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION) {
        for (int64_t v = ver; rc == SQLITE_OK && v < FJ_CACHE_SCHEMA_VERSION; v++)
            rc = sqlite3_exec(c->db, migrations[v], NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = stamp_version(c->db);
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    else if (ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION)
        say(c, FJ_LOG_INFO, "cache file migrated from schema %lld to %d", (long long)ver,
            FJ_CACHE_SCHEMA_VERSION);
    return rc;
}

static int prepare_all(fj_cache *c)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (!c->has_parts && writes_parts(i))
            continue;
        char *sql = sqlite3_mprintf(sql_text[i], c->has_parts ? "parts" : "NULL");
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
    int rc = read_version(c->db, &ver, &objects);
    if (rc == SQLITE_OK && writable
        && ((ver == 0 && objects == 0) || (ver >= 1 && ver < FJ_CACHE_SCHEMA_VERSION))) {
        rc = create_or_migrate(c);
        if (rc == SQLITE_OK)   /* ours, or whoever created or migrated it first */
            rc = read_version(c->db, &ver, &objects);
    }
    if (rc != SQLITE_OK)
        return is_corrupt_rc(rc) ? OPEN_CORRUPT : OPEN_FAIL;
    if (ver > FJ_CACHE_SCHEMA_VERSION)
        return OPEN_NEWER;
    if (ver < 1)
        return OPEN_CORRUPT;
    c->has_parts = ver >= 2;
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
    say(c, FJ_LOG_WARN, "%s is corrupt or not a fajit cache; moved to %s, "
        "starting a fresh cache", path, aside);
    rc = 0;
out:
    if (fd != -1)
        close(fd);   /* releases the flock */
    return rc;
}

static int open_readonly(fj_cache *c, const char *path)
{
    const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_FULLMUTEX;
    char *uri = file_uri(path, "?immutable=1");
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
        say(c, FJ_LOG_WARN, "%s is read-only and its -wal is ignored; "
            "entries not checkpointed into the file are not seen", path);
}

/* Leaves c->db open on the file (c->path set), or closed (memory only, warning said). */
static void open_dir(fj_cache *c, const char *dir)
{
    const char *const *why = open_why;
    struct stat sb;
    size_t n = strlen(dir);
    int exists, writable, r = OPEN_FAIL;
    char *path = malloc(n + sizeof "/kernels.db");

    if (!path)
        return;
    snprintf(path, n + sizeof "/kernels.db", "%s/kernels.db", dir);
    if (n == 0 || mkdir_p(dir) == -1) {
        say(c, FJ_LOG_WARN, "cannot use directory '%s' (%s); using memory only",
            dir, n ? strerror(errno) : "empty path");
        goto out;
    }
    exists = access(path, F_OK) == 0;
    writable = !fj_cache_debug_force_readonly && access(dir, W_OK) == 0
               && (!exists || access(path, W_OK) == 0);
    if (!writable) {
        if (exists && (r = open_readonly(c, path)) == OPEN_OK) {
            c->readonly = 1;
            say(c, FJ_LOG_DEBUG, "%s is read-only; opened immutable", path);
            warn_unread_wal(c, path);
        } else {
            say(c, FJ_LOG_WARN, "%s is not writable and %s; using memory only",
                exists ? path : dir, exists ? why[r] : "holds no cache");
        }
        goto out;
    }
    /* A corrupt file is set aside and the open tried again (more than once in case
     * another process raced us with another bad file). */
    for (int attempt = 0; attempt < 3; attempt++) {
        memset(&sb, 0, sizeof sb);
        stat(path, &sb);
        r = open_writable(c, path);
        if (r != OPEN_CORRUPT)
            break;
        close_db(c);
        if (set_aside(c, dir, path, &sb) == -1) {
            say(c, FJ_LOG_WARN, "%s is corrupt and cannot be moved aside (%s); "
                "using memory only", path, strerror(errno));
            goto out;
        }
    }
    if (r != OPEN_OK)
        say(c, FJ_LOG_WARN, "%s is %s%s; using memory only", path, why[r],
            r == OPEN_NEWER ? " (left untouched)" : "");
out:
    if (c->db && r == OPEN_OK) {
        c->path = path;
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
        say(c, FJ_LOG_WARN, "cannot open bundle %s: %s", path,
            err ? strerror(err) : open_why[r]);
        fj_cache_close(c);
        return -1;
    }
    c->readonly = 1;
    warn_unread_wal(c, path);
    *out = c;
    return 0;
}

/* ---- leases: bookkeeping and heartbeat -------------------------------------------- */

static void drop_held(fj_cache *c, size_t i)
{
    c->held[i] = c->held[--c->n_held];
}

static int reserve_held(fj_cache *c)
{
    if (c->n_held < c->cap_held)
        return 0;
    size_t cap = c->cap_held ? 2 * c->cap_held : 8;
    held_lease *h = realloc(c->held, cap * sizeof *h);
    if (!h)
        return -1;
    c->held = h;
    c->cap_held = cap;
    return 0;
}

/* Index of this handle's lease on `key`, preferring the calling thread's; or -1. */
static long find_held(const fj_cache *c, const fj_key *key, int self_only)
{
    long any = -1;
    for (size_t i = 0; i < c->n_held; i++) {
        if (memcmp(c->held[i].key.b, key->b, sizeof key->b) != 0)
            continue;
        if (pthread_equal(c->held[i].thread, pthread_self()))
            return (long)i;
        any = (long)i;
    }
    return self_only ? -1 : any;
}

/* Refreshes every held lease about once a second; sleeps while none is held. A lease
 * whose row is gone (published, released or taken over) is forgotten. */
static void *heartbeat_main(void *arg)
{
    fj_cache *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->hb_stop) {
        if (c->n_held == 0) {
            pthread_cond_wait(&c->hb_cv, &c->mu);
            continue;
        }
        for (size_t i = 0; i < c->n_held; ) {
            sqlite3_stmt *st = c->st[ST_BEAT];
            bind_key(st, 1, &c->held[i].key);
            sqlite3_bind_int64(st, 2, (sqlite3_int64)c->held[i].token);
            sqlite3_bind_int64(st, 3, (sqlite3_int64)time(NULL));
            int rc = sqlite3_step(st);
            done(st);
            if (rc == SQLITE_DONE && sqlite3_changes(c->db) == 0)
                drop_held(c, i);
            else
                i++;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += HEARTBEAT_MS / 1000;
        pthread_cond_timedwait(&c->hb_cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Owner gone: its pid no longer exists on this host, or it stopped beating. */
static int lease_is_stale(const fj_cache *c, int64_t pid, const char *host, int64_t beat)
{
    if (beat < (int64_t)time(NULL) - FJ_LEASE_STALE_S)
        return 1;
    if (!host || strcmp(host, c->host) != 0 || pid == (int64_t)getpid())
        return 0;
    return pid <= 0 || (kill((pid_t)pid, 0) == -1 && errno == ESRCH);
}

/* Starts the heartbeat thread on the first lease; it then lives until close. */
static void start_heartbeat(fj_cache *c)
{
    if (c->hb_started)
        return;
    if (pthread_create(&c->hb, NULL, heartbeat_main, c) == 0)
        c->hb_started = 1;
    else
        say(c, FJ_LOG_WARN, "no heartbeat thread; leases may be taken over "
            "after %d s", FJ_LEASE_STALE_S);
}

/* Decides, inside the caller's transaction, what the lease row of `key` means for us. */
static int lease_state(fj_cache *c, const fj_key *key, int *take, int *takeover)
{
    sqlite3_stmt *st = c->st[ST_EXISTS];
    int r = LEASE_ERROR, rc;

    bind_key(st, 1, key);
    rc = sqlite3_step(st);
    done(st);
    if (rc == SQLITE_ROW)
        return LEASE_PUBLISHED;
    if (rc != SQLITE_DONE)
        return LEASE_ERROR;
    st = c->st[ST_LEASE_GET];
    bind_key(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) {
        *take = 1;
        r = LEASE_OURS;
    } else if (rc == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(st, 0);
        const char *host = (const char *)sqlite3_column_text(st, 1);
        uint64_t tok = (uint64_t)sqlite3_column_int64(st, 2);
        long mine = find_held(c, key, 1);
        if (mine >= 0 && c->held[mine].token == tok) {
            r = LEASE_OURS;   /* the same thread asked twice */
        } else if (lease_is_stale(c, pid, host, sqlite3_column_int64(st, 3))) {
            *take = *takeover = 1;
            r = LEASE_OURS;
        } else {
            r = LEASE_WAIT;
        }
    }
    done(st);
    return r;
}

/* One attempt, in one IMMEDIATE transaction so that exactly one process wins. */
static int try_lease(fj_cache *c, const fj_key *key)
{
    uint64_t token = 0;
    int r = LEASE_ERROR, take = 0, takeover = 0, rc;

    pthread_mutex_lock(&c->mu);
    if (reserve_held(c) == -1)
        goto out;
    rc = exec1(c, ST_BEGIN);
    if (rc != SQLITE_DONE) {
        r = rc == SQLITE_BUSY ? LEASE_WAIT : LEASE_ERROR;
        goto out;
    }
    r = lease_state(c, key, &take, &takeover);
    if (take) {
        sqlite3_stmt *st = c->st[ST_LEASE_SET];
        token = new_token();
        bind_key(st, 1, key);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)getpid());
        sqlite3_bind_text(st, 3, c->host, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)token);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)time(NULL));
        if (exec1(c, ST_LEASE_SET) != SQLITE_DONE)
            r = LEASE_ERROR;
    }
    if (r == LEASE_ERROR || exec1(c, ST_COMMIT) != SQLITE_DONE) {
        exec1(c, ST_ROLLBACK);
        r = LEASE_ERROR;
        goto out;
    }
    if (take) {
        held_lease h = { *key, token, pthread_self() };
        c->held[c->n_held++] = h;
        if (takeover) {
            c->ctr.lease_takeovers++;
            say(c, FJ_LOG_INFO, "took over the compile lease of a dead or "
                "silent owner");
        }
        start_heartbeat(c);
        pthread_cond_signal(&c->hb_cv);
    }
out:
    if (r == LEASE_ERROR)
        say(c, FJ_LOG_WARN, "lease failed (%s); compiling without it",
            sqlite3_errmsg(c->db));
    pthread_mutex_unlock(&c->mu);
    return r;
}

int fj_cache_lease(fj_cache *c, const fj_key *key, int timeout_ms, fj_entry *out)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int waited = 0, bad_reads = 0;

    if (out)
        memset(out, 0, sizeof *out);
    if (!c || !key || !c->path || c->readonly)
        return 0;
    for (;;) {
        switch (try_lease(c, key)) {
        case LEASE_OURS:
        case LEASE_ERROR:
            return 0;
        case LEASE_PUBLISHED:
            /* A corrupt entry reads as a miss and is deleted; try again once. */
            if (!out || fj_cache_get(c, key, out))
                return 1;
            if (++bad_reads > 1)
                return 0;
            continue;
        case LEASE_WAIT:
            break;
        }
        if (!waited) {
            waited = 1;
            pthread_mutex_lock(&c->mu);
            c->ctr.lease_waits++;
            pthread_mutex_unlock(&c->mu);
        }
        if (now_ms() >= deadline) {
            say(c, FJ_LOG_WARN, "waited %d ms for another compile of the "
                "same kernel; compiling anyway", timeout_ms);
            return 0;
        }
        sleep_ms(POLL_MS);
    }
}

void fj_cache_lease_release(fj_cache *c, const fj_key *key)
{
    long i;
    if (!c || !key)
        return;
    pthread_mutex_lock(&c->mu);
    i = find_held(c, key, 0);
    if (i >= 0) {
        sqlite3_stmt *st = c->st[ST_LEASE_DEL];
        bind_key(st, 1, key);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)c->held[i].token);
        if (exec1(c, ST_LEASE_DEL) != SQLITE_DONE)
            say(c, FJ_LOG_WARN, "cannot release a lease (%s); it expires in "
                "%d s", sqlite3_errmsg(c->db), FJ_LEASE_STALE_S);
        drop_held(c, (size_t)i);
    }
    pthread_mutex_unlock(&c->mu);
}

void fj_cache_close(fj_cache *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->hb_stop = 1;
    pthread_cond_signal(&c->hb_cv);
    pthread_mutex_unlock(&c->mu);
    if (c->hb_started)
        pthread_join(c->hb, NULL);
    /* Leases still held would make others wait for a dead heartbeat; give them back. */
    while (c->n_held > 0 && c->db) {
        fj_key k = c->held[c->n_held - 1].key;
        fj_cache_lease_release(c, &k);
    }
    close_db(c);
    pthread_cond_destroy(&c->hb_cv);
    pthread_mutex_destroy(&c->mu);
    free(c->held);
    free(c->path);
    free(c);
}

/* ---- entries ---------------------------------------------------------------------- */

const char *fj_cache_path(const fj_cache *c) { return c ? c->path : NULL; }
int fj_cache_readonly(const fj_cache *c) { return c ? c->readonly : 0; }

void fj_entry_free(fj_entry *e)
{
    if (!e)
        return;
    free(e->name);
    free(e->options);
    free(e->blob);
    free(e->log);
    free(e->parts);
    e->name = e->options = e->log = e->parts = NULL;
    e->blob = NULL;
}

static int checksum_ok(const void *blob, size_t n, int64_t size, int64_t sum)
{
    return (int64_t)n == size && (blob || !n)
           && XXH3_64bits(n ? blob : "", n) == (uint64_t)sum;
}

/* Fills the metadata columns shared by ST_GET and ST_LIST (column numbers differ);
 * parts is the column after hits, and stays NULL when not recorded. */
static int fill_meta(fj_entry *e, sqlite3_stmt *st, int arch, int name, int options,
                     int log, int ms)
{
    const char *parts = (const char *)sqlite3_column_text(st, ms + 7);
    if (parts && !(e->parts = dup_str(parts)))
        return -1;
    const char *a = (const char *)sqlite3_column_text(st, arch);
    snprintf(e->arch, sizeof e->arch, "%s", a ? a : "");
    e->nvrtc_version = sqlite3_column_int(st, arch + 1);
    e->name = dup_str((const char *)sqlite3_column_text(st, name));
    e->options = dup_str((const char *)sqlite3_column_text(st, options));
    e->log = dup_str((const char *)sqlite3_column_text(st, log));
    e->compile_ms = sqlite3_column_double(st, ms);
    e->regs = sqlite3_column_int(st, ms + 1);
    e->smem = sqlite3_column_int(st, ms + 2);
    e->spill_bytes = sqlite3_column_int(st, ms + 3);
    e->created = sqlite3_column_int64(st, ms + 4);
    e->last_used = sqlite3_column_int64(st, ms + 5);
    e->hits = sqlite3_column_int64(st, ms + 6);
    return e->name && e->options && e->log ? 0 : -1;
}

static void delete_entry(fj_cache *c, const fj_key *key)
{
    sqlite3_stmt *st = c->st[ST_DEL];
    if (c->readonly)
        return;
    bind_key(st, 1, key);
    exec1(c, ST_DEL);
}

int fj_cache_get(fj_cache *c, const fj_key *key, fj_entry *out)
{
    sqlite3_stmt *st;
    int hit = 0, bad = 0, rc;

    if (!out)
        return 0;
    memset(out, 0, sizeof *out);
    if (!c || !key)
        return 0;
    pthread_mutex_lock(&c->mu);
    st = c->st[ST_GET];
    bind_key(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st, 4);
        size_t n = (size_t)sqlite3_column_bytes(st, 4);
        if (n && !blob) {
            /* out of memory: a plain miss */
        } else if (!checksum_ok(blob, n, sqlite3_column_int64(st, 5),
                                sqlite3_column_int64(st, 6))) {
            bad = 1;
        } else if ((out->blob = malloc(n ? n : 1)) != NULL
                   && fill_meta(out, st, 0, 2, 3, 7, 8) == 0) {
            if (n)
                memcpy(out->blob, blob, n);
            out->blob_size = n;
            out->key = *key;
            hit = 1;
        }
    } else if (rc != SQLITE_DONE) {
        bad = is_corrupt_rc(rc);
        say(c, bad ? FJ_LOG_WARN : FJ_LOG_DEBUG, "reading an entry failed (%s); a miss",
            sqlite3_errmsg(c->db));
    }
    done(st);

    if (hit && !c->readonly) {
        /* Bookkeeping for LRU; a failure (say, BUSY for 5 s) costs nothing but that. */
        out->last_used = (int64_t)time(NULL);
        out->hits++;
        st = c->st[ST_TOUCH];
        bind_key(st, 1, key);
        sqlite3_bind_int64(st, 2, out->last_used);
        exec1(c, ST_TOUCH);
    }
    if (bad) {
        c->ctr.corrupt++;
        delete_entry(c, key);
    }
    if (!hit)
        fj_entry_free(out);
    if (hit)
        c->ctr.hits++;
    else
        c->ctr.misses++;
    pthread_mutex_unlock(&c->mu);
    return hit;
}

int fj_cache_has(fj_cache *c, const fj_key *key)
{
    if (!c || !key)
        return 0;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_EXISTS];
    bind_key(st, 1, key);
    int has = sqlite3_step(st) == SQLITE_ROW;
    done(st);
    pthread_mutex_unlock(&c->mu);
    return has;
}

int fj_cache_nvrtc_versions(fj_cache *c, const char *arch, int *out, int max)
{
    int n = 0;
    if (!c || !arch || !out)
        return -1;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_NVRTC_VERSIONS];
    sqlite3_bind_text(st, 1, arch, -1, SQLITE_STATIC);
    while (n < max && sqlite3_step(st) == SQLITE_ROW)
        out[n++] = sqlite3_column_int(st, 0);
    done(st);
    pthread_mutex_unlock(&c->mu);
    return n;
}

int fj_cache_put(fj_cache *c, const fj_entry *e)
{
    const void *blob;
    sqlite3_stmt *st;
    int rc = -1, in_txn = 0;

    if (!c || !e || (!e->blob && e->blob_size))
        return -1;
    /* A NULL pointer would bind SQL NULL; an empty blob must stay a blob. */
    blob = e->blob_size ? e->blob : "";
    pthread_mutex_lock(&c->mu);
    if (c->readonly) {
        c->ctr.put_skipped++;
        if (!c->told_readonly)
            say(c, FJ_LOG_INFO, "%s is read-only; new kernels are not saved",
                c->path);
        c->told_readonly = 1;
        rc = 0;
        goto out;
    }
    if (exec1(c, ST_BEGIN) != SQLITE_DONE)
        goto out;
    in_txn = 1;
    st = c->st[ST_PUT];
    bind_key(st, 1, &e->key);
    sqlite3_bind_text(st, 2, e->arch, (int)strnlen(e->arch, sizeof e->arch), SQLITE_STATIC);
    sqlite3_bind_int(st, 3, e->nvrtc_version);
    sqlite3_bind_text(st, 4, e->name ? e->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, e->options ? e->options : "", -1, SQLITE_STATIC);
    sqlite3_bind_blob64(st, 6, blob, e->blob_size, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)e->blob_size);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)XXH3_64bits(blob, e->blob_size));
    sqlite3_bind_text(st, 9, e->log ? e->log : "", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 10, e->compile_ms);
    sqlite3_bind_int(st, 11, e->regs);
    sqlite3_bind_int(st, 12, e->smem);
    sqlite3_bind_int(st, 13, e->spill_bytes);
    sqlite3_bind_int64(st, 14, (sqlite3_int64)time(NULL));
    if (e->parts)
        sqlite3_bind_text(st, 15, e->parts, -1, SQLITE_STATIC);
    if (exec1(c, ST_PUT) != SQLITE_DONE)
        goto out;
    /* Published: the lease on this key, whoever holds it, has no more purpose. */
    bind_key(c->st[ST_LEASE_DEL_KEY], 1, &e->key);
    if (exec1(c, ST_LEASE_DEL_KEY) != SQLITE_DONE || exec1(c, ST_COMMIT) != SQLITE_DONE)
        goto out;
    in_txn = 0;
    for (long i; (i = find_held(c, &e->key, 0)) >= 0; )
        drop_held(c, (size_t)i);
    c->ctr.puts++;
    rc = 0;
out:
    if (rc != 0) {
        say(c, FJ_LOG_WARN, "cannot save kernel '%s' (%s)",
            e->name ? e->name : "", sqlite3_errmsg(c->db));
        if (in_txn)
            exec1(c, ST_ROLLBACK);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- maintenance ------------------------------------------------------------------ */

int fj_cache_list(fj_cache *c, fj_cache_list_fn fn, void *user)
{
    fj_entry *v = NULL;
    size_t n = 0, cap = 0;
    int rc = -1, step;

    if (!c || !fn)
        return -1;
    /* Collected first so fn runs without the lock and may call back into the cache. */
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_LIST];
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            fj_entry *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        fj_entry *e = &v[n++];
        memset(e, 0, sizeof *e);
        if (sqlite3_column_bytes(st, 0) == (int)sizeof e->key.b)
            memcpy(e->key.b, sqlite3_column_blob(st, 0), sizeof e->key.b);
        e->blob_size = (size_t)sqlite3_column_int64(st, 5);
        if (fill_meta(e, st, 1, 3, 4, 6, 7) == -1)
            break;
    }
    if (step != SQLITE_DONE)
        say(c, FJ_LOG_WARN, "list failed (%s)", sqlite3_errmsg(c->db));
    else
        rc = 0;
    done(st);
    pthread_mutex_unlock(&c->mu);

    for (size_t i = 0; i < n; i++)
        if (rc == 0 && fn(user, &v[i]))
            break;
    for (size_t i = 0; i < n; i++)
        fj_entry_free(&v[i]);
    free(v);
    return rc;
}

int fj_cache_verify(fj_cache *c, int *n_checked)
{
    fj_key *bad = NULL;
    size_t n_bad = 0, cap = 0;
    int checked = 0, rc = -1, step;

    if (n_checked)
        *n_checked = 0;
    if (!c)
        return -1;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_VERIFY];
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st, 1);
        size_t n = (size_t)sqlite3_column_bytes(st, 1);
        checked++;
        if ((n && !blob)   /* out of memory: not the entry's fault */
            || checksum_ok(blob, n, sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3)))
            continue;
        if (n_bad == cap) {
            fj_key *nb = realloc(bad, (cap = cap ? 2 * cap : 16) * sizeof *bad);
            if (!nb)
                break;
            bad = nb;
        }
        memset(&bad[n_bad], 0, sizeof *bad);
        if (sqlite3_column_bytes(st, 0) == (int)sizeof bad->b)
            memcpy(bad[n_bad].b, sqlite3_column_blob(st, 0), sizeof bad->b);
        n_bad++;
    }
    if (step != SQLITE_DONE)
        say(c, FJ_LOG_WARN, "verify failed (%s)", sqlite3_errmsg(c->db));
    done(st);
    /* Deleted after the scan: changing a table under a running SELECT is undefined. */
    for (size_t i = 0; i < n_bad; i++)
        delete_entry(c, &bad[i]);
    c->ctr.corrupt += n_bad;
    if (step == SQLITE_DONE)
        rc = (int)n_bad;
    pthread_mutex_unlock(&c->mu);
    free(bad);
    if (n_checked)
        *n_checked = checked;
    return rc;
}

int fj_cache_clear(fj_cache *c)
{
    int rc = -1;
    if (!c)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly)
        say(c, FJ_LOG_WARN, "%s is read-only; not cleared", c->path);
    else if (exec1(c, ST_CLEAR) != SQLITE_DONE)
        say(c, FJ_LOG_WARN, "clear failed (%s)", sqlite3_errmsg(c->db));
    else
        rc = 0;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Kernel count and blob bytes, under c->mu. */
static int kernel_totals(fj_cache *c, fj_cache_stats *out)
{
    sqlite3_stmt *st = c->st[ST_STATS];
    int ok = sqlite3_step(st) == SQLITE_ROW;
    if (ok) {
        out->entries = sqlite3_column_int64(st, 0);
        out->bytes = sqlite3_column_int64(st, 1);
    }
    done(st);
    return ok ? 0 : -1;
}

int fj_cache_prune(fj_cache *c, int64_t max_bytes, const fj_key *keep, int64_t *removed,
                   int64_t *freed)
{
    fj_cache_stats before = {0}, after = {0};
    int rc = -1;
    if (removed)
        *removed = 0;
    if (freed)
        *freed = 0;
    if (!c || max_bytes < 0)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly) {
        say(c, FJ_LOG_WARN, "%s is read-only; not pruned", c->path);
        goto out;
    }
    if (exec1(c, ST_BEGIN) != SQLITE_DONE) {
        say(c, FJ_LOG_WARN, "prune failed (%s)", sqlite3_errmsg(c->db));
        goto out;
    }
    sqlite3_stmt *st = c->st[ST_PRUNE];
    sqlite3_bind_int64(st, 1, max_bytes);
    if (keep)
        bind_key(st, 2, keep);
    else
        sqlite3_bind_null(st, 2);
    if (kernel_totals(c, &before) != 0 || exec1(c, ST_PRUNE) != SQLITE_DONE ||
        kernel_totals(c, &after) != 0 || exec1(c, ST_COMMIT) != SQLITE_DONE) {
        say(c, FJ_LOG_WARN, "prune failed (%s)", sqlite3_errmsg(c->db));
        exec1(c, ST_ROLLBACK);
        goto out;
    }
    if (before.entries > after.entries)
        say(c, FJ_LOG_INFO, "pruned %lld least recently used kernels (%lld bytes) to stay under "
            "%lld bytes", (long long)(before.entries - after.entries),
            (long long)(before.bytes - after.bytes), (long long)max_bytes);
    if (removed)
        *removed = before.entries - after.entries;
    if (freed)
        *freed = before.bytes - after.bytes;
    rc = 0;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int fj_cache_stats_get(fj_cache *c, fj_cache_stats *st_out)
{
    int rc = -1;
    if (!c || !st_out)
        return -1;
    memset(st_out, 0, sizeof *st_out);
    pthread_mutex_lock(&c->mu);
    rc = kernel_totals(c, st_out);
    if (c->path) {
        char wal[4200];
        snprintf(wal, sizeof wal, "%s-wal", c->path);
        st_out->file_bytes = file_size(c->path) + file_size(wal);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

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

int fj_cache_debug_corrupt(fj_cache *c, const fj_key *key)
{
    sqlite3_stmt *st;
    unsigned char *copy = NULL;
    size_t n = 0;
    int rc = -1;

    if (!c || !key)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly)
        goto out;
    st = c->st[ST_GET];
    bind_key(st, 1, key);
    if (sqlite3_step(st) == SQLITE_ROW) {
        n = (size_t)sqlite3_column_bytes(st, 4);
        copy = malloc(n ? n : 1);
        if (copy && n)
            memcpy(copy, sqlite3_column_blob(st, 4), n);
    }
    done(st);
    if (!copy)
        goto out;
    /* Flip one byte; an empty blob gains one instead (its size then disagrees). */
    if (n)
        copy[n / 2] ^= 0x5a;
    else
        copy[0] = 0, n = 1;
    st = c->st[ST_CORRUPT];
    bind_key(st, 1, key);
    sqlite3_bind_blob64(st, 2, copy, n, SQLITE_STATIC);
    if (exec1(c, ST_CORRUPT) == SQLITE_DONE && sqlite3_changes(c->db) == 1)
        rc = 0;
out:
    pthread_mutex_unlock(&c->mu);
    free(copy);
    return rc;
}

/* ---- tuning rows ------------------------------------------------------------------ */

void fj_tune_row_free(fj_tune_row *r)
{
    if (!r)
        return;
    free(r->table_json);
    r->table_json = NULL;
}

/* A fixed-size char array of a row, bound up to its NUL (or its end). */
static void bind_fixed(sqlite3_stmt *st, int i, const char *s, size_t cap)
{
    sqlite3_bind_text(st, i, s, (int)strnlen(s, cap), SQLITE_STATIC);
}

static void bind_tune_key(sqlite3_stmt *st, const char *gpu_name, const char *arch,
                          int sm_count, const char *signature, const char *bucket)
{
    sqlite3_bind_text(st, 1, gpu_name ? gpu_name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, arch ? arch : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, sm_count);
    sqlite3_bind_text(st, 4, signature ? signature : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, bucket ? bucket : "", -1, SQLITE_STATIC);
}

/* Binds the key of `r` as ?1..?5 (TUNE_KEY). */
static void bind_row_key(sqlite3_stmt *st, const fj_tune_row *r)
{
    bind_fixed(st, 1, r->gpu_name, sizeof r->gpu_name);
    bind_fixed(st, 2, r->arch, sizeof r->arch);
    sqlite3_bind_int(st, 3, r->sm_count);
    bind_fixed(st, 4, r->signature, sizeof r->signature);
    bind_fixed(st, 5, r->bucket, sizeof r->bucket);
}

/* Binds ?1..?12 of TUNE_PUT. */
static void bind_tune_row(sqlite3_stmt *st, const fj_tune_row *r, int64_t created)
{
    bind_row_key(st, r);
    bind_fixed(st, 6, r->config, sizeof r->config);
    sqlite3_bind_double(st, 7, r->time_ms);
    sqlite3_bind_text(st, 8, r->table_json ? r->table_json : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 9, r->pinned != 0);
    bind_fixed(st, 10, r->fajit_version, sizeof r->fajit_version);
    sqlite3_bind_int(st, 11, r->nvrtc_version);
    sqlite3_bind_int64(st, 12, (sqlite3_int64)created);
}

static void column_to(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", s ? s : "");
}

/* Reads a row of TUNE_COLS, columns 0..11. Returns 0, or -1 when out of memory. */
static int read_tune_row(sqlite3_stmt *st, fj_tune_row *r)
{
    memset(r, 0, sizeof *r);
    column_to(r->gpu_name, sizeof r->gpu_name, st, 0);
    column_to(r->arch, sizeof r->arch, st, 1);
    r->sm_count = sqlite3_column_int(st, 2);
    column_to(r->signature, sizeof r->signature, st, 3);
    column_to(r->bucket, sizeof r->bucket, st, 4);
    column_to(r->config, sizeof r->config, st, 5);
    r->time_ms = sqlite3_column_double(st, 6);
    r->table_json = dup_str((const char *)sqlite3_column_text(st, 7));
    r->pinned = sqlite3_column_int(st, 8) != 0;
    column_to(r->fajit_version, sizeof r->fajit_version, st, 9);
    r->nvrtc_version = sqlite3_column_int(st, 10);
    r->created = sqlite3_column_int64(st, 11);
    return r->table_json ? 0 : -1;
}

/* Inside the caller's transaction: stores `r` (created at `created`) unless the row
 * already there wins. A pinned row beats an unpinned one either way. Between rows of the
 * same pinning, `r` wins a put; an import (merge) takes the newer, then the faster, and
 * keeps the row there on a tie, so that imports commute. Returns 0 stored, 1 kept, -1. */
static int tune_store(fj_cache *c, const fj_tune_row *r, int64_t created, int merge)
{
    sqlite3_stmt *st = c->st[ST_TUNE_GET];
    int keep = 0, rc;

    bind_row_key(st, r);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        int pinned = sqlite3_column_int(st, 8) != 0;
        int64_t was = sqlite3_column_int64(st, 11);
        double t = sqlite3_column_double(st, 6);
        if (pinned != (r->pinned != 0))
            keep = pinned;
        else if (merge)
            keep = !(created > was || (created == was && r->time_ms < t));
        rc = SQLITE_DONE;
    }
    done(st);
    if (rc != SQLITE_DONE)
        return -1;
    if (keep)
        return 1;
    bind_tune_row(c->st[ST_TUNE_PUT], r, created);
    return exec1(c, ST_TUNE_PUT) == SQLITE_DONE ? 0 : -1;
}

int fj_cache_tune_put(fj_cache *c, const fj_tune_row *r)
{
    int rc = -1;

    if (!c || !r)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly) {
        say(c, FJ_LOG_WARN, "%s is read-only; tuning result not saved", c->path);
        goto out;
    }
    if (exec1(c, ST_BEGIN) == SQLITE_DONE) {
        rc = tune_store(c, r, r->created ? r->created : (int64_t)time(NULL), 0);
        if (rc < 0 || exec1(c, ST_COMMIT) != SQLITE_DONE) {
            exec1(c, ST_ROLLBACK);
            rc = -1;
        }
    }
    if (rc < 0)
        say(c, FJ_LOG_WARN, "cannot save the tuning row %s/%s (%s)", r->signature, r->bucket,
            sqlite3_errmsg(c->db));
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int fj_cache_tune_get(fj_cache *c, const char *gpu_name, const char *arch, int sm_count,
                      const char *signature, const char *bucket, fj_tune_row *out)
{
    sqlite3_stmt *st;
    int hit = 0, rc;

    if (!out)
        return 0;
    memset(out, 0, sizeof *out);
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    st = c->st[ST_TUNE_GET];
    bind_tune_key(st, gpu_name, arch, sm_count, signature, bucket);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        hit = read_tune_row(st, out) == 0;
    else if (rc != SQLITE_DONE)
        say(c, FJ_LOG_WARN, "reading a tuning row failed (%s)", sqlite3_errmsg(c->db));
    done(st);
    pthread_mutex_unlock(&c->mu);
    if (!hit)
        fj_tune_row_free(out);
    return hit;
}

int fj_cache_tune_pin(fj_cache *c, const char *gpu_name, const char *arch, int sm_count,
                      const char *signature, const char *bucket, int pinned)
{
    int rc = -1;

    if (!c)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly) {
        say(c, FJ_LOG_WARN, "%s is read-only; pin not changed", c->path);
    } else {
        sqlite3_stmt *st = c->st[ST_TUNE_PIN];
        bind_tune_key(st, gpu_name, arch, sm_count, signature, bucket);
        sqlite3_bind_int(st, 6, pinned != 0);
        if (exec1(c, ST_TUNE_PIN) == SQLITE_DONE)
            rc = sqlite3_changes(c->db) > 0;
        else
            say(c, FJ_LOG_WARN, "pin failed (%s)", sqlite3_errmsg(c->db));
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int fj_cache_tune_list(fj_cache *c, fj_tune_list_fn fn, void *user)
{
    fj_tune_row *v = NULL;
    size_t n = 0, cap = 0;
    int rc = -1, step;

    if (!c || !fn)
        return -1;
    /* Collected first so fn runs without the lock and may call back into the cache. */
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_TUNE_LIST];
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            fj_tune_row *nv = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        if (read_tune_row(st, &v[n++]) == -1)
            break;
    }
    if (step != SQLITE_DONE)
        say(c, FJ_LOG_WARN, "listing tuning rows failed (%s)", sqlite3_errmsg(c->db));
    else
        rc = 0;
    done(st);
    pthread_mutex_unlock(&c->mu);

    for (size_t i = 0; i < n; i++)
        if (rc == 0 && fn(user, &v[i]))
            break;
    for (size_t i = 0; i < n; i++)
        fj_tune_row_free(&v[i]);
    free(v);
    return rc;
}

/* ---- bundles ---------------------------------------------------------------------- */

enum { COPY_OK, COPY_PRESENT, COPY_CORRUPT, COPY_ERROR };

/* Copies the kernel row at `src` (COPY_SELECT's columns) through `dst` (COPY_INSERT),
 * after checking its key and blob. */
static int copy_kernel(sqlite3_stmt *src, sqlite3_stmt *dst)
{
    const void *blob;
    size_t n;
    int rc;

    if (sqlite3_column_type(src, 0) != SQLITE_BLOB || sqlite3_column_bytes(src, 0) != 16)
        return COPY_CORRUPT;
    blob = sqlite3_column_blob(src, 5);
    n = (size_t)sqlite3_column_bytes(src, 5);
    if (n && !blob)
        return COPY_ERROR;   /* out of memory */
    if (!checksum_ok(blob, n, sqlite3_column_int64(src, 6), sqlite3_column_int64(src, 7)))
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

/* Same file as the cache's own (which export would replace under its users)? */
static int is_cache_file(const fj_cache *c, const char *path)
{
    struct stat a, b;
    return c->path && stat(c->path, &a) == 0 && stat(path, &b) == 0
           && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Copies every row of `src` (bound, stepped and reset here) into the bundle: kernels
 * through copy_kernel, tuning rows as they are. Returns the last step's code. */
static int export_rows(sqlite3_stmt *src, const char *arch, sqlite3_stmt *ins, int kernels,
                       fj_bundle_stats *st)
{
    int step;
    if (arch)
        sqlite3_bind_text(src, 1, arch, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(src)) == SQLITE_ROW) {
        int r = COPY_OK;
        if (kernels) {
            r = copy_kernel(src, ins);
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
        *(kernels ? &st->kernels : &st->rows) += r == COPY_OK;
    }
    done(src);
    return step;
}

int fj_cache_export(fj_cache *c, const char *path, const char *arch, fj_bundle_stats *st_out)
{
    fj_bundle_stats st;
    sqlite3 *db = NULL;
    sqlite3_stmt *ins_k = NULL, *ins_t = NULL;
    char *tmp = NULL, *journal = NULL, why[512] = "";
    int rc = -1, step;
    size_t n;

    memset(&st, 0, sizeof st);
    if (st_out)
        *st_out = st;
    if (!c || !path || !*path)
        return -1;
    if (is_cache_file(c, path)) {
        say(c, FJ_LOG_WARN, "not exporting onto the cache's own file %s", path);
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
    snprintf(tmp, n, "%s.tmp-%016llx", path, (unsigned long long)new_token());
    snprintf(journal, n, "%s-journal", tmp);
    unlink(tmp);
    unlink(journal);

    pthread_mutex_lock(&c->mu);
    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL)
            != SQLITE_OK
        || sqlite3_exec(db, "PRAGMA journal_mode = DELETE; BEGIN", NULL, NULL, NULL)
            != SQLITE_OK
        || write_schema(db) != SQLITE_OK
        || sqlite3_prepare_v2(db, COPY_INSERT, -1, &ins_k, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(db, TUNE_PUT, -1, &ins_t, NULL) != SQLITE_OK) {
        note_err(why, sizeof why, tmp, db);
        goto out;
    }
    step = export_rows(c->st[ST_EXPORT_K], arch, ins_k, 1, &st);
    if (step == SQLITE_DONE)
        step = export_rows(c->st[ST_TUNE_LIST], arch, ins_t, 0, &st);
    if (step != SQLITE_DONE) {
        if (step == SQLITE_ROW)
            note_err(why, sizeof why, tmp, db);
        else
            note_err(why, sizeof why, "reading the cache", c->db);
        goto out;
    }
    sqlite3_finalize(ins_k);
    sqlite3_finalize(ins_t);
    ins_k = ins_t = NULL;
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_close(db) != SQLITE_OK) {
        note_err(why, sizeof why, tmp, db);
        goto out;
    }
    db = NULL;
    if (rename(tmp, path) == -1) {
        note_err(why, sizeof why, path, NULL);
        goto out;
    }
    rc = 0;
    if (st.corrupt)
        say(c, FJ_LOG_WARN, "export to %s: %d corrupt kernels skipped", path, st.corrupt);
    say(c, FJ_LOG_INFO, "exported %d kernels and %d tuning rows to %s", st.kernels, st.rows,
        path);
out:
    if (rc != 0)
        say(c, FJ_LOG_WARN, "export to %s failed (%s)", path, why);
    pthread_mutex_unlock(&c->mu);
    sqlite3_finalize(ins_k);
    sqlite3_finalize(ins_t);
    sqlite3_close(db);   /* NULL: no-op */
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
        char *uri = file_uri(path, query[i]);
        if (!uri)
            return SQLITE_NOMEM;
        rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
        free(uri);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout(*db, BUSY_TIMEOUT_MS);
            rc = read_version(*db, ver, &objects);
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

int fj_cache_import(fj_cache *c, const char *path, fj_bundle_stats *st_out)
{
    fj_bundle_stats st;
    sqlite3 *db = NULL;
    sqlite3_stmt *sel_k = NULL, *sel_t = NULL;
    char *sql = NULL, why[512] = "";
    int64_t ver = 0;
    int rc = -1, step = SQLITE_DONE, locked = 0, in_txn = 0;

    memset(&st, 0, sizeof st);
    if (st_out)
        *st_out = st;
    if (!c || !path)
        return -1;
    if (access(path, R_OK) == -1)
        note_err(why, sizeof why, path, NULL);
    else if (open_source(path, &db, &ver, why, sizeof why) != SQLITE_OK)
        ;   /* why says it */
    else if (ver < 1 || ver > FJ_CACHE_SCHEMA_VERSION)
        snprintf(why, sizeof why, "%s: not a fajit bundle of schema 1..%d (user_version "
                 "%lld)", path, FJ_CACHE_SCHEMA_VERSION, (long long)ver);
    else if (!(sql = sqlite3_mprintf(COPY_SELECT, ver >= 2 ? "parts" : "NULL"))
             || sqlite3_prepare_v2(db, sql, -1, &sel_k, NULL) != SQLITE_OK
             || sqlite3_prepare_v2(db, TUNE_LIST, -1, &sel_t, NULL) != SQLITE_OK)
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
    while ((step = sqlite3_step(sel_k)) == SQLITE_ROW) {
        int r = copy_kernel(sel_k, c->st[ST_IMPORT_K]);
        if (r == COPY_ERROR)
            break;
        st.kernels += r == COPY_OK;
        st.kernels_present += r == COPY_PRESENT;
        st.corrupt += r == COPY_CORRUPT;
    }
    while (step == SQLITE_DONE) {
        fj_tune_row row;
        if ((step = sqlite3_step(sel_t)) != SQLITE_ROW)
            break;
        int r = read_tune_row(sel_t, &row) == 0 ? tune_store(c, &row, row.created, 1) : -1;
        fj_tune_row_free(&row);
        if (r < 0)
            break;
        st.rows += r == 0;
        st.rows_kept += r == 1;
        step = SQLITE_DONE;
    }
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
        say(c, FJ_LOG_WARN, "import of %s: %d corrupt kernels skipped", path, st.corrupt);
    say(c, FJ_LOG_INFO, "imported from %s: %d kernels (%d already here), %d tuning rows "
        "(%d kept as they were)", path, st.kernels, st.kernels_present, st.rows,
        st.rows_kept);
out:
    if (in_txn)
        exec1(c, ST_ROLLBACK);
    if (rc != 0)
        say(c, FJ_LOG_WARN, "import failed, nothing imported (%s)", why);
    if (locked)
        pthread_mutex_unlock(&c->mu);
    sqlite3_finalize(sel_k);
    sqlite3_finalize(sel_t);
    sqlite3_free(sql);
    sqlite3_close(db);
    if (st_out && rc == 0)
        *st_out = st;
    return rc;
}

/* ---- key parts and explain -------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* A value of a parts text: '%', ';' and control characters as %XX. */
static void sb_esc(sbuf *b, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char hex[4];
        if (ch == '%' || ch == ';' || ch < 0x20 || ch == 0x7f) {
            snprintf(hex, sizeof hex, "%%%02X", ch);
            sb_put(b, hex, 3);
        } else {
            sb_put(b, s, 1);
        }
    }
}

/* The string built, or NULL (everything freed) when out of memory. */
static char *sb_take(sbuf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p ? b->p : dup_str("");
}

char *fj_key_parts(const unsigned char src_digest[16], const char *function,
                   const char *preamble, const char *options, const char *arch,
                   int nvrtc_version, int format_version)
{
    sbuf b = { 0 };
    char num[40];
    const char *pre = preamble ? preamble : "";

    sb_str(&b, "digest=");
    for (int i = 0; i < 16; i++) {
        snprintf(num, sizeof num, "%02x", src_digest ? src_digest[i] : 0);
        sb_str(&b, num);
    }
    sb_str(&b, ";function=");
    sb_esc(&b, function);
    snprintf(num, sizeof num, ";preamble_hash=%016llx",
             (unsigned long long)XXH3_64bits(pre, strlen(pre)));
    sb_str(&b, num);
    sb_str(&b, ";options=");
    sb_esc(&b, options);
    sb_str(&b, ";arch=");
    sb_esc(&b, arch);
    snprintf(num, sizeof num, ";nvrtc=%d;format=%d", nvrtc_version, format_version);
    sb_str(&b, num);
    return sb_take(&b);
}

static const struct {
    const char *name;
    unsigned bit;
} part_names[] = {
    { "digest", FJ_PART_DIGEST },   { "function", FJ_PART_FUNCTION },
    { "preamble_hash", FJ_PART_PREAMBLE }, { "options", FJ_PART_OPTIONS },
    { "arch", FJ_PART_ARCH },       { "nvrtc", FJ_PART_NVRTC },
    { "format", FJ_PART_FORMAT },
};
#define N_PARTS (sizeof part_names / sizeof part_names[0])

/* The value of field `name` in a parts text, as (*v, *n); 0 when absent. */
static int part_value(const char *parts, const char *name, const char **v, size_t *n)
{
    size_t len = strlen(name);
    for (const char *p = parts; p && *p; ) {
        const char *end = strchr(p, ';');
        size_t flen = end ? (size_t)(end - p) : strlen(p);
        if (flen > len && strncmp(p, name, len) == 0 && p[len] == '=') {
            *v = p + len + 1;
            *n = flen - len - 1;
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    *v = "";
    *n = 0;
    return 0;
}

/* The parts in which `have` differs from `want`. With `partial` (an entry without
 * recorded parts, described by its columns), fields `have` lacks are not compared. */
static unsigned parts_diff(const char *want, const char *have, int partial)
{
    unsigned d = 0;
    for (size_t i = 0; i < N_PARTS; i++) {
        const char *a, *b;
        size_t na, nb;
        int ha = part_value(want, part_names[i].name, &a, &na);
        int hb = part_value(have, part_names[i].name, &b, &nb);
        if (partial && !hb)
            continue;
        if (ha != hb || na != nb || memcmp(a, b, na) != 0)
            d |= part_names[i].bit;
    }
    return d;
}

/* What an entry stored without parts records of its key: options, arch, nvrtc. */
static char *column_parts(const char *arch, int nvrtc, const char *options)
{
    sbuf b = { 0 };
    char num[32];
    sb_str(&b, "options=");
    sb_esc(&b, options);
    sb_str(&b, ";arch=");
    sb_esc(&b, arch);
    snprintf(num, sizeof num, ";nvrtc=%d", nvrtc);
    sb_str(&b, num);
    return sb_take(&b);
}

static int n_bits(unsigned x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

typedef struct nearest {
    int tier;          /* 2 same variant, 1 same arch, 0 none yet */
    int n_diff;
    int64_t created;
    unsigned differs;
    fj_key key;
    char name[96], arch[16];
    char *parts;       /* recorded, or made by column_parts */
} nearest;

/* Appends to out->text (truncating quietly). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void text_add(fj_explain *out, const char *fmt, ...)
{
    size_t len = strlen(out->text);
    va_list ap;
    if (len + 1 >= sizeof out->text)
        return;
    va_start(ap, fmt);
    vsnprintf(out->text + len, sizeof out->text - len, fmt, ap);
    va_end(ap);
}

static void describe(fj_explain *out, const nearest *b, const char *want, int n_rows)
{
    char hex[33];
    const char *sep = "";

    if (!out->has_nearest) {
        text_add(out, "miss: no entry of the same variant or target among %d entries",
                 n_rows);
        return;
    }
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", b->key.b[i]);
    text_add(out, "miss: nearest entry '%s' (%s, key %.12s) differs in ", b->name, b->arch,
             hex);
    for (size_t i = 0; i < N_PARTS; i++) {
        const char *have, *wanted;
        size_t nh, nw;
        if (!(b->differs & part_names[i].bit))
            continue;
        part_value(b->parts, part_names[i].name, &have, &nh);
        part_value(want, part_names[i].name, &wanted, &nw);
        text_add(out, "%s%s (entry %.*s%s, wanted %.*s%s)", sep, part_names[i].name,
                 (int)(nh < 48 ? nh : 48), have, nh > 48 ? "..." : "",
                 (int)(nw < 48 ? nw : 48), wanted, nw > 48 ? "..." : "");
        sep = ", ";
    }
    if (b->differs & FJ_PART_UNRECORDED)
        text_add(out, "%sa part the entry did not record: digest, function or preamble "
                 "(stored without key parts)", sep);
    if (!b->differs)
        text_add(out, "nothing recorded (the key derivation itself changed)");
}

int fj_cache_explain(fj_cache *c, const fj_key *key, const char *name, const char *parts,
                     fj_explain *out)
{
    nearest best;
    sqlite3_stmt *st;
    int n_rows = 0, rc;

    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    memset(&best, 0, sizeof best);
    if (!c || !key || !parts)
        return -1;
    pthread_mutex_lock(&c->mu);
    st = c->st[ST_EXISTS];
    bind_key(st, 1, key);
    rc = sqlite3_step(st);
    done(st);
    out->hit = rc == SQLITE_ROW;
    /* A miss: the nearest entry, by a scan of the metadata (no blobs are read). */
    st = c->st[ST_EXPLAIN];
    while (rc == SQLITE_DONE && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *rname = (const char *)sqlite3_column_text(st, 1);
        const char *rarch = (const char *)sqlite3_column_text(st, 2);
        const char *rparts = (const char *)sqlite3_column_text(st, 5);
        int64_t created = sqlite3_column_int64(st, 6);
        char *own = NULL;
        n_rows++;
        if (!rparts
            && !(own = column_parts(rarch, sqlite3_column_int(st, 3),
                                    (const char *)sqlite3_column_text(st, 4)))) {
            rc = SQLITE_DONE;
            continue;   /* out of memory: this row is not a candidate */
        }
        unsigned d = parts_diff(parts, rparts ? rparts : own, !rparts);
        if (!rparts && !d)
            d = FJ_PART_UNRECORDED;
        int same_variant = (name && rname && strcmp(name, rname) == 0)
                           || (rparts && !(d & (FJ_PART_FUNCTION | FJ_PART_PREAMBLE)));
        int tier = same_variant ? 2 : !(d & FJ_PART_ARCH);
        int nd = n_bits(d);
        if (tier && (tier > best.tier || (tier == best.tier && (nd < best.n_diff
                     || (nd == best.n_diff && created > best.created))))) {
            char *keep = own ? own : dup_str(rparts);
            if (keep) {
                free(best.parts);
                best.parts = keep;
                own = NULL;
                best.tier = tier;
                best.n_diff = nd;
                best.created = created;
                best.differs = d;
                if (sqlite3_column_bytes(st, 0) == (int)sizeof best.key.b)
                    memcpy(best.key.b, sqlite3_column_blob(st, 0), sizeof best.key.b);
                snprintf(best.name, sizeof best.name, "%s", rname ? rname : "");
                snprintf(best.arch, sizeof best.arch, "%s", rarch ? rarch : "");
            }
        }
        free(own);
        rc = SQLITE_DONE;
    }
    done(st);
    if (rc != SQLITE_DONE && !out->hit)
        say(c, FJ_LOG_WARN, "explain failed (%s)", sqlite3_errmsg(c->db));
    pthread_mutex_unlock(&c->mu);

    if (rc != SQLITE_DONE && !out->hit) {
        free(best.parts);
        return -1;
    }
    if (out->hit) {
        snprintf(out->text, sizeof out->text, "hit: the key is in the cache");
    } else {
        out->has_nearest = best.tier > 0;
        out->nearest = best.key;
        out->differs = best.differs;
        snprintf(out->nearest_name, sizeof out->nearest_name, "%s", best.name);
        snprintf(out->nearest_arch, sizeof out->nearest_arch, "%s", best.arch);
        describe(out, &best, parts, n_rows);
    }
    free(best.parts);
    return out->hit;
}
