/* cache.h - the persistent kernel cache (SQLite). The only code that includes sqlite3.h
 * is src/cache/ (file by file in its README.md).
 *
 * One cache = one SQLite file "<dir>/kernels.db" (WAL, busy timeout), or memory only,
 * holding compiled kernels and tuning winners; or a bundle (one self-contained file made
 * by fj_cache_export, opened immutable with fj_cache_open_bundle).
 * Every call is thread-safe (the handle is opened in SQLite's serialized mode and guarded
 * by its own mutex). Nothing here is fatal: a corrupt entry reads as a miss and bumps
 * counters.corrupt; a corrupt file is renamed aside ("kernels.db.corrupt-<unix time>")
 * and a fresh file is created, at open or when any statement later finds the file damaged
 * inside (SQLITE_CORRUPT/NOTADB: set aside before the call returns, under the same flock
 * and inode check; list, clear and stats then answer from the fresh file, verify runs
 * PRAGMA quick_check first); a read-only file is opened immutable and still serves hits
 * (puts then succeed without persisting and bump counters.put_skipped).
 */
#ifndef FJ_CACHE_H
#define FJ_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Two versions, kept apart on purpose:
 * - FJ_CACHE_FORMAT_VERSION is part of every kernel key. Bump it only when what is stored
 *   for a key changes meaning; a bump orphans every entry in the field.
 * - FJ_CACHE_SCHEMA_VERSION is the file layout (PRAGMA user_version). Files of an older
 *   layout are migrated in place when writable and read as they are when read-only;
 *   newer files are left alone (memory only). Migrations:
 *     1 -> 2: ALTER TABLE kernels ADD COLUMN parts (every key kept).
 *     2 -> 3: tuning gains an `op` column, filled from the signature's first dot-separated
 *             component ("fwd.bf16.hd128.causal" -> "fwd"); every tuning row is kept.
 *             Kernel rows are deleted (see below).
 *     3 -> 4: CREATE TABLE verdicts (the validation gate's verdicts); everything kept. A
 *             read-only file of schema < 4 holds no verdicts (get: none, list: empty).
 *     4 -> 5: verdicts gain a `features` column in their key (the model-feature set a
 *             verdict is of); the table is rebuilt with every row kept, as features ''
 *             (feature-free: what every verdict of schema 4 is). A read-only file of
 *             schema 4 reads its verdicts as features '' and takes no put.
 *
 * Format 2 (with schema 3): the operation is a part of the key (fj_key_inputs.op), and a
 * blob's checksum covers its key (XXH3-64 of the 16 key bytes, then the blob), so a blob
 * and checksum moved to another key read as corrupt. Every key changed, so the kernels of
 * format 1 (all the kernels of a file of schema 1 or 2) can never hit again. They are
 * cleanly ignored this way:
 *   - a writable old file: deleted by the migration to schema 3, in its transaction (the
 *     count is logged; the pages are reused); they compile again on demand;
 *   - a read-only old file (schema 1 or 2, opened immutable): left in place, read with the
 *     checksum rule of format 1 (so list/stats count them and verify does not call them
 *     corrupt), never hit by a key of format 2; explain names the difference (format, op);
 *     export skips them (counted in fj_bundle_stats.kernels_stale);
 *   - an old bundle or cache file given to fj_cache_import: its kernels are skipped and
 *     counted in kernels_stale, its tuning rows are imported (op filled from the signature).
 */
#define FJ_CACHE_FORMAT_VERSION 2
#define FJ_CACHE_SCHEMA_VERSION 5

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
    char *parts;             /* the inputs of the key, as made by fj_key_parts, for
                                fj_cache_explain; may be NULL (not recorded) */
} fj_entry;

void fj_entry_free(fj_entry *e);   /* frees the members, not e; accepts NULL */

/* ---- the kernel key (key.c) ---------------------------------------------------------
 * Everything a compiled kernel depends on, and nothing else (no paths, hostnames, times):
 * the digest of every embedded source and header, the operation ("fwd", fj_op_name), the
 * entry point, the generated preamble, the NVRTC options as one sorted text, the exact
 * target ("sm_90a"), NVRTC's version (major*1000 + minor*10) and the cache format
 * (FJ_CACHE_FORMAT_VERSION). A NULL string reads as "", a NULL digest as 16 zero bytes. */
