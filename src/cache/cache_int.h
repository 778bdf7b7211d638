/* cache_int.h - what the files of src/cache share: the handle, its prepared statements
 * and a few helpers. Not for use outside src/cache (cache.h is the contract). */
#ifndef FJ_CACHE_INT_H
#define FJ_CACHE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "cache.h"

#define BUSY_TIMEOUT_MS 5000

/* Statements prepared once per handle. Preparing them all at open doubles as a schema
 * check: a file whose tables do not match fails here and is treated as unknown.
 * In a read-only file of an older schema (which cannot be migrated) columns it lacks are
 * read as expressions and statements that write them are not prepared (a read-only
 * handle never writes): "%s" stands for kernels.parts ("parts", or "NULL" before schema
 * 2) in kernel statements, for tuning.op (OP_COL, or OP_FROM_SIGNATURE before schema 3)
 * in tuning statements, for verdicts.features (VERDICT_FEATURES, or "''" before schema 5)
 * in verdict statements (which may take it twice). */
enum {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
    ST_GET, ST_TOUCH, ST_PUT, ST_DEL, ST_EXISTS, ST_CORRUPT,
    ST_LEASE_GET, ST_LEASE_SET, ST_LEASE_DEL, ST_LEASE_DEL_KEY, ST_BEAT,
    ST_LIST, ST_VERIFY, ST_STATS, ST_CLEAR, ST_PRUNE, ST_NVRTC_VERSIONS,
    ST_TUNE_GET, ST_TUNE_PUT, ST_TUNE_PIN, ST_TUNE_LIST,
    ST_EXPLAIN, ST_EXPORT_K, ST_IMPORT_K,
    ST_VERDICT_GET, ST_VERDICT_PUT, ST_VERDICT_LIST,
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
/* Tuning columns, in the order of fj_tune_row (op last, column 12): TUNE_COLS for
 * writing, TUNE_SEL (with "%s" for op) for reading. */
#define TUNE_BASE "gpu_name, arch, sm_count, signature, bucket, config, time_ms, table_json," \
                  " pinned, fajit_version, nvrtc_version, created"
#define TUNE_COLS TUNE_BASE ", op"
#define TUNE_SEL TUNE_BASE ", %s"
#define OP_COL "op"
/* The signature's first dot-separated component: "fwd.bf16.hd128.causal" -> "fwd". */
#define OP_FROM_SIGNATURE "substr(signature, 1, instr(signature || '.', '.') - 1)"
#define TUNE_KEY "gpu_name = ?1 AND arch = ?2 AND sm_count = ?3 AND signature = ?4" \
                 " AND bucket = ?5"
#define TUNE_LIST "SELECT " TUNE_SEL " FROM tuning WHERE ?1 IS NULL OR arch = ?1" \
                  " ORDER BY gpu_name, arch, sm_count, signature, bucket"
#define TUNE_PUT "INSERT OR REPLACE INTO tuning (" TUNE_COLS ")" \
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
#define N_TUNE_COLS 13

/* Verdict columns, in the order of fj_verdict: VERDICT_COLS for writing (schema 5),
 * VERDICT_SEL (with "%s" for features: VERDICT_FEATURES, or "''" in a file of schema 4,
 * whose verdicts are all of feature-free problems) for reading; VERDICT_KEY and
 * VERDICT_LIST take that "%s" twice. */
#define VERDICT_BASE "gpu_name, arch, sm_count, driver_version, fajit_version, family, pass," \
                     " failed_case, error, created"
#define VERDICT_COLS VERDICT_BASE ", features"
#define VERDICT_SEL VERDICT_BASE ", %s"
#define VERDICT_FEATURES "features"
#define VERDICT_KEY "gpu_name = ?1 AND arch = ?2 AND sm_count = ?3 AND driver_version = ?4" \
                    " AND fajit_version = ?5 AND family = ?6 AND %s = ?11"
#define VERDICT_PUT "INSERT OR REPLACE INTO verdicts (" VERDICT_COLS ")" \
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
#define VERDICT_LIST "SELECT " VERDICT_SEL " FROM verdicts WHERE ?1 IS NULL OR arch = ?1" \
                     " ORDER BY gpu_name, arch, sm_count, driver_version, fajit_version, family," \
                     " %s"
#define N_VERDICT_COLS 11

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
    char *aside;          /* where open moved a corrupt file: its entries are lost */
    struct stat file_st;  /* the file opened (its inode: set_aside's check) */
    int damaged;          /* a statement returned SQLITE_CORRUPT/NOTADB: the file is set
                             aside and reopened before the lock is released */
    char *stale_path;     /* the path of a file that could not be reopened (kept: callers
                             may hold fj_cache_path's pointer) */
    int schema;           /* the file's schema (user_version): FJ_CACHE_SCHEMA_VERSION,
                             or older in a read-only file */
    int told_readonly;    /* the INFO line about skipped puts is said once */
    fj_cache_log_fn log;
    void *log_user;
    fj_cache_counters ctr;
    char host[256];

