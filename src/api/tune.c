/* tune.c - the GPU side of the autotuner: the hooks that compile, check and time one
 * candidate configuration (src/autotune/tune.c chooses), the tuning row they produce, and
 * tuning a whole spec on random inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../autotune/spec.h"
#include "../autotune/tune.h"
#include "oracle.h"

#define MAX_CANDIDATES 48
#define MAX_SETS FJ_INPUT_SETS

typedef struct tuner {
    fajit_ctx *ctx;
    const fajit_attn_desc *sets[MAX_SETS]; /* same problem, different inputs: rotated */
    int n_sets;
    fj_kplan plan[MAX_CANDIDATES];
    fj_oracle orc;         /* the reference output of sets[0] */
    CUdeviceptr flush;
    int done, total;       /* progress over a whole spec */
} tuner;

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
    return fj_oracle_check(t->ctx, &t->orc, &t->plan[i], t->sets[0], why, n);
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
        if (fj_l2_flush(ctx, t->flush, FJ_L2_FLUSH_BYTES) != FAJIT_OK) {   /* evict L2, clean */
            snprintf(why, n, "L2 flush: %s", fajit_errmsg(ctx));
            goto done;
        }
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

/* Persists a tuning result: the winner in `out` and the whole table of the n entries e, as
 * the row of out->signature in `bucket` (pinned: the `pin` option). FAJIT_OK, also where a
 * pinned row exists and is kept, or FAJIT_CACHE_ERROR. */
static fajit_status store_row(fajit_ctx *ctx, const fj_tune_entry *e, int n, const char *bucket,
                              int pin, const fajit_tune_result *out)
{
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    size_t json_len = (size_t)fj_tune_table_json(e, n, NULL, 0) + 1;
    row.table_json = malloc(json_len);
    if (row.table_json)
        fj_tune_table_json(e, n, row.table_json, json_len);
    snprintf(row.gpu_name, sizeof row.gpu_name, "%s", ctx->gpu_name);
    snprintf(row.arch, sizeof row.arch, "%s", ctx->arch);
    row.sm_count = ctx->sm_count;
    snprintf(row.signature, sizeof row.signature, "%s", out->signature);
    snprintf(row.bucket, sizeof row.bucket, "%s", bucket);
    snprintf(row.config, sizeof row.config, "%s", out->winner);
    row.time_ms = out->winner_ms;
    row.pinned = pin;
    snprintf(row.fajit_version, sizeof row.fajit_version, "%s", FAJIT_VERSION_STRING);
    int major, minor;
    fj_nvrtc_version(fj_nvrtc_get(NULL, 0), &major, &minor);
    row.nvrtc_version = major * 1000 + minor * 10;
    int put = fj_cache_tune_put(ctx->cache, &row);
    free(row.table_json);
    if (put < 0)
        return fj_fail(ctx, FAJIT_CACHE_ERROR, "storing the tuning row %s %s failed (read-only "
                       "cache?)", out->signature, bucket);
    if (put == 1)
        fj_log(ctx, FAJIT_LOG_INFO, "tune %s %s: a pinned row exists and is kept",
               out->signature, bucket);
    return FAJIT_OK;
}

/* Tunes the problem of sets[0] (all sets describe the same shapes); in: where they came
 * from (a paged problem's oracle reads in->k_twin), NULL for a caller's contiguous one. */
