/* ctx.c - creating and destroying a context, and the registry of live contexts. Options are in options.c, errors and logging in errors.c, the device and what a
 * context reports in info.c, cache maintenance in cache_maint.c. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Atomic uint64_t g_ctx_ids;

/*------ the registry of live contexts ------
 * Every public entry point taking a context first asks fj_ctx_live, so a destroyed or
 * garbage pointer is refused before anything reads through it (reading freed memory to
 * find a magic word would itself be undefined). An open-addressed set of the addresses of
 * the live contexts, linear probing: lookups are lock-free (atomic loads only, no write to
 * shared memory, so many server threads calling into one context do not contend);
 * inserts and removals are serialized by a mutex. A removed address leaves a tombstone
 * that lookups step over; a tombstone followed by an empty slot becomes empty again (no
 * probe sequence runs through it), so the set does not silt up. At most REG_SLOTS / 2
 * contexts live at once. */
enum { REG_BITS = 12, REG_SLOTS = 1 << REG_BITS, REG_EMPTY = 0, REG_TOMB = 1 };
#define FJ_CTX_MAGIC 0x666a6374u   /* "fjct" */

static _Atomic uintptr_t g_reg[REG_SLOTS];
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_reg_live;   /* under g_reg_lock */

static unsigned reg_hash(uintptr_t p)
{
    return (unsigned)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> (64 - REG_BITS));
}

int fj_ctx_live(const fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    if (p <= REG_TOMB)
        return 0;
    for (unsigned i = reg_hash(p), n = 0; n < REG_SLOTS; i = (i + 1) & (REG_SLOTS - 1), n++) {
        uintptr_t v = atomic_load_explicit(&g_reg[i], memory_order_acquire);
        if (v == p)
            return ctx->magic == FJ_CTX_MAGIC;
        if (v == REG_EMPTY)
            return 0;
    }
    return 0;
}

static int reg_insert(fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    int ok = 0;
    pthread_mutex_lock(&g_reg_lock);
    if (g_reg_live < REG_SLOTS / 2) {
        unsigned i = reg_hash(p);
        while (atomic_load_explicit(&g_reg[i], memory_order_relaxed) > REG_TOMB)
            i = (i + 1) & (REG_SLOTS - 1);
        ctx->magic = FJ_CTX_MAGIC;
        atomic_store_explicit(&g_reg[i], p, memory_order_release);
        g_reg_live++;
        ok = 1;
    }
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

static void reg_remove(fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    pthread_mutex_lock(&g_reg_lock);
    for (unsigned i = reg_hash(p), n = 0; n < REG_SLOTS; i = (i + 1) & (REG_SLOTS - 1), n++) {
        uintptr_t v = atomic_load_explicit(&g_reg[i], memory_order_relaxed);
        if (v == REG_EMPTY)
            break;
        if (v != p)
            continue;
        ctx->magic = 0;
        g_reg_live--;
        if (atomic_load_explicit(&g_reg[(i + 1) & (REG_SLOTS - 1)], memory_order_relaxed) !=
            REG_EMPTY) {
            atomic_store_explicit(&g_reg[i], REG_TOMB, memory_order_release);
            break;
        }
        /* the end of a run: this slot and the tombstones before it become empty */
        atomic_store_explicit(&g_reg[i], REG_EMPTY, memory_order_release);
        for (unsigned j = (i - 1) & (REG_SLOTS - 1);
             atomic_load_explicit(&g_reg[j], memory_order_relaxed) == REG_TOMB;
             j = (j - 1) & (REG_SLOTS - 1))
            atomic_store_explicit(&g_reg[j], REG_EMPTY, memory_order_release);
        break;
    }
    pthread_mutex_unlock(&g_reg_lock);
}

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
    if (!reg_insert(ctx)) {
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
    reg_remove(ctx);   /* from here on every entry point refuses it */
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
