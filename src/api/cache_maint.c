/* cache_maint.c - the public cache maintenance entry points (list, verify, clear, stats,
 * prune, export, import, recompiling to compare) over src/cache. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../autotune/spec.h"

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
                 "cache when this context opened or used it: moved to %s with every entry it held; "
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

void fajit_bundle_report_init_sized(fajit_bundle_report *r, size_t struct_size)
{
    fajit_bundle_report d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    fj_struct_export(r, struct_size, &d, sizeof d);
}

/* rep's struct_size checked (NULL: nothing to fill). */
static fajit_status check_report(fajit_ctx *ctx, const fajit_bundle_report *rep)
{
    size_t n = 0;
    if (rep)
        memcpy(&n, rep, sizeof n);
    FJ_RETURN_IF(rep && (n < FAJIT_BUNDLE_REPORT_SIZE_V1 || n > 4096), ctx,
                 FAJIT_INVALID_ARGUMENT, "fajit_bundle_report.struct_size must be in [%zu, "
                 "4096] (this library's is %zu), got %zu: fill it with fajit_bundle_report_init",
                 (size_t)FAJIT_BUNDLE_REPORT_SIZE_V1, sizeof *rep, n);
    return FAJIT_OK;
}

static void report_out(fajit_bundle_report *rep, const fj_bundle_stats *st)
{
    if (!rep)
        return;
    fajit_bundle_report r;
    size_t n;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.kernels = st->kernels, r.kernels_present = st->kernels_present;
    r.rows = st->rows, r.rows_kept = st->rows_kept, r.corrupt = st->corrupt;
    r.verdicts = st->verdicts, r.verdicts_replaced = st->verdicts_replaced;
    r.verdicts_kept = st->verdicts_kept, r.verdicts_refused = st->verdicts_refused;
    memcpy(&n, rep, sizeof n);
    fj_struct_export(rep, n, &r, sizeof r);
}

fajit_status fajit_cache_export_bundle(fajit_ctx *ctx, const char *path, const char *arch,
                                       unsigned flags, fajit_bundle_report *rep)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !path, ctx, FAJIT_INVALID_ARGUMENT, "ctx and path must not be NULL");
    FJ_CHECK(check_report(ctx, rep));
    FJ_RETURN_IF(flags & ~(unsigned)FAJIT_EXPORT_FORCE, ctx, FAJIT_INVALID_ARGUMENT,
                 "flags may hold only FAJIT_EXPORT_FORCE (1), got %#x", flags);
    FJ_RETURN_IF(arch && fj_arch_sm(arch) < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'", arch);
    fj_bundle_stats st;
    FJ_RETURN_IF(fj_cache_export(ctx->cache, path, arch,
                                 flags & FAJIT_EXPORT_FORCE ? FJ_EXPORT_FORCE : 0, &st) != 0,
                 ctx, FAJIT_CACHE_ERROR,
                 "exporting the cache%s%s to %s failed: the target has no kernel in it, the "
                 "file there is not a bundle to replace, or SQLite failed (the log says which)",
                 arch ? " for " : "", arch ? arch : "", path);
    report_out(rep, &st);
    return FAJIT_OK;
}

fajit_status fajit_cache_export(fajit_ctx *ctx, const char *path, const char *arch,
                                int *n_kernels, int *n_rows)
{
    fajit_bundle_report r;
    fajit_bundle_report_init(&r);
    fajit_status st = fajit_cache_export_bundle(ctx, path, arch, 0, &r);
    if (st == FAJIT_OK && n_kernels)
        *n_kernels = r.kernels;
    if (st == FAJIT_OK && n_rows)
        *n_rows = r.rows;
    return st;
}

/* The families whose PASS verdicts import does not take: those with a status note (never
 * run on hardware), which pass only by being validated on the GPU class itself. */
static void local_pass_families(const char **names, int max)
{
    int n = 0;
    for (int i = 0; i < fj_family_count() && n < max - 1; i++)
        if (fj_family_at(i)->status_note)
            names[n++] = fj_family_at(i)->name;
    names[n] = NULL;
}

