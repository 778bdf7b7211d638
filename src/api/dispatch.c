/* dispatch.c - from a validated descriptor to its launches: the problem signature and shape
 * bucket, the choice of kernel family (the registry, src/families) and configuration (a
 * tuning row if the cache has one for this GPU class, else the family's default), the plan
 * cache that makes a warm call one lookup, the compile policies, the workspace, and the
 * launches of a plan. */
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
    p.op = (int)d->op;
    p.dtype = d->dtype;
    p.head_dim = d->head_dim;
    p.heads_q = d->heads_q;
    p.heads_kv = d->heads_kv;
    p.mask = d->mask;
    p.window_left = d->mask == FAJIT_MASK_WINDOW ? d->window_left : -1;
    p.window_right = d->mask == FAJIT_MASK_WINDOW ? d->window_right : -1;
    p.page_size = d->block_table ? d->page_size : 0;
    if (fj_tune_signature(&p, sig, n) != 0 && n)
        sig[0] = 0;
}

void fj_desc_bucket(const fajit_attn_desc *d, int sm_count, char *bucket, size_t n)
{
    int sq = d->seqlen_q > 0 ? d->seqlen_q : 1, sk = d->seqlen_k > 0 ? d->seqlen_k : 1;
    char base[FJ_BUCKET_LEN], suffix[FJ_BUCKET_LEN];
    int r = fj_shape_bucket(sq, sk, base, sizeof base) == 0 &&
                    fj_family_bucket_suffix(d, sm_count, suffix, sizeof suffix) == 0
                ? snprintf(bucket, n, "%s%s", base, suffix) : -1;
    if ((r < 0 || (size_t)r >= n) && n)
        bucket[0] = 0;
}

/* A small integer that changes exactly where fj_shape_bucket's string does (checked by
 * the unit suite), so the hot path never formats strings. */
int fj_bucket_index(int seqlen_q, int seqlen_k)
{
    const int spec = seqlen_q > 1 && seqlen_q <= 16, by_k = seqlen_q <= 16;
    int len = by_k ? seqlen_k : seqlen_q, i = 0;
    for (int top = 512; len > top && i < 6; top <<= 1)
        i++;
    if (!spec)
        return (seqlen_q <= 1) * 8 + i;
    return 16 + (seqlen_q <= 4 ? 0 : seqlen_q <= 8 ? 1 : 2) * 8 + i;
}

/*------ choice ------*/

int fj_arch_is_a(const char *arch)
{
    size_t n = arch ? strlen(arch) : 0;
    return n > 0 && arch[n - 1] == 'a';
}

fj_target fj_target_of(const fajit_ctx *ctx, const char *arch)
{
    fj_target t = {ctx->cc, fj_arch_is_a(ctx->arch), ctx->sm_count, ctx->opts.checked,
                   ctx->paged_hopper, &ctx->fopts};
    if (arch)
        t = (fj_target){fj_arch_sm(arch), fj_arch_is_a(arch), 0, ctx->opts.checked,
                        ctx->paged_hopper, &ctx->fopts};
    return t;
}

/* The tuned configuration for d on this context's GPU class, if the cache has one that
 * serves d. A row of a family that does not serve this problem (e.g. a winner whose family
 * needs the varlen totals, asked without them) is expected and passed over quietly; one
 * that it serves but whose configuration fails the family's check is reported. */
static int tuned_config(fajit_ctx *ctx, const fajit_attn_desc *d, const fj_target *t, fj_kcfg *c)
{
    char sig[128], bucket[FJ_DESC_BUCKET_LEN], why[160] = "";
    fj_tune_row row;
    if (!ctx->cu)
        return 0;
    fj_desc_signature(d, sig, sizeof sig);
    fj_desc_bucket(d, ctx->sm_count, bucket, sizeof bucket);
    if (!fj_cache_tune_get(ctx->cache, ctx->gpu_name, ctx->arch, ctx->sm_count, sig, bucket,
                           &row))
        return 0;
    int parsed = fj_kcfg_parse(row.config, c) == 0;
    int serves = parsed && c->fam->op == (int)d->op && c->fam->applies(d, t);
    int ok = serves && c->fam->check(c, d, t, why, sizeof why) == 0;
    if (!ok && (!parsed || serves))
        fj_log(ctx, FAJIT_LOG_WARN, "ignoring tuning row %s/%s: config '%s' does not apply%s%s",
               sig, bucket, row.config, why[0] ? ": " : "", why);
    fj_tune_row_free(&row);
    return ok;
}

