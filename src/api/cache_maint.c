/* cache_maint.c - the public cache maintenance entry points (list, verify, clear, stats,
 * prune, export, import) over src/cache. */
#include "internal.h"

typedef struct list_ctx {
    fajit_cache_entry_fn fn;
    void *user;
} list_ctx;

static int list_one(void *user, const fj_entry *e)
{
    list_ctx *lc = user;
    fajit_cache_entry pe;
    fj_key_hex(&e->key, pe.key_hex);
    pe.arch = e->arch;
    pe.name = e->name ? e->name : "";
    pe.cubin_bytes = e->blob_size;
    pe.compile_ms = e->compile_ms;
    pe.regs = e->regs;
    pe.smem = e->smem;
    pe.spill_bytes = e->spill_bytes;
    pe.created = e->created;
    pe.last_used = e->last_used;
    pe.hits = e->hits;
    return lc->fn(lc->user, &pe);
}

fajit_status fajit_cache_list(fajit_ctx *ctx, fajit_cache_entry_fn fn, void *user)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !fn, ctx, FAJIT_INVALID_ARGUMENT, "ctx and fn must not be NULL");
    list_ctx lc = {fn, user};
    FJ_RETURN_IF(fj_cache_list(ctx->cache, list_one, &lc) < 0, ctx, FAJIT_CACHE_ERROR,
                 "listing the cache failed");
    return FAJIT_OK;
}

fajit_status fajit_cache_verify(fajit_ctx *ctx, int *n_checked, int *n_bad)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    int checked = 0, bad = fj_cache_verify(ctx->cache, &checked);
    FJ_RETURN_IF(bad < 0, ctx, FAJIT_CACHE_ERROR, "verifying the cache failed");
    if (n_checked)
        *n_checked = checked;
    if (n_bad)
        *n_bad = bad;
    /* Every entry of a file found corrupt at open is gone: that is no clean cache. */
    const char *aside = fj_cache_set_aside(ctx->cache);
    FJ_RETURN_IF(aside, ctx, FAJIT_CACHE_ERROR, "the cache file %s was corrupt or not a fajit "
                 "cache when this context opened it: moved to %s with every entry it held; "
                 "the fresh file has %d entries (%d bad)", fj_cache_path(ctx->cache), aside,
                 checked, bad);
    return FAJIT_OK;
}

fajit_status fajit_cache_clear(fajit_ctx *ctx)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(fj_cache_clear(ctx->cache) < 0, ctx, FAJIT_CACHE_ERROR,
                 "clearing the cache failed");
    return FAJIT_OK;
}

fajit_status fajit_cache_stats(fajit_ctx *ctx, int64_t *entries, int64_t *bytes,
                               int64_t *file_bytes)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    fj_cache_stats st;
    FJ_RETURN_IF(fj_cache_stats_get(ctx->cache, &st) < 0, ctx, FAJIT_CACHE_ERROR,
                 "reading cache statistics failed");
    if (entries)
        *entries = st.entries;
    if (bytes)
        *bytes = st.bytes;
    if (file_bytes)
        *file_bytes = st.file_bytes;
    return FAJIT_OK;
}

fajit_status fajit_cache_prune(fajit_ctx *ctx, int64_t max_bytes, int64_t *n_removed,
                               int64_t *bytes_freed)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(max_bytes < 0, ctx, FAJIT_INVALID_ARGUMENT, "max_bytes must be >= 0, got %lld",
                 (long long)max_bytes);
    FJ_RETURN_IF(fj_cache_readonly(ctx->cache), ctx, FAJIT_CACHE_ERROR,
                 "the cache %s is read-only", fj_cache_path(ctx->cache));
    FJ_RETURN_IF(fj_cache_prune(ctx->cache, max_bytes, NULL, n_removed, bytes_freed) != 0, ctx,
                 FAJIT_CACHE_ERROR, "pruning the cache failed");
    return FAJIT_OK;
}

fajit_status fajit_cache_export(fajit_ctx *ctx, const char *path, const char *arch,
                                int *n_kernels, int *n_rows)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !path, ctx, FAJIT_INVALID_ARGUMENT, "ctx and path must not be NULL");
    FJ_RETURN_IF(arch && fj_arch_sm(arch) < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'", arch);
    fj_bundle_stats st;
    FJ_RETURN_IF(fj_cache_export(ctx->cache, path, arch, &st) != 0, ctx, FAJIT_CACHE_ERROR,
                 "exporting the cache%s%s to %s failed: the target has no kernel in it, the "
                 "file is a live cache, or SQLite failed (the log says which)",
                 arch ? " for " : "", arch ? arch : "", path);
    if (n_kernels)
        *n_kernels = st.kernels;
    if (n_rows)
        *n_rows = st.rows;
    return FAJIT_OK;
}

fajit_status fajit_cache_import(fajit_ctx *ctx, const char *path, int *n_kernels, int *n_rows,
                                int *n_corrupt)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !path, ctx, FAJIT_INVALID_ARGUMENT, "ctx and path must not be NULL");
    fj_bundle_stats st;
    FJ_RETURN_IF(fj_cache_import(ctx->cache, path, &st) != 0, ctx, FAJIT_CACHE_ERROR,
                 "importing %s failed: not a fajit cache or bundle, corrupt, or the cache is "
                 "read-only (see the log); nothing was changed", path);
    if (n_kernels)
        *n_kernels = st.kernels;
    if (n_rows)
        *n_rows = st.rows;
    if (n_corrupt)
        *n_corrupt = st.corrupt;
    return FAJIT_OK;
}
