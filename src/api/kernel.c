/* kernel.c - the kernel store of a context: memory map -> SQLite cache -> NVRTC compile.
 *
 * Kernel key: fj_key_make (src/cache/key.c documents its serialization) over the digest of
 * every embedded source and header, the operation, the entry point, the preamble, NVRTC's
 * options as one sorted text, the exact target, NVRTC's version and the cache format.
 * Nothing else: no paths, hostnames or times, so a cache copied to an identical machine
 * hits.
 *
 * Kernels of another NVRTC. The key of the loaded NVRTC's version is looked up first.
 * When it misses, an entry of the same kernel (every other key input equal) that another
 * NVRTC version made serves: a CUBIN is machine code for one exact target, and whether it
 * runs is the CUDA driver's call, not NVRTC's. The other versions are tried nearest first:
 * those not newer than the loaded NVRTC, newest first, then the newer ones, oldest first
 * (fj_kernel_serve_order); without NVRTC every version counts as older, so the newest
 * serves. The driver judges at load: an entry it refuses is skipped (logged, kept in the
 * cache) and the next is tried; when none loads, the loaded NVRTC's key is compiled or
 * missed as the policy says. The memory map holds the kernel under the key that was
 * wanted, so the search runs once per kernel and context.
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
                                     fj_entry *e, int *compiled)
{
    *compiled = 0;
    if (fj_cache_get(ctx->cache, key, e))
        return FAJIT_OK;
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

/* Loads entry `e` of `v` into *out (owned by the caller). The driver's error otherwise,
 * with nothing loaded. */
static CUresult try_load(fajit_ctx *ctx, const fj_variant *v, const fj_entry *e,
                         fj_kernel **out)
{
    fj_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return 2;   /* CUDA_ERROR_OUT_OF_MEMORY */
    k->key = e->key;
    fj_module m;
    CUresult r = fj_module_load(ctx->cu, e->blob, v->function, &m);
    if (r != 0) {
        free(k);
        return r;
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
    return 0;
}

static fajit_status load_kernel(fajit_ctx *ctx, const fj_variant *v, const fj_entry *e,
                                fj_kernel **out)
{
    char err[64];
    CUresult r = try_load(ctx, v, e, out);
    FJ_RETURN_IF(r, ctx, r == 2 ? FAJIT_OUT_OF_MEMORY : FAJIT_CUDA_ERROR, "loading %s: %s",
                 v->name, fj_cuda_errname(ctx->cu, r, err, sizeof err));
    return FAJIT_OK;
}

/*------ kernels of another NVRTC ------*/

static int nearest_first(int want, int a, int b)
{
    int a_old = want <= 0 || a <= want, b_old = want <= 0 || b <= want;
    if (a_old != b_old)
        return a_old ? -1 : 1;
    return a_old ? (a > b ? -1 : a < b) : (a < b ? -1 : a > b);
}

int fj_kernel_serve_order(int want, int *vers, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)   /* drop `want` and repeats */
        if (vers[i] != want) {
            int seen = 0;
            for (int j = 0; j < m && !seen; j++)
                seen = vers[j] == vers[i];
            if (!seen)
                vers[m++] = vers[i];
        }
    for (int i = 1; i < m; i++)   /* insertion sort: a handful of versions */
        for (int j = i; j > 0 && nearest_first(want, vers[j - 1], vers[j]) > 0; j--) {
            int t = vers[j];
            vers[j] = vers[j - 1];
            vers[j - 1] = t;
        }
    return m;
}

/* What the search for another NVRTC's entry found. */
typedef struct other_nvrtc {
    int versions;          /* NVRTC versions the cache holds kernels of for the target */
    int refused;           /* entries of this kernel the driver would not load */
    int refused_version;   /* the last of them: its NVRTC version and the driver's error */
    char refused_err[64];
} other_nvrtc;

static void say_version(int v, char *out, size_t n)
{
    snprintf(out, n, "%d.%d", v / 1000, v % 1000 / 10);
}

/* Serves `v` from an entry another NVRTC than `want` (0: none loaded) made for the
 * context's target, in fj_kernel_serve_order: 1 with *out loaded, 0 when no such entry
 * loads (what was tried in *o), or an error status (negated) from the key. */