/* What the family choice did besides choosing: whether the first-use gate may validate (plans
 * only: describe and the workspace query never run kernels), on which stream, and the first
 * family it passed over as quarantined (describe names it). lazy: 1 (FAJIT_VALIDATE=lazy)
 * every family without a verdict; 2 (warm, the default) only a family with a status note
 * (compiled but never run on hardware: FA4), whose first use on a GPU class is exactly what
 * the gate is for; 0 none. */
typedef struct gate {
    int lazy;
    void *stream;
    const fj_family *skipped;
} gate;

/* The family for d on t: the registry's choice, passing over quarantined families (each
 * validated first under LAZY when it has no verdict yet). */
static const fj_family *pick_family(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                                    int want, gate *g)
{
    const fj_family *skip[FJ_MAX_VERDICTS];
    for (int n = 0;;) {
        const fj_family *f = fj_family_choose_except(d, t, want, skip, n);
        if (f && g && (g->lazy == 1 || (g->lazy == 2 && f->status_note)))
            fj_validate_first_use(ctx, f, g->stream);
        if (!f || n == FJ_MAX_VERDICTS || !fj_quarantined(ctx, t, f))
            return f;
        if (g && !g->skipped)
            g->skipped = f;
        skip[n++] = f;
    }
}

/* The dispatch decision for d on target t: the exact configuration (tuned if a row exists for
 * the context's own target and its family is not quarantined) and the default one (equal
 * when nothing is tuned). `ref` forces the reference family. g may be NULL. */
static fajit_status choose(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                           int ref, fj_kcfg *exact, fj_kcfg *dflt, gate *g)
{
    fj_kcfg tc;
    int want = ref ? FAJIT_FAMILY_REF : (int)ctx->opts.family;
    const fj_family *f = ref ? fj_family_choose(d, t, want) : pick_family(ctx, t, d, want, g);
    if (ref && f && f->id != FAJIT_FAMILY_REF)
        f = NULL;   /* the oracle or nothing */
    FJ_RETURN_IF(!f, ctx, FAJIT_UNSUPPORTED, "no kernel family computes %s for this problem "
                 "on sm_%d%s", fajit_op_name(d->op) ? fajit_op_name(d->op) : "?", t->sm,
                 ref ? " with the reference kernel (it does not read paged K/V)" : "");
    f->default_cfg(d, t, dflt);
    *exact = *dflt;
    if (!ref && t->sm == ctx->cc && tuned_config(ctx, d, t, &tc) &&
        (want == FAJIT_FAMILY_AUTO || want == tc.fam->id) && !fj_quarantined(ctx, t, tc.fam))
        *exact = tc;
    return FAJIT_OK;
}

/* The describe/explain calls: checks a valid problem and a target (named, or the
 * context's device), then makes the dispatch decision for them. */