fajit_status fajit_cache_import_bundle(fajit_ctx *ctx, const char *path,
                                       fajit_bundle_report *rep)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !path, ctx, FAJIT_INVALID_ARGUMENT, "ctx and path must not be NULL");
    FJ_CHECK(check_report(ctx, rep));
    const char *local[16];
    local_pass_families(local, 16);
    fj_bundle_stats st;
    FJ_RETURN_IF(fj_cache_import(ctx->cache, path, local, &st) != 0, ctx, FAJIT_CACHE_ERROR,
                 "importing %s failed: not a regular file, not a fajit cache or bundle, "
                 "corrupt, or the cache is read-only (see the log); nothing was changed", path);
    report_out(rep, &st);
    return FAJIT_OK;
}

fajit_status fajit_cache_import(fajit_ctx *ctx, const char *path, int *n_kernels, int *n_rows,
                                int *n_corrupt)
{
    fajit_bundle_report r;
    fajit_bundle_report_init(&r);
    fajit_status st = fajit_cache_import_bundle(ctx, path, &r);
    if (st == FAJIT_OK && n_kernels)
        *n_kernels = r.kernels;
    if (st == FAJIT_OK && n_rows)
        *n_rows = r.rows;
    if (st == FAJIT_OK && n_corrupt)
        *n_corrupt = r.corrupt;
    return st;
}

/*------ verify by recompiling ------*/

typedef struct rc_entry {
    fj_key key;
    char arch[16];
    char *name;
    size_t bytes;
    int matched;    /* 1: compared; 2: its key is one of another NVRTC version's */
} rc_entry;

/* Every kernel row of the cache. Which ones can be compared is decided by key alone: the
 * nvrtc_version column is covered by neither the key nor the checksum, so a bundle can
 * write anything there. */
typedef struct rc_set {
    rc_entry *e;
    size_t n, cap;
    int nvrtc;      /* the local NVRTC's version: only its kernels can be compared */
    int other;      /* kernels whose key is that of another NVRTC version */
} rc_set;

static int rc_cmp(const void *a, const void *b)
{
    return memcmp(((const rc_entry *)a)->key.b, ((const rc_entry *)b)->key.b, 16);
}

static int rc_collect(void *user, const fj_entry *e)
{
    rc_set *s = user;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        rc_entry *p = realloc(s->e, cap * sizeof *p);
        if (!p)
            return 1;
        s->e = p, s->cap = cap;
    }
    rc_entry *r = &s->e[s->n++];
    memset(r, 0, sizeof *r);
    r->key = e->key;
    memcpy(r->arch, e->arch, sizeof r->arch);
    r->name = strdup(e->name ? e->name : "");
    r->bytes = e->blob_size;
    return 0;
}

/* The variants this fajit builds for `arch` and one (op, dtype, head_dim, mask): the
 * shipped ones and the tuning candidates at a few lengths (the length classes). Keys only
 * say "same or not", so the kernels of a cache are found by enumerating, not by parsing. */
static int rc_variants(const fj_target *t, int op, int dt, int hdim, int mask,
                       fj_variant *vs, int max)
{
    static const int shapes[][2] = {{1, 4096}, {4, 4096}, {16, 4096}, {512, 512},
                                    {2048, 2048}, {8192, 8192}, {32768, 32768}};
    fajit_attn_desc d;
    int n = 0;
    memset(&d, 0, sizeof d);
    d.op = (fajit_op)op, d.dtype = (fajit_dtype)dt, d.head_dim = hdim, d.mask = (fajit_mask)mask;
    d.batch = d.heads_q = d.heads_kv = 1;
    d.window_left = d.window_right = mask == FAJIT_MASK_WINDOW ? 256 : -1;
    if (fj_family_variants(&d, t, 0, vs, &n, max) != 0)
        return -1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        d.seqlen_q = shapes[i][0], d.seqlen_k = shapes[i][1];
        if (fj_family_variants(&d, t, 1, vs, &n, max) != 0)
            return -1;
    }
    return n;
}

/* The rows variant `v` of target `arch` finds under the key of each NVRTC version in
 * vers[0..n_vers) (vers[0]: the local one): recompiled and compared when found by the local
 * key, counted as another NVRTC's when found by another's. */
