/* kernel.c - the kernel store of a context: memory map -> SQLite cache -> NVRTC compile.
 *
 * Kernel key: fj_key_make (src/cache/key.c documents its serialization) over the digest of
 * every embedded source and header, the operation, the entry point, the preamble, NVRTC's
 * options as one sorted text, the exact target, NVRTC's version and the cache format.
 * Nothing else: no paths, hostnames or times, so a cache copied to an identical machine
 * hits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "../kernels_src/embedded.h"
#include "../autotune/spec.h"

const fj_embedded *fj_embedded_find(const char *name)
{
    for (int i = 0; i < fj_embedded_count; i++)
        if (strcmp(fj_embedded_sources[i].name, name) == 0)
            return &fj_embedded_sources[i];
    return NULL;
}

/*------ the memory map ------*/

static unsigned bucket(const fj_key *k) { return (k->b[0] | k->b[1] << 8) % FJ_KMAP_BUCKETS; }

static fj_kernel *map_find(fajit_ctx *ctx, const fj_key *k)
{
    for (fj_kernel *e = ctx->kmap[bucket(k)]; e; e = e->next)
        if (memcmp(e->key.b, k->b, 16) == 0)
            return e;
    return NULL;
}

void fj_kernel_map_free(fajit_ctx *ctx)
{
    for (int i = 0; i < FJ_KMAP_BUCKETS; i++) {
        fj_kernel *e = ctx->kmap[i];
        while (e) {
            fj_kernel *next = e->next;
            if (e->module && ctx->cu)
                ctx->cu->cuModuleUnload(e->module);
            free(e);
            e = next;
        }
        ctx->kmap[i] = NULL;
    }
}

/*------ compile ------*/

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int nvrtc_version_of(const fj_nvrtc *nv)
{
    int major, minor;
    fj_nvrtc_version(nv, &major, &minor);
    return major * 1000 + minor * 10;
}

/* The inputs of the key of `v` for `arch`, NVRTC `nvrtc_version`, options `opts`. */
static fj_key_inputs key_inputs(const fj_variant *v, const char *arch, int nvrtc_version,
                                const char *opts)
{
    fj_key_inputs in = {
        .digest = fj_embedded_digest,
        .op = fj_op_name(v->op),
        .function = v->function,
        .preamble = v->preamble,
        .options = opts,
        .arch = arch,
        .nvrtc_version = nvrtc_version,
        .format_version = FJ_CACHE_FORMAT_VERSION,
    };
    return in;
}

/* The option FAJIT_LINEINFO=1 adds to every compile (and to the options text of its keys). */
static const char *const k_lineinfo[] = {"-lineinfo", NULL};

/* Key of `v` for `arch` as compiled by NVRTC `nvrtc_version` (major*1000 + minor*10), and
 * the NVRTC options text it covers. */
static fajit_status variant_key(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                                int nvrtc_version, fj_key *key, char *opts, size_t opts_len)
{
    fj_nvrtc_options_text(arch, opts, opts_len);
    if (ctx->lineinfo) {   /* other bytes (line tables): another key */
        size_t at = strlen(opts);
        snprintf(opts + at, opts_len - at, " %s", k_lineinfo[0]);
    }
    FJ_RETURN_IF(!fj_embedded_find(v->source), ctx, FAJIT_UNSUPPORTED,
                 "no embedded source named %s", v->source);
    fj_key_inputs in = key_inputs(v, arch, nvrtc_version, opts);
    fj_key_make(&in, key);
    return FAJIT_OK;
}

/* First `n` lines of a log, for error messages. */
static void head_lines(const char *log, int n, char *out, size_t len)
{
    const char *p = log;
    while (n-- > 0 && p && (p = strchr(p, '\n')))
        p++;
    size_t k = p ? (size_t)(p - log) : strlen(log);
    snprintf(out, len, "%.*s", (int)(k < len ? k : len - 1), log);
}

