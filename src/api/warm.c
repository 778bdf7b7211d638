/* warm.c - compiling kernels without a GPU: every variant fajit ships for a target
 * (fajit_warm), or every variant a model's spec needs (fajit_warm_spec), on a pool of
 * threads, with progress reported from the caller's thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../autotune/spec.h"

typedef struct warm_job {
    fajit_ctx *ctx;
    const char *arch;
    const fj_variant *vs;
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next, done, compiled, cached;
    fajit_status first_error;
    char first_msg[FJ_ERRMSG_LEN];   /* the worker's fajit_errmsg/compile log of it */
    char *first_log;
    const char *last_name;
    int last_compiled;
} warm_job;

static void *warm_worker(void *arg)
{
    warm_job *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int i = w->next < w->n ? w->next++ : -1;
        pthread_mutex_unlock(&w->mu);
        if (i < 0)
            return NULL;
        int compiled = 0;
        fajit_status st = fj_kernel_warm(w->ctx, &w->vs[i], w->arch, &compiled);
        pthread_mutex_lock(&w->mu);
        w->done++;
        w->compiled += st == FAJIT_OK && compiled;
        w->cached += st == FAJIT_OK && !compiled;
        if (st != FAJIT_OK && w->first_error == FAJIT_OK) {
            w->first_error = st;
            snprintf(w->first_msg, sizeof w->first_msg, "%s", fajit_errmsg(w->ctx));
            w->first_log = strdup(fajit_compile_log(w->ctx));
        }
        w->last_name = w->vs[i].name;
        w->last_compiled = compiled;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

double fj_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void fj_spec_progress(fajit_ctx *ctx, double since, int done, int total, const fj_problem *p,
                      const fj_shape *sh)
{
    if (!ctx->opts.progress || done < 1)
        return;
    char what[200];
    snprintf(what, sizeof what, "%s sq %d sk %d b %d", p->name, sh->seqlen_q, sh->seqlen_k,
             sh->batch);
    ctx->opts.progress(ctx->opts.progress_user, done, total,
                       (fj_mono_s() - since) / done * (total - done), what);
}

static fajit_status check_arch(fajit_ctx *ctx, const char *arch, int *sm)
{
    *sm = fj_arch_sm(arch);
    FJ_RETURN_IF(*sm < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'",
                 arch ? arch : "(null)");
    FJ_RETURN_IF(*sm < 80, ctx, FAJIT_UNSUPPORTED, "fajit needs sm_80 or newer, got %s", arch);
    return FAJIT_OK;
}

enum { MAX_JOBS = 64 };

/* One pass of `jobs` threads over vs[0..n), progress reported from this thread. */
static void run_jobs(fajit_ctx *ctx, const char *arch, const fj_variant *vs, int n, int jobs,
                     warm_job *out)
{
    *out = (warm_job){.ctx = ctx, .arch = arch, .vs = vs, .n = n, .first_error = FAJIT_OK};
    warm_job *wp = out;
    pthread_mutex_init(&wp->mu, NULL);
    pthread_cond_init(&wp->cv, NULL);
    pthread_t tids[MAX_JOBS];
    int started = 0;
    for (; started < jobs && started < wp->n; started++)
        if (pthread_create(&tids[started], NULL, warm_worker, wp) != 0)
            break;
    if (started == 0)   /* no thread could start: do the work here */
        warm_worker(wp);

    /* Report progress from the caller's thread as items finish. */
    double t0 = fj_mono_s();
    pthread_mutex_lock(&wp->mu);
    for (int reported = 0; reported < wp->n;) {
        while (wp->done == reported)
            pthread_cond_wait(&wp->cv, &wp->mu);
        reported = wp->done;
        if (ctx->opts.progress) {
            char what[160];
            snprintf(what, sizeof what, "%s %s%s", arch, wp->last_name,
                     wp->last_compiled ? "" : " (cached)");
            double el = fj_mono_s() - t0;
            ctx->opts.progress(ctx->opts.progress_user, reported, wp->n,
                               el / reported * (wp->n - reported), what);
        }
    }
    pthread_mutex_unlock(&wp->mu);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&wp->mu);
    pthread_cond_destroy(&wp->cv);
}


