/* errors.c - the status table, per-thread error messages and compile logs, and logging
 * through the context's callback. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*------ version and status table ------*/

unsigned fajit_version_number(void) { return FAJIT_VERSION_NUMBER; }
const char *fajit_version_string(void) { return FAJIT_VERSION_STRING; }

const char *fajit_status_name(fajit_status s)
{
    switch (s) {
#define X(name, value, msg) \
    case FAJIT_##name:      \
        return "FAJIT_" #name;
        FAJIT_STATUS_MAP(X)
#undef X
    }
    return "FAJIT_UNKNOWN_STATUS";
}

const char *fajit_strerror(fajit_status s)
{
    switch (s) {
#define X(name, value, msg) \
    case FAJIT_##name:      \
        return msg;
        FAJIT_STATUS_MAP(X)
#undef X
    }
    return "unknown status code";
}

/*------ errors and logging ------*/

/* Errors and compile logs are kept per thread: threads sharing a context never read each
 * other's message, nor a log another thread freed. A thread keeps the last failure of its
 * TL_SLOTS most recently failing contexts, keyed by an id no other context ever gets. */
enum { TL_SLOTS = 4 };

typedef struct {
    uint64_t id;
    char msg[FJ_ERRMSG_LEN];
    char *log;
} tl_slot;

typedef struct {
    tl_slot s[TL_SLOTS];
    unsigned next;
} tl_state;

static pthread_key_t g_tl_key;
static pthread_once_t g_tl_once = PTHREAD_ONCE_INIT;

static void tl_free(void *p)
{
    tl_state *t = p;
    for (int i = 0; i < TL_SLOTS; i++)
        free(t->s[i].log);
    free(t);
}

static void tl_init(void) { pthread_key_create(&g_tl_key, tl_free); }

/* The calling thread's slot of `ctx`; with `create`, a fresh one (the oldest is reused). */
static tl_slot *tl_find(const fajit_ctx *ctx, int create)
{
    pthread_once(&g_tl_once, tl_init);
    tl_state *t = pthread_getspecific(g_tl_key);
    if (!t) {
        if (!create || !(t = calloc(1, sizeof *t)))
            return NULL;
        if (pthread_setspecific(g_tl_key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    for (int i = 0; i < TL_SLOTS; i++)
        if (t->s[i].id == ctx->id)
            return &t->s[i];
    if (!create)
        return NULL;
    tl_slot *s = &t->s[t->next++ % TL_SLOTS];
    s->id = ctx->id;
    s->msg[0] = 0;
    free(s->log);
    s->log = NULL;
    return s;
}

fajit_status fj_fail(fajit_ctx *ctx, fajit_status st, const char *fmt, ...)
{
    if (!ctx)
        return st;
    char buf[FJ_ERRMSG_LEN - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tl_slot *s = tl_find(ctx, 1);
    if (s)
        snprintf(s->msg, sizeof s->msg, "%s: %s", fajit_status_name(st), buf);
    fj_log(ctx, FAJIT_LOG_DEBUG, "%s: %s", fajit_status_name(st), buf);
    return st;
}

void fj_keep_compile_log(fajit_ctx *ctx, const char *log)
{
    tl_slot *s = ctx ? tl_find(ctx, 1) : NULL;
    if (!s)
        return;
    free(s->log);
    s->log = strdup(log ? log : "");
}

void fj_error_carry(fajit_ctx *ctx, const char *msg, const char *log)
{
    tl_slot *s = ctx ? tl_find(ctx, 1) : NULL;
    if (!s)
        return;
    snprintf(s->msg, sizeof s->msg, "%s", msg ? msg : "");
    if (log) {
        free(s->log);
        s->log = strdup(log);
    }
}

void fj_log(fajit_ctx *ctx, fajit_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->opts.log || level > ctx->opts.log_level)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ctx->opts.log(ctx->opts.log_user, level, buf);
}

void fj_errors_forget(const fajit_ctx *ctx)
{
    tl_slot *s = tl_find(ctx, 0);  /* this thread's; other threads' slots age out */
    if (s) {
        free(s->log);
        memset(s, 0, sizeof *s);
    }
}

#define NOT_LIVE "not a live fajit context (destroyed, or never created by fajit_ctx_create)"

const char *fajit_errmsg(fajit_ctx *ctx)
{
    if (!ctx)
        return "no context";
    if (!fj_ctx_live(ctx))
        return NOT_LIVE;
    const tl_slot *s = tl_find(ctx, 0);
    return s ? s->msg : "";
}

const char *fajit_compile_log(fajit_ctx *ctx)
{
    if (ctx && !fj_ctx_live(ctx))
        return NOT_LIVE;
    const tl_slot *s = ctx ? tl_find(ctx, 0) : NULL;
    return s && s->log ? s->log : "";
}
