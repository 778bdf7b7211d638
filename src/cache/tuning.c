/* tuning.c - tuning rows: one winner per (GPU class, problem signature, shape bucket),
 * with its timing table; pinned rows beat unpinned ones. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "cache_int.h"

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

/* Binds ?1..?13 of TUNE_PUT; an empty op as the signature's first component. */
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
    if (r->op[0]) {
        bind_fixed(st, 13, r->op, sizeof r->op);
    } else {
        size_t n = strnlen(r->signature, sizeof r->signature);
        const char *dot = memchr(r->signature, '.', n);
        sqlite3_bind_text(st, 13, r->signature, (int)(dot ? (size_t)(dot - r->signature) : n),
                          SQLITE_STATIC);
    }
}

static void column_to(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", s ? s : "");
}

/* Reads a row of TUNE_SEL, columns 0..12. Returns 0, or -1 when out of memory. */
int fj_tune_read(sqlite3_stmt *st, fj_tune_row *r)
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
    column_to(r->op, sizeof r->op, st, 12);
    return r->table_json ? 0 : -1;
}

/* Inside the caller's transaction: stores `r` (created at `created`) unless the row
 * already there wins. A pinned row beats an unpinned one either way. Between rows of the
 * same pinning, `r` wins a put; an import (merge) takes the newer, then the faster, and
 * keeps the row there on a tie, so that imports commute. Returns 0 stored, 1 kept, -1. */
int fj_tune_store(fj_cache *c, const fj_tune_row *r, int64_t created, int merge)
{
    sqlite3_stmt *st = c->st[ST_TUNE_GET];
    int keep = 0, rc;

    bind_row_key(st, r);
    rc = fj_step(c, st);
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
        fj_cache_say(c, FJ_LOG_WARN, "%s is read-only; tuning result not saved", c->path);
        goto out;
    }
    if (exec1(c, ST_BEGIN) == SQLITE_DONE) {
        rc = fj_tune_store(c, r, r->created ? r->created : (int64_t)time(NULL), 0);
        if (rc < 0 || exec1(c, ST_COMMIT) != SQLITE_DONE) {
            exec1(c, ST_ROLLBACK);
            rc = -1;
        }
    }
    if (rc < 0)
        fj_cache_say(c, FJ_LOG_WARN, "cannot save the tuning row %s/%s (%s)", r->signature,
                     r->bucket, sqlite3_errmsg(c->db));
out:
    fj_cache_unlock(c);
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
    rc = fj_step(c, st);
    if (rc == SQLITE_ROW)
        hit = fj_tune_read(st, out) == 0;
    else if (rc != SQLITE_DONE)
        fj_cache_say(c, FJ_LOG_WARN, "reading a tuning row failed (%s)", sqlite3_errmsg(c->db));
    done(st);
    fj_cache_unlock(c);
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
        fj_cache_say(c, FJ_LOG_WARN, "%s is read-only; pin not changed", c->path);
    } else {
        sqlite3_stmt *st = c->st[ST_TUNE_PIN];
        bind_tune_key(st, gpu_name, arch, sm_count, signature, bucket);
        sqlite3_bind_int(st, 6, pinned != 0);
        if (exec1(c, ST_TUNE_PIN) == SQLITE_DONE)
            rc = sqlite3_changes(c->db) > 0;
        else
            fj_cache_say(c, FJ_LOG_WARN, "pin failed (%s)", sqlite3_errmsg(c->db));
    }
    fj_cache_unlock(c);
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
    while ((step = fj_step(c, st)) == SQLITE_ROW) {
        if (n == cap) {
            fj_tune_row *nv = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        if (fj_tune_read(st, &v[n++]) == -1)
            break;
    }
    if (step != SQLITE_DONE)
        fj_cache_say(c, FJ_LOG_WARN, "listing tuning rows failed (%s)", sqlite3_errmsg(c->db));
    else
        rc = 0;
    done(st);
    fj_cache_unlock(c);

    for (size_t i = 0; i < n; i++)
        if (rc == 0 && fn(user, &v[i]))
            break;
    for (size_t i = 0; i < n; i++)
        fj_tune_row_free(&v[i]);
    free(v);
    return rc;
}