fajit_status fj_warm_list(fajit_ctx *ctx, const char *arch, const fj_variant *vs, int n,
                          int jobs, int *n_compiled, int *n_cached)
{
    char why[1024];
    FJ_RETURN_IF(!fj_nvrtc_get(why, sizeof why), ctx, FAJIT_NO_NVRTC, "%s", why);
    if (jobs <= 0)
        jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    /* Bounded by memory too: one NVRTC compile of these kernels peaks near 0.5 GiB. */
    long avail_pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (avail_pages > 0 && page > 0) {
        long by_mem = (long)((double)avail_pages * page / (512.0 * 1024 * 1024));
        if (by_mem < jobs)
            jobs = by_mem < 1 ? 1 : (int)by_mem;
    }
    jobs = jobs < 1 ? 1 : jobs > MAX_JOBS ? MAX_JOBS : jobs;

    fj_cache_counters before, after;
    warm_job w;
    int compiled = 0;
    /* A cache file found damaged during the pass is set aside with what it held: one more
     * pass puts the kernels it lost into the fresh file. */
    for (int pass = 0; pass < 2; pass++) {
        fj_cache_counters_get(ctx->cache, &before);
        run_jobs(ctx, arch, vs, n, jobs, &w);
        compiled += w.compiled;
        fj_cache_counters_get(ctx->cache, &after);
        if (w.first_error != FAJIT_OK || after.set_aside == before.set_aside || pass)
            break;
        free(w.first_log);
        fj_log(ctx, FAJIT_LOG_WARN, "warm %s: the cache file was damaged and set aside; "
               "warming again into the fresh one", arch);
    }
    w.cached -= compiled - w.compiled;   /* cached now only because compiled before */
    w.compiled = compiled;
    if (w.first_error != FAJIT_OK)   /* the message was made on a worker's thread */
        fj_error_carry(ctx, w.first_msg, w.first_log);
    free(w.first_log);
    if (n_compiled)
        *n_compiled = w.compiled;
    if (n_cached)
        *n_cached = w.cached;
    /* Warm exists to fill the cache: kernels compiled but not saved are its failure (disk
     * full mid-warm, a damaged file), counted over every put of the cache in the last pass. */
    uint64_t unsaved = after.put_failed - before.put_failed;
    FJ_RETURN_IF(w.first_error == FAJIT_OK && unsaved, ctx, FAJIT_CACHE_ERROR,
                 "%llu of the %d kernels compiled for %s could not be saved in the cache "
                 "(the log says why); they compile again on their next use",
                 (unsigned long long)unsaved, w.compiled, arch);
    return w.first_error;
}

int fj_warm_variants(const char *arch, fj_variant *out, int max)
{
    /* Every head_dim the API accepts, every dtype and mask, for each family the target runs
     * (the shipped configurations: what dispatch picks untuned at any length). A compile
     * costs 0.3-0.6 s, so a target is a minute or two of one core, and a server never meets
     * a cold variant. */
    /* (checked-mode variants compile on first use) */
    const fj_target t = {fj_arch_sm(arch), fj_arch_is_a(arch), 0, 0, 0, NULL};
    int n = 0;
    for (int op = 0; fj_op_name(op); op++)
        for (int dt = 0; dt < 2; dt++)
            for (int hdim = 8; hdim <= 256; hdim += 8)
                for (int m = 0; m < 3; m++) {
                    fajit_attn_desc d;
                    memset(&d, 0, sizeof d);
                    d.op = (fajit_op)op, d.dtype = (fajit_dtype)dt, d.head_dim = hdim;
                    d.mask = (fajit_mask)m;
                    d.batch = d.heads_q = d.heads_kv = 1;
                    if (fj_family_variants(&d, &t, 0, out, &n, max) != 0)
                        return -1;
                }
    for (int dt = 0; dt < 2; dt++) {   /* fajit_attn_merge's kernels */
        if (n >= max)
            return -1;
        fj_merge_variant(dt, &out[n++]);
    }
    return n;
}

fajit_status fajit_warm(fajit_ctx *ctx, const char *arch, int jobs, int *n_compiled,
                        int *n_cached)
{
    FJ_CTX_CHECK(ctx);
    enum { MAX_VARIANTS = 1000 };
    int sm;
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_CHECK(check_arch(ctx, arch, &sm));
    fj_variant *vs = malloc(MAX_VARIANTS * sizeof *vs);
    FJ_RETURN_IF(!vs, ctx, FAJIT_OUT_OF_MEMORY, "allocating variants");
    int n = fj_warm_variants(arch, vs, MAX_VARIANTS);
    if (n < 0) {
        free(vs);
        return fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "more than %d kernel variants for %s",
                       MAX_VARIANTS, arch);
    }
    fajit_status st = fj_warm_list(ctx, arch, vs, n, jobs, n_compiled, n_cached);
    free(vs);
    return st;
}

