/* options.c - context options: defaults, validation, FAJIT_* environment overrides, and
 * where the cache lives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/*------ structs that grow (fajit.h, "Growing structs") ------*/

enum { STRUCT_MAX = 4096 };   /* no sized struct grows past a page */

void fj_struct_export(void *user, size_t n, const void *defaults, size_t size)
{
    if (!user || n < sizeof(size_t) || n > STRUCT_MAX)
        return;   /* (the struct_size check of the call that takes it reports the size) */
    memcpy(user, defaults, n < size ? n : size);
    if (n > size)   /* fields of a newer header: zero is the default of every one */
        memset((char *)user + size, 0, n - size);
    memcpy(user, &n, sizeof n);
}

fajit_status fj_struct_import(fajit_ctx *ctx, const char *type, const void *user,
                              size_t size_v1, size_t size, const void *defaults, void *local)
{
    size_t n;
    memcpy(&n, user, sizeof n);
    FJ_RETURN_IF(n < size_v1, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s.struct_size must be at least %zu (the first sized %s; this library's is "
                 "%zu), got %zu: fill it with %s_init", type, size_v1, type, size, n, type);
    FJ_RETURN_IF(n > STRUCT_MAX, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s.struct_size must be at most %d (this library's is %zu), got %zu: fill it "
                 "with %s_init", type, STRUCT_MAX, size, n, type);
    const unsigned char *tail = user;
    for (size_t i = size; i < n; i++)   /* a caller built against a newer header */
        FJ_RETURN_IF(tail[i], ctx, FAJIT_INVALID_ARGUMENT,
                     "%s.struct_size is %zu, larger than this library's %zu, and byte %zu is "
                     "not zero: a field this version of fajit does not know is set",
                     type, n, size, i);
    memcpy(local, user, n < size ? n : size);
    if (n < size)   /* a caller built against an older header: defaults for the rest */
        memcpy((char *)local + n, (const char *)defaults + n, size - n);
    memcpy(local, &size, sizeof size);
    return FAJIT_OK;
}

/*------ context options ------*/

static void opts_defaults(fajit_ctx_opts *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->device = 0;
    o->policy = FAJIT_POLICY_BLOCKING;
    o->log_level = FAJIT_LOG_WARN;
}

void fajit_ctx_opts_init_sized(fajit_ctx_opts *o, size_t struct_size)
{
    fajit_ctx_opts d;
    opts_defaults(&d);
    fj_struct_export(o, struct_size, &d, sizeof d);
}

fajit_status fj_opts_import(fajit_ctx *ctx, const fajit_ctx_opts *user)
{
    opts_defaults(&ctx->opts);
    if (!user)
        return FAJIT_OK;
    fajit_ctx_opts d;
    opts_defaults(&d);
    return fj_struct_import(ctx, "fajit_ctx_opts", user, FAJIT_CTX_OPTS_SIZE_V1, sizeof d, &d,
                            &ctx->opts);
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
    ctx->paged_hopper = 1;   /* FAJIT_PAGED_PREFILL=decode: the decode family keeps paged K/V */
    if ((e = getenv("FAJIT_POLICY")) && *e) {
        int i = lookup(e, policies, 3);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_POLICY must be blocking, fallback or strict, got '%s'", e);
        ctx->opts.policy = (fajit_policy)i;
    }
    if ((e = getenv("FAJIT_FAMILY")) && *e) {
        int i = fj_family_parse(e);
        if (i < 0) {
            char names[128];
            fj_family_names(names, sizeof names);
            return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "FAJIT_FAMILY must be %s, got '%s'%s",
                           names, e, strcasecmp(e, "ref") == 0 ? ": the reference kernel is "
                           "not a dispatch choice (fajit_attn_fwd_reference runs it)" : "");
        }
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
    if ((e = getenv("FAJIT_VALIDATE")) && *e) {
        static const char *const gates[] = {"warm", "off", "lazy"};   /* fajit_validate_policy */
        int i = lookup(e, gates, 3);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_VALIDATE must be warm, off or lazy, got '%s'", e);
        ctx->opts.validate = (fajit_validate_policy)i;
    }
    if ((e = getenv("FAJIT_CHECKED")) && *e) {
        FJ_RETURN_IF(strcmp(e, "0") != 0 && strcmp(e, "1") != 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_CHECKED must be 0 or 1, got '%s'", e);
        ctx->opts.checked = e[0] == '1';
    }
    if ((e = getenv("FAJIT_LINEINFO")) && *e) {
        FJ_RETURN_IF(strcmp(e, "0") != 0 && strcmp(e, "1") != 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_LINEINFO must be 0 or 1, got '%s'", e);
        ctx->lineinfo = e[0] == '1';
    }
    if ((e = getenv("FAJIT_MODEL_FEATURES")) && *e) {
        static const char *const on_off[] = {"off", "on"};
        int i = lookup(e, on_off, 2);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_MODEL_FEATURES must be off or on, got '%s'", e);
        ctx->features_on = i;
    }
    if ((e = getenv("FAJIT_PAGED_PREFILL")) && *e) {
        static const char *const ways[] = {"decode", "hopper"};
        int i = lookup(e, ways, 2);
        FJ_RETURN_IF(i < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "FAJIT_PAGED_PREFILL must be decode or hopper, got '%s'", e);
        ctx->paged_hopper = i;
    }
    char why[256];
    const fajit_status st = fj_family_options(&ctx->fopts, why, sizeof why);
    FJ_RETURN_IF(st != FAJIT_OK, ctx, st, "%s", why);
    return FAJIT_OK;
}

/* option > FAJIT_CACHE_DIR > $XDG_CACHE_HOME/fajit > $HOME/.cache/fajit > memory. */
char *fj_resolve_cache_dir(const char *opt_dir)
{
    const char *e;
    char buf[4096];
    if (opt_dir)
        return *opt_dir ? strdup(opt_dir) : NULL;
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
    if (!fj_family_selectable((int)ctx->opts.family)) {
        char names[128];
        fj_family_names(names, sizeof names);
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "family must be AUTO (0) or a family that "
                       "dispatch may be forced to (%s), got %d%s", names, (int)ctx->opts.family,
                       ctx->opts.family == FAJIT_FAMILY_REF ? " (REF: the reference kernel is "
                       "not a dispatch choice; fajit_attn_fwd_reference runs it)" : "");
    }
    FJ_RETURN_IF(ctx->opts.checked != 0 && ctx->opts.checked != 1, ctx, FAJIT_INVALID_ARGUMENT,
                 "checked must be 0 or 1, got %d", ctx->opts.checked);
    FJ_RETURN_IF((unsigned)ctx->opts.validate > FAJIT_VALIDATE_LAZY, ctx, FAJIT_INVALID_ARGUMENT,
                 "validate must be WARM (0), OFF (1) or LAZY (2), got %d",
                 (int)ctx->opts.validate);
    FJ_RETURN_IF(ctx->opts.cache_max_bytes < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "cache_max_bytes must be >= 0 (0: no cap), got %lld",
                 (long long)ctx->opts.cache_max_bytes);
    FJ_RETURN_IF(ctx->opts.device < FAJIT_DEVICE_NONE, ctx, FAJIT_INVALID_ARGUMENT,
                 "device must be >= 0 or FAJIT_DEVICE_NONE (-1), got %d", ctx->opts.device);
    return apply_env(ctx);
}

/*------ tuning options ------*/

static void tune_defaults(fajit_tune_opts *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->reps = 20;
    o->noise_band = 0.03;
}

void fajit_tune_opts_init_sized(fajit_tune_opts *o, size_t struct_size)
{
    fajit_tune_opts d;
    tune_defaults(&d);
    fj_struct_export(o, struct_size, &d, sizeof d);
}

fajit_status fj_tune_opts_import(fajit_ctx *ctx, const fajit_tune_opts *user,
                                 fajit_tune_opts *local)
{
    fajit_tune_opts d;
    tune_defaults(&d);
    *local = d;
    if (!user)
        return FAJIT_OK;
    return fj_struct_import(ctx, "fajit_tune_opts", user, FAJIT_TUNE_OPTS_SIZE_V1, sizeof d, &d,
                            local);
}
