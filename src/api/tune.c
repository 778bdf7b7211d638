/* tune.c - the GPU side of the autotuner: the hooks that compile, check and time one
 * candidate configuration (src/autotune/tune.c chooses), the tuning row they produce, and
 * tuning a whole spec on random inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "../autotune/spec.h"
#include "../autotune/tune.h"

#define MAX_CANDIDATES 48
#define MAX_SETS 2
#define FLUSH_BYTES ((size_t)256 << 20)   /* > 4x the 50-60 MB L2 of an H100/H200 */

typedef struct tuner {
    fajit_ctx *ctx;
    const fajit_attn_desc *sets[MAX_SETS]; /* same problem, different inputs: rotated */
    int n_sets;
    fj_kplan plan[MAX_CANDIDATES];
    float *ref;            /* reference output, valid elements in order */
    float *out;            /* candidate output, same order */
    uint16_t *raw;         /* O as copied back */
    size_t n_valid, raw_elems;
    int32_t *cu_q;         /* host copy of cu_seqlens_q (varlen) */
    CUdeviceptr flush;
    int done, total;       /* progress over a whole spec */
} tuner;

static float half_to_f32(uint16_t h, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                        : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* Elements of O from its base pointer up to the last valid one. */
static size_t o_extent(const fajit_attn_desc *d, const int32_t *cu_q)
{
    int64_t rows = cu_q ? cu_q[d->batch] : d->seqlen_q;
    int64_t last = (rows ? rows - 1 : 0) * d->o_row_stride + (int64_t)(d->heads_q - 1) *
                   d->o_head_stride + d->head_dim;
    if (!cu_q)
        last += (int64_t)(d->batch - 1) * d->o_batch_stride;
    return (size_t)last;
}

/* Copies O back and gathers its valid elements, in a fixed order, as floats. */
static fajit_status read_o(tuner *t, const fajit_attn_desc *d, float *dst)
{
    fajit_ctx *ctx = t->ctx;
    char err[64];
    CUresult r = ctx->cu->cuCtxSynchronize();
    if (!r)
        r = ctx->cu->cuMemcpyDtoH(t->raw, (CUdeviceptr)d->o, t->raw_elems * 2);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "reading the output back: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    size_t n = 0;
    for (int b = 0; b < d->batch; b++) {
        int64_t r0 = t->cu_q ? t->cu_q[b] : 0;
        int sq = t->cu_q ? t->cu_q[b + 1] - t->cu_q[b] : d->seqlen_q;
        int64_t base = t->cu_q ? r0 * d->o_row_stride : (int64_t)b * d->o_batch_stride;
        for (int i = 0; i < sq; i++)
            for (int h = 0; h < d->heads_q; h++)
                for (int c = 0; c < d->head_dim; c++)
                    dst[n++] = half_to_f32(t->raw[base + i * d->o_row_stride +
                                                  h * d->o_head_stride + c],
                                           d->dtype == FAJIT_BF16);
    }
    t->n_valid = n;
    return FAJIT_OK;
}

/*------ the hooks ------*/

static int prepare(void *user, int i, char *why, size_t n)
{
    tuner *t = user;
    const fajit_attn_desc *d = t->sets[0];
    fj_kplan *kp = &t->plan[i];
    kp->cfg.fam->kernels(&kp->cfg, d, &kp->ks);
    for (int k = 0; k < kp->ks.n; k++)
        if (kp->ks.dyn_smem[k] > t->ctx->smem_optin) {
            snprintf(why, n, "needs %d B of shared memory, the device allows %d",
                     kp->ks.dyn_smem[k], t->ctx->smem_optin);
            return -1;
        }
    if (fj_kplan_load(t->ctx, kp, d, 0) != FAJIT_OK) {
        snprintf(why, n, "%s", fajit_errmsg(t->ctx));
        return -1;
    }
    for (int k = 0; k < kp->ks.n; k++) {
        const fj_kernel *kk = kp->k[k];
        if (kk->spill_bytes > 0 || kk->local_bytes > 0) {
            snprintf(why, n, "%s spills %d B, local memory %d B", kp->ks.v[k].name,
                     kk->spill_bytes, kk->local_bytes);
            return -1;
        }
        if (kk->warning[0]) {
            snprintf(why, n, "%s: ptxas warning %s (serialized wgmma or ignored setmaxnreg)",
                     kp->ks.v[k].name, kk->warning);
            return -1;
        }
    }
    return 0;
}

static int check(void *user, int i, char *why, size_t n)
{
    tuner *t = user;
    const fajit_attn_desc *d = t->sets[0];
    fajit_ctx *ctx = t->ctx;
    ctx->cu->cuMemsetD8((CUdeviceptr)d->o, 0xff, t->raw_elems * 2);   /* poison: NaN */
    if (fj_kplan_launch(ctx, &t->plan[i], d, NULL) != FAJIT_OK ||
        read_o(t, d, t->out) != FAJIT_OK) {
        snprintf(why, n, "launch failed: %s", fajit_errmsg(ctx));
        return -1;
    }
    double max_err = 0, max_ref = 0;
    for (size_t k = 0; k < t->n_valid; k++) {
        double e = fabs((double)t->out[k] - t->ref[k]);
        max_err = isnan(e) || e > max_err ? (isnan(e) ? INFINITY : e) : max_err;
        max_ref = fmax(max_ref, fabs(t->ref[k]));
    }
    double ulp = d->dtype == FAJIT_BF16 ? 1.0 / 128 : 1.0 / 1024;
    if (!(max_err <= ulp * fmax(max_ref, 1e-3) + 1e-6)) {
        snprintf(why, n, "wrong result: max error %g against the reference kernel", max_err);
        return -1;
    }
    return 0;
}

static int time_it(void *user, int i, double *samples, int reps, char *why, size_t n)
{
    tuner *t = user;
    fajit_ctx *ctx = t->ctx;
    const fj_cuda *cu = ctx->cu;
    CUevent ev[2 * FJ_TUNE_MAX_REPS];
    int made = 0, rc = -1;
    char err[64];
    CUresult r = 0;
    for (; made < 2 * reps && !r; made++)
        r = cu->cuEventCreate(&ev[made], 0);
    if (r) {
        made--;
        snprintf(why, n, "cuEventCreate: %s", fj_cuda_errname(cu, r, err, sizeof err));
        goto done;
    }
    for (int w = 0; w < 3; w++)   /* warm-up: clocks up, instruction cache warm */
        if (fj_kplan_launch(ctx, &t->plan[i], t->sets[w % t->n_sets], NULL) != FAJIT_OK)
            goto launch_failed;
    for (int k = 0; k < reps; k++) {
        cu->cuMemsetD8(t->flush, (unsigned char)k, FLUSH_BYTES);   /* evict L2 */
        cu->cuEventRecord(ev[2 * k], NULL);
        if (fj_kplan_launch(ctx, &t->plan[i], t->sets[k % t->n_sets], NULL) != FAJIT_OK)
            goto launch_failed;
        cu->cuEventRecord(ev[2 * k + 1], NULL);
    }
    if ((r = cu->cuCtxSynchronize())) {
        snprintf(why, n, "kernel failed: %s", fj_cuda_errname(cu, r, err, sizeof err));
        goto done;
    }
    for (int k = 0; k < reps; k++) {
        float ms = 0;
        cu->cuEventElapsedTime(&ms, ev[2 * k], ev[2 * k + 1]);
        samples[k] = ms;
    }
    rc = 0;
    goto done;
launch_failed:
    snprintf(why, n, "launch failed: %s", fajit_errmsg(ctx));
done:
    for (int k = 0; k < made; k++)
        cu->cuEventDestroy(ev[k]);
    return rc;
}

/*------ one problem ------*/

static void result_from_row(const fj_tune_row *row, fajit_tune_result *out)
{
    snprintf(out->winner, sizeof out->winner, "%.31s", row->config);
    out->winner_ms = row->time_ms;
    out->from_cache = 1;
}

/* Tunes the problem of sets[0] (all sets describe the same shapes). */
static fajit_status tune_sets(fajit_ctx *ctx, const fajit_attn_desc *const *sets, int n_sets,
                              const fajit_tune_opts *o, fajit_tune_result *out)
{
    fajit_tune_opts def;
    if (!o) {
        fajit_tune_opts_init(&def);
        o = &def;
    }
    const fajit_attn_desc *d = sets[0];
    memset(out, 0, sizeof *out);
    fj_desc_signature(d, out->signature, sizeof out->signature);
    fj_desc_bucket(d, out->bucket, sizeof out->bucket);
    out->seqlen_q = d->seqlen_q, out->seqlen_k = d->seqlen_k, out->batch = d->batch;
    const fj_target tg = fj_target_of(ctx, NULL);
    fj_kcfg dc;
    FJ_RETURN_IF(fj_kcfg_default(d, &tg, FAJIT_FAMILY_AUTO, &dc) != 0, ctx, FAJIT_UNSUPPORTED,
                 "no kernel family serves %s on %s", out->signature, ctx->arch);
    fj_kcfg_name(&dc, out->default_config);

    fj_tune_row row;
    if (!o->force && fj_cache_tune_get(ctx->cache, ctx->gpu_name, ctx->arch, ctx->sm_count,
                                       out->signature, out->bucket, &row)) {
        result_from_row(&row, out);
        fj_tune_row_free(&row);
        return FAJIT_OK;
    }

    tuner *t = calloc(1, sizeof *t);
    fj_tune_entry *e = calloc(MAX_CANDIDATES, sizeof *e);
    fajit_status st = FAJIT_OK;
    char err[64];
    if (!t || !e) {
        st = fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "allocating the tuner");
        goto done;
    }
    t->ctx = ctx;
    t->n_sets = n_sets;
    for (int i = 0; i < n_sets; i++)
        t->sets[i] = sets[i];
    fj_kcfg cfg[MAX_CANDIDATES];
    int n = fj_kcfg_candidates(d, &tg, cfg, MAX_CANDIDATES);
    for (int i = 0; i < n; i++)
        t->plan[i].cfg = cfg[i];
    if (d->cu_seqlens_q) {
        t->cu_q = malloc(sizeof(int32_t) * (size_t)(d->batch + 1));
        if (!t->cu_q) {
            st = fj_fail(ctx, FAJIT_OUT_OF_MEMORY, "allocating the tuner");
            goto done;
        }
        ctx->cu->cuMemcpyDtoH(t->cu_q, (CUdeviceptr)d->cu_seqlens_q,
                              sizeof(int32_t) * (size_t)(d->batch + 1));
    }
    t->raw_elems = o_extent(d, t->cu_q);
    size_t valid = (size_t)(t->cu_q ? t->cu_q[d->batch] : (int64_t)d->batch * d->seqlen_q) *
                   (size_t)d->heads_q * (size_t)d->head_dim;
    t->raw = malloc(t->raw_elems * 2 + 16);
    t->ref = malloc(valid * sizeof(float) + 16);
    t->out = malloc(valid * sizeof(float) + 16);
    CUresult r = ctx->cu->cuMemAlloc(&t->flush, FLUSH_BYTES);
    if (!t->raw || !t->ref || !t->out || r) {
        st = fj_fail(ctx, r ? FAJIT_CUDA_ERROR : FAJIT_OUT_OF_MEMORY,
                     "allocating the tuner's buffers%s%s", r ? ": " : "",
                     r ? fj_cuda_errname(ctx->cu, r, err, sizeof err) : "");
        goto done;
    }
    /* The oracle: the reference kernel's output on the first input set; for a paged problem
     * (only from fajit_tune_spec, which lays the pages out in order) on the same memory seen
     * as contiguous K/V. */
    fajit_attn_desc twin = *d;
    if (d->block_table) {
        twin.block_table = NULL, twin.block_table_stride = 0, twin.page_size = 0;
        twin.num_pages = 0, twin.k_page_stride = twin.v_page_stride = 0;
        twin.seqused_k = NULL;
    }
    if ((st = fajit_attn_fwd_reference(ctx, &twin, NULL)) != FAJIT_OK ||
        (st = read_o(t, d, t->ref)) != FAJIT_OK)
        goto done;

    for (int i = 0; i < n; i++)
        fj_kcfg_name(&t->plan[i].cfg, e[i].config);
    fj_tune_hooks h = {prepare, check, time_it, NULL, t};
    int w = fj_tune_run(e, n, &h, o->reps, o->noise_band);
    out->candidates = n;
    for (int i = 0; i < n; i++) {
        out->pruned += !e[i].ok;
        if (!e[i].ok)
            fj_log(ctx, FAJIT_LOG_INFO, "tune %s %s: %s pruned: %s", out->signature,
                   out->bucket, e[i].config, e[i].why);
    }
    if (e[0].ok && strcmp(e[0].config, out->default_config) == 0)
        out->default_ms = e[0].median_ms;
    if (w < 0) {
        st = fj_fail(ctx, FAJIT_UNSUPPORTED, "tuning %s %s: all %d candidates were pruned "
                     "(first: %s: %s)", out->signature, out->bucket, n, e[0].config, e[0].why);
        goto done;
    }
    snprintf(out->winner, sizeof out->winner, "%s", e[w].config);
    out->winner_ms = e[w].median_ms;

    /* Persist: the winner and the whole table. */
    size_t json_len = (size_t)fj_tune_table_json(e, n, NULL, 0) + 1;
    memset(&row, 0, sizeof row);
    row.table_json = malloc(json_len);
    if (row.table_json)
        fj_tune_table_json(e, n, row.table_json, json_len);
    snprintf(row.gpu_name, sizeof row.gpu_name, "%s", ctx->gpu_name);
    snprintf(row.arch, sizeof row.arch, "%s", ctx->arch);
    row.sm_count = ctx->sm_count;
    snprintf(row.signature, sizeof row.signature, "%s", out->signature);
    snprintf(row.bucket, sizeof row.bucket, "%s", out->bucket);
    snprintf(row.config, sizeof row.config, "%s", out->winner);
    row.time_ms = out->winner_ms;
    row.pinned = o->pin;
    snprintf(row.fajit_version, sizeof row.fajit_version, "%s", FAJIT_VERSION_STRING);
    int major, minor;
    fj_nvrtc_version(fj_nvrtc_get(NULL, 0), &major, &minor);
    row.nvrtc_version = major * 1000 + minor * 10;
    int put = fj_cache_tune_put(ctx->cache, &row);
    free(row.table_json);
    if (put < 0)
        st = fj_fail(ctx, FAJIT_CACHE_ERROR, "storing the tuning row %s %s failed (read-only "
                     "cache?)", out->signature, out->bucket);
    else if (put == 1)
        fj_log(ctx, FAJIT_LOG_INFO, "tune %s %s: a pinned row exists and is kept",
               out->signature, out->bucket);
    /* Plans made before this row existed must not outlive it. */
    pthread_mutex_lock(&ctx->lock);
    for (int b = 0; b < FJ_PLAN_BUCKETS; b++)
        for (fj_plan *p = ctx->plans[b]; p; p = p->next)
            p->key.bits |= 1ull << 63;   /* retired: never matches a live key again */
    pthread_mutex_unlock(&ctx->lock);
done:
    if (t) {
        if (t->flush)
            ctx->cu->cuMemFree(t->flush);
        free(t->raw), free(t->ref), free(t->out), free(t->cu_q);
    }
    free(t);
    free(e);
    return st;
}

