/* kernels.c - compiled kernels: get (checksum verified), lease (a compile lease, or the
 * kernel another compile published), has, put, list, verify, clear, prune (LRU under a
 * byte cap), stats, and the test hook that corrupts a blob. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "cache_int.h"

/* Test hook, deliberately not in cache.h: nonzero makes every fj_cache_put of a writable
 * cache fail as an SQLite error would (disk full, a damaged file). */
int fj_cache_debug_fail_puts;

/* ---- entries ---------------------------------------------------------------------- */


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

uint64_t fj_blob_sum(const uint8_t key[16], const void *blob, size_t n)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, key, 16);
    XXH3_64bits_update(&st, n ? blob : "", n);
    return XXH3_64bits_digest(&st);
}

int fj_blob_ok(int schema, const void *key, const void *blob, size_t n, int64_t size,
               int64_t sum)
{
    if ((int64_t)n != size || (!blob && n))
        return 0;
    if (schema < 3)   /* cache format 1: the blob alone */
        return XXH3_64bits(n ? blob : "", n) == (uint64_t)sum;
    return key && fj_blob_sum(key, blob, n) == (uint64_t)sum;
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
    rc = fj_step(c, st);
    if (rc == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st, 4);
        size_t n = (size_t)sqlite3_column_bytes(st, 4);
        if (n && !blob) {
            /* out of memory: a plain miss */
        } else if (!fj_blob_ok(c->schema, key->b, blob, n, sqlite3_column_int64(st, 5),
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
        fj_cache_say(c, bad ? FJ_LOG_WARN : FJ_LOG_DEBUG, "reading an entry failed (%s); a miss",
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
    fj_cache_unlock(c);
    return hit;
}

/* The lease of lease.c, reading a kernel that another thread or process published. */
int fj_cache_lease(fj_cache *c, const fj_key *key, int timeout_ms, fj_entry *out)
{
    return fj_lease_wait(c, key, timeout_ms, fj_cache_get, out);
}

int fj_cache_has(fj_cache *c, const fj_key *key)
{
    if (!c || !key)
        return 0;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_EXISTS];
    bind_key(st, 1, key);
    int has = fj_step(c, st) == SQLITE_ROW;
    done(st);
    fj_cache_unlock(c);
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
    while (n < max && fj_step(c, st) == SQLITE_ROW)
        out[n++] = sqlite3_column_int(st, 0);
    done(st);
    fj_cache_unlock(c);
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
            fj_cache_say(c, FJ_LOG_INFO, "%s is read-only; new kernels are not saved",
                         c->path);
        c->told_readonly = 1;
        rc = 0;
        goto out;
    }
    if (fj_cache_debug_fail_puts || exec1(c, ST_BEGIN) != SQLITE_DONE)
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
    sqlite3_bind_int64(st, 8, (sqlite3_int64)fj_blob_sum(e->key.b, blob, e->blob_size));
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
    fj_lease_forget(c, &e->key);
    c->ctr.puts++;
    rc = 0;
out:
    if (rc != 0) {
        c->ctr.put_failed++;
        fj_cache_say(c, FJ_LOG_WARN, "cannot save kernel '%s' (%s)",
                     e->name ? e->name : "", sqlite3_errmsg(c->db));
        if (in_txn)
            exec1(c, ST_ROLLBACK);
    }
    fj_cache_unlock(c);
    return rc;
}

/* ---- maintenance ------------------------------------------------------------------ */

/* fj_cache_list once; *recovered: the file was found damaged, set aside and reopened. */
static int list_once(fj_cache *c, fj_cache_list_fn fn, void *user, int *recovered)
{
    fj_entry *v = NULL;
    size_t n = 0, cap = 0;
    int rc = -1, step;

    /* Collected first so fn runs without the lock and may call back into the cache. */
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_LIST];
    while ((step = fj_step(c, st)) == SQLITE_ROW) {
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
        fj_cache_say(c, FJ_LOG_WARN, "list failed (%s)", sqlite3_errmsg(c->db));
    else
        rc = 0;
    done(st);
    *recovered = fj_cache_unlock(c);

    for (size_t i = 0; i < n; i++)
        if (rc == 0 && fn(user, &v[i]))
            break;
    for (size_t i = 0; i < n; i++)
        fj_entry_free(&v[i]);
    free(v);
    return rc;
}

/* list, clear and stats are tried again once on the fresh file when they found the old one
 * damaged (it is set aside with its entries: the answer is the fresh file's). */
int fj_cache_list(fj_cache *c, fj_cache_list_fn fn, void *user)
{
    int recovered = 0, rc;
    if (!c || !fn)
        return -1;
    rc = list_once(c, fn, user, &recovered);
    return rc < 0 && recovered ? list_once(c, fn, user, &recovered) : rc;
}

/* PRAGMA quick_check on c's file (caller holds c->mu): 1 when SQLite finds it sound,
 * 0 with c->damaged set when not (the pages themselves, which the blobs' checksums do not
 * see), -1 when it could not run.
 * Noted only for a file: a memory-only cache cannot be damaged this way. */
static int file_sound(fj_cache *c)
{
    sqlite3_stmt *st = NULL;
    int ok = 0, rc = sqlite3_prepare_v2(c->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (is_corrupt_rc(rc))
        c->damaged = 1;
    if (rc == SQLITE_OK && (rc = fj_step(c, st)) == SQLITE_ROW) {
        const char *r = (const char *)sqlite3_column_text(st, 0);
        ok = r && strcmp(r, "ok") == 0;
        if (!ok)
            fj_cache_say(c, FJ_LOG_WARN, "%s fails SQLite's integrity check: %s",
                         c->path ? c->path : "the cache", r ? r : "?");
    }
    sqlite3_finalize(st);
    if (is_corrupt_rc(rc) || (rc == SQLITE_ROW && !ok))
        c->damaged = 1;
    return ok ? 1 : c->damaged ? 0 : -1;
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
    int sound = file_sound(c);
    if (sound <= 0) {   /* damaged: set aside and reopened here, every entry lost */
        if (sound < 0)
            fj_cache_say(c, FJ_LOG_WARN, "verify failed (%s)", sqlite3_errmsg(c->db));
        fj_cache_unlock(c);
        return sound;
    }
    sqlite3_stmt *st = c->st[ST_VERIFY];
    while ((step = fj_step(c, st)) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st, 1);
        size_t n = (size_t)sqlite3_column_bytes(st, 1);
        checked++;
        const void *key = sqlite3_column_bytes(st, 0) == 16 ? sqlite3_column_blob(st, 0)
                                                            : NULL;
        if ((n && !blob)   /* out of memory: not the entry's fault */
            || fj_blob_ok(c->schema, key, blob, n, sqlite3_column_int64(st, 2),
                          sqlite3_column_int64(st, 3)))
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
        fj_cache_say(c, FJ_LOG_WARN, "verify failed (%s)", sqlite3_errmsg(c->db));
    done(st);
    /* Deleted after the scan: changing a table under a running SELECT is undefined. */
    for (size_t i = 0; i < n_bad; i++)
        delete_entry(c, &bad[i]);
    c->ctr.corrupt += n_bad;
    if (step == SQLITE_DONE)
        rc = (int)n_bad;
    fj_cache_unlock(c);
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
    for (int again = 1; rc != 0 && again >= 0; again--) {
        pthread_mutex_lock(&c->mu);
        if (c->readonly)
            fj_cache_say(c, FJ_LOG_WARN, "%s is read-only; not cleared", c->path);
        else if (exec1(c, ST_CLEAR) != SQLITE_DONE)
            fj_cache_say(c, FJ_LOG_WARN, "clear failed (%s)", sqlite3_errmsg(c->db));
        else
            rc = 0;
        if (!fj_cache_unlock(c))
            break;
    }
    return rc;
}

/* Kernel count and blob bytes, under c->mu. */
static int kernel_totals(fj_cache *c, fj_cache_stats *out)
{
    sqlite3_stmt *st = c->st[ST_STATS];
    int ok = fj_step(c, st) == SQLITE_ROW;
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
        fj_cache_say(c, FJ_LOG_WARN, "%s is read-only; not pruned", c->path);
        goto out;
    }
    if (exec1(c, ST_BEGIN) != SQLITE_DONE) {
        fj_cache_say(c, FJ_LOG_WARN, "prune failed (%s)", sqlite3_errmsg(c->db));
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
        fj_cache_say(c, FJ_LOG_WARN, "prune failed (%s)", sqlite3_errmsg(c->db));
        exec1(c, ST_ROLLBACK);
        goto out;
    }
    if (before.entries > after.entries)
        fj_cache_say(c, FJ_LOG_INFO, "pruned %lld least recently used kernels (%lld bytes) "
                     "to stay under %lld bytes", (long long)(before.entries - after.entries),
                     (long long)(before.bytes - after.bytes), (long long)max_bytes);
    if (removed)
        *removed = before.entries - after.entries;
    if (freed)
        *freed = before.bytes - after.bytes;
    rc = 0;
out:
    fj_cache_unlock(c);
    return rc;
}

int fj_cache_stats_get(fj_cache *c, fj_cache_stats *st_out)
{
    int rc = -1;
    if (!c || !st_out)
        return -1;
    for (int again = 1; rc != 0 && again >= 0; again--) {
        memset(st_out, 0, sizeof *st_out);
        pthread_mutex_lock(&c->mu);
        rc = kernel_totals(c, st_out);
        if (c->path) {
            char wal[4200];
            snprintf(wal, sizeof wal, "%s-wal", c->path);
            st_out->file_bytes = file_size(c->path) + file_size(wal);
        }
        if (!fj_cache_unlock(c))
            break;
    }
    return rc;
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
    if (fj_step(c, st) == SQLITE_ROW) {
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
    fj_cache_unlock(c);
    free(copy);
    return rc;
}
