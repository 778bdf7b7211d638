/* ctx.c - creating and destroying a context (the registry of live contexts is live.c). Options are in options.c, errors and logging in errors.c, the device and what a
 * context reports in info.c, cache maintenance in cache_maint.c. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Atomic uint64_t g_ctx_ids;

static void cache_log(void *user, int level, const char *msg)
{
    fj_log(user, (fajit_log_level)level, "cache: %s", msg);
}

fajit_status fajit_ctx_create(fajit_ctx **out, const fajit_ctx_opts *opts)
{
    if (!out)
        return FAJIT_INVALID_ARGUMENT;
    *out = NULL;
    fajit_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return FAJIT_OUT_OF_MEMORY;
    if (!fj_ctx_register(ctx)) {
        free(ctx);
        return FAJIT_OUT_OF_MEMORY;   /* REG_SLOTS / 2 contexts are alive */
    }
    ctx->id = ++g_ctx_ids;
    fajit_ctx_opts_init(&ctx->opts);
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->compile_lock, NULL);
    pthread_mutex_init(&ctx->bg_lock, NULL);
    pthread_cond_init(&ctx->bg_done, NULL);
    pthread_mutex_init(&ctx->verdict_lock, NULL);
    pthread_mutex_init(&ctx->validate_lock, NULL);
    *out = ctx;

    FJ_CHECK(fj_opts_import(ctx, opts));   /* opts->struct_size bytes, defaults past them */
    const char *opt_dir = ctx->opts.cache_dir;
    ctx->opts.cache_dir = NULL;  /* not kept: copied into cache_dir below */
    FJ_CHECK(fj_opts_check(ctx));

    ctx->cache_dir = fj_resolve_cache_dir(opt_dir);
    if (!ctx->cache_dir && !(opt_dir && !*opt_dir))
        fj_log(ctx, FAJIT_LOG_WARN, "no cache directory (no FAJIT_CACHE_DIR, XDG_CACHE_HOME "
                                    "or HOME): kernels are kept in memory only");
    fj_cache_open(&ctx->cache, ctx->cache_dir, cache_log, ctx);
    if (!ctx->cache)
        return fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "opening the cache");
    if (ctx->opts.device != FAJIT_DEVICE_NONE) {
        FJ_CHECK(fj_bind_device(ctx));
        FJ_CHECK(fj_ws_counters_early(ctx));
    }
    fj_log(ctx, FAJIT_LOG_INFO, "context: device %d (%s, %d SMs), cache %s", ctx->opts.device,
           ctx->arch[0] ? ctx->arch : "none", ctx->sm_count,
           fj_cache_path(ctx->cache) ? fj_cache_path(ctx->cache) : "memory only");
    return FAJIT_OK;
}

void fajit_ctx_destroy(fajit_ctx *ctx)
{
    if (!fj_ctx_live(ctx))   /* NULL, destroyed already, or not a context: nothing to do */
        return;
    pthread_mutex_lock(&ctx->bg_lock);   /* background compiles use the context */
    while (ctx->bg_running > 0)
        pthread_cond_wait(&ctx->bg_done, &ctx->bg_lock);
    pthread_mutex_unlock(&ctx->bg_lock);
    fj_ctx_unregister(ctx);   /* from here on every entry point refuses it */
    fj_plans_free(ctx);
    fj_kernel_map_free(ctx);
    fj_ws_free(ctx);
    if (ctx->cuctx)
        ctx->cu->cuDevicePrimaryCtxRelease(ctx->dev);
    fj_cache_close(ctx->cache);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->compile_lock);
    pthread_mutex_destroy(&ctx->bg_lock);
    pthread_cond_destroy(&ctx->bg_done);
    pthread_mutex_destroy(&ctx->verdict_lock);
    pthread_mutex_destroy(&ctx->validate_lock);
    free(ctx->cache_dir);
    fj_errors_forget(ctx);
    free(ctx);
}