static fajit_status check_opts(fajit_ctx *ctx, const fajit_tune_opts *o)
{
    FJ_RETURN_IF(o && (o->reps < 1 || o->reps > FJ_TUNE_MAX_REPS), ctx, FAJIT_INVALID_ARGUMENT,
                 "reps must be in [1, %d], got %d", FJ_TUNE_MAX_REPS, o->reps);
    FJ_RETURN_IF(o && !(o->noise_band >= 0 && o->noise_band < 1), ctx, FAJIT_INVALID_ARGUMENT,
                 "noise_band must be in [0, 1), got %g", o->noise_band);
    return FAJIT_OK;
}

fajit_status fajit_tune(fajit_ctx *ctx, const fajit_attn_desc *d, const fajit_tune_opts *o,
                        fajit_tune_result *out)
{
    fajit_attn_desc ld;
    fajit_tune_opts lo;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    FJ_CHECK(fj_tune_opts_import(ctx, o, &lo));
    d = &ld, o = &lo;
    FJ_RETURN_IF(!ctx || !out, ctx, FAJIT_INVALID_ARGUMENT, "ctx and out must not be NULL");
    FJ_CHECK(fajit_attn_check(ctx, d));
    FJ_RETURN_IF(d->block_table, ctx, FAJIT_UNSUPPORTED, "fajit_tune takes contiguous K/V "
                 "(the reference it checks against reads no block table); tune a paged problem "
                 "with a spec that sets page_size (fajit_tune_spec), on pages it lays out");
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "tuning needs a device");
    FJ_RETURN_IF(ctx->cc < 80, ctx, FAJIT_UNSUPPORTED, "tuning needs sm_80 or newer");
    FJ_CHECK(check_opts(ctx, o));
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    const fajit_attn_desc *sets[1] = {d};
    return tune_sets(ctx, sets, 1, o, out);
}