int fj_kernel_headers(fj_src *out, int max)
{
    int n = 0;
    for (int i = 0; i < fj_embedded_count; i++) {
        const char *name = fj_embedded_sources[i].name;
        size_t len = strlen(name);
        if ((len > 2 && strcmp(name + len - 2, ".h") == 0) ||
            (len > 4 && strcmp(name + len - 4, ".cuh") == 0)) {
            if (n == max)
                return -1;
            out[n++] = (fj_src){name, fj_embedded_sources[i].text, fj_embedded_sources[i].len};
        }
    }
    return n;
}

/* Compiles `v` for `arch` into *co (freed by the caller on success). */
static fajit_status compile_only(fajit_ctx *ctx, const fj_nvrtc *nv, const fj_variant *v,
                                 const char *arch, fj_compile_out *co)
{
    const fj_embedded *src = fj_embedded_find(v->source);
    fj_src main_src = {src->name, src->text, src->len};
    fj_src headers[FJ_NVRTC_MAX_HEADERS];
    const int nh = fj_kernel_headers(headers, FJ_NVRTC_MAX_HEADERS);
    FJ_RETURN_IF(nh < 0, ctx, FAJIT_COMPILE_FAILED, "%s [%s]: the library embeds more than %d "
                 "kernel headers (FJ_NVRTC_MAX_HEADERS)", v->name, arch, FJ_NVRTC_MAX_HEADERS);
    char err[512], head[1024];
    double t0 = now_s();
    int rc = fj_nvrtc_compile(nv, v->preamble, &main_src, headers, nh, arch,
                              ctx->lineinfo ? k_lineinfo : NULL, co, err, sizeof err);
    ctx->compile_us += (uint64_t)((now_s() - t0) * 1e6);
    ctx->compiles++;
    fj_keep_compile_log(ctx, co->log);
    if (rc != 0) {
        head_lines(co->log, 8, head, sizeof head);
        fj_compile_out_free(co);
        return fj_fail(ctx, FAJIT_COMPILE_FAILED, "%s [%s]: %s\n%s", v->name, arch, err, head);
    }
    return FAJIT_OK;
}

/* Compiles `v` for `arch` and publishes it; fills `e` (owned by the caller). The caller
 * holds the key's lease. */
static fajit_status compile_variant(fajit_ctx *ctx, const fj_nvrtc *nv, const fj_variant *v,
                                    const char *arch, const fj_key *key, const char *opts,
                                    fj_entry *e)
{
    fj_compile_out co;
    FJ_CHECK(compile_only(ctx, nv, v, arch, &co));
    fj_log(ctx, FAJIT_LOG_INFO, "compiled %s for %s in %.0f ms: %d registers, %d B spills",
           v->name, arch, co.ms, co.regs, co.spill_bytes);
    memset(e, 0, sizeof *e);
    e->key = *key;
    snprintf(e->arch, sizeof e->arch, "%s", arch);
    e->nvrtc_version = nvrtc_version_of(nv);
    e->name = strdup(v->name);
    e->options = strdup(opts);
    e->blob = co.cubin;
    e->blob_size = co.cubin_size;
    e->log = co.log;
    e->compile_ms = co.ms;
    e->regs = co.regs;
    e->smem = co.smem;
    e->spill_bytes = co.spill_bytes;
    fj_key_inputs in = key_inputs(v, arch, e->nvrtc_version, opts);
    e->parts = fj_key_parts(&in);
    if (fj_cache_put(ctx->cache, e) != 0) {
        fj_log(ctx, FAJIT_LOG_WARN, "could not store %s in the cache; kept in memory", v->name);
        fj_cache_lease_release(ctx->cache, key);   /* waiters compile it themselves */
    } else if (ctx->opts.cache_max_bytes > 0)   /* the new kernel stays even if over the cap */
        fj_cache_prune(ctx->cache, ctx->opts.cache_max_bytes, key, NULL, NULL);
    return FAJIT_OK;
}

/* Finds `key` in the cache or compiles it, under the key's lease. *compiled = 1 when this
 * call compiled. */