static fajit_status describe_choice(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                    const char *buf, size_t len, fj_target *t, fj_kcfg *c,
                                    fj_kcfg *dc, gate *g)
{
    FJ_RETURN_IF(!ctx || !buf || !len, ctx, FAJIT_INVALID_ARGUMENT,
                 "ctx and buf must not be NULL, len must be > 0");
    FJ_CHECK(fj_desc_check(ctx, d));
    *t = fj_target_of(ctx, arch);
    FJ_RETURN_IF(arch && t->sm < 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "arch must be a target like sm_80, sm_90a or sm_100a, got '%s'", arch);
    FJ_RETURN_IF(!arch && !ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device: name a target (arch)");
    FJ_RETURN_IF(t->sm < 80, ctx, FAJIT_UNSUPPORTED, "fajit needs sm_80 or newer, got sm_%d",
                 t->sm);
    return choose(ctx, t, d, 0, c, dc, g);
}

fajit_status fajit_dispatch_describe(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                     char *buf, size_t len)
{
    fajit_attn_desc ld;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    d = &ld;
    fj_target t;
    fj_kcfg c, dc;
    fj_kernels ks;
    char grid[256];
    gate g = {0, NULL, NULL};
    FJ_CHECK(describe_choice(ctx, arch, d, buf, len, &t, &c, &dc, &g));
    c.fam->kernels(&c, d, &ks);
    c.fam->describe_grid(&c, d, &t, grid, sizeof grid);
    size_t at = 0;
    for (int i = 0; i < ks.n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s (%s)%s%s, %d threads, %d B dynamic "
                               "shared memory, source %s, entry %s", i ? "; then " : "",
                               ks.v[i].name, fj_kcfg_same(&c, &dc) ? "default" : "tuned",
                               i ? "" : ": ", i ? "" : grid, ks.threads[i], ks.dyn_smem[i],
                               ks.v[i].source, ks.v[i].function);
    if (c.fam->status_note && at < len)
        at += (size_t)snprintf(buf + at, len - at, "; note: family %s is %s", c.fam->name,
                               c.fam->status_note);
    fj_verdict v;
    if (g.skipped && at < len && fj_verdict_state(ctx, g.skipped, &v) == FJ_VS_FAIL)
        snprintf(buf + at, len - at, "; family %s is QUARANTINED on this GPU class (failed "
                 "validation at %s: %s)", g.skipped->name, v.failed_case, v.error);
    return FAJIT_OK;
}

fajit_status fj_dispatch_kernels(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                 fj_kernels *ks)
{
    char one[1];
    fj_target t;
    fj_kcfg c, dc;
    FJ_CHECK(describe_choice(ctx, arch, d, one, sizeof one, &t, &c, &dc, NULL));
    c.fam->kernels(&c, d, ks);
    return FAJIT_OK;
}

fajit_status fajit_cache_explain(fajit_ctx *ctx, const char *arch, const fajit_attn_desc *d,
                                 char *buf, size_t len)
{
    fajit_attn_desc ld;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    d = &ld;
    fj_kernels ks;
    FJ_RETURN_IF(!buf || !len, ctx, FAJIT_INVALID_ARGUMENT,
                 "ctx and buf must not be NULL, len must be > 0");
    FJ_CHECK(fj_dispatch_kernels(ctx, arch, d, &ks));
    size_t at = 0;
    for (int i = 0; i < ks.n && at < len; i++) {
        if (i)
            at += (size_t)snprintf(buf + at, len - at, "\n");
        FJ_CHECK(fj_kernel_explain(ctx, &ks.v[i], arch ? arch : ctx->arch, buf + at, len - at));
        at += strlen(buf + at);
    }
    return FAJIT_OK;
}

static void workspace_of(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                         fj_workspace *ws)
{
    memset(ws, 0, sizeof *ws);
    if (c->fam->workspace)
        c->fam->workspace(c, d, t, ws);
}

/* Caller workspace layout: the counters first, the scratch from the next 256 bytes. */
static size_t ws_counter_span(const fj_workspace *ws)
{
    return (ws->counter_bytes + 255) / 256 * 256;
}

fajit_status fajit_attn_workspace_size(fajit_ctx *ctx, const fajit_attn_desc *d, size_t *bytes)
{
    fajit_attn_desc ld;
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    d = &ld;
    FJ_RETURN_IF(!bytes, ctx, FAJIT_INVALID_ARGUMENT, "bytes must not be NULL");
    FJ_CHECK(fj_desc_check(ctx, d));
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "the context has no device");
    fj_target t = fj_target_of(ctx, NULL);
    fj_kcfg c, dc;
    fj_workspace ws, wd;
    FJ_CHECK(choose(ctx, &t, d, 0, &c, &dc, NULL));
    /* Under FALLBACK the default may serve first: enough for either. */
    workspace_of(&c, d, &t, &ws);
    workspace_of(&dc, d, &t, &wd);
    size_t a = ws.scratch_bytes ? ws_counter_span(&ws) + ws.scratch_bytes : ws.counter_bytes;
    size_t b = wd.scratch_bytes ? ws_counter_span(&wd) + wd.scratch_bytes : wd.counter_bytes;
    *bytes = a > b ? a : b;
    return FAJIT_OK;
}