/*------ a whole spec on random inputs ------*/

typedef struct dev_problem {
    CUdeviceptr q[MAX_SETS], k[MAX_SETS], v[MAX_SETS], o;
    CUdeviceptr bt;   /* paged problems: block table [batch][pages per sequence], in order */
    fajit_attn_desc d[MAX_SETS];
} dev_problem;

static uint64_t g_rand = 0x9E3779B97F4A7C15ull;
static uint16_t rand_half(int bf16)
{
    g_rand ^= g_rand << 13, g_rand ^= g_rand >> 7, g_rand ^= g_rand << 17;
    float f = (float)(g_rand >> 40) / (float)(1 << 24) * 2.f - 1.f;   /* [-1, 1) */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (bf16)
        return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    int e = (int)((u >> 23) & 0xff) - 127 + 15;   /* |f| < 1: normal or subnormal half */
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (e <= 0)
        return sign;
    return (uint16_t)(sign | e << 10 | ((u >> 13) & 0x3ff));
}

CUresult fj_upload_random(const fj_cuda *cu, CUdeviceptr *p, size_t elems, int bf16,
                          uint16_t *host)
{
    for (size_t i = 0; i < elems; i++)
        host[i] = rand_half(bf16);
    CUresult r = cu->cuMemAlloc(p, elems * 2);
    return r ? r : cu->cuMemcpyHtoD(*p, host, elems * 2);
}

