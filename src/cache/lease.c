/* lease.c - one compile per key across threads and processes. A row in `leases` names
 * its owner (pid, host, random token) and carries a heartbeat that a background thread
 * refreshes while this handle holds leases; a dead or silent owner's lease is taken over. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache_int.h"

#define POLL_MS 10          /* lease wait: sleep between attempts */
#define HEARTBEAT_MS 1000

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

static void close_leases(fj_cache *c);

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
            int rc = fj_step(c, st);
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
        fj_cache_say(c, FJ_LOG_WARN, "no heartbeat thread; leases may be taken over "
                     "after %d s", FJ_LEASE_STALE_S);
}

/* Decides, inside the caller's transaction, what the lease row of `key` means for us. */
static int lease_state(fj_cache *c, const fj_key *key, int *take, int *takeover)
{
    sqlite3_stmt *st = c->st[ST_EXISTS];
    int r = LEASE_ERROR, rc;

    bind_key(st, 1, key);
    rc = fj_step(c, st);
    done(st);
    if (rc == SQLITE_ROW)
        return LEASE_PUBLISHED;
    if (rc != SQLITE_DONE)
        return LEASE_ERROR;
    st = c->st[ST_LEASE_GET];
    bind_key(st, 1, key);
    rc = fj_step(c, st);
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
        token = fj_cache_token();
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
            fj_cache_say(c, FJ_LOG_INFO, "took over the compile lease of a dead or "
                         "silent owner");
        }
        c->close_leases = close_leases;
        start_heartbeat(c);
        pthread_cond_signal(&c->hb_cv);
    }
out:
    if (r == LEASE_ERROR)
        fj_cache_say(c, FJ_LOG_WARN, "lease failed (%s); compiling without it",
                     sqlite3_errmsg(c->db));
    fj_cache_unlock(c);
    return r;
}

int fj_lease_wait(fj_cache *c, const fj_key *key, int timeout_ms, fj_lease_read_fn read,
                  fj_entry *out)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int waited = 0, bad_reads = 0;

    if (out)
        memset(out, 0, sizeof *out);
    /* A memory-only cache leases too, in its own database: the threads of one context
     * then compile each key once. A read-only one cannot write lease rows (nor keep what
     * is compiled, so a waiter would gain nothing). */
    if (!c || !key || c->readonly)
        return 0;
    for (;;) {
        switch (try_lease(c, key)) {
        case LEASE_OURS:
        case LEASE_ERROR:
            return 0;
        case LEASE_PUBLISHED:
            /* A corrupt entry reads as a miss and is deleted; try again once. */
            if (!out || read(c, key, out))
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
            fj_cache_unlock(c);
        }
        if (now_ms() >= deadline) {
            fj_cache_say(c, FJ_LOG_WARN, "waited %d ms for another compile of the "
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
            fj_cache_say(c, FJ_LOG_WARN, "cannot release a lease (%s); it expires in "
                         "%d s", sqlite3_errmsg(c->db), FJ_LEASE_STALE_S);
        drop_held(c, (size_t)i);
    }
    fj_cache_unlock(c);
}

void fj_lease_forget(fj_cache *c, const fj_key *key)
{
    for (long i; (i = find_held(c, key, 0)) >= 0; )
        drop_held(c, (size_t)i);
}

/* Stops the heartbeat and gives back every lease still held: c->close_leases, called by
 * fj_cache_close on a handle that ever took a lease. */
static void close_leases(fj_cache *c)
{
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
}
