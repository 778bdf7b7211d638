/* attn.c - the attention entry points: descriptor defaults and validation, the choice of
 * kernel family and configuration (dispatch), and the launch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../autotune/fa2_config.h"

void fajit_attn_desc_init(fajit_attn_desc *d, const void *q, const void *k, const void *v,
                          void *o, int batch, int heads_q, int heads_kv, int seqlen_q,
                          int seqlen_k, int head_dim, fajit_dtype dtype)
{
    memset(d, 0, sizeof *d);
    d->q = q, d->k = k, d->v = v, d->o = o;
    d->batch = batch, d->heads_q = heads_q, d->heads_kv = heads_kv;
    d->seqlen_q = seqlen_q, d->seqlen_k = seqlen_k, d->head_dim = head_dim;
    d->dtype = dtype;
    d->mask = FAJIT_MASK_NONE;
    d->window_left = d->window_right = -1;
    d->softmax_scale = head_dim > 0 ? 1.0f / sqrtf((float)head_dim) : 1.0f;
    int64_t hd = head_dim;
    d->q_head_stride = d->o_head_stride = hd;
    d->q_row_stride = d->o_row_stride = hd * heads_q;
    d->q_batch_stride = d->o_batch_stride = hd * heads_q * seqlen_q;
    d->k_head_stride = d->v_head_stride = hd;
    d->k_row_stride = d->v_row_stride = hd * heads_kv;
    d->k_batch_stride = d->v_batch_stride = hd * heads_kv * seqlen_k;
}

/*------ validation ------*/