static void free_problem(const fj_cuda *cu, dev_problem *dp)
{
    for (int s = 0; s < MAX_SETS; s++) {
        if (dp->q[s]) cu->cuMemFree(dp->q[s]);
        if (dp->k[s]) cu->cuMemFree(dp->k[s]);
        if (dp->v[s]) cu->cuMemFree(dp->v[s]);
    }
    if (dp->o)
        cu->cuMemFree(dp->o);
    if (dp->bt)
        cu->cuMemFree(dp->bt);
}

/* A paged problem's block table: sequence b's pages b*pps .. b*pps + pps-1, so that its
 * K/V are contiguous too (the oracle's view, tune_sets). */
CUresult fj_upload_block_table(const fj_cuda *cu, CUdeviceptr *p, int batch, int pps)
{
    const size_t n = (size_t)batch * pps;
    int32_t *t = malloc(n * sizeof *t);
    if (!t)
        return 2;   /* CUDA_ERROR_OUT_OF_MEMORY */
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)i;
    CUresult r = cu->cuMemAlloc(p, n * sizeof *t);
    if (!r)
        r = cu->cuMemcpyHtoD(*p, t, n * sizeof *t);
    free(t);
    return r;
}

fajit_status fajit_tune_spec(fajit_ctx *ctx, const char *spec, const fajit_tune_opts *o,
                             fajit_tune_result_fn fn, void *user)
{
    fajit_tune_opts lo;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_tune_opts_import(ctx, o, &lo));
    o = &lo;
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "tuning needs a device");
    FJ_CHECK(check_opts(ctx, o));
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    fj_spec sp;
    FJ_CHECK(fj_spec_load(ctx, spec, &sp));
    int total = 0, done = 0;
    for (size_t i = 0; i < sp.n_problems; i++)
        total += (int)sp.problems[i].n_shapes;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fajit_status st = FAJIT_OK;
    for (size_t i = 0; i < sp.n_problems && st == FAJIT_OK; i++) {
        const fj_problem *p = &sp.problems[i];
        for (size_t s = 0; s < p->n_shapes && st == FAJIT_OK; s++) {
            const fj_shape *sh = &p->shapes[s];
            /* paged: whole pages per sequence (pps of them), laid out in order */
            const int pps = p->page_size ? (sh->seqlen_k + p->page_size - 1) / p->page_size : 0;
            const size_t rows_k = p->page_size ? (size_t)pps * p->page_size : (size_t)sh->seqlen_k;
            size_t nq = (size_t)sh->batch * sh->seqlen_q * p->heads_q * p->head_dim;
            size_t nk = (size_t)sh->batch * rows_k * p->heads_kv * p->head_dim;
            /* Two input sets when one fits in L2 several times over; else one (the L2 flush
             * before each repetition already makes every run cold). */
            int sets = (nq + 2 * nk) * 2 < (size_t)96 << 20 ? 2 : 1;
            dev_problem dp;
            memset(&dp, 0, sizeof dp);
            uint16_t *host = malloc((nq > nk ? nq : nk) * 2);
            r = host ? 0 : 1;
            for (int k = 0; k < sets && !r; k++) {
                int bf16 = p->dtype == FAJIT_BF16;
                if (!(r = fj_upload_random(ctx->cu, &dp.q[k], nq, bf16, host)) &&
                    !(r = fj_upload_random(ctx->cu, &dp.k[k], nk, bf16, host)))
                    r = fj_upload_random(ctx->cu, &dp.v[k], nk, bf16, host);
            }
            if (!r)
                r = ctx->cu->cuMemAlloc(&dp.o, nq * 2);
            if (!r && p->page_size)
                r = fj_upload_block_table(ctx->cu, &dp.bt, sh->batch, pps);
            free(host);
            if (r) {
                free_problem(ctx->cu, &dp);
                st = fj_fail(ctx, FAJIT_CUDA_ERROR, "allocating inputs for %s (%d x %d x %d): %s",
                             p->name, sh->batch, sh->seqlen_q, sh->seqlen_k,
                             fj_cuda_errname(ctx->cu, r, err, sizeof err));
                break;
            }
            const fajit_attn_desc *ds[MAX_SETS];
            for (int k = 0; k < sets; k++) {
                fajit_attn_desc *d = &dp.d[k];
                fajit_attn_desc_init(d, (void *)dp.q[k], (void *)dp.k[k], (void *)dp.v[k],
                                     (void *)dp.o, sh->batch, p->heads_q, p->heads_kv,
                                     sh->seqlen_q, sh->seqlen_k, p->head_dim, p->dtype);
                d->mask = p->mask;
                d->window_left = p->window_left;
                d->window_right = p->window_right;
                if (p->page_size) {
                    d->k_batch_stride = d->v_batch_stride =
                        (int64_t)rows_k * p->heads_kv * p->head_dim;   /* (the oracle's) */
                    d->block_table = (const int32_t *)(uintptr_t)dp.bt;
                    d->block_table_stride = pps, d->page_size = p->page_size;
                    d->num_pages = sh->batch * pps;
                }
                ds[k] = d;
            }
            fajit_tune_result res;
            st = fajit_attn_check(ctx, ds[0]);
            if (st == FAJIT_OK)
                st = tune_sets(ctx, ds, sets, o, &res);
            free_problem(ctx->cu, &dp);
            done++;
            if (st == FAJIT_OK && fn)
                fn(user, &res);
            if (ctx->opts.progress) {
                clock_gettime(CLOCK_MONOTONIC, &t1);
                double el = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
                char what[200];
                snprintf(what, sizeof what, "%s sq %d sk %d b %d", p->name, sh->seqlen_q,
                         sh->seqlen_k, sh->batch);
                ctx->opts.progress(ctx->opts.progress_user, done, total,
                                   el / done * (total - done), what);
            }
        }
    }
    fj_spec_free(&sp);
    return st;
}
