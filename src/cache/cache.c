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
    ST_LIST, ST_VERIFY, ST_STATS, ST_CLEAR,
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
    e->name = e->options = e->log = NULL;
    e->blob = NULL;
}

static int checksum_ok(const void *blob, size_t n, int64_t size, int64_t sum)
{
    return (int64_t)n == size && (blob || !n)
           && XXH3_64bits(n ? blob : "", n) == (uint64_t)sum;
}

/* Fills the metadata columns shared by ST_GET and ST_LIST (column numbers differ). */
static int fill_meta(fj_entry *e, sqlite3_stmt *st, int arch, int name, int options,
                     int log, int ms)
{
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

int fj_cache_stats_get(fj_cache *c, fj_cache_stats *st_out)
{
    int rc = -1;
    if (!c || !st_out)
        return -1;
    memset(st_out, 0, sizeof *st_out);
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_STATS];
    if (sqlite3_step(st) == SQLITE_ROW) {
        st_out->entries = sqlite3_column_int64(st, 0);
        st_out->bytes = sqlite3_column_int64(st, 1);
        rc = 0;
    }
    done(st);
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