typedef struct fj_key_inputs {
    const unsigned char *digest;   /* 16 bytes */
    const char *op, *function, *preamble, *options, *arch;
    int nvrtc_version, format_version;
} fj_key_inputs;

/* The key: XXH3-128 of the serialization documented in key.c. */
void fj_key_make(const fj_key_inputs *in, fj_key *out);

/* The inputs of a key as one text, stored with the entry so that a miss can be explained
 * (the key itself is a hash). Fields in this order, separated by ';':
 *   digest=<32 hex>;op=<op>;function=<name>;preamble_hash=<16 hex: XXH3-64 of the
 *   preamble>;options=<text>;arch=<target>;nvrtc=<version>;format=<format version>
 * In values, '%', ';' and control characters are written %XX. Returns a malloc'd string
 * (free it, or hand it to an fj_entry), NULL when out of memory. */
char *fj_key_parts(const fj_key_inputs *in);

/* 32 lowercase hex digits and a NUL. */
void fj_key_hex(const fj_key *k, char out[33]);

typedef struct fj_cache_counters {
    uint64_t hits, misses, corrupt, puts, put_skipped, lease_waits, lease_takeovers;
    uint64_t put_failed;   /* puts that returned -1: the kernel was not saved */
    uint64_t set_aside;    /* files set aside damaged while open (their entries lost) */
} fj_cache_counters;

typedef struct fj_cache fj_cache;

/* Opens (creating the directory and the file when needed) the cache in `dir`.
 * dir == NULL opens a memory-only cache. Never fails for an unusable directory or
 * file: it falls back to memory only and logs a warning; *out is always set unless
 * out of memory (returns -1). Returns 0. Directories it creates are made 0700. A
 * "kernels.db" (or its -wal or -shm) that is a symbolic link is not followed, dangling
 * or not: the cache is then memory only, with a warning naming the path. */
int fj_cache_open(fj_cache **out, const char *dir, fj_cache_log_fn log, void *log_user);
void fj_cache_close(fj_cache *c);  /* accepts NULL */

/* Opens one file (a bundle made by fj_cache_export, or any cache file) read-only and
 * immutable: it serves hits, puts are skipped as for a read-only cache. Returns 0, or -1
 * (reason logged, *out NULL) when the file is missing, unreadable, corrupt or not ours. */
int fj_cache_open_bundle(fj_cache **out, const char *path, fj_cache_log_fn log,
                         void *log_user);

/* Where it lives: the file path, or NULL when memory only. Whether it is read-only. */
const char *fj_cache_path(const fj_cache *c);
int fj_cache_readonly(const fj_cache *c);
/* Where this handle's open moved a corrupt cache file (its entries are lost), or NULL. */
const char *fj_cache_set_aside(const fj_cache *c);

/* 1 = hit (*out filled, checksum verified, last_used/hits updated when writable),
 * 0 = miss (also for a corrupt entry, which is deleted when writable). */
int fj_cache_get(fj_cache *c, const fj_key *key, fj_entry *out);
/* 1 when the cache holds `key` (its blob is not read or checked), else 0. */
int fj_cache_has(fj_cache *c, const fj_key *key);
/* The NVRTC versions (major*1000 + minor*10) the cache holds kernels of for `arch`, newest
 * first: up to `max` in out[]; returns how many (or -1). For lookups of a kernel another
 * NVRTC made than the loaded one (or any, without NVRTC): src/api/kernel.c. */
int fj_cache_nvrtc_versions(fj_cache *c, const char *arch, int *out, int max);

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
 * A memory-only cache leases between the threads that share it; a read-only one returns
 * 0 at once. */
#define FJ_LEASE_STALE_S 30
int fj_cache_lease(fj_cache *c, const fj_key *key, int timeout_ms, fj_entry *out);
void fj_cache_lease_release(fj_cache *c, const fj_key *key);

