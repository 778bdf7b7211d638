/* dispatch.c - the choice for a validated descriptor: the kernel family (the registry,
 * src/families, past quarantined ones, with the LAZY validation gate) and configuration (a
 * tuning row if the cache has one for this GPU class, else the family's default), FALLBACK's
 * stand-ins and background compiles, describe/explain, the workspace size, and the entry
 * points. The plan table and its runs are plans.c, loading and launching kplan.c, the
 * problem's names problem.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../autotune/spec.h"

/*------ choice ------*/

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

/* The family for d on t: the registry's choice, passing over families quarantined for d's
 * model-feature set (each validated first for that set under LAZY when it has no verdict
 * yet; not for a feature the family has not run with while FAJIT_MODEL_FEATURES is off:
 * the call is refused anyway). */
static const fj_family *pick_family(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                                    int want, gate *g)
{
    const fj_family *skip[FJ_MAX_VERDICTS];
    const unsigned fset = fj_feature_set(d);
    for (int n = 0;;) {
        const fj_family *f = fj_family_choose_except(d, t, want, skip, n);
        const int may_validate = f && g && (!(fj_features(d) & ~f->ran_features) ||
                                            ctx->features_on);
        if (may_validate && (g->lazy == 1 || (g->lazy == 2 && f->status_note)))
            fj_validate_first_use(ctx, f, fset, g->stream);
        if (!f || n == FJ_MAX_VERDICTS || !fj_quarantined(ctx, t, f, fset))
            return f;
        if (g && !g->skipped)
            g->skipped = f;
        skip[n++] = f;
    }
}

/* The dispatch decision for d on target t: the exact configuration (tuned if a row exists for
 * the context's own target and its family is not quarantined) and the default one (equal
 * when nothing is tuned). The reference kernel's is fj_choose_reference. g may be NULL. */
static fajit_status choose(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                           fj_kcfg *exact, fj_kcfg *dflt, gate *g)
{
    fj_kcfg tc;
    int want = (int)ctx->opts.family;
    const fj_family *f = pick_family(ctx, t, d, want, g);
    if (!f && fj_features(d)) {
        char names[128];
        fj_feature_names(fj_features(d), names, sizeof names);
        return fj_fail(ctx, FAJIT_UNSUPPORTED, "no kernel family of this fajit serves %s with "
                       "%s on sm_%d%s (docs/usage.md lists which family serves which)",
                       d->block_table ? "paged K/V" : "this problem", names, t->sm,
                       t->arch_a ? "a" : "");
    }
    FJ_RETURN_IF(!f, ctx, FAJIT_UNSUPPORTED, "no kernel family computes %s for this problem "
                 "on sm_%d%s", fajit_op_name(d->op) ? fajit_op_name(d->op) : "?", t->sm, "");
    if ((fj_features(d) & ~f->ran_features) && !ctx->features_on) {
        char names[128];
        fj_feature_names(fj_features(d) & ~f->ran_features, names, sizeof names);
        return fj_fail(ctx, FAJIT_UNSUPPORTED, "the %s kernels with %s are compiled but have "
                       "not run on a GPU yet (nor have their GPU tests): set "
                       "FAJIT_MODEL_FEATURES=on to use them", f->name, names);
    }
    f->default_cfg(d, t, dflt);
    *exact = *dflt;
    if (t->sm == ctx->cc && tuned_config(ctx, d, t, &tc) &&
        (want == FAJIT_FAMILY_AUTO || want == tc.fam->id) &&
        !fj_quarantined(ctx, t, tc.fam, fj_feature_set(d)))
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
    return choose(ctx, t, d, c, dc, g);
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
    const unsigned fset = fj_feature_set(d);
    char set[64];
    fj_verdict v;
    fj_feature_set_name(fset, set, sizeof set);
    if (g.skipped && at < len && fj_verdict_state(ctx, g.skipped, fset, &v) == FJ_VS_FAIL)
        at += (size_t)snprintf(buf + at, len - at, "; family %s is QUARANTINED on this GPU "
                               "class%s%s (failed validation at %s: %s)", g.skipped->name,
                               fset ? " for " : "", set, v.failed_case, v.error);
    if (at < len)
        fj_verdict_describe(ctx, &t, c.fam, fset, buf + at, len - at);
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
    FJ_CHECK(choose(ctx, &t, d, &c, &dc, NULL));
    /* Under FALLBACK the default may serve first: enough for either. */
    fj_kplan_workspace(&c, d, &t, &ws);
    fj_kplan_workspace(&dc, d, &t, &wd);
    size_t a = ws.scratch_bytes ? fj_ws_counter_span(&ws) + ws.scratch_bytes : ws.counter_bytes;
    size_t b = wd.scratch_bytes ? fj_ws_counter_span(&wd) + wd.scratch_bytes : wd.counter_bytes;
    *bytes = a > b ? a : b;
    return FAJIT_OK;
}

/*------ FALLBACK: stand-ins and background compiles ------*/

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
                (!best || f->rank > best->rank) && !fj_quarantined(ctx, &t, f, fj_feature_set(d)))
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

/* The choice with the validation gate (LAZY, or WARM for a family with a status note),
 * given the call's stream. */
static fajit_status choose_gated(fajit_ctx *ctx, const fj_target *t, const fajit_attn_desc *d,
                                 fj_kcfg *exact, fj_kcfg *dflt, void *stream)
{
    gate g = {ctx->opts.validate == FAJIT_VALIDATE_LAZY   ? 1
              : ctx->opts.validate == FAJIT_VALIDATE_WARM ? 2
                                                          : 0,
              stream, NULL};
    return choose(ctx, t, d, exact, dflt, &g);
}

static const fj_chooser dispatch_chooser = {choose_gated, stand_in, start_background};

fajit_status fajit_attn_fwd(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    fajit_attn_desc ld;   /* (NULL ctx: validation, then INVALID_ARGUMENT) */
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    return fj_plan_run(ctx, &ld, stream, 0, &dispatch_chooser);
}

fajit_status fajit_attn_fwd_reference(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream)
{
    fajit_attn_desc ld;   /* (NULL ctx: validation, then INVALID_ARGUMENT) */
    FJ_CHECK(fj_desc_import(ctx, d, &ld));
    return fj_plan_run(ctx, &ld, stream, 1, &fj_reference_chooser);
}