static fajit_status check_ptr(fajit_ctx *ctx, const void *p, const char *name, unsigned align)
{
    FJ_RETURN_IF(!p, ctx, FAJIT_INVALID_ARGUMENT, "%s must not be NULL", name);
    FJ_RETURN_IF((uintptr_t)p % align, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s must be %u-byte aligned, got %p", name, align, p);
    return FAJIT_OK;
}

static fajit_status check_strides(fajit_ctx *ctx, char t, int64_t b, int64_t r, int64_t h)
{
    const int64_t s[3] = {b, r, h};
    static const char *const names[3] = {"batch", "row", "head"};
    for (int i = 0; i < 3; i++) {
        FJ_RETURN_IF(s[i] < 0, ctx, FAJIT_INVALID_ARGUMENT,
                     "%c_%s_stride must be >= 0, got %lld", t, names[i], (long long)s[i]);
        FJ_RETURN_IF(s[i] % 8, ctx, FAJIT_INVALID_ARGUMENT,
                     "%c_%s_stride must be a multiple of 8 elements (16 bytes), got %lld", t,
                     names[i], (long long)s[i]);
    }
    return FAJIT_OK;
}

fajit_status fajit_attn_check(fajit_ctx *ctx, const fajit_attn_desc *d)
{
    FJ_RETURN_IF(!d, ctx, FAJIT_INVALID_ARGUMENT, "desc must not be NULL");
    FJ_CHECK(check_ptr(ctx, d->q, "q", 16));
    FJ_CHECK(check_ptr(ctx, d->k, "k", 16));
    FJ_CHECK(check_ptr(ctx, d->v, "v", 16));
    FJ_CHECK(check_ptr(ctx, d->o, "o", 16));
    FJ_RETURN_IF(d->dtype != FAJIT_F16 && d->dtype != FAJIT_BF16, ctx, FAJIT_INVALID_ARGUMENT,
                 "dtype must be FAJIT_F16 (0) or FAJIT_BF16 (1), got %d", (int)d->dtype);
    FJ_RETURN_IF(d->batch < 1, ctx, FAJIT_INVALID_ARGUMENT, "batch must be >= 1, got %d",
                 d->batch);
    FJ_RETURN_IF(d->heads_q < 1, ctx, FAJIT_INVALID_ARGUMENT, "heads_q must be >= 1, got %d",
                 d->heads_q);
    FJ_RETURN_IF(d->heads_kv < 1, ctx, FAJIT_INVALID_ARGUMENT,
                 "heads_kv must be >= 1, got %d", d->heads_kv);
    FJ_RETURN_IF(d->heads_q % d->heads_kv, ctx, FAJIT_INVALID_ARGUMENT,
                 "heads_q must be a multiple of heads_kv, got heads_q %d, heads_kv %d",
                 d->heads_q, d->heads_kv);
    int varlen = d->cu_seqlens_q || d->cu_seqlens_k;
    int min_len = varlen ? 0 : 1;   /* varlen maxima may be 0 when all sequences are empty */
    FJ_RETURN_IF(d->seqlen_q < min_len, ctx, FAJIT_INVALID_ARGUMENT,
                 "seqlen_q must be >= %d, got %d", min_len, d->seqlen_q);
    FJ_RETURN_IF(d->seqlen_k < min_len, ctx, FAJIT_INVALID_ARGUMENT,
                 "seqlen_k must be >= %d, got %d", min_len, d->seqlen_k);
    FJ_RETURN_IF(d->head_dim < 8 || d->head_dim > 256 || d->head_dim % 8, ctx,
                 FAJIT_UNSUPPORTED, "head_dim must be a multiple of 8 in [8, 256], got %d",
                 d->head_dim);
    FJ_CHECK(check_strides(ctx, 'q', d->q_batch_stride, d->q_row_stride, d->q_head_stride));
    FJ_CHECK(check_strides(ctx, 'k', d->k_batch_stride, d->k_row_stride, d->k_head_stride));
    FJ_CHECK(check_strides(ctx, 'v', d->v_batch_stride, d->v_row_stride, d->v_head_stride));
    FJ_CHECK(check_strides(ctx, 'o', d->o_batch_stride, d->o_row_stride, d->o_head_stride));
    switch (d->mask) {
    case FAJIT_MASK_NONE:
    case FAJIT_MASK_CAUSAL:
        break;
    case FAJIT_MASK_WINDOW:
        FJ_RETURN_IF(d->window_left < 0 || d->window_left > (1 << 30), ctx,
                     FAJIT_INVALID_ARGUMENT, "window_left must be in [0, 2^30], got %d",
                     d->window_left);
        FJ_RETURN_IF(d->window_right < 0 || d->window_right > (1 << 30), ctx,
                     FAJIT_INVALID_ARGUMENT, "window_right must be in [0, 2^30], got %d",
                     d->window_right);
        break;
    default:
        return fj_fail(ctx, FAJIT_INVALID_ARGUMENT,
                       "mask must be NONE (0), CAUSAL (1) or WINDOW (2), got %d", (int)d->mask);
    }
    FJ_RETURN_IF(!(d->softmax_scale > 0.f) || isinf(d->softmax_scale), ctx,
                 FAJIT_INVALID_ARGUMENT, "softmax_scale must be finite and > 0, got %g",
                 (double)d->softmax_scale);
    FJ_RETURN_IF(!d->cu_seqlens_q != !d->cu_seqlens_k, ctx, FAJIT_INVALID_ARGUMENT,
                 "cu_seqlens_q and cu_seqlens_k must be given together (varlen), got %s only",
                 d->cu_seqlens_q ? "cu_seqlens_q" : "cu_seqlens_k");
    if (varlen) {
        FJ_CHECK(check_ptr(ctx, d->cu_seqlens_q, "cu_seqlens_q", 4));
        FJ_CHECK(check_ptr(ctx, d->cu_seqlens_k, "cu_seqlens_k", 4));
    }
    if (d->lse)
        FJ_CHECK(check_ptr(ctx, d->lse, "lse", 4));
    return FAJIT_OK;
}

void fj_params_from_desc(const fajit_attn_desc *d, fj_attn_params *p)
{
    memset(p, 0, sizeof *p);
    p->q = (uintptr_t)d->q, p->k = (uintptr_t)d->k, p->v = (uintptr_t)d->v;
    p->o = (uintptr_t)d->o, p->lse = (uintptr_t)d->lse;
    p->cu_seqlens_q = (uintptr_t)d->cu_seqlens_q;
    p->cu_seqlens_k = (uintptr_t)d->cu_seqlens_k;
    p->q_batch_stride = d->q_batch_stride, p->q_row_stride = d->q_row_stride;
    p->q_head_stride = d->q_head_stride;
    p->k_batch_stride = d->k_batch_stride, p->k_row_stride = d->k_row_stride;
    p->k_head_stride = d->k_head_stride;
    p->v_batch_stride = d->v_batch_stride, p->v_row_stride = d->v_row_stride;
    p->v_head_stride = d->v_head_stride;
    p->o_batch_stride = d->o_batch_stride, p->o_row_stride = d->o_row_stride;
    p->o_head_stride = d->o_head_stride;
    p->batch = d->batch, p->heads_q = d->heads_q, p->heads_kv = d->heads_kv;
    p->head_dim = d->head_dim, p->seqlen_q = d->seqlen_q, p->seqlen_k = d->seqlen_k;
    switch (d->mask) {
    case FAJIT_MASK_CAUSAL:
        p->window_left = -1, p->window_right = 0;
        break;
    case FAJIT_MASK_WINDOW:
        p->window_left = d->window_left, p->window_right = d->window_right;
        break;
    default:
        p->window_left = p->window_right = -1;
    }
    p->scale = d->softmax_scale;
    p->scale_log2 = d->softmax_scale * 1.4426950408889634f;
}

/*------ variants ------*/

enum { FAM_REF = 1, FAM_FA2 = 2 };

static const char *const k_dtype_name[] = {"f16", "bf16"};
static const char *const k_mask_name[] = {"none", "causal", "window"};

void fj_variant_ref(fj_variant *v, int dtype)
{
    v->source = "attn_ref.cu";
    v->function = "fj_attn_ref";
    snprintf(v->preamble, sizeof v->preamble, "#define FJ_DTYPE %d\n", dtype);
    snprintf(v->name, sizeof v->name, "ref %s", k_dtype_name[dtype]);
}

void fj_variant_fa2(fj_variant *v, const fj_fa2_config *c, int dtype, int hdim, int mask)
{
    v->source = "attn_fwd_sm80.cu";
    v->function = "fj_attn_fwd_sm80";
    snprintf(v->preamble, sizeof v->preamble,
             "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_MASK %d\n"
             "#define FJ_BLOCK_M %d\n#define FJ_BLOCK_N %d\n#define FJ_WARPS %d\n"
             "#define FJ_STAGES %d\n",
             dtype, hdim, mask, c->block_m, c->block_n, c->warps, c->stages);
    snprintf(v->name, sizeof v->name, "fa2 %s d%d %s %dx%d w%d s%d", k_dtype_name[dtype], hdim,
             k_mask_name[mask], c->block_m, c->block_n, c->warps, c->stages);
}

int fj_warm_variants(int sm, fj_variant *out, int max)
{
    /* Every head_dim the API accepts: a compile costs about 0.3 s, so the whole set for
     * one target is a minute of one core, and a server never meets a cold variant. */
    int n = 0;
    for (int dt = 0; dt < 2 && n < max; dt++)
        fj_variant_ref(&out[n++], dt);
    for (int dt = 0; dt < 2; dt++)
        for (int hdim = 8; hdim <= 256; hdim += 8)
            for (int m = 0; m < 3 && n < max; m++) {
                fj_fa2_config c = fj_fa2_default(sm, hdim, m);
                fj_variant_fa2(&out[n++], &c, dt, hdim, m);
            }
    return n;
}

/*------ dispatch and launch ------*/

static uint64_t signature(int family, const fajit_attn_desc *d)
{
    return (uint64_t)family | (uint64_t)d->dtype << 4 | (uint64_t)d->mask << 6 |
           (uint64_t)d->head_dim << 8;
}

/* The dispatch decision: which kernel variant and launch shape serve `d` on target `sm`.
 * Tuned configurations will be looked up here (autotuner: not yet); today the per-target
 * default table of src/autotune decides. */
static void choose(int sm, const fajit_attn_desc *d, int family, fj_variant *v, fj_plan *p)
{
    if (family == FAM_FA2) {
        fj_fa2_config c = fj_fa2_default(sm, d->head_dim, (int)d->mask);
        fj_variant_fa2(v, &c, (int)d->dtype, d->head_dim, (int)d->mask);
        p->block_m = c.block_m;
        p->threads = c.warps * 32;
        p->dyn_smem = (int)fj_fa2_smem_bytes(&c, d->head_dim);
    } else {
        fj_variant_ref(v, (int)d->dtype);
        p->block_m = 1;
        p->threads = 256;
        p->dyn_smem = 0;
    }
}

/* The portable FA2 kernel runs on every target fajit compiles for (sm_80+). */
static int family_for(int sm) { return sm >= 80 ? FAM_FA2 : FAM_REF; }

fajit_status fajit_dispatch_describe(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                     char *buf, size_t len)
{
    FJ_RETURN_IF(!ctx || !buf || !len, ctx, FAJIT_INVALID_ARGUMENT,
                 "ctx and buf must not be NULL, len must be > 0");
    FJ_CHECK(fajit_attn_check(ctx, d));
    int sm = arch ? fj_arch_sm(arch) : ctx->cc;
    FJ_RETURN_IF(arch && sm < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'", arch);
    FJ_RETURN_IF(!arch && !ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device: name a target (arch)");
    FJ_RETURN_IF(sm < 80, ctx, FAJIT_UNSUPPORTED, "fajit needs sm_80 or newer, got sm_%d", sm);
    fj_variant v;
    fj_plan p;
    choose(sm, d, family_for(sm), &v, &p);
    snprintf(buf, len, "%s: grid (ceil(seqlen_q/%d), heads_q, batch), %d threads, %d B dynamic "
             "shared memory, source %s, entry %s", v.name, p.block_m, p.threads, p.dyn_smem,
             v.source, v.function);
    return FAJIT_OK;
}

/* Builds the plan for a signature: picks the family and configuration, gets the kernel. */
static fajit_status make_plan(fajit_ctx *ctx, const fajit_attn_desc *d, int family,
                              uint64_t sig, fj_plan **out)
{
    fj_variant v;
    fj_plan *p = calloc(1, sizeof *p);
    FJ_RETURN_IF(!p, ctx, FAJIT_OUT_OF_MEMORY, "allocating a plan");
    p->sig = sig;
    choose(ctx->cc, d, family, &v, p);
    fajit_status st = fj_kernel_get(ctx, &v, 1, &p->k);
    if (st != FAJIT_OK) {
        free(p);
        return st;
    }
    if (p->dyn_smem > 48 * 1024) {
        char err[64];
        CUresult r = ctx->cu->cuFuncSetAttribute(p->k->fn, FJ_CU_FUNC_ATTR_MAX_DYN_SMEM,
                                                 p->dyn_smem);
        if (r) {
            int bytes = p->dyn_smem;
            free(p);
            return fj_fail(ctx, FAJIT_CUDA_ERROR, "raising the shared memory of %s to %d: %s",
                           v.name, bytes, fj_cuda_errname(ctx->cu, r, err, sizeof err));
        }
    }
    fj_log(ctx, FAJIT_LOG_DEBUG, "dispatch: %s on %s (%d registers)", v.name, ctx->arch,
           p->k->regs);
    *out = p;
    return FAJIT_OK;
}

static fajit_status run(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream, int family)
{
    FJ_CHECK(fajit_attn_check(ctx, d));
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device (FAJIT_DEVICE_NONE): it can only compile");
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));

    uint64_t sig = signature(family, d);
    unsigned b = (unsigned)(sig * 0x9E3779B97F4A7C15ull >> 58) % FJ_PLAN_BUCKETS;
    pthread_mutex_lock(&ctx->lock);
    fj_plan *p = ctx->plans[b];
    while (p && p->sig != sig)
        p = p->next;
    pthread_mutex_unlock(&ctx->lock);
    if (p) {
        ctx->hits_memory++;
    } else {
        FJ_CHECK(make_plan(ctx, d, family, sig, &p));
        pthread_mutex_lock(&ctx->lock);
        p->next = ctx->plans[b];   /* a racing duplicate plan is harmless: same kernel */
        ctx->plans[b] = p;
        pthread_mutex_unlock(&ctx->lock);
    }
    if (d->seqlen_q == 0)   /* varlen batch whose sequences are all empty */
        return FAJIT_OK;
    fj_attn_params params;
    fj_params_from_desc(d, &params);
    void *args[] = {&params};
    unsigned gx = (unsigned)((d->seqlen_q + p->block_m - 1) / p->block_m);
    r = ctx->cu->cuLaunchKernel(p->k->fn, gx, (unsigned)d->heads_q, (unsigned)d->batch,
                                (unsigned)p->threads, 1, 1, (unsigned)p->dyn_smem,
                                (CUstream)stream, args, NULL);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    ctx->calls++;
    return FAJIT_OK;
}

fajit_status fajit_attn_fwd(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    return run(ctx, d, stream, family_for(ctx ? ctx->cc : 0));
}

fajit_status fajit_attn_fwd_reference(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    return run(ctx, d, stream, FAM_REF);
}

/*------ offline warm-up ------*/

typedef struct warm_job {
    fajit_ctx *ctx;
    const char *arch;
    const fj_variant *vs;
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next, done, compiled, cached;
    fajit_status first_error;
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
        if (st != FAJIT_OK && w->first_error == FAJIT_OK)
            w->first_error = st;
        w->last_name = w->vs[i].name;
        w->last_compiled = compiled;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

fajit_status fajit_warm(fajit_ctx *ctx, const char *arch, int jobs, int *n_compiled,
                        int *n_cached)
{
    enum { MAX_VARIANTS = 256, MAX_JOBS = 64 };
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    int sm = fj_arch_sm(arch);
    FJ_RETURN_IF(sm < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'",
                 arch ? arch : "(null)");
    FJ_RETURN_IF(sm < 80, ctx, FAJIT_UNSUPPORTED, "fajit needs sm_80 or newer, got %s", arch);
    char why[1024];
    FJ_RETURN_IF(!fj_nvrtc_get(why, sizeof why), ctx, FAJIT_NO_NVRTC, "%s", why);
    if (jobs <= 0)
        jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    jobs = jobs < 1 ? 1 : jobs > MAX_JOBS ? MAX_JOBS : jobs;

    warm_job w = {.ctx = ctx, .arch = arch, .first_error = FAJIT_OK};
    fj_variant *vs = malloc(MAX_VARIANTS * sizeof *vs);
    FJ_RETURN_IF(!vs, ctx, FAJIT_OUT_OF_MEMORY, "allocating variants");
    w.vs = vs;
    w.n = fj_warm_variants(sm, vs, MAX_VARIANTS);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t tids[MAX_JOBS];
    int started = 0;
    for (; started < jobs && started < w.n; started++)
        if (pthread_create(&tids[started], NULL, warm_worker, &w) != 0)
            break;
    if (started == 0)   /* no thread could start: do the work here */
        warm_worker(&w);

    /* Report progress from the caller's thread as items finish. */
    double t0 = mono_s();
    pthread_mutex_lock(&w.mu);
    for (int reported = 0; reported < w.n;) {
        while (w.done == reported)
            pthread_cond_wait(&w.cv, &w.mu);
        reported = w.done;
        if (ctx->opts.progress) {
            char what[160];
            snprintf(what, sizeof what, "%s %s%s", arch, w.last_name,
                     w.last_compiled ? "" : " (cached)");
            double el = mono_s() - t0;
            ctx->opts.progress(ctx->opts.progress_user, reported, w.n,
                               el / reported * (w.n - reported), what);
        }
    }
    pthread_mutex_unlock(&w.mu);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    free(vs);
    if (n_compiled)
        *n_compiled = w.compiled;
    if (n_cached)
        *n_cached = w.cached;
    return w.first_error;
}