    held_lease *held;     /* leases this handle owns */
    size_t n_held, cap_held;
    void (*close_leases)(fj_cache *c);   /* set by lease.c with the first lease taken;
                                            close calls it (the heartbeat, leases held) */
    pthread_t hb;
    pthread_cond_t hb_cv;
    int hb_started, hb_stop;
};

enum { OPEN_OK, OPEN_CORRUPT, OPEN_NEWER, OPEN_FAIL };
enum { LEASE_OURS, LEASE_PUBLISHED, LEASE_WAIT, LEASE_ERROR };

/* ---- small helpers (cache.c unless inline) ---------------------------------------- */

/* Log through c->log (a no-op without one). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void fj_cache_say(const fj_cache *c, int level, const char *fmt, ...);

/* Releases c->mu; first, when a statement found the file damaged (c->damaged), sets the
 * file aside and opens a fresh one in its place (or memory only), as open does. No
 * statement may be mid-step and no transaction open. Returns 1 when it did that. */
int fj_cache_unlock(fj_cache *c);

/* Unique per acquisition, across threads, processes and hosts. */
uint64_t fj_cache_token(void);

/* "file:<path percent-encoded><query>" for SQLITE_OPEN_URI; query is "?immutable=1"
 * or "?mode=ro". */
char *fj_cache_uri(const char *path, const char *query);
/* The format version and the number of schema objects, from one snapshot: read apart,
 * another process could create the schema in between and make a new file look foreign. */
int fj_cache_read_version(sqlite3 *db, int64_t *ver, int64_t *objects);
/* The current schema, in the caller's transaction on an empty database. */
int fj_cache_write_schema(sqlite3 *db);

/* kernels.c: the checksum of a kernel row of the current format: XXH3-64 of the 16 key
 * bytes followed by the blob, so that a blob moved to another key does not verify. */
uint64_t fj_blob_sum(const uint8_t key[16], const void *blob, size_t n);
/* kernels.c: a blob matches its stored size and checksum, by the rule of a file of
 * `schema` (before 3: XXH3-64 of the blob alone). key: its 16 bytes. */
int fj_blob_ok(int schema, const void *key, const void *blob, size_t n, int64_t size,
               int64_t sum);

/* tuning.c: reads a row of TUNE_SEL (columns 0..12); 0, or -1 when out of memory. */
int fj_tune_read(sqlite3_stmt *st, fj_tune_row *r);
/* tuning.c: stores `r` inside the caller's transaction unless the row there wins
 * (merge = 1: import's rule). 0 stored, 1 kept, -1 error. */
int fj_tune_store(fj_cache *c, const fj_tune_row *r, int64_t created, int merge);

/* verdicts.c: reads a row of VERDICT_SEL; stores `v` inside the caller's transaction
 * unless the row there is newer (merge = 1: import's rule; else `v` wins). 0 stored (none
 * there; always without merge), 1 kept, 2 stored over the row there, -1 error. */
void fj_verdict_read(sqlite3_stmt *st, fj_verdict *v);
int fj_verdict_store(fj_cache *c, const fj_verdict *v, int merge);

/* lease.c: forgets this handle's leases on `key` (published); caller holds c->mu. */
void fj_lease_forget(fj_cache *c, const fj_key *key);
/* lease.c: fj_cache_lease, with the read of a key someone else published passed in
 * (kernels.c passes fj_cache_get), so that the leases do not call up into the kernels. */
typedef int (*fj_lease_read_fn)(fj_cache *c, const fj_key *key, fj_entry *out);
int fj_lease_wait(fj_cache *c, const fj_key *key, int timeout_ms, fj_lease_read_fn read,
                  fj_entry *out);

/* ---- inline helpers ---- */

static inline int is_corrupt_rc(int rc)
{
    rc &= 0xff;
    return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

static inline char *dup_str(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s ? s : "", n);
    return p;
}

/* Resets and unbinds a statement, ending any read it holds open. */
static inline void done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* sqlite3_step on one of c's statements, noting damage inside the file (c->damaged). */
static inline int fj_step(fj_cache *c, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (is_corrupt_rc(rc))
        c->damaged = 1;
    return rc;
}

static inline int exec1(fj_cache *c, int id)
{
    int rc = fj_step(c, c->st[id]);
    done(c->st[id]);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

static inline int bind_key(sqlite3_stmt *st, int i, const fj_key *k)
{
    return sqlite3_bind_blob(st, i, k->b, (int)sizeof k->b, SQLITE_TRANSIENT);
}

static inline int64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

#endif /* FJ_CACHE_INT_H */