static fajit_status rc_match(fajit_ctx *ctx, rc_set *s, const fj_variant *v, const char *arch,
                             const int *vers, int n_vers, fajit_cache_entry_fn on_differ,
                             void *user, int *same, int *differ)
{
    for (int k = 0; k < n_vers; k++) {
        rc_entry want, *r;
        fajit_status st = fj_kernel_key(ctx, v, arch, vers[k], &want.key);
        if (st)
            return st;
        r = s->n ? bsearch(&want, s->e, s->n, sizeof *r, rc_cmp) : NULL;
        if (!r || r->matched)
            continue;
        if (k > 0) {
            r->matched = 2;
            s->other++;
            continue;
        }
        int ok = 0;
        if ((st = fj_kernel_recompile_same(ctx, v, arch, &r->key, &ok)))
            return st;
        r->matched = 1;
        *(ok ? same : differ) += 1;
        if (!ok && on_differ) {
            fajit_cache_entry pe;
            memset(&pe, 0, sizeof pe);
            fj_key_hex(&r->key, pe.key_hex);
            pe.arch = r->arch, pe.name = r->name, pe.cubin_bytes = r->bytes;
            on_differ(user, &pe);
        }
    }
    return FAJIT_OK;
}

/* Recompiles every entry of `s` of target `arch` that a known variant's key finds, trying
 * the key of the local NVRTC and of every version the cache's rows of `arch` name. */
static fajit_status rc_arch(fajit_ctx *ctx, rc_set *s, const char *arch,
                            fajit_cache_entry_fn on_differ, void *user, int *same, int *differ)
{
    enum { MAX_VARIANTS = 2048, MAX_VERS = 16 };
    const fj_target t = {fj_arch_sm(arch), fj_arch_is_a(arch), 0, 0, 0, NULL};
    int vers[MAX_VERS + 1] = {s->nvrtc}, n_vers = 1, got[MAX_VERS];
    int n_got = fj_cache_nvrtc_versions(ctx->cache, arch, got, MAX_VERS);
    for (int i = 0; i < n_got; i++)
        if (got[i] != s->nvrtc)
            vers[n_vers++] = got[i];
    fj_variant *vs = malloc(MAX_VARIANTS * sizeof *vs);
    fajit_status st = FAJIT_OK;
    FJ_RETURN_IF(!vs, ctx, FAJIT_OUT_OF_MEMORY, "allocating variants");
    for (int op = 0; fj_op_name(op) && !st; op++)
        for (int dt = 0; dt < 2 && !st; dt++)
            for (int hdim = 8; hdim <= 256 && !st; hdim += 8)
                for (int m = 0; m < 3 && !st; m++) {
                    int n = rc_variants(&t, op, dt, hdim, m, vs, MAX_VARIANTS);
                    for (int i = 0; i < n && !st; i++)
                        st = rc_match(ctx, s, &vs[i], arch, vers, n_vers, on_differ, user,
                                      same, differ);
                }
    free(vs);
    return st;
}

fajit_status fajit_cache_verify_recompile(fajit_ctx *ctx, fajit_cache_entry_fn on_differ,
                                          void *user, int *n_same, int *n_differ,
                                          int *n_skipped)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    rc_set s = {.nvrtc = fj_kernel_nvrtc_version()};
    FJ_RETURN_IF(s.nvrtc < 0, ctx, FAJIT_NO_NVRTC, "recompiling needs NVRTC, and none is "
                 "loaded (FAJIT_NVRTC_PATH names it)");
    fajit_status st = FAJIT_OK;
    int same = 0, differ = 0;
    if (fj_cache_list(ctx->cache, rc_collect, &s) < 0 || s.n > (size_t)INT32_MAX)
        st = fj_fail(ctx, FAJIT_CACHE_ERROR, "listing the cache failed");
    if (!st && s.n)
        qsort(s.e, s.n, sizeof *s.e, rc_cmp);
    /* One pass per target present (entries are few; targets fewer). */
    for (size_t i = 0; i < s.n && !st; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(s.e[j].arch, s.e[i].arch) == 0;
        if (!seen && fj_arch_sm(s.e[i].arch) >= 80)
            st = rc_arch(ctx, &s, s.e[i].arch, on_differ, user, &same, &differ);
    }
    int unmatched = 0;
    for (size_t i = 0; i < s.n; i++) {
        unmatched += s.e[i].matched != 1;
        free(s.e[i].name);
    }
    free(s.e);
    if (n_same)
        *n_same = same;
    if (n_differ)
        *n_differ = differ;
    if (n_skipped)
        *n_skipped = unmatched;
    return st;
}