/* Maintenance (fajit-tune cache ...). list calls fn for each entry (blob not loaded:
 * blob == NULL, blob_size set); return nonzero from fn to stop. verify re-reads every
 * blob, checks its checksum, deletes bad entries (when writable) and returns how many
 * were bad (or -1). clear deletes every kernel (tuning rows stay). stats fills totals
 * (kernels only). */
typedef int (*fj_cache_list_fn)(void *user, const fj_entry *e);
int fj_cache_list(fj_cache *c, fj_cache_list_fn fn, void *user);
int fj_cache_verify(fj_cache *c, int *n_checked);
int fj_cache_clear(fj_cache *c);
/* Deletes the least recently used kernels (last load, then fewest hits, then oldest) until
 * their blobs total at most max_bytes; `keep` (may be NULL) goes last. Tuning rows stay.
 * The file keeps its size and reuses the freed pages. 0, or -1 (read-only, SQLite error). */
int fj_cache_prune(fj_cache *c, int64_t max_bytes, const fj_key *keep, int64_t *removed,
                   int64_t *freed);
typedef struct fj_cache_stats { int64_t entries, bytes, file_bytes; } fj_cache_stats;
int fj_cache_stats_get(fj_cache *c, fj_cache_stats *st);
void fj_cache_counters_get(fj_cache *c, fj_cache_counters *out);

/* ---- tuning rows ------------------------------------------------------------------
 * One row per (GPU class, problem signature, shape bucket): the winning configuration,
 * its time and the whole timing table. A pinned row is only replaced by a pinned one. */
typedef struct fj_tune_row {
    char gpu_name[128];      /* "NVIDIA H200" */
    char arch[16];           /* "sm_90a" */
    int sm_count;
    char signature[128];     /* fj_tune_signature (src/autotune/spec.h) */
    char op[16];             /* the operation, fj_op_name: the signature's first
                                dot-separated component; put: "" = take it from there */
    char bucket[64];         /* fj_shape_bucket */
    char config[128];        /* the winner, e.g. "128x64w4s1" */
    double time_ms;          /* the winner's time */
    char *table_json;        /* every candidate's timing; owned after get/list, read by put
                                (NULL stored as "") */
    int pinned;              /* 1: kept against unpinned puts and imports */
    char fajit_version[16];  /* FAJIT_VERSION_STRING of the tuner */
    int nvrtc_version;
    int64_t created;         /* unix seconds; put: 0 = now */
} fj_tune_row;

void fj_tune_row_free(fj_tune_row *r);   /* frees table_json, not r; accepts NULL */

/* Stores `r` in one transaction, replacing the row of the same key, except that a pinned
 * row is kept when `r` is not pinned. An empty r->op is stored as the signature's first
 * dot-separated component. Returns 0 stored, 1 kept the pinned row, -1 error
 * (logged; a read-only cache is an error: nothing would persist). */
int fj_cache_tune_put(fj_cache *c, const fj_tune_row *r);

/* 1 = found (*out filled; free with fj_tune_row_free), 0 = none (or an error, logged). */
int fj_cache_tune_get(fj_cache *c, const char *gpu_name, const char *arch, int sm_count,
                      const char *signature, const char *bucket, fj_tune_row *out);

/* Sets or clears the pinned flag. Returns 1 done, 0 no such row, -1 error or read-only. */
int fj_cache_tune_pin(fj_cache *c, const char *gpu_name, const char *arch, int sm_count,
                      const char *signature, const char *bucket, int pinned);

/* Calls fn for every row (ordered by key), without holding the cache's lock: fn may call
 * back into the cache. Return nonzero from fn to stop. Returns 0, or -1 on error. */
typedef int (*fj_tune_list_fn)(void *user, const fj_tune_row *r);
int fj_cache_tune_list(fj_cache *c, fj_tune_list_fn fn, void *user);

