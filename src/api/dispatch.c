/* dispatch.c - from a validated descriptor to a launch: the problem signature and shape
 * bucket, the choice of kernel family and configuration (a tuning row if the cache has
 * one for this GPU class, else the per-target default table), the plan cache that makes a
 * warm call one lookup, the compile policies, and the launch itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../autotune/spec.h"

/*------ names of a problem in the tuning table ------*/

void fj_desc_signature(const fajit_attn_desc *d, char *sig, size_t n)
{
    fj_problem p;
    memset(&p, 0, sizeof p);
    p.dtype = d->dtype;
    p.head_dim = d->head_dim;
    p.heads_q = d->heads_q;
    p.heads_kv = d->heads_kv;
    p.mask = d->mask;
    p.window_left = d->mask == FAJIT_MASK_WINDOW ? d->window_left : -1;
    p.window_right = d->mask == FAJIT_MASK_WINDOW ? d->window_right : -1;
    if (fj_tune_signature(&p, sig, n) != 0 && n)
        sig[0] = 0;
}

void fj_desc_bucket(const fajit_attn_desc *d, char *bucket, size_t n)
{
    int sq = d->seqlen_q > 0 ? d->seqlen_q : 1, sk = d->seqlen_k > 0 ? d->seqlen_k : 1;
    if (fj_shape_bucket(sq, sk, bucket, n) != 0 && n)
        bucket[0] = 0;
}

/* A small integer that changes exactly where fj_shape_bucket's string does (checked by
 * the unit suite), so the hot path never formats strings. */
int fj_bucket_index(int seqlen_q, int seqlen_k)
{
    int decode = seqlen_q <= 1, len = decode ? seqlen_k : seqlen_q, i = 0;
    for (int top = 512; len > top && i < 6; top <<= 1)
        i++;
    return decode * 8 + i;
}

/*------ choice ------*/

/* The tuned configuration for d on this context's GPU class, if the cache has a valid one. */
static int tuned_config(fajit_ctx *ctx, const fajit_attn_desc *d, fj_kcfg *c)
{
    char sig[128], bucket[FJ_BUCKET_LEN];
    fj_tune_row row;
    if (!ctx->cu)
        return 0;
    fj_desc_signature(d, sig, sizeof sig);
    fj_desc_bucket(d, bucket, sizeof bucket);
    if (!fj_cache_tune_get(ctx->cache, ctx->gpu_name, ctx->arch, ctx->sm_count, sig, bucket,
                           &row))
        return 0;
    int parsed = fj_kcfg_parse(row.config, c) == 0;
    int ok = parsed && fj_kcfg_valid(c, ctx->cc, 1, d);
    if (!ok && !(parsed && c->family == FJ_FAM_FA3 && d->cu_seqlens_q))
        /* (an FA3 winner not serving varlen without totals is expected: no warning) */
        fj_log(ctx, FAJIT_LOG_WARN, "ignoring tuning row %s/%s: config '%s' does not apply",
               sig, bucket, row.config);
    fj_tune_row_free(&row);
    return ok;
}

/* The dispatch decision for d on target sm: the exact variant (tuned if a row exists for
 * the context's own target) and the default one (equal when nothing is tuned). `ref`
 * forces the reference kernel. */
static void choose(fajit_ctx *ctx, int sm, int arch_a, const fajit_attn_desc *d, int ref,
                   fj_variant *exact, fj_launch *le, fj_variant *dflt, fj_launch *ld)
{
    fj_kcfg c, t;
    fajit_family want = ctx->opts.family;
    /* A forced FA2 hides the "a" target from the choice: FA3 never applies then. */
    fj_kcfg_default(ref ? 0 : sm, want == FAJIT_FAMILY_FA2 ? 0 : arch_a, d, &c);
    fj_kcfg_variant(&c, d, dflt, ld);
    if (!ref && sm == ctx->cc && tuned_config(ctx, d, &t) &&
        (want == FAJIT_FAMILY_AUTO || (int)want == t.family))
        c = t;
    fj_kcfg_variant(&c, d, exact, le);
}

/* The describe/explain calls: checks a valid problem and a target (named, or the
 * context's device), then makes the dispatch decision for them. */