/*------ plans ------*/

static fajit_status load_one(fajit_ctx *ctx, fj_kplan *kp, int i, unsigned flags)
{
    const fj_variant *v = &kp->ks.v[i];
    FJ_CHECK(fj_kernel_get(ctx, v, flags, &kp->k[i]));
    char err[64];
    CUresult r = fj_func_dyn_smem(ctx->cu, kp->k[i]->fn, kp->ks.dyn_smem[i]);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "raising the shared memory of %s to %d: %s", v->name,
                 kp->ks.dyn_smem[i], fj_cuda_errname(ctx->cu, r, err, sizeof err));
    /* The clusters the GPU runs of it. A cluster launch asks for at least half the SM's
     * shared memory, so that each CTA of a cluster has an SM to itself: where two or three
     * fit one SM, a GPC stacks a cluster's CTAs on fewer SMs, halving a streaming kernel's
     * SMs (decode q_len 8, 74 KB CTAs: 1.6-4 us slower on the H200 with clusters of 4-8,
     * also under the SPREAD scheduling policy; dev/decode/NOTES.md, 2026-12-04). */
    if (kp->ks.cluster[i] > 1 && ctx->cc >= 90) {   /* (fj_kplan_load zeroed the fields) */
        const int own = kp->ks.dyn_smem[i], half = ctx->smem_optin / 2 + 1024;
        const int cs = half > own && half < ctx->smem_optin ? half : own;
        if (cs == own || fj_func_dyn_smem(ctx->cu, kp->k[i]->fn, cs) == 0) {
            kp->cluster_smem[i] = cs;
            kp->cluster_max[i] = fj_cluster_probe(ctx->cu, kp->k[i]->fn,
                                                  (unsigned)kp->ks.threads[i], (unsigned)cs,
                                                  kp->ks.cluster[i], kp->cluster_active[i]);
        }
    }
    return FAJIT_OK;
}

/* Loading a module and raising a function's shared memory are not stream work, but while the
 * calling thread captures a stream (CUDA graphs) in global or thread-local mode the driver
 * refuses them and invalidates the capture. A kernel's first use may come inside an
 * application's capture: the thread is in relaxed mode for the loads only. */
fajit_status fj_kplan_load(fajit_ctx *ctx, fj_kplan *kp, const fajit_attn_desc *d,
                           unsigned flags)
{
    const fj_cuda *cu = ctx->cu;
    kp->cfg.fam->kernels(&kp->cfg, d, &kp->ks);
    memset(kp->k, 0, sizeof kp->k);
    memset(kp->cluster_max, 0, sizeof kp->cluster_max);
    memset(kp->cluster_active, 0, sizeof kp->cluster_active);
    memset(kp->cluster_smem, 0, sizeof kp->cluster_smem);
    int mode = FJ_CU_CAPTURE_MODE_RELAXED;
    int swapped = cu->cuThreadExchangeStreamCaptureMode &&
                  cu->cuThreadExchangeStreamCaptureMode(&mode) == 0;
    fajit_status st = FAJIT_OK;
    for (int i = 0; i < kp->ks.n && st == FAJIT_OK; i++)
        st = load_one(ctx, kp, i, flags);
    if (swapped)
        cu->cuThreadExchangeStreamCaptureMode(&mode);
    return st;
}

typedef struct bg_job {
    fajit_ctx *ctx;
    fj_plan *plan;
    fajit_attn_desc d;
} bg_job;