static fajit_status fetch_or_compile(fajit_ctx *ctx, const fj_nvrtc *nv, const fj_variant *v,
                                     const char *arch, const fj_key *key, const char *opts,
                                     int allow_compile, fj_entry *e, int *compiled)
{
    *compiled = 0;
    if (fj_cache_get(ctx->cache, key, e))
        return FAJIT_OK;
    if (!allow_compile) {
        char hex[33];
        fj_key_hex(key, hex);
        return fj_fail(ctx, FAJIT_CACHE_MISS, "%s for %s (key %s) is not in the cache and "
                       "policy STRICT forbids compiling; run fajit-tune warm", v->name, arch, hex);
    }
    int r = fj_cache_lease(ctx->cache, key, 600 * 1000, e);
    if (r == 1)   /* another thread or process published it while we waited; the cache
                     counted the wait (counters.lease_waits), once */
        return FAJIT_OK;
    fajit_status st = compile_variant(ctx, nv, v, arch, key, opts, e);
    if (st != FAJIT_OK)
        fj_cache_lease_release(ctx->cache, key);
    else
        *compiled = 1;
    return st;
}

static fajit_status load_kernel(fajit_ctx *ctx, const fj_variant *v, const fj_entry *e,
                                fj_kernel **out)
{
    char err[64];
    const fj_cuda *cu = ctx->cu;
    fj_kernel *k = calloc(1, sizeof *k);
    FJ_RETURN_IF(!k, ctx, FAJIT_OUT_OF_MEMORY, "allocating a kernel");
    k->key = e->key;
    fj_module m;
    CUresult r = fj_module_load(cu, e->blob, v->function, &m);
    if (r != 0) {
        free(k);
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "loading %s: %s", v->name,
                       fj_cuda_errname(cu, r, err, sizeof err));
    }
    k->module = m.module, k->fn = m.fn, k->regs = m.regs, k->local_bytes = m.local_bytes;
    k->spill_bytes = e->spill_bytes;
    static const char *const bad[] = {"C7508", "C7510", "C7511", "C7515", "C7519"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] && e->log; i++)
        if (strstr(e->log, bad[i])) {
            snprintf(k->warning, sizeof k->warning, "%s", bad[i]);
            break;
        }
    *out = k;
    return FAJIT_OK;
}

/* Without NVRTC nothing compiles, and the key's NVRTC version is unknown: a kernel any
 * NVRTC made for this target is served (the newest), with STRICT's rules otherwise. */
static fajit_status key_without_nvrtc(fajit_ctx *ctx, const fj_variant *v, const char *why,
                                      fj_key *key, char *opts, size_t opts_len)
{
    int vers[16];
    int n = fj_cache_nvrtc_versions(ctx->cache, ctx->arch, vers, 16);
    for (int i = 0; i < n; i++) {
        FJ_CHECK(variant_key(ctx, v, ctx->arch, vers[i], key, opts, opts_len));
        pthread_mutex_lock(&ctx->lock);
        int in_memory = map_find(ctx, key) != NULL;
        pthread_mutex_unlock(&ctx->lock);
        if (in_memory || fj_cache_has(ctx->cache, key))
            return FAJIT_OK;
    }
    return fj_fail(ctx, FAJIT_NO_NVRTC, "%s is not in the cache for %s (made by %d NVRTC "
                   "version%s there) and cannot be compiled: %s", v->name, ctx->arch, n < 0 ? 0 : n,
                   n == 1 ? "" : "s", why);
}

