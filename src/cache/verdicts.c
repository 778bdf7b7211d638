/* verdicts.c - the validation gate's verdicts: one per (GPU class, family, model-feature
 * set), pass or fail with the first failing case. The newer verdict of a key replaces the
 * older. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "cache_int.h"

static void bind_text(sqlite3_stmt *st, int i, const char *s, size_t cap)
{
    sqlite3_bind_text(st, i, s, (int)strnlen(s, cap), SQLITE_STATIC);
}

/* ?1..?6 and ?11: the class, the family and the feature set (VERDICT_KEY). */
static void bind_class(sqlite3_stmt *st, const fj_verdict *v)
{
    bind_text(st, 1, v->gpu_name, sizeof v->gpu_name);
    bind_text(st, 2, v->arch, sizeof v->arch);
    sqlite3_bind_int(st, 3, v->sm_count);
    sqlite3_bind_int(st, 4, v->driver_version);
    bind_text(st, 5, v->fajit_version, sizeof v->fajit_version);
    bind_text(st, 6, v->family, sizeof v->family);
    bind_text(st, 11, v->features, sizeof v->features);
}

static void column_to(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
    const char *s = (const char *)sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", s ? s : "");
}

void fj_verdict_read(sqlite3_stmt *st, fj_verdict *v)
{
    memset(v, 0, sizeof *v);
    column_to(v->gpu_name, sizeof v->gpu_name, st, 0);
    column_to(v->arch, sizeof v->arch, st, 1);
    v->sm_count = sqlite3_column_int(st, 2);
    v->driver_version = sqlite3_column_int(st, 3);
    column_to(v->fajit_version, sizeof v->fajit_version, st, 4);
    column_to(v->family, sizeof v->family, st, 5);
    v->pass = sqlite3_column_int(st, 6) != 0;
    column_to(v->failed_case, sizeof v->failed_case, st, 7);
    column_to(v->error, sizeof v->error, st, 8);
    v->created = sqlite3_column_int64(st, 9);
    column_to(v->features, sizeof v->features, st, 10);
}

/* Import's order of two verdicts of one class, family and feature set: the newer wins; of the same
 * time, FAIL; then the smaller case and error text. A total order, so the result does not
 * depend on the order of imports. > 0 when `have` (the row there) wins or ties. */
static int row_wins(sqlite3_stmt *have, const fj_verdict *v, int64_t created)
{
    const int64_t t = sqlite3_column_int64(have, 9);
    const int pass = sqlite3_column_int(have, 6) != 0;
    if (t != created)
        return t > created;
    if (pass != (v->pass != 0))
        return !pass;
    const char *fc = (const char *)sqlite3_column_text(have, 7);
    int d = strcmp(fc ? fc : "", v->failed_case);
    if (d)
        return d < 0;
    const char *err = (const char *)sqlite3_column_text(have, 8);
    return strcmp(err ? err : "", v->error) <= 0;
}

int fj_verdict_store(fj_cache *c, const fj_verdict *v, int merge)
{
    const int64_t now = (int64_t)time(NULL);
    int64_t created = v->created ? v->created : now;
    int replaced = 0;
    if (merge) {   /* import: no verdict is dated after the import (nor before 1970) */
        created = created > now ? now : created < 0 ? 0 : created;
        sqlite3_stmt *st = c->st[ST_VERDICT_GET];
        bind_class(st, v);
        int rc = fj_step(c, st), keep = rc == SQLITE_ROW && row_wins(st, v, created);
        done(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return -1;
        if (keep)
            return 1;
        replaced = rc == SQLITE_ROW;
    }
    sqlite3_stmt *put = c->st[ST_VERDICT_PUT];
    bind_class(put, v);
    sqlite3_bind_int(put, 7, v->pass != 0);
    bind_text(put, 8, v->failed_case, sizeof v->failed_case);
    bind_text(put, 9, v->error, sizeof v->error);
    sqlite3_bind_int64(put, 10, (sqlite3_int64)created);
    return exec1(c, ST_VERDICT_PUT) == SQLITE_DONE ? 2 * replaced : -1;
}

int fj_cache_verdict_put(fj_cache *c, const fj_verdict *v)
{
    int rc = -1;
    if (!c || !v)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->readonly || !c->st[ST_VERDICT_PUT])
        fj_cache_say(c, FJ_LOG_WARN, "%s is read-only; the verdict on %s is kept in memory "
                     "only", c->path ? c->path : "the cache", v->family);
    else if ((rc = fj_verdict_store(c, v, 0)) < 0)
        fj_cache_say(c, FJ_LOG_WARN, "cannot save the verdict on %s (%s)", v->family,
                     sqlite3_errmsg(c->db));
    fj_cache_unlock(c);
    return rc;
}