/* ---- validation verdicts -----------------------------------------------------------
 * One row per (GPU class, family, feature set): whether the family's kernels matched the
 * reference kernel on the validation problems (src/api/validate.c), and if not the first
 * failing case and the error. The GPU class is the name, target, SM count, driver version
 * and fajit version: a new driver or a new fajit is a class not validated yet. The feature
 * set names the model features the problems turned on ("softcap,sinks", "kv_e4m3"; "" for
 * none), each set being other kernel code: a verdict of one set says nothing of another.
 * The cache stores it as opaque text (src/api/validate.c makes and parses it). */
typedef struct fj_verdict {
    char gpu_name[128];      /* "NVIDIA H200" */
    char arch[16];           /* "sm_90a" */
    int sm_count;
    int driver_version;      /* cuDriverGetVersion: 13000 */
    char fajit_version[16];  /* FAJIT_VERSION_STRING */
    char family[16];         /* fj_family.name: "fa3" */
    int pass;                /* 1 pass, 0 fail */
    char failed_case[160];   /* "" when passed */
    char error[256];
    int64_t created;         /* unix seconds; put: 0 = now */
    char features[64];       /* the model-feature set, "" for none (a key part) */
} fj_verdict;

/* Stores `v`, replacing the row of the same class, family and features. 0, or -1 (read-only cache,
 * SQLite error; logged). */
int fj_cache_verdict_put(fj_cache *c, const fj_verdict *v);
/* 1 = found (*out filled), 0 = none (or an error, logged). `key` gives the class, family
 * and features (its other fields are not read). */
int fj_cache_verdict_get(fj_cache *c, const fj_verdict *key, fj_verdict *out);
/* Calls fn for every verdict of target `arch` (NULL = all), ordered by class, family and
 * features,
 * without holding the cache's lock. Nonzero from fn stops. 0, or -1 on error. */
typedef int (*fj_verdict_list_fn)(void *user, const fj_verdict *v);
int fj_cache_verdict_list(fj_cache *c, const char *arch, fj_verdict_list_fn fn, void *user);
/* Calls fn for every verdict row, under the cache's lock (fn must not call into the cache);
 * status_ok: its pass column is the integer 0 or 1 (fj_verdict.pass only says nonzero).
 * Rows fn returns nonzero for are deleted (not in a read-only cache). *n_checked, *n_bad
 * (may be NULL): rows read, rows fn called bad. 0, or -1 (SQLite error, out of memory;
 * logged). */
typedef int (*fj_verdict_check_fn)(void *user, const fj_verdict *v, int status_ok);
int fj_cache_verdict_check(fj_cache *c, fj_verdict_check_fn fn, void *user, int *n_checked,
                           int *n_bad);

/* ---- bundles: export, import, merge ----------------------------------------------- */
typedef struct fj_bundle_stats {
    int kernels;          /* export: written; import: added */
    int kernels_present;  /* import: already in the cache (same key), left as they were */
    int rows;             /* tuning rows written (export) or added/replaced (import) */
    int rows_kept;        /* import: rows where the cache's row won (see fj_cache_import) */
    int corrupt;          /* kernels whose blob failed its checksum: skipped */
    int kernels_stale;    /* kernels of an older cache format (a file of schema < 3):
                             never hit, skipped (see FJ_CACHE_FORMAT_VERSION) */
    int verdicts;         /* validation verdicts written (export) or added (import: no
                             verdict of the class, family and features was there) */
    int verdicts_replaced;  /* import: the bundle's verdict won over the cache's */
    int verdicts_kept;      /* import: the cache's verdict won (see fj_cache_import) */
    int verdicts_refused;   /* import: PASS verdicts of a family in `local_pass` */
} fj_bundle_stats;