/* FALLBACK: compiles the exact kernels off the caller's thread, then swaps them in. */
static void *bg_compile(void *arg)
{
    bg_job *j = arg;
    fajit_ctx *ctx = j->ctx;
    fj_kplan *better = &j->plan->better;
    if (fj_kplan_load(ctx, better, &j->d, FJ_KF_BACKGROUND) == FAJIT_OK) {
        atomic_store(&j->plan->launch, better);
        fj_log(ctx, FAJIT_LOG_INFO, "fallback: %s ready, swapped in", better->ks.v[0].name);
    } else {
        fj_log(ctx, FAJIT_LOG_WARN, "fallback: background compile of %s failed: %s; the "
               "default kernel stays", better->ks.v[0].name, fajit_errmsg(ctx));
    }
    free(j);
    pthread_mutex_lock(&ctx->bg_lock);
    if (--ctx->bg_running == 0)
        pthread_cond_broadcast(&ctx->bg_done);
    pthread_mutex_unlock(&ctx->bg_lock);
    return NULL;
}

static void start_background(fajit_ctx *ctx, fj_plan *p, const fajit_attn_desc *d)
{
    bg_job *j = malloc(sizeof *j);
    pthread_t t;
    if (!j)
        return;   /* the default kernel simply stays */
    *j = (bg_job){ctx, p, *d};
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

/* FALLBACK: a configuration already in the cache that can serve d while `exact` compiles:
 * the chosen family's shipped configurations (its default first), then the defaults of the
 * other families that serve d, highest rank first. 1 and *kp filled when one is found. */
static int stand_in(fajit_ctx *ctx, const fajit_attn_desc *d, const fj_kcfg *exact,
                    fj_kplan *kp)
{
    enum { MAX = 16 };
    const fj_target t = fj_target_of(ctx, NULL);
    fj_kcfg c[MAX];
    int n = 0;
    exact->fam->default_cfg(d, &t, &c[n++]);
    n += exact->fam->shipped(d, &t, c + n, MAX - 1 - fj_family_count());
    const fj_family *done[8] = {exact->fam};
    for (int nd = 1; nd < 8;) {   /* the other families, by rank */
        const fj_family *best = NULL;
        for (int i = 0; i < fj_family_count(); i++) {
            const fj_family *f = fj_family_at(i);
            int seen = 0;
            for (int k = 0; k < nd; k++)
                seen |= done[k] == f;
            if (!seen && f->rank > FJ_RANK_ORACLE && f->op == (int)d->op && f->applies(d, &t) &&
                (!best || f->rank > best->rank) && !fj_quarantined(ctx, &t, f))
                best = f;
        }
        if (!best)
            break;
        done[nd++] = best;
        best->default_cfg(d, &t, &c[n++]);
    }
    for (int i = 0; i < n; i++) {
        if (fj_kcfg_same(&c[i], exact))
            continue;
        kp->cfg = c[i];
        if (fj_kplan_load(ctx, kp, d, FJ_KF_NO_COMPILE) == FAJIT_OK)
            return 1;
    }
    return 0;
}

/* Builds the plan for a signature under the context's policies (the compile policy; the
 * LAZY validation gate, given the call's stream). */
static fajit_status make_plan(fajit_ctx *ctx, const fajit_attn_desc *d, int ref,
                              const fj_plan_key *key, void *stream, fj_plan **out)
{
    const fj_target t = fj_target_of(ctx, NULL);
    fj_kcfg c, dc;
    gate g = {ctx->opts.validate == FAJIT_VALIDATE_LAZY   ? 1
              : ctx->opts.validate == FAJIT_VALIDATE_WARM ? 2
                                                          : 0,
              stream, NULL};
    FJ_CHECK(choose(ctx, &t, d, ref, &c, &dc, &g));
    fj_plan *p = calloc(1, sizeof *p);
    FJ_RETURN_IF(!p, ctx, FAJIT_OUT_OF_MEMORY, "allocating a plan");
    p->key = *key;
    unsigned flags = ctx->opts.policy == FAJIT_POLICY_BLOCKING ? FJ_KF_SERVING : FJ_KF_NO_COMPILE;
    p->first.cfg = c;
    fajit_status st = fj_kplan_load(ctx, &p->first, d, flags);
    if (st == FAJIT_CACHE_MISS && ctx->opts.policy == FAJIT_POLICY_FALLBACK) {
        if (!ref && stand_in(ctx, d, &c, &p->first)) {
            p->better.cfg = c;   /* a cached kernel now, the exact one when it is ready */
            p->pending = 1;
            st = FAJIT_OK;
        } else {          /* nothing cached could stand in: this call waits for the compile */
            p->first.cfg = c;
            st = fj_kplan_load(ctx, &p->first, d, FJ_KF_SERVING);
        }
    }
    if (st != FAJIT_OK) {
        free(p);
        return st;
    }
    atomic_store(&p->launch, &p->first);
    if (p->pending) {
        fj_kernels want;
        c.fam->kernels(&c, d, &want);
        fj_log(ctx, FAJIT_LOG_INFO, "fallback: %s for now, compiling %s",
               p->first.ks.v[0].name, want.v[0].name);
        start_background(ctx, p, d);
    }
    fj_log(ctx, FAJIT_LOG_DEBUG, "dispatch: %s on %s (%d registers)", p->first.ks.v[0].name,
           ctx->arch, p->first.k[0]->regs);
    *out = p;
    return FAJIT_OK;
}

static fj_plan_key plan_key(const fajit_ctx *ctx, int ref, const fajit_attn_desc *d)
{
    const fj_target t = fj_target_of(ctx, NULL);
    int varlen = d->cu_seqlens_q != NULL, totals = varlen && d->total_q > 0 && d->total_k > 0;
    int win = d->mask == FAJIT_MASK_WINDOW, paged = d->block_table != NULL;
    const fj_plan_class pc = fj_family_plan_class(d, &t);
    fj_plan_key k = {   /* (paged: a paged prefill and a contiguous one take other families) */
        (uint64_t)ref | (uint64_t)varlen << 1 | (uint64_t)totals << 2 | (uint64_t)paged << 3 |
            (uint64_t)d->dtype << 4 | (uint64_t)d->mask << 6 | (uint64_t)d->head_dim << 8 |
            (uint64_t)fj_bucket_index(d->seqlen_q, d->seqlen_k) << 20 |
            (uint64_t)d->op << 32,
        d->heads_q / d->heads_kv, win ? d->window_left : -1, win ? d->window_right : -1,
        paged ? d->page_size : 0, pc.split_class, pc.other};
    return k;
}

static unsigned plan_bucket(const fj_plan_key *k)
{
    uint64_t h = k->bits ^ (uint64_t)(unsigned)k->gqa << 40 ^
                 (uint64_t)(unsigned)k->window_left * 0x100000001b3ull ^
                 (uint64_t)(unsigned)k->window_right << 17 ^
                 (uint64_t)(unsigned)k->page_size * 0xff51afd7ed558ccdull ^
                 (uint64_t)(unsigned)k->other << 52;
    return (unsigned)(h * 0x9E3779B97F4A7C15ull >> 58) % FJ_PLAN_BUCKETS;
}

static int same_key(const fj_plan_key *a, const fj_plan_key *b)
{
    return a->bits == b->bits && a->gqa == b->gqa && a->window_left == b->window_left &&
           a->window_right == b->window_right && a->page_size == b->page_size &&
           a->split_class == b->split_class && a->other == b->other;
}

void fj_plans_retire(fajit_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    for (int b = 0; b < FJ_PLAN_BUCKETS; b++)
        for (fj_plan *p = ctx->plans[b]; p; p = p->next)
            p->key.bits |= 1ull << 63;   /* retired: never matches a live key again */
    pthread_mutex_unlock(&ctx->lock);
}

void fj_plans_free(fajit_ctx *ctx)
{
    for (int i = 0; i < FJ_PLAN_BUCKETS; i++) {
        fj_plan *p = ctx->plans[i];
        while (p) {
            fj_plan *next = p->next;
            free(p);
            p = next;
        }
        ctx->plans[i] = NULL;
    }
}

static fajit_status run(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream, int ref)
{
    FJ_CHECK(fj_desc_check(ctx, d));
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    FJ_RETURN_IF(d->op != FAJIT_OP_FWD, ctx, FAJIT_INVALID_ARGUMENT,
                 "fajit_attn_fwd computes op FAJIT_OP_FWD (0), got %d", (int)d->op);
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE,
                 "the context has no device (FAJIT_DEVICE_NONE): it can only compile");
    char err[64];
    CUresult r = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));

    const fj_plan_key key = plan_key(ctx, ref, d);
    const unsigned b = plan_bucket(&key);
    pthread_mutex_lock(&ctx->lock);
    fj_plan *p = ctx->plans[b];
    while (p && !same_key(&p->key, &key))
        p = p->next;
    pthread_mutex_unlock(&ctx->lock);
    if (p) {
        ctx->hits_memory++;
    } else {
        FJ_CHECK(make_plan(ctx, d, ref, &key, stream, &p));
        pthread_mutex_lock(&ctx->lock);
        p->next = ctx->plans[b];   /* a racing duplicate plan is harmless: same kernel */
        ctx->plans[b] = p;
        pthread_mutex_unlock(&ctx->lock);
    }
    const fj_kplan *kp = atomic_load(&p->launch);
    if (p->pending && kp == &p->first)
        ctx->fallback_launches++;
    FJ_CHECK(fj_kplan_launch(ctx, kp, d, stream));
    ctx->calls++;
    return FAJIT_OK;
}