static fajit_status describe_choice(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                    const char *buf, size_t len, fj_variant *v, fj_launch *l,
                                    fj_variant *dv)
{
    int sm;
    fj_launch dl;
    FJ_RETURN_IF(!ctx || !buf || !len, ctx, FAJIT_INVALID_ARGUMENT,
                 "ctx and buf must not be NULL, len must be > 0");
    FJ_CHECK(fajit_attn_check(ctx, d));
    sm = arch ? fj_arch_sm(arch) : ctx->cc;
    FJ_RETURN_IF(arch && sm < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'", arch);
    FJ_RETURN_IF(!arch && !ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device: name a target (arch)");
    FJ_RETURN_IF(sm < 80, ctx, FAJIT_UNSUPPORTED, "fajit needs sm_80 or newer, got sm_%d", sm);
    choose(ctx, sm, arch ? fj_arch_is_a(arch) : 1, d, 0, v, l, dv, &dl);
    return FAJIT_OK;
}

fajit_status fajit_dispatch_describe(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                     char *buf, size_t len)
{
    fajit_attn_desc ld;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    d = &ld;
    fj_variant v, dv;
    fj_launch l;
    FJ_CHECK(describe_choice(ctx, arch, d, buf, len, &v, &l, &dv));
    char grid[64];
    if (l.family == FJ_FAM_FA3 && l.fa3.persistent)
        snprintf(grid, sizeof grid, "persistent grid (one CTA per SM%s)",
                 l.fa3.persistent == 2 ? ", dynamic tile order" : "");
    else
        snprintf(grid, sizeof grid, "grid (ceil(seqlen_q/%d), heads_q, batch)", l.block_m);
    snprintf(buf, len, "%s (%s): %s, %d threads, %d B dynamic shared memory, source %s, entry %s",
             v.name, strcmp(v.name, dv.name) ? "tuned" : "default", grid, l.threads, l.dyn_smem,
             v.source, v.function);
    return FAJIT_OK;
}

fajit_status fajit_cache_explain(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                 char *buf, size_t len)
{
    fajit_attn_desc ld;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    d = &ld;
    fj_variant v, dv;
    fj_launch l;
    FJ_CHECK(describe_choice(ctx, arch, d, buf, len, &v, &l, &dv));
    return fj_kernel_explain(ctx, &v, arch ? arch : ctx->arch, buf, len);
}

/*------ plans ------*/

static fajit_status set_smem(fajit_ctx *ctx, const fj_variant *v, fj_launch *l)
{
    if (l->dyn_smem <= 48 * 1024)
        return FAJIT_OK;
    char err[64];
    CUresult r = ctx->cu->cuFuncSetAttribute(l->k->fn, FJ_CU_FUNC_ATTR_MAX_DYN_SMEM, l->dyn_smem);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "raising the shared memory of %s to %d: %s", v->name,
                 l->dyn_smem, fj_cuda_errname(ctx->cu, r, err, sizeof err));
    return FAJIT_OK;
}

/* Loading a module and raising a function's shared memory are not stream work, but while the
 * calling thread captures a stream (CUDA graphs) in global or thread-local mode the driver
 * refuses them and invalidates the capture. A kernel's first use may come inside an
 * application's capture: the thread is in relaxed mode for the load only. */
fajit_status fj_get_launch(fajit_ctx *ctx, const fj_variant *v, unsigned flags, fj_launch *l)
{
    const fj_cuda *cu = ctx->cu;
    int mode = FJ_CU_CAPTURE_MODE_RELAXED;
    int swapped = cu->cuThreadExchangeStreamCaptureMode &&
                  cu->cuThreadExchangeStreamCaptureMode(&mode) == 0;
    fajit_status st = fj_kernel_get(ctx, v, flags, &l->k);
    if (st == FAJIT_OK)
        st = set_smem(ctx, v, l);
    if (swapped)
        cu->cuThreadExchangeStreamCaptureMode(&mode);
    return st;
}

typedef struct bg_job {
    fajit_ctx *ctx;
    fj_plan *plan;
    fj_variant v;
} bg_job;

/* FALLBACK: compiles the exact kernel off the caller's thread, then swaps it in. */
static void *bg_compile(void *arg)
{
    bg_job *j = arg;
    fajit_ctx *ctx = j->ctx;
    fj_launch *better = &j->plan->better;
    if (fj_get_launch(ctx, &j->v, FJ_KF_BACKGROUND, better) == FAJIT_OK) {
        atomic_store(&j->plan->launch, better);
        fj_log(ctx, FAJIT_LOG_INFO, "fallback: %s ready, swapped in", j->v.name);
    } else {
        fj_log(ctx, FAJIT_LOG_WARN, "fallback: background compile of %s failed: %s; the "
               "default kernel stays", j->v.name, fajit_errmsg(ctx));
    }
    free(j);
    pthread_mutex_lock(&ctx->bg_lock);
    if (--ctx->bg_running == 0)
        pthread_cond_broadcast(&ctx->bg_done);
    pthread_mutex_unlock(&ctx->bg_lock);
    return NULL;
}

static void start_background(fajit_ctx *ctx, fj_plan *p, const fj_variant *v)
{
    bg_job *j = malloc(sizeof *j);
    pthread_t t;
    if (!j)
        return;   /* the default kernel simply stays */
    *j = (bg_job){ctx, p, *v};
    pthread_mutex_lock(&ctx->bg_lock);
    ctx->bg_running++;
    pthread_mutex_unlock(&ctx->bg_lock);
    if (pthread_create(&t, NULL, bg_compile, j) != 0) {
        free(j);
        pthread_mutex_lock(&ctx->bg_lock);
        ctx->bg_running--;
        pthread_mutex_unlock(&ctx->bg_lock);
        return;
    }
    pthread_detach(t);
}

/* FALLBACK: a kernel already in the cache that can serve d while `exact` compiles: the
 * default, the defaults of the other length classes, the portable kernel's default (it
 * takes every problem), in that order. 1 and *l, *used filled when one is found. */
static int stand_in(fajit_ctx *ctx, const fajit_attn_desc *d, const fj_variant *exact,
                    fj_launch *l, fj_variant *used)
{
    int arch_a = ctx->opts.family != FAJIT_FAMILY_FA2, own = fj_fa3_length_class(d->seqlen_q);
    fj_kcfg c[FJ_FA3_CLASSES + 1];
    int n = 0;
    fj_kcfg_default(ctx->cc, arch_a, d, &c[n++]);
    for (int cls = 0; cls < FJ_FA3_CLASSES; cls++) {
        fajit_attn_desc other = *d;
        other.seqlen_q = fj_fa3_class_seqlen(cls);
        if (cls != own)
            fj_kcfg_default(ctx->cc, arch_a, &other, &c[n++]);
    }
    fj_kcfg_default(ctx->cc, 0, d, &c[n++]);
    for (int i = 0; i < n; i++) {
        fj_kcfg_variant(&c[i], d, used, l);
        if (strcmp(used->name, exact->name) != 0 &&
            fj_get_launch(ctx, used, FJ_KF_NO_COMPILE, l) == FAJIT_OK)
            return 1;
    }
    return 0;
}

/* Builds the plan for a signature under the context's policy. */
static fajit_status make_plan(fajit_ctx *ctx, const fajit_attn_desc *d, int ref,
                              const fj_plan_key *key, fj_plan **out)
{
    fj_variant v, dv;
    fj_launch le, ld;
    fj_plan *p = calloc(1, sizeof *p);
    FJ_RETURN_IF(!p, ctx, FAJIT_OUT_OF_MEMORY, "allocating a plan");
    p->key = *key;
    choose(ctx, ctx->cc, 1, d, ref, &v, &le, &dv, &ld);
    unsigned flags = ctx->opts.policy == FAJIT_POLICY_BLOCKING ? FJ_KF_SERVING : FJ_KF_NO_COMPILE;
    p->first = le;
    fajit_status st = fj_get_launch(ctx, &v, flags, &p->first);
    if (st == FAJIT_CACHE_MISS && ctx->opts.policy == FAJIT_POLICY_FALLBACK) {
        if (!ref && stand_in(ctx, d, &v, &p->first, &dv)) {
            p->better = le;   /* a cached kernel now, the exact one when it is ready */
            p->pending = 1;
            st = FAJIT_OK;
        } else {          /* nothing cached could stand in: this call waits for the compile */
            p->first = le;
            st = fj_get_launch(ctx, &v, FJ_KF_SERVING, &p->first);
        }
    }
    if (st != FAJIT_OK) {
        free(p);
        return st;
    }
    atomic_store(&p->launch, &p->first);
    if (p->pending) {
        fj_log(ctx, FAJIT_LOG_INFO, "fallback: %s for now, compiling %s", dv.name, v.name);
        start_background(ctx, p, &v);
    }
    fj_log(ctx, FAJIT_LOG_DEBUG, "dispatch: %s on %s (%d registers)",
           p->pending ? dv.name : v.name, ctx->arch, p->first.k->regs);
    *out = p;
    return FAJIT_OK;
}

static fj_plan_key plan_key(int ref, const fajit_attn_desc *d)
{
    int varlen = d->cu_seqlens_q != NULL, totals = varlen && d->total_q > 0 && d->total_k > 0;
    int win = d->mask == FAJIT_MASK_WINDOW;
    fj_plan_key k = {
        (uint64_t)ref | (uint64_t)varlen << 1 | (uint64_t)totals << 2 |
            (uint64_t)d->dtype << 4 | (uint64_t)d->mask << 6 | (uint64_t)d->head_dim << 8 |
            (uint64_t)fj_bucket_index(d->seqlen_q, d->seqlen_k) << 20,
        d->heads_q / d->heads_kv, win ? d->window_left : -1, win ? d->window_right : -1};
    return k;
}

static unsigned plan_bucket(const fj_plan_key *k)
{
    uint64_t h = k->bits ^ (uint64_t)(unsigned)k->gqa << 40 ^
                 (uint64_t)(unsigned)k->window_left * 0x100000001b3ull ^
                 (uint64_t)(unsigned)k->window_right << 17;
    return (unsigned)(h * 0x9E3779B97F4A7C15ull >> 58) % FJ_PLAN_BUCKETS;
}

static int same_key(const fj_plan_key *a, const fj_plan_key *b)
{
    return a->bits == b->bits && a->gqa == b->gqa && a->window_left == b->window_left &&
           a->window_right == b->window_right;
}

static fajit_status run(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream, int ref)
{
    FJ_CHECK(fajit_attn_check(ctx, d));
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device (FAJIT_DEVICE_NONE): it can only compile");
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));

    const fj_plan_key key = plan_key(ref, d);
    const unsigned b = plan_bucket(&key);
    pthread_mutex_lock(&ctx->lock);
    fj_plan *p = ctx->plans[b];
    while (p && !same_key(&p->key, &key))
        p = p->next;
    pthread_mutex_unlock(&ctx->lock);
    if (p) {
        ctx->hits_memory++;
    } else {
        FJ_CHECK(make_plan(ctx, d, ref, &key, &p));
        pthread_mutex_lock(&ctx->lock);
        p->next = ctx->plans[b];   /* a racing duplicate plan is harmless: same kernel */
        ctx->plans[b] = p;
        pthread_mutex_unlock(&ctx->lock);
    }
    const fj_launch *l = atomic_load(&p->launch);
    if (p->pending && l == &p->first)
        ctx->fallback_launches++;
    FJ_CHECK(fj_launch_desc(ctx, l, d, stream));
    ctx->calls++;
    return FAJIT_OK;
}

