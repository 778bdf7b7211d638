/* ctx.c - the context: options and FAJIT_* overrides, device binding, cache location,
 * status table, error messages, logging, counters, system information. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
static _Atomic uint64_t g_ctx_ids;

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

static void cache_log(void *user, int level, const char *msg)
{
    fj_log(user, (fajit_log_level)level, "cache: %s", msg);
}

const char *fajit_errmsg(fajit_ctx *ctx)
{
    if (!ctx)
        return "no context";
    const tl_slot *s = tl_find(ctx, 0);
    return s ? s->msg : "";
}

const char *fajit_compile_log(fajit_ctx *ctx)
{
    const tl_slot *s = ctx ? tl_find(ctx, 0) : NULL;
    return s && s->log ? s->log : "";
}

/*------ options ------*/

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
        int i = fj_family_parse(e);
        if (i < 0) {
            char names[128];
            fj_family_names(names, sizeof names);
            return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "FAJIT_FAMILY must be %s, got '%s'",
                           names, e);
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
    return FAJIT_OK;
}

/* option > FAJIT_CACHE_DIR > $XDG_CACHE_HOME/fajit > $HOME/.cache/fajit > memory. */
static char *resolve_cache_dir(const fajit_ctx_opts *o)
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

int fj_arch_sm(const char *arch)
{
    int sm = 0, n = 0;
    if (!arch || sscanf(arch, "sm_%d%n", &sm, &n) != 1 || sm < 50 || sm > 200)
        return -1;
    if (arch[n] && !(arch[n] == 'a' && !arch[n + 1]) && !(arch[n] == 'f' && !arch[n + 1]))
        return -1;
    return sm;
}

/* The exact target for a compute capability: the "a" variants carry the
 * generation-specific instructions (wgmma on 9.0, tcgen05 on 10.x). */
static void arch_of(int major, int minor, char *out, size_t n)
{
    int a = major >= 9;
    snprintf(out, n, "sm_%d%d%s", major, minor, a ? "a" : "");
}

static fajit_status bind_device(fajit_ctx *ctx)
{
    char why[256], err[64];
    int count = 0, major = 0, minor = 0;
    ctx->cu = fj_cuda_get(why, sizeof why);
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DRIVER, "%s", why);
    const fj_cuda *cu = ctx->cu;
    CUresult r = cu->cuDeviceGetCount(&count);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuDeviceGetCount: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    FJ_RETURN_IF(ctx->opts.device < 0 || ctx->opts.device >= count, ctx, FAJIT_NO_DEVICE,
                 "device must be in [0, %d), got %d", count, ctx->opts.device);
    if ((r = cu->cuDeviceGet(&ctx->dev, ctx->opts.device)) ||
        (r = cu->cuDeviceGetAttribute(&major, FJ_CU_ATTR_CC_MAJOR, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&minor, FJ_CU_ATTR_CC_MINOR, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&ctx->sm_count, FJ_CU_ATTR_SM_COUNT, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&ctx->smem_optin, FJ_CU_ATTR_MAX_SMEM_OPTIN, ctx->dev)) ||
        (r = cu->cuDeviceGetName(ctx->gpu_name, sizeof ctx->gpu_name, ctx->dev)) ||
        (r = cu->cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->dev)))
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "querying device %d: %s", ctx->opts.device,
                       fj_cuda_errname(cu, r, err, sizeof err));
    ctx->cc = major * 10 + minor;
    arch_of(major, minor, ctx->arch, sizeof ctx->arch);
    return FAJIT_OK;
}