/* The workspace of one call: from the caller's desc->workspace (held to the plan's whole
 * workspace), else the context's counter ring and stream-ordered scratch, as much of them
 * as this launch uses (fj_family.launch_workspace: e.g. none for a cluster merge). */
static fajit_status take_workspace(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                                   const fj_workspace *whole, void *stream, fj_launch_env *env,
                                   CUdeviceptr *to_free)
{
    char err[64];
    fj_workspace used = *whole;
    const fj_workspace *ws = d->workspace ? whole : &used;
    if (!d->workspace && kp->cfg.fam->launch_workspace)
        kp->cfg.fam->launch_workspace(&kp->cfg, d, env, &used);
    if (!ws->counter_bytes && !ws->scratch_bytes)
        return FAJIT_OK;
    if (d->workspace) {
        size_t need = ws->scratch_bytes ? ws_counter_span(ws) + ws->scratch_bytes
                                        : ws->counter_bytes;
        FJ_RETURN_IF(d->workspace_bytes < need, ctx, FAJIT_INVALID_ARGUMENT,
                     "workspace_bytes must be at least %zu for %s (fajit_attn_workspace_size), "
                     "got %zu", need, kp->ks.v[0].name, d->workspace_bytes);
        env->counters = ws->counter_bytes ? (CUdeviceptr)(uintptr_t)d->workspace : 0;
        env->scratch = ws->scratch_bytes
                           ? (CUdeviceptr)(uintptr_t)d->workspace + ws_counter_span(ws) : 0;
        return FAJIT_OK;
    }
    const fj_cuda *cu = ctx->cu;
    FJ_RETURN_IF(ws->scratch_bytes && (!cu->cuMemAllocAsync || !cu->cuMemFreeAsync), ctx,
                 FAJIT_UNSUPPORTED, "%s needs %zu B of scratch and the driver lacks "
                 "cuMemAllocAsync: pass desc->workspace", kp->ks.v[0].name, ws->scratch_bytes);
    if (ws->counter_bytes)
        FJ_CHECK(fj_ws_counters(ctx, stream, ws->counter_bytes, &env->counters));
    if (ws->scratch_bytes) {
        CUresult r = cu->cuMemAllocAsync(&env->scratch, ws->scratch_bytes, (CUstream)stream);
        FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuMemAllocAsync(%zu): %s", ws->scratch_bytes,
                     fj_cuda_errname(cu, r, err, sizeof err));
        *to_free = env->scratch;
    }
    return FAJIT_OK;
}