fajit_status fj_launch_desc(fajit_ctx *ctx, const fj_launch *l, const fajit_attn_desc *d,
                            void *stream)
{
    char err[256];
    if (d->seqlen_q == 0)   /* varlen batch whose sequences are all empty */
        return FAJIT_OK;
    fj_attn_params params;
    fj_params_from_desc(d, &params);
    unsigned grid[3], threads = (unsigned)l->threads;
    fj_fa3_tmap maps[3];
    CUdeviceptr sched_ctr = 0;   /* the dynamic schedule's tile counter, else unused */
    void *args[5] = {&params, &maps[0], &maps[1], &maps[2], &sched_ctr};
    if (l->family == FJ_FAM_FA3) {
        if (l->fa3.persistent == 2)
            FJ_CHECK(fj_sched_counter(ctx, stream, &sched_ctr));
        /* The TMA descriptors hold addresses and shapes: encoded for every call. */
        FJ_RETURN_IF(!ctx->cu->cuTensorMapEncodeTiled, ctx, FAJIT_UNSUPPORTED,
                     "the driver lacks cuTensorMapEncodeTiled (needed by the sm_90a kernel)");
        FJ_RETURN_IF(fj_fa3_encode_tmaps(ctx->cu->cuTensorMapEncodeTiled, &params,
                                         (int)d->dtype, &l->fa3, d->total_q, d->total_k, maps, err,
                                         sizeof err) != 0,
                     ctx, FAJIT_INVALID_ARGUMENT, "encoding TMA descriptors: %s", err);
        fj_fa3_launch_shape(&l->fa3, &params, ctx->sm_count, grid, &threads);
    } else {
        grid[0] = (unsigned)((d->seqlen_q + l->block_m - 1) / l->block_m);
        grid[1] = (unsigned)d->heads_q;
        grid[2] = (unsigned)d->batch;
    }
    CUresult r = ctx->cu->cuLaunchKernel(l->k->fn, grid[0], grid[1], grid[2], threads, 1, 1,
                                         (unsigned)l->dyn_smem, (CUstream)stream, args, NULL);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    return FAJIT_OK;
}

fajit_status fajit_attn_fwd(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    fajit_attn_desc ld;   /* (NULL ctx: validation, then INVALID_ARGUMENT) */
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    return run(ctx, &ld, stream, 0);
}

fajit_status fajit_attn_fwd_reference(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    fajit_attn_desc ld;   /* (NULL ctx: validation, then INVALID_ARGUMENT) */
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    return run(ctx, &ld, stream, 1);
}