static int serve_other(fajit_ctx *ctx, const fj_variant *v, int want, fj_kernel **out,
                       other_nvrtc *o)
{
    char opts[256], had[16], have[16];
    int vers[16];
    fj_key key;
    fj_entry e;
    memset(o, 0, sizeof *o);
    int n = fj_cache_nvrtc_versions(ctx->cache, ctx->arch, vers, 16);
    o->versions = n < 0 ? 0 : n;
    n = fj_kernel_serve_order(want, vers, o->versions);
    for (int i = 0; i < n; i++) {
        fajit_status st = variant_key(ctx, v, ctx->arch, vers[i], &key, opts, sizeof opts);
        if (st != FAJIT_OK)
            return -(int)st;
        if (!fj_cache_get(ctx->cache, &key, &e))
            continue;
        CUresult r = try_load(ctx, v, &e, out);
        fj_entry_free(&e);
        say_version(vers[i], had, sizeof had);
        if (r == 0) {
            if (want > 0) {
                say_version(want, have, sizeof have);
                fj_log(ctx, FAJIT_LOG_INFO, "%s [%s]: served from the entry NVRTC %s made "
                       "(the loaded NVRTC is %s; the driver loaded its CUBIN)", v->name,
                       ctx->arch, had, have);
            }
            return 1;
        }
        o->refused++;
        o->refused_version = vers[i];
        fj_cuda_errname(ctx->cu, r, o->refused_err, sizeof o->refused_err);
        fj_log(ctx, FAJIT_LOG_WARN, "%s [%s]: the driver refused the CUBIN NVRTC %s made (%s); "
               "the entry is skipped and kept", v->name, ctx->arch, had, o->refused_err);
    }
    return 0;
}

/* The failure of a lookup that nothing can compile: without NVRTC (`why`), or under
 * FJ_KF_NO_COMPILE (STRICT) for the key `key` of the loaded NVRTC. */
static fajit_status not_served(fajit_ctx *ctx, const fj_variant *v, const fj_key *key,
                               const char *why, const other_nvrtc *o)
{
    char refused[160] = "", had[16], hex[33];
    if (o->refused) {
        say_version(o->refused_version, had, sizeof had);
        snprintf(refused, sizeof refused, "; the driver refused %d entr%s of another NVRTC "
                 "(the last, NVRTC %s's: %s)", o->refused, o->refused == 1 ? "y" : "ies", had,
                 o->refused_err);
    }
    if (why)
        return fj_fail(ctx, FAJIT_NO_NVRTC, "%s is not in the cache for %s (made by %d NVRTC "
                       "version%s there) and cannot be compiled: %s%s", v->name, ctx->arch,
                       o->versions, o->versions == 1 ? "" : "s", why, refused);
    fj_key_hex(key, hex);
    return fj_fail(ctx, FAJIT_CACHE_MISS, "%s for %s (key %s) is not in the cache, from this "
                   "NVRTC or another, and policy STRICT forbids compiling; run fajit-tune warm%s",
                   v->name, ctx->arch, hex, refused);
}

/* Finds or makes the kernel of `key` (the loaded NVRTC's, or version 0 without one)
 * once the memory map missed: the cache, then another NVRTC's entry, then a compile as
 * `flags` allow. Counts what happened. The caller holds compile_lock. */
static fajit_status find_or_make(fajit_ctx *ctx, const fj_nvrtc *nv, const char *why,
                                 const fj_variant *v, const fj_key *key, const char *opts,
                                 unsigned flags, fj_kernel **k)
{
    fj_entry e;
    other_nvrtc o;
    const int want = nv ? nvrtc_version_of(nv) : 0;
    if (nv && fj_cache_get(ctx->cache, key, &e)) {
        ctx->hits_disk++;
        fajit_status st = load_kernel(ctx, v, &e, k);
        fj_entry_free(&e);
        return st;
    }
    int r = serve_other(ctx, v, want, k, &o);
    if (r < 0)
        return (fajit_status)-r;
    if (r == 1) {
        ctx->hits_disk++;
        ctx->hits_other_nvrtc++;
        return FAJIT_OK;
    }
    if (!nv)
        return not_served(ctx, v, key, why, &o);
    if (flags & FJ_KF_NO_COMPILE) {
        ctx->misses++;
        return not_served(ctx, v, key, NULL, &o);
    }
    int compiled = 0;
    FJ_CHECK(fetch_or_compile(ctx, nv, v, ctx->arch, key, opts, &e, &compiled));
    if (compiled) {
        ctx->misses++;
        if (flags & FJ_KF_SERVING)
            ctx->serving_compiles++;
        if (flags & FJ_KF_BACKGROUND)
            ctx->background_compiles++;
    } else {
        ctx->hits_disk++;
    }
    fajit_status st = load_kernel(ctx, v, &e, k);
    fj_entry_free(&e);
    return st;
}

