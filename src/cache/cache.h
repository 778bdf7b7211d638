/* cache.h - the persistent kernel cache (SQLite). The only code that includes sqlite3.h
 * is src/cache/cache.c.
 *
 * One cache = one SQLite file "<dir>/kernels.db" (WAL, busy timeout), or memory only.
 * Every call is thread-safe (the handle is opened in SQLite's serialized mode and guarded
 * by its own mutex). Nothing here is fatal: a corrupt entry reads as a miss and bumps
 * counters.corrupt; a corrupt file is renamed aside ("kernels.db.corrupt-<unix time>")
 * and a fresh file is created; a read-only file is opened immutable and still serves hits
 * (puts then succeed without persisting and bump counters.put_skipped).
 */
#ifndef FJ_CACHE_H
#define FJ_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define FJ_CACHE_FORMAT_VERSION 1  /* schema version; part of every kernel key */

typedef struct fj_key { uint8_t b[16]; } fj_key;   /* XXH3-128, big-endian bytes */

/* Log sink used by the cache for warnings (file set aside, read-only, memory only). */
typedef void (*fj_cache_log_fn)(void *user, int level, const char *msg);
enum { FJ_LOG_ERROR = 0, FJ_LOG_WARN = 1, FJ_LOG_INFO = 2, FJ_LOG_DEBUG = 3 };

/* One compiled kernel. Strings and blob are owned by the entry after fj_cache_get
 * (free with fj_entry_free); fj_cache_put only reads them. */
typedef struct fj_entry {
    fj_key key;
    char arch[16];           /* exact target, "sm_90a" */
    int nvrtc_version;       /* major*1000 + minor*10, as cudaRuntimeGetVersion */
    char *name;              /* kernel family/variant, human readable ("ref f16") */
    char *options;           /* NVRTC options, one string */
    void *blob;              /* CUBIN */
    size_t blob_size;
    char *log;               /* full compile log (may be "") */
    double compile_ms;
    int regs, smem, spill_bytes;   /* from the compile log; -1 = unknown */
    int64_t created, last_used, hits;  /* unix seconds; filled by get/list */
} fj_entry;

void fj_entry_free(fj_entry *e);   /* frees the members, not e; accepts NULL */

typedef struct fj_cache_counters {
    uint64_t hits, misses, corrupt, puts, put_skipped, lease_waits, lease_takeovers;
} fj_cache_counters;

typedef struct fj_cache fj_cache;

/* Opens (creating the directory and the file when needed) the cache in `dir`.
 * dir == NULL opens a memory-only cache. Never fails for an unusable directory or
 * file: it falls back to memory only and logs a warning; *out is always set unless
 * out of memory (returns -1). Returns 0. */
int fj_cache_open(fj_cache **out, const char *dir, fj_cache_log_fn log, void *log_user);
void fj_cache_close(fj_cache *c);  /* accepts NULL */

/* Where it lives: the file path, or NULL when memory only. Whether it is read-only. */
const char *fj_cache_path(const fj_cache *c);
int fj_cache_readonly(const fj_cache *c);

/* 1 = hit (*out filled, checksum verified, last_used/hits updated when writable),
 * 0 = miss (also for a corrupt entry, which is deleted when writable). */
int fj_cache_get(fj_cache *c, const fj_key *key, fj_entry *out);

/* Publishes one entry in one transaction (INSERT OR REPLACE) and releases this process's
 * lease on the key, if any. Returns 0, or -1 on an SQLite error (logged; never fatal). */
int fj_cache_put(fj_cache *c, const fj_entry *e);

/* One compile per key across threads and processes.
 * fj_cache_lease waits until either the key is published by someone else (returns 1,
 * *out filled as by fj_cache_get) or this caller holds the lease (returns 0; it must then
 * compile and call fj_cache_put or fj_cache_lease_release). A lease row holds the owner
 * (pid, hostname, random token) and a heartbeat refreshed by a background thread while
 * held; a lease whose owner pid is dead (same host) or whose heartbeat is older than
 * FJ_LEASE_STALE_S is taken over (counters.lease_takeovers). After `timeout_ms` of waiting
 * the caller proceeds as owner anyway (returns 0) so nothing blocks forever.
 * Memory-only and read-only caches return 0 at once. */
#define FJ_LEASE_STALE_S 30
int fj_cache_lease(fj_cache *c, const fj_key *key, int timeout_ms, fj_entry *out);
void fj_cache_lease_release(fj_cache *c, const fj_key *key);

/* Maintenance (fajit-tune cache ...). list calls fn for each entry (blob not loaded:
 * blob == NULL, blob_size set); return nonzero from fn to stop. verify re-reads every
 * blob, checks its checksum, deletes bad entries (when writable) and returns how many
 * were bad (or -1). clear deletes every entry. stats fills totals. */
typedef int (*fj_cache_list_fn)(void *user, const fj_entry *e);
int fj_cache_list(fj_cache *c, fj_cache_list_fn fn, void *user);
int fj_cache_verify(fj_cache *c, int *n_checked);
int fj_cache_clear(fj_cache *c);
typedef struct fj_cache_stats { int64_t entries, bytes, file_bytes; } fj_cache_stats;
int fj_cache_stats_get(fj_cache *c, fj_cache_stats *st);
void fj_cache_counters_get(fj_cache *c, fj_cache_counters *out);

/* Test hook: corrupt the stored blob of `key` in place (flip one byte), bypassing the
 * checksum update. Returns 0 if the entry existed. */
int fj_cache_debug_corrupt(fj_cache *c, const fj_key *key);

#endif /* FJ_CACHE_H */