fajit_status fajit_ctx_create(fajit_ctx **out, const fajit_ctx_opts *opts)
{
    if (!out)
        return FAJIT_INVALID_ARGUMENT;
    *out = NULL;
    fajit_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return FAJIT_OUT_OF_MEMORY;
    ctx->id = ++g_ctx_ids;
    if (opts)
        ctx->opts = *opts;
    else
        fajit_ctx_opts_init(&ctx->opts);
    ctx->opts.cache_dir = NULL;  /* not kept: copied into cache_dir below */
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->compile_lock, NULL);
    pthread_mutex_init(&ctx->bg_lock, NULL);
    pthread_cond_init(&ctx->bg_done, NULL);
    *out = ctx;

    FJ_RETURN_IF((unsigned)ctx->opts.policy > FAJIT_POLICY_STRICT, ctx, FAJIT_INVALID_ARGUMENT,
                 "policy must be BLOCKING (0), FALLBACK (1) or STRICT (2), got %d",
                 (int)ctx->opts.policy);
    FJ_RETURN_IF((unsigned)ctx->opts.log_level > FAJIT_LOG_DEBUG, ctx, FAJIT_INVALID_ARGUMENT,
                 "log_level must be in [0, 3], got %d", (int)ctx->opts.log_level);
    if (!fj_family_selectable((int)ctx->opts.family)) {
        char names[128];
        fj_family_names(names, sizeof names);
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "family must be AUTO (0) or a family that "
                       "dispatch may be forced to (%s), got %d", names, (int)ctx->opts.family);
    }
    FJ_RETURN_IF(ctx->opts.cache_max_bytes < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "cache_max_bytes must be >= 0 (0: no cap), got %lld",
                 (long long)ctx->opts.cache_max_bytes);
    FJ_RETURN_IF(ctx->opts.device < FAJIT_DEVICE_NONE, ctx, FAJIT_INVALID_ARGUMENT,
                 "device must be >= 0 or FAJIT_DEVICE_NONE (-1), got %d", ctx->opts.device);
    FJ_CHECK(apply_env(ctx));

    ctx->cache_dir = resolve_cache_dir(opts ? opts : &ctx->opts);
    if (!ctx->cache_dir && !(opts && opts->cache_dir && !*opts->cache_dir))
        fj_log(ctx, FAJIT_LOG_WARN, "no cache directory (no FAJIT_CACHE_DIR, XDG_CACHE_HOME "
                                    "or HOME): kernels are kept in memory only");
    fj_cache_open(&ctx->cache, ctx->cache_dir, cache_log, ctx);
    if (!ctx->cache)
        return fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "opening the cache");
    if (ctx->opts.device != FAJIT_DEVICE_NONE) {
        FJ_CHECK(bind_device(ctx));
        FJ_CHECK(fj_ws_counters_early(ctx));
    }
    fj_log(ctx, FAJIT_LOG_INFO, "context: device %d (%s, %d SMs), cache %s", ctx->opts.device,
           ctx->arch[0] ? ctx->arch : "none", ctx->sm_count,
           fj_cache_path(ctx->cache) ? fj_cache_path(ctx->cache) : "memory only");
    return FAJIT_OK;
}

void fajit_ctx_destroy(fajit_ctx *ctx)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->bg_lock);   /* background compiles use the context */
    while (ctx->bg_running > 0)
        pthread_cond_wait(&ctx->bg_done, &ctx->bg_lock);
    pthread_mutex_unlock(&ctx->bg_lock);
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
    free(ctx->cache_dir);
    tl_slot *s = tl_find(ctx, 0);  /* this thread's; other threads' slots age out */
    if (s) {
        free(s->log);
        memset(s, 0, sizeof *s);
    }
    free(ctx);
}

/*------ counters and information ------*/

void fajit_counters_get(fajit_ctx *ctx, fajit_counters *out)
{
    memset(out, 0, sizeof *out);
    if (!ctx)
        return;
    fj_cache_counters cc;
    fj_cache_counters_get(ctx->cache, &cc);
    out->calls = ctx->calls;
    out->hits_memory = ctx->hits_memory;
    out->hits_disk = ctx->hits_disk;
    out->misses = ctx->misses;
    out->compiles = ctx->compiles;
    out->compile_seconds = ctx->compile_us / 1e6;
    out->corrupt_entries = cc.corrupt;
    out->lease_waits = ctx->lease_waits + cc.lease_waits;
    out->serving_compiles = ctx->serving_compiles;
    out->background_compiles = ctx->background_compiles;
    out->fallback_launches = ctx->fallback_launches;
}