static fajit_status tune_sets(fajit_ctx *ctx, const fajit_attn_desc *const *sets, int n_sets,
                              const fj_inputs *in, const fajit_tune_opts *o,
                              fajit_tune_result *out)
{
    fajit_tune_opts def;
    if (!o) {
        fajit_tune_opts_init(&def);
        o = &def;
    }
    const fajit_attn_desc *d = sets[0];
    char bucket[FJ_DESC_BUCKET_LEN];   /* the row's; out->bucket may be shorter */
    memset(out, 0, sizeof *out);
    fj_desc_signature(d, out->signature, sizeof out->signature);
    fj_desc_bucket(d, ctx->sm_count, bucket, sizeof bucket);
    snprintf(out->bucket, sizeof out->bucket, "%.*s", (int)sizeof out->bucket - 1, bucket);
    out->seqlen_q = d->seqlen_q, out->seqlen_k = d->seqlen_k, out->batch = d->batch;
    const fj_target tg = fj_target_of(ctx, NULL);
    fj_kcfg dc;
    FJ_RETURN_IF(fj_kcfg_default(d, &tg, FAJIT_FAMILY_AUTO, &dc) != 0, ctx, FAJIT_UNSUPPORTED,
                 "no kernel family serves %s on %s", out->signature, ctx->arch);
    fj_kcfg_name(&dc, out->default_config);

    fj_tune_row row;
    if (!o->force && fj_cache_tune_get(ctx->cache, ctx->gpu_name, ctx->arch, ctx->sm_count,
                                       out->signature, bucket, &row)) {
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
    if ((st = fj_oracle_init(ctx, &t->orc, d)) != FAJIT_OK)
        goto done;
    CUresult r = ctx->cu->cuMemAlloc(&t->flush, FJ_L2_FLUSH_BYTES);
    if (r) {
        st = fj_fail(ctx, FAJIT_CUDA_ERROR, "allocating the tuner's L2 flush buffer: %s",
                     fj_cuda_errname(ctx->cu, r, err, sizeof err));
        goto done;
    }
    /* The oracle: the reference kernel's output on the first input set (a paged problem,
     * only from fajit_tune_spec, on its twin in sequence order). */
    if ((st = fj_oracle_reference(ctx, &t->orc, d, in ? in->k_twin : 0,
                                  in ? in->v_twin : 0)) != FAJIT_OK)
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
                   bucket, e[i].config, e[i].why);
    }
    if (e[0].ok && strcmp(e[0].config, out->default_config) == 0)
        out->default_ms = e[0].median_ms;
    if (w < 0) {
        st = fj_fail(ctx, FAJIT_UNSUPPORTED, "tuning %s %s: all %d candidates were pruned "
                     "(first: %s: %s)", out->signature, bucket, n, e[0].config, e[0].why);
        goto done;
    }
    snprintf(out->winner, sizeof out->winner, "%s", e[w].config);
    out->winner_ms = e[w].median_ms;
    st = store_row(ctx, e, n, bucket, o->pin, out);
    fj_plans_retire(ctx);   /* plans made before this row existed must not outlive it */
done:
    if (t) {
        if (t->flush)
            ctx->cu->cuMemFree(t->flush);
        fj_oracle_free(&t->orc);
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
                 "with a spec that sets page_size (fajit_tune_spec), on pages it scatters");
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "tuning needs a device");
    FJ_RETURN_IF(ctx->cc < 80, ctx, FAJIT_UNSUPPORTED, "tuning needs sm_80 or newer");
    FJ_CHECK(check_opts(ctx, o));
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    const fajit_attn_desc *sets[1] = {d};
    return tune_sets(ctx, sets, 1, NULL, o, out);
}

/*------ a whole spec on random inputs ------*/

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
    const double t0 = fj_mono_s();
    fajit_status st = FAJIT_OK;
    for (size_t i = 0; i < sp.n_problems && st == FAJIT_OK; i++) {
        const fj_problem *p = &sp.problems[i];
        for (size_t s = 0; s < p->n_shapes && st == FAJIT_OK; s++) {
            const fj_shape *sh = &p->shapes[s];
            /* Two input sets when one fits in L2 several times over; else one (the L2 flush
             * before each repetition already makes every run cold). */
            const size_t rows_k = p->page_size ? (size_t)(sh->seqlen_k + p->page_size - 1) /
                                                 p->page_size * p->page_size : (size_t)sh->seqlen_k;
            size_t nq = (size_t)sh->batch * sh->seqlen_q * p->heads_q * p->head_dim;
            size_t nk = (size_t)sh->batch * rows_k * p->heads_kv * p->head_dim;
            int sets = (nq + 2 * nk) * 2 < (size_t)96 << 20 ? 2 : 1;
            fj_inputs in;
            if ((st = fj_inputs_make(ctx, p, sh, sets, NULL, NULL, FJ_INPUTS_TWIN, &in)) != FAJIT_OK)
                break;
            const fajit_attn_desc *ds[MAX_SETS] = {&in.d[0], &in.d[1]};
            fajit_tune_result res;
            st = fajit_attn_check(ctx, ds[0]);
            if (st == FAJIT_OK)
                st = tune_sets(ctx, ds, sets, &in, o, &res);
            fj_inputs_free(ctx->cu, &in);
            done++;
            if (st == FAJIT_OK && fn)
                fn(user, &res);
            fj_spec_progress(ctx, t0, done, total, p, sh);
        }
    }
    fj_spec_free(&sp);
    return st;
}