int fj_cache_verdict_get(fj_cache *c, const fj_verdict *key, fj_verdict *out)
{
    int hit = 0;
    if (!c || !key || !out)
        return 0;
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_VERDICT_GET];
    if (st) {   /* (NULL in a read-only file of an older schema: no verdicts there) */
        bind_class(st, key);
        int rc = fj_step(c, st);
        if (rc == SQLITE_ROW) {
            fj_verdict_read(st, out);
            hit = 1;
        } else if (rc != SQLITE_DONE) {
            fj_cache_say(c, FJ_LOG_WARN, "reading a verdict failed (%s)", sqlite3_errmsg(c->db));
        }
        done(st);
    }
    fj_cache_unlock(c);
    return hit;
}

int fj_cache_verdict_list(fj_cache *c, const char *arch, fj_verdict_list_fn fn, void *user)
{
    fj_verdict *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, step = SQLITE_DONE;
    if (!c || !fn)
        return -1;
    /* Collected first so fn runs without the lock and may call back into the cache. */
    pthread_mutex_lock(&c->mu);
    sqlite3_stmt *st = c->st[ST_VERDICT_LIST];
    if (st && arch)
        sqlite3_bind_text(st, 1, arch, -1, SQLITE_STATIC);
    while (st && (step = fj_step(c, st)) == SQLITE_ROW) {
        if (n == cap) {
            fj_verdict *nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        fj_verdict_read(st, &v[n++]);
    }
    if (step != SQLITE_DONE) {
        fj_cache_say(c, FJ_LOG_WARN, "listing verdicts failed (%s)", sqlite3_errmsg(c->db));
        rc = -1;
    }
    if (st)
        done(st);
    fj_cache_unlock(c);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (fn(user, &v[i]))
            break;
    free(v);
    return rc;
}

#define CHECK_SELECT(features) "SELECT " VERDICT_BASE ", " features ", typeof(pass) =" \
                               " 'integer' AND pass IN (0, 1), rowid FROM verdicts"

/* Reads every verdict row (with whether its pass column is the integer 0 or 1), then
 * deletes the rows fn calls bad, by rowid: a key column too long for fj_verdict or NULL
 * would not match VERDICT_KEY. */
int fj_cache_verdict_check(fj_cache *c, fj_verdict_check_fn fn, void *user, int *n_checked,
                           int *n_bad)
{
    sqlite3_int64 *bad = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, step = SQLITE_DONE, nb = 0;
    sqlite3_stmt *sel = NULL, *del = NULL;
    if (!c || !fn)
        return -1;
    pthread_mutex_lock(&c->mu);
    if (c->st[ST_VERDICT_LIST]   /* (a read-only file of an older schema has no verdicts) */
        && (sqlite3_prepare_v2(c->db, c->schema >= 5 ? CHECK_SELECT(VERDICT_FEATURES)
                                                     : CHECK_SELECT("''"), -1, &sel, NULL)
                != SQLITE_OK
            || (!c->readonly && sqlite3_prepare_v2(c->db, "DELETE FROM verdicts WHERE rowid = ?1",
                                                   -1, &del, NULL) != SQLITE_OK)))
        rc = -1;
    while (sel && rc == 0 && (step = fj_step(c, sel)) == SQLITE_ROW) {
        fj_verdict v;
        fj_verdict_read(sel, &v);
        n++;
        if (!fn(user, &v, sqlite3_column_int(sel, N_VERDICT_COLS)))
            continue;
        if ((size_t)nb == cap) {
            sqlite3_int64 *nbad = realloc(bad, (cap = cap ? 2 * cap : 16) * sizeof *bad);
            if (!nbad) {
                rc = -1;
                break;
            }
            bad = nbad;
        }
        bad[nb++] = sqlite3_column_int64(sel, N_VERDICT_COLS + 1);
    }
    if (rc == 0 && sel && step != SQLITE_DONE)
        rc = -1;
    for (int i = 0; rc == 0 && del && i < nb; i++) {
        sqlite3_bind_int64(del, 1, bad[i]);
        if (fj_step(c, del) != SQLITE_DONE)
            rc = -1;
        done(del);
    }
    if (rc != 0)
        fj_cache_say(c, FJ_LOG_WARN, "checking verdicts failed (%s)", sqlite3_errmsg(c->db));
    sqlite3_finalize(sel);
    sqlite3_finalize(del);
    fj_cache_unlock(c);
    free(bad);
    if (n_checked)
        *n_checked = (int)n;
    if (n_bad)
        *n_bad = nb;
    return rc;
}