fajit_status fajit_sysinfo_get(fajit_ctx *ctx, fajit_sysinfo *out)
{
    FJ_RETURN_IF(!ctx || !out, ctx, FAJIT_INVALID_ARGUMENT, "ctx and out must not be NULL");
    memset(out, 0, sizeof *out);
    const fj_cuda *cu = fj_cuda_get(NULL, 0);
    if (cu) {
        out->driver_loaded = 1;
        out->driver_version = cu->version;
        cu->cuDeviceGetCount(&out->device_count);
    }
    const fj_nvrtc *nv = fj_nvrtc_get(NULL, 0);
    out->nvrtc_loaded = nv != NULL;
    fj_nvrtc_version(nv, &out->nvrtc_major, &out->nvrtc_minor);
    out->cache_path = fj_cache_path(ctx->cache);
    out->cache_readonly = fj_cache_readonly(ctx->cache);
    return FAJIT_OK;
}

fajit_status fajit_device_info_get(fajit_ctx *ctx, int ordinal, fajit_device_info *out)
{
    char why[256], err[64];
    FJ_RETURN_IF(!out, ctx, FAJIT_INVALID_ARGUMENT, "out must not be NULL");
    memset(out, 0, sizeof *out);
    const fj_cuda *cu = fj_cuda_get(why, sizeof why);
    FJ_RETURN_IF(!cu, ctx, FAJIT_NO_DRIVER, "%s", why);
    int count = 0;
    CUdevice dev;
    cu->cuDeviceGetCount(&count);
    FJ_RETURN_IF(ordinal < 0 || ordinal >= count, ctx, FAJIT_NO_DEVICE,
                 "device must be in [0, %d), got %d", count, ordinal);
    CUresult r;
    if ((r = cu->cuDeviceGet(&dev, ordinal)) ||
        (r = cu->cuDeviceGetName(out->name, sizeof out->name, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->cc_major, FJ_CU_ATTR_CC_MAJOR, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->cc_minor, FJ_CU_ATTR_CC_MINOR, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->sm_count, FJ_CU_ATTR_SM_COUNT, dev)) ||
        (r = cu->cuDeviceTotalMem(&out->total_mem, dev)))
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "querying device %d: %s", ordinal,
                       fj_cuda_errname(cu, r, err, sizeof err));
    arch_of(out->cc_major, out->cc_minor, out->arch, sizeof out->arch);
    return FAJIT_OK;
}

/*------ cache maintenance ------*/

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
    FJ_RETURN_IF(!ctx || !fn, ctx, FAJIT_INVALID_ARGUMENT, "ctx and fn must not be NULL");
    list_ctx lc = {fn, user};
    FJ_RETURN_IF(fj_cache_list(ctx->cache, list_one, &lc) < 0, ctx, FAJIT_CACHE_ERROR,
                 "listing the cache failed");
    return FAJIT_OK;
}

fajit_status fajit_cache_verify(fajit_ctx *ctx, int *n_checked, int *n_bad)
{
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    int checked = 0, bad = fj_cache_verify(ctx->cache, &checked);
    FJ_RETURN_IF(bad < 0, ctx, FAJIT_CACHE_ERROR, "verifying the cache failed");
    if (n_checked)
        *n_checked = checked;
    if (n_bad)
        *n_bad = bad;
    return FAJIT_OK;
}

fajit_status fajit_cache_clear(fajit_ctx *ctx)
{
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(fj_cache_clear(ctx->cache) < 0, ctx, FAJIT_CACHE_ERROR,
                 "clearing the cache failed");
    return FAJIT_OK;
}

fajit_status fajit_cache_stats(fajit_ctx *ctx, int64_t *entries, int64_t *bytes,
                               int64_t *file_bytes)
{
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
    FJ_RETURN_IF(!ctx || !path, ctx, FAJIT_INVALID_ARGUMENT, "ctx and path must not be NULL");
    fj_bundle_stats st;
    FJ_RETURN_IF(fj_cache_export(ctx->cache, path, arch, &st) != 0, ctx, FAJIT_CACHE_ERROR,
                 "exporting the cache to %s failed (see the log)", path);
    if (n_kernels)
        *n_kernels = st.kernels;
    if (n_rows)
        *n_rows = st.rows;
    return FAJIT_OK;
}

fajit_status fajit_cache_import(fajit_ctx *ctx, const char *path, int *n_kernels, int *n_rows,
                                int *n_corrupt)
{
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