/* Checked mode: zeroed report memory before the launches (synchronous: this mode is for
 * finding bad device-side indices, not for speed). */
static fajit_status take_report(fajit_ctx *ctx, const fj_workspace *ws, fj_launch_env *env)
{
    const fj_cuda *cu = ctx->cu;
    char err[64];
    if (!ws->report_bytes)
        return FAJIT_OK;
    FJ_RETURN_IF(!cu->cuMemAlloc || !cu->cuMemsetD8 || !cu->cuMemcpyDtoH || !cu->cuMemFree ||
                     !cu->cuCtxSynchronize, ctx, FAJIT_UNSUPPORTED,
                 "the checked mode needs cuMemAlloc, cuMemsetD8, cuMemcpyDtoH and "
                 "cuCtxSynchronize in the driver table");
    CUresult r = cu->cuMemAlloc(&env->report, ws->report_bytes);
    if (!r && (r = cu->cuMemsetD8(env->report, 0, ws->report_bytes)) != 0)
        cu->cuMemFree(env->report), env->report = 0;
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "allocating the checked mode's report: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    return FAJIT_OK;
}

/* Checked mode: waits for the launches, reads the report back and asks the family. */
static fajit_status read_report(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                                const fj_workspace *ws, CUdeviceptr report)
{
    const fj_cuda *cu = ctx->cu;
    unsigned char buf[256];
    char err[256];
    CUresult r = cu->cuCtxSynchronize();
    if (!r)
        r = cu->cuMemcpyDtoH(buf, report, ws->report_bytes < sizeof buf ? ws->report_bytes
                                                                         : sizeof buf);
    cu->cuMemFree(report);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "checked mode: waiting for %s: %s",
                 kp->ks.v[0].name, fj_cuda_errname(cu, r, err, sizeof err));
    err[0] = 0;
    fajit_status st = kp->cfg.fam->report(&kp->cfg, d, buf, err, sizeof err);
    return st == FAJIT_OK ? st : fj_fail(ctx, st, "checked mode: %s", err);
}