fajit_status fj_kernel_get(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_kernel **out)
{
    char why[1024], opts[256];
    fj_key key;
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "the context has no device "
                 "(created with FAJIT_DEVICE_NONE or without a driver)");
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    if (nv)
        FJ_CHECK(variant_key(ctx, v, ctx->arch, nvrtc_version_of(nv), &key, opts, sizeof opts));
    else
        FJ_CHECK(key_without_nvrtc(ctx, v, why, &key, opts, sizeof opts));

    pthread_mutex_lock(&ctx->lock);
    fj_kernel *k = map_find(ctx, &key);
    pthread_mutex_unlock(&ctx->lock);
    if (k) {
        ctx->hits_memory++;
        *out = k;
        return FAJIT_OK;
    }
    /* One thread of this context fetches or compiles; the others find it in memory. */
    pthread_mutex_lock(&ctx->compile_lock);
    pthread_mutex_lock(&ctx->lock);
    k = map_find(ctx, &key);
    pthread_mutex_unlock(&ctx->lock);
    fajit_status st = FAJIT_OK;
    if (k) {
        ctx->hits_memory++;
    } else {
        fj_entry e;
        int compiled = 0;
        int allow = nv && !(flags & FJ_KF_NO_COMPILE);
        st = fetch_or_compile(ctx, nv, v, ctx->arch, &key, opts, allow, &e, &compiled);
        if (st == FAJIT_OK) {
            if (compiled) {
                ctx->misses++;
                if (flags & FJ_KF_SERVING)
                    ctx->serving_compiles++;
                if (flags & FJ_KF_BACKGROUND)
                    ctx->background_compiles++;
            } else {
                ctx->hits_disk++;
            }
            st = load_kernel(ctx, v, &e, &k);
            fj_entry_free(&e);
        } else if (st == FAJIT_CACHE_MISS) {
            ctx->misses++;
        }
        if (st == FAJIT_OK) {
            pthread_mutex_lock(&ctx->lock);
            k->next = ctx->kmap[bucket(&key)];
            ctx->kmap[bucket(&key)] = k;
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    pthread_mutex_unlock(&ctx->compile_lock);
    if (st == FAJIT_OK)
        *out = k;
    return st;
}

fajit_status fj_kernel_warm(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                            int *compiled)
{
    char why[1024], opts[256];
    fj_key key;
    fj_entry e;
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    FJ_RETURN_IF(!nv, ctx, FAJIT_NO_NVRTC, "%s", why);
    FJ_CHECK(variant_key(ctx, v, arch, nvrtc_version_of(nv), &key, opts, sizeof opts));
    FJ_CHECK(fetch_or_compile(ctx, nv, v, arch, &key, opts, 1, &e, compiled));
    fj_entry_free(&e);
    return FAJIT_OK;
}

fajit_status fj_kernel_key(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                           int nvrtc_version, fj_key *key)
{
    char opts[256];
    return variant_key(ctx, v, arch, nvrtc_version, key, opts, sizeof opts);
}

fajit_status fj_kernel_recompile_same(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                                      const fj_key *key, int *same)
{
    char why[1024];
    fj_entry e;
    fj_compile_out co;
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    FJ_RETURN_IF(!nv, ctx, FAJIT_NO_NVRTC, "%s", why);
    FJ_RETURN_IF(fj_cache_get(ctx->cache, key, &e) != 1, ctx, FAJIT_CACHE_MISS,
                 "%s [%s] left the cache (or is corrupt)", v->name, arch);
    fajit_status st = compile_only(ctx, nv, v, arch, &co);
    if (st == FAJIT_OK) {
        *same = co.cubin_size == e.blob_size && memcmp(co.cubin, e.blob, e.blob_size) == 0;
        fj_compile_out_free(&co);
    }
    fj_entry_free(&e);
    return st;
}

int fj_kernel_nvrtc_version(void)
{
    char why[1024];
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    return nv ? nvrtc_version_of(nv) : -1;
}

fajit_status fj_kernel_explain(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                               char *buf, size_t len)
{
    char why[1024], opts[256], hex[33];
    fj_key key;
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    FJ_RETURN_IF(!nv, ctx, FAJIT_NO_NVRTC, "%s (the key includes NVRTC's version)", why);
    FJ_CHECK(variant_key(ctx, v, arch, nvrtc_version_of(nv), &key, opts, sizeof opts));
    fj_key_inputs in = key_inputs(v, arch, nvrtc_version_of(nv), opts);
    char *parts = fj_key_parts(&in);
    FJ_RETURN_IF(!parts, ctx, FAJIT_OUT_OF_MEMORY, "explaining a key");
    fj_explain x;
    int r = fj_cache_explain(ctx->cache, &key, v->name, parts, &x);
    fj_key_hex(&key, hex);
    if (r < 0)
        snprintf(buf, len, "%s [%s] key %s: the cache could not be searched", v->name, arch, hex);
    else
        snprintf(buf, len, "%s [%s]\n  key   %s\n  parts %s\n  %s", v->name, arch, hex, parts,
                 x.text);
    free(parts);
    FJ_RETURN_IF(r < 0, ctx, FAJIT_CACHE_ERROR, "explain: cache error");
    return FAJIT_OK;
}