/* Loads a spec: a built-in preset name, else a file path. */
fajit_status fj_spec_load(fajit_ctx *ctx, const char *spec, fj_spec *out)
{
    char err[512], err2[512];
    FJ_RETURN_IF(!spec, ctx, FAJIT_INVALID_ARGUMENT, "spec must not be NULL");
    if (fj_spec_preset_text(spec))
        FJ_RETURN_IF(fj_spec_preset(spec, out, err, sizeof err) != 0, ctx,
                     FAJIT_INVALID_ARGUMENT, "%s", err);
    else if (fj_spec_parse_file(spec, out, err, sizeof err) != 0) {
        size_t at = 0;
        err2[0] = 0;
        for (int i = 0; fj_spec_preset_name(i) && at < sizeof err2; i++)
            at += (size_t)snprintf(err2 + at, sizeof err2 - at, "%s%s", i ? ", " : "",
                                   fj_spec_preset_name(i));
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT, "%s (nor a preset: %s)", err, err2);
    }
    return FAJIT_OK;
}

fajit_status fj_spec_warm_variants(fajit_ctx *ctx, const char *spec, const char *arch,
                                   fj_variant **out, int *n)
{
    enum { MAX_CANDIDATES = 96 };   /* new variants per shape; most shapes add none */
    int sm;
    fj_spec sp;
    *out = NULL, *n = 0;
    FJ_CHECK(check_arch(ctx, arch, &sm));
    FJ_CHECK(fj_spec_load(ctx, spec, &sp));
    size_t cap = 0;
    for (size_t i = 0; i < sp.n_problems; i++)
        cap += sp.problems[i].n_shapes * MAX_CANDIDATES + 1;
    fj_variant *vs = malloc((cap ? cap : 1) * sizeof *vs);
    if (!vs) {
        fj_spec_free(&sp);
        return fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "allocating variants");
    }
    /* Every candidate of every family (the defaults among them) for each shape at each of
     * its batches, as the tuner and dispatch will ask (the decode family's tiles and head
     * packing depend on the batch: its split class); the same variant may serve several
     * problems: compiled once. */
    const fj_target t = {sm, fj_arch_is_a(arch), 0, 0, ctx->paged_hopper,
                         &ctx->fopts};
    int m = 0;
    for (size_t i = 0; i < sp.n_problems; i++) {
        const fj_problem *p = &sp.problems[i];
        fajit_attn_desc d;
        memset(&d, 0, sizeof d);
        d.op = (fajit_op)p->op, d.dtype = p->dtype, d.head_dim = p->head_dim, d.mask = p->mask;
        d.heads_q = p->heads_q, d.heads_kv = p->heads_kv;
        d.window_left = p->window_left, d.window_right = p->window_right;
        /* K/V heads side by side, as fajit_attn_desc_init lays them out (head packing's
         * condition: the configurations dispatch will pick for such calls) */
        d.k_head_stride = d.v_head_stride = p->head_dim;
        for (size_t s = 0; s < p->n_shapes; s++) {
            d.seqlen_q = p->shapes[s].seqlen_q, d.seqlen_k = p->shapes[s].seqlen_k;
            d.batch = p->shapes[s].batch > 0 ? p->shapes[s].batch : 1;
            if (p->page_size) {   /* (a paged problem: the table is never read here) */
                d.block_table = (const int32_t *)(uintptr_t)256;
                d.page_size = p->page_size;
                d.block_table_stride = (d.seqlen_k + p->page_size - 1) / p->page_size;
                d.num_pages = (int)d.block_table_stride;
            }
            fj_problem_features(p, &d);
            if (fj_family_variants(&d, &t, 1, vs, &m, (int)cap) != 0) {
                free(vs);
                fj_spec_free(&sp);
                return fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "more than %zu kernel variants for "
                               "spec %s", cap, spec);
            }
        }
    }
    fj_spec_free(&sp);
    *out = vs, *n = m;
    return FAJIT_OK;
}

fajit_status fajit_warm_spec(fajit_ctx *ctx, const char *spec, const char *arch, int jobs,
                             int *n_compiled, int *n_cached)
{
    FJ_CTX_CHECK(ctx);
    fj_variant *vs;
    int n;
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_CHECK(fj_spec_warm_variants(ctx, spec, arch, &vs, &n));
    fajit_status st = fj_warm_list(ctx, arch, vs, n, jobs, n_compiled, n_cached);
    free(vs);
    return st;
}