fajit_status fj_kernel_get(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_kernel **out)
{
    char why[1024], opts[256];
    fj_key key;
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "the context has no device "
                 "(created with FAJIT_DEVICE_NONE or without a driver)");
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    FJ_CHECK(variant_key(ctx, v, ctx->arch, nv ? nvrtc_version_of(nv) : 0, &key, opts,
                         sizeof opts));

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
        st = find_or_make(ctx, nv, why, v, &key, opts, flags, &k);
        if (st == FAJIT_OK) {
            k->key = key;   /* the key wanted: another NVRTC's entry is found at once */
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
    FJ_CHECK(fetch_or_compile(ctx, nv, v, arch, &key, opts, &e, compiled));
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

/* The first entry of `v` for `arch` that another NVRTC than `want` made, in the order the
 * lookup tries them: 1 with its version and key, 0 none (*n_versions: how many NVRTC
 * versions the cache holds kernels of for `arch`), or a negated status. */
static int first_other(fajit_ctx *ctx, const fj_variant *v, const char *arch, int want,
                       int *version, fj_key *key, int *n_versions)
{
    char opts[256];
    int vers[16];
    int n = fj_cache_nvrtc_versions(ctx->cache, arch, vers, 16);
    *n_versions = n < 0 ? 0 : n;
    n = fj_kernel_serve_order(want, vers, *n_versions);
    for (int i = 0; i < n; i++) {
        fajit_status st = variant_key(ctx, v, arch, vers[i], key, opts, sizeof opts);
        if (st != FAJIT_OK)
            return -(int)st;
        if (fj_cache_has(ctx->cache, key)) {
            *version = vers[i];
            return 1;
        }
    }
    return 0;
}

fajit_status fj_kernel_explain(fajit_ctx *ctx, const fj_variant *v, const char *arch,
                               char *buf, size_t len)
{
    char why[1024], opts[256], hex[33], nvrtc[1200], had[16];
    fj_key key;
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    const int want = nv ? nvrtc_version_of(nv) : 0;
    fj_nvrtc_describe(nvrtc, sizeof nvrtc);
    size_t at = (size_t)snprintf(buf, len, "%s [%s]\n  nvrtc %s", v->name, arch, nvrtc);
    int hit = 0;
    if (nv) {
        FJ_CHECK(variant_key(ctx, v, arch, want, &key, opts, sizeof opts));
        fj_key_inputs in = key_inputs(v, arch, want, opts);
        char *parts = fj_key_parts(&in);
        FJ_RETURN_IF(!parts, ctx, FAJIT_OUT_OF_MEMORY, "explaining a key");
        fj_explain x;
        int r = fj_cache_explain(ctx->cache, &key, v->name, parts, &x);
        fj_key_hex(&key, hex);
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "\n  key   %s\n  parts %s\n  %s", hex,
                                   parts, r < 0 ? "the cache could not be searched" : x.text);
        free(parts);
        FJ_RETURN_IF(r < 0, ctx, FAJIT_CACHE_ERROR, "explain: cache error");
        hit = r == 1;
    }
    if (hit)
        return FAJIT_OK;
    int version = 0, n_versions = 0;
    int r = first_other(ctx, v, arch, want, &version, &key, &n_versions);
    if (r < 0)
        return (fajit_status)-r;
    if (at >= len)
        return FAJIT_OK;
    if (r == 1) {
        fj_key_hex(&key, hex);
        say_version(version, had, sizeof had);
        snprintf(buf + at, len - at, "\n  served: the entry NVRTC %s made (key %.12s) serves "
                 "instead, if the driver loads its CUBIN (it judges at load; a refused entry is "
                 "skipped and kept, then %s)", had, hex,
                 nv ? "the policy compiles or misses" : "the call fails: no NVRTC");
    } else {
        snprintf(buf + at, len - at, "\n  served: no entry of another NVRTC either (%d NVRTC "
                 "version%s in the cache for %s)%s", n_versions, n_versions == 1 ? "" : "s", arch,
                 nv ? "" : "; without NVRTC nothing compiles");
    }
    return FAJIT_OK;
}