/* Writes the kernels, tuning rows and verdicts of target `arch` ("sm_90a"; NULL = all) to one
 * self-contained SQLite file at `path` (journal_mode DELETE, nothing left in a journal,
 * so it can be opened immutable on read-only media). Every blob is verified first; bad
 * ones are skipped and counted. Leases, hit counts and last-use times are not exported.
 * The file is written beside `path` and renamed over it, so readers never see half a
 * bundle. An existing `path` is opened without blocking and checked first; refused (-1,
 * logged): anything but a regular file (a FIFO, a device, a directory: never replaced,
 * never blocked on), the cache's own file or its -wal/-shm (same inode, whatever the
 * path's spelling or links), any live cache (an SQLite file in WAL mode, which no bundle
 * is, so `fajit-tune cache merge` cannot clobber a cache either) and, unless flags has
 * FJ_EXPORT_FORCE, a regular file that is neither empty nor a fajit bundle. A target with
 * no good kernel in the cache fails too (nothing written). st may be NULL. Returns 0 or
 * -1. */
#define FJ_EXPORT_FORCE 1u
int fj_cache_export(fj_cache *c, const char *path, const char *arch, unsigned flags,
                    fj_bundle_stats *st);

/* Copies the kernels, tuning rows and verdicts of the bundle (or cache file) at `path` into
 * `c`, in one transaction: all or nothing; `path` must be a regular file (no FIFO: never
 * blocked on). Verdicts: the newer of a GPU class, family and feature set wins (a file of
 * schema 4 holds feature-free ones), `created` capped at the time of the import; of the
 * same time FAIL wins, then the smaller case and error text (a file of schema < 4 has
 * none); a PASS for a family named in `local_pass` (NULL-terminated; may be NULL) is not
 * taken (st->verdicts_refused): such a family passes only by being validated on the GPU
 * class itself. Kernels: each blob is verified (bad: skipped, counted);
 * a key already present is left as it is. Tuning rows: a pinned row beats an unpinned
 * one; otherwise the newer (created) wins, then the faster; otherwise the cache's row is
 * kept. The result does not depend on the order in which bundles are imported, so a
 * merge is: open a fresh cache, import each bundle, export. Reads files of every schema
 * version up to ours; from a file of schema < 3 it takes the tuning rows (op filled from
 * the signature) and skips the kernels (st->kernels_stale). st may be NULL. Returns 0,
 * or -1 (not a bundle, corrupt file, read-only cache, SQLite error; logged, nothing
 * changed). */
int fj_cache_import(fj_cache *c, const char *path, const char *const *local_pass,
                    fj_bundle_stats *st);

/* ---- explain ----------------------------------------------------------------------- */
enum {
    FJ_PART_DIGEST = 1 << 0,     /* embedded sources and headers */
    FJ_PART_FUNCTION = 1 << 1,
    FJ_PART_PREAMBLE = 1 << 2,
    FJ_PART_OPTIONS = 1 << 3,
    FJ_PART_ARCH = 1 << 4,
    FJ_PART_NVRTC = 1 << 5,
    FJ_PART_FORMAT = 1 << 6,
    FJ_PART_UNRECORDED = 1 << 7, /* the nearest entry has no parts and what it records
                                    matches: the difference is in digest/op/function/
                                    preamble */
    FJ_PART_OP = 1 << 8          /* the operation (fwd, ...) */
};

typedef struct fj_explain {
    int hit;               /* the key is in the cache */
    int has_nearest;       /* a miss with a nearest entry (below) */
    fj_key nearest;
    char nearest_name[96];
    char nearest_arch[16];
    unsigned differs;      /* FJ_PART_* bits in which the nearest entry differs */
    char text[1024];       /* one line for people: what was found and what differed */
} fj_explain;

/* Why `key` hits or misses. `parts` (fj_key_parts of the wanted key) is required; `name`
 * (the variant's entry name) may be NULL. On a miss, the nearest entry is the one of the
 * same variant (same name, or same function and preamble) or, failing that, of the same
 * arch, with the fewest differing parts (then the newest); out->differs names the parts.
 * Returns 1 hit, 0 miss (out filled either way), -1 error. */
int fj_cache_explain(fj_cache *c, const fj_key *key, const char *name, const char *parts,
                     fj_explain *out);

/* Test hook: corrupt the stored blob of `key` in place (flip one byte), bypassing the
 * checksum update. Returns 0 if the entry existed. */
int fj_cache_debug_corrupt(fj_cache *c, const fj_key *key);

#endif /* FJ_CACHE_H */
