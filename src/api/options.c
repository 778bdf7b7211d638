/* options.c - context options: defaults, validation, FAJIT_* environment overrides, and
 * where the cache lives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

void fajit_ctx_opts_init(fajit_ctx_opts *o)
{
    memset(o, 0, sizeof *o);
    o->device = 0;
    o->policy = FAJIT_POLICY_BLOCKING;
    o->log_level = FAJIT_LOG_WARN;
}

/* Index of `s` in `names` (case-insensitive), or -1. */
static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

static fajit_status apply_env(fajit_ctx *ctx)
{
    static const char *const policies[] = {"blocking", "fallback", "strict"};
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const char *e;
    if ((e = getenv("FAJIT_POLICY")) && *e) {
        int i = lookup(e, policies, 3);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_POLICY must be blocking, fallback or strict, got '%s'", e);
        ctx->opts.policy = (fajit_policy)i;
    }
    if ((e = getenv("FAJIT_FAMILY")) && *e) {
        static const char *const fams[] = {"auto", "", "fa2", "fa3"};
        int i = lookup(e, fams, 4);
        FJ_RETURN_IF(i < 0 || i == 1, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_FAMILY must be auto, fa2 or fa3, got '%s'", e);
        ctx->opts.family = (fajit_family)i;
    }
    if ((e = getenv("FAJIT_CACHE_MAX_MB")) && *e) {
        char *end;
        errno = 0;
        long long mb = strtoll(e, &end, 10);
        FJ_RETURN_IF(errno || *end || mb < 0 || mb > (1ll << 40), ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_CACHE_MAX_MB must be a whole number of MiB >= 0 (0: no cap), "
                     "got '%s'", e);
        ctx->opts.cache_max_bytes = (int64_t)mb << 20;
    }
    if ((e = getenv("FAJIT_LOG_LEVEL")) && *e) {
        int i = lookup(e, levels, 4);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_LOG_LEVEL must be error, warn, info or debug, got '%s'", e);
        ctx->opts.log_level = (fajit_log_level)i;
    }
    return FAJIT_OK;
}

/* option > FAJIT_CACHE_DIR > $XDG_CACHE_HOME/fajit > $HOME/.cache/fajit > memory. */
char *fj_resolve_cache_dir(const fajit_ctx_opts *o)
{
    const char *e;
    char buf[4096];
    if (o->cache_dir)
        return *o->cache_dir ? strdup(o->cache_dir) : NULL;
    if ((e = getenv("FAJIT_CACHE_DIR")) && *e)
        return strdup(e);
    if ((e = getenv("XDG_CACHE_HOME")) && *e) {
        snprintf(buf, sizeof buf, "%s/fajit", e);
        return strdup(buf);
    }
    if ((e = getenv("HOME")) && *e) {
        snprintf(buf, sizeof buf, "%s/.cache/fajit", e);
        return strdup(buf);
    }
    return NULL;
}

fajit_status fj_opts_check(fajit_ctx *ctx)
{
    FJ_RETURN_IF((unsigned)ctx->opts.policy > FAJIT_POLICY_STRICT, ctx, FAJIT_INVALID_ARGUMENT,
                 "policy must be BLOCKING (0), FALLBACK (1) or STRICT (2), got %d",
                 (int)ctx->opts.policy);
    FJ_RETURN_IF((unsigned)ctx->opts.log_level > FAJIT_LOG_DEBUG, ctx, FAJIT_INVALID_ARGUMENT,
                 "log_level must be in [0, 3], got %d", (int)ctx->opts.log_level);
    FJ_RETURN_IF(ctx->opts.family != FAJIT_FAMILY_AUTO && ctx->opts.family != FAJIT_FAMILY_FA2 &&
                     ctx->opts.family != FAJIT_FAMILY_FA3,
                 ctx, FAJIT_INVALID_ARGUMENT, "family must be AUTO (0), FA2 (2) or FA3 (3), got %d",
                 (int)ctx->opts.family);
    FJ_RETURN_IF(ctx->opts.cache_max_bytes < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "cache_max_bytes must be >= 0 (0: no cap), got %lld",
                 (long long)ctx->opts.cache_max_bytes);
    FJ_RETURN_IF(ctx->opts.device < FAJIT_DEVICE_NONE, ctx, FAJIT_INVALID_ARGUMENT,
                 "device must be >= 0 or FAJIT_DEVICE_NONE (-1), got %d", ctx->opts.device);
    return apply_env(ctx);
}