fajit_status fj_kplan_launch(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                             void *stream)
{
    char err[256];
    if (d->seqlen_q == 0)   /* varlen batch whose sequences are all empty */
        return FAJIT_OK;
    const fj_family *f = kp->cfg.fam;
    const fj_target t = fj_target_of(ctx, NULL);
    fj_workspace ws;
    workspace_of(&kp->cfg, d, &t, &ws);
    fj_launch_env env = {ctx->cu, ctx->sm_count, 0, 0, 0, ctx->cc, {0}, {{0}}, &ctx->fopts};
    for (int i = 0; i < kp->ks.n && t.sm >= 90; i++) {
        env.cluster_max[i] = kp->cluster_max[i];
        memcpy(env.cluster_active[i], kp->cluster_active[i], sizeof env.cluster_active[i]);
    }
    CUdeviceptr scratch = 0;   /* stream-ordered scratch to give back after the launches */
    FJ_CHECK(take_workspace(ctx, kp, d, &ws, stream, &env, &scratch));
    fajit_status st = take_report(ctx, &ws, &env);
    for (int i = 0; i < kp->ks.n && st == FAJIT_OK; i++) {
        fj_args a;
        a.used = 0, a.n = 0, a.cluster = 0;
        err[0] = 0;
        st = f->launch_args(&kp->cfg, i, d, &env, &a, err, sizeof err);
        if (st != FAJIT_OK) {
            st = fj_fail(ctx, st, "%s: %s", kp->ks.v[i].name, err);
            break;
        }
        if (!a.grid[0] || !a.grid[1] || !a.grid[2])
            continue;
        const int smem = a.cluster > 1 && kp->cluster_smem[i] > kp->ks.dyn_smem[i]
                             ? kp->cluster_smem[i] : kp->ks.dyn_smem[i];
        CUresult r = fj_launch(ctx->cu, kp->k[i]->fn, a.grid, (unsigned)kp->ks.threads[i],
                               (unsigned)smem, (CUstream)stream, a.ptr,
                               kp->ks.pdl[i] && t.sm >= 90, a.cluster);
        if (r)
            st = fj_fail(ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel(%s): %s", kp->ks.v[i].name,
                         fj_cuda_errname(ctx->cu, r, err, sizeof err));
    }
    if (scratch)
        ctx->cu->cuMemFreeAsync(scratch, (CUstream)stream);
    if (env.report)
        st = st == FAJIT_OK ? read_report(ctx, kp, d, &ws, env.report)
                            : (ctx->cu->cuMemFree(env.report), st);
    return st;
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
