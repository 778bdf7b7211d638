/* plans.c - the context's plan table: the key of a problem's plan (what its choice depends
 * on, with the families' plan class), its bucket, and retiring and freeing the plans. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

fj_plan_key fj_plan_key_of(const fajit_ctx *ctx, int ref, const fajit_attn_desc *d)
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
        paged ? d->page_size : 0, pc.split_class, pc.other,
        (int)(fj_features(d) | (unsigned)d->kv_dtype << 8 | (unsigned)d->head_dim_v << 12)};
    return k;
}

unsigned fj_plan_bucket(const fj_plan_key *k)
{
    uint64_t h = k->bits ^ (uint64_t)(unsigned)k->gqa << 40 ^
                 (uint64_t)(unsigned)k->window_left * 0x100000001b3ull ^
                 (uint64_t)(unsigned)k->window_right << 17 ^
                 (uint64_t)(unsigned)k->page_size * 0xff51afd7ed558ccdull ^
                 (uint64_t)(unsigned)k->other << 52 ^ (uint64_t)(unsigned)k->feat << 24;
    return (unsigned)(h * 0x9E3779B97F4A7C15ull >> 58) % FJ_PLAN_BUCKETS;
}

int fj_plan_same(const fj_plan_key *a, const fj_plan_key *b)
{
    return a->bits == b->bits && a->gqa == b->gqa && a->window_left == b->window_left &&
           a->window_right == b->window_right && a->page_size == b->page_size &&
           a->split_class == b->split_class && a->other == b->other && a->feat == b->feat;
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

/*------ running a plan ------*/

/* The reference kernel's configuration for d on t (no tuning, no gate). */
static fajit_status choose_reference(fajit_ctx *ctx, const fj_target *t,
                                     const fajit_attn_desc *d, fj_kcfg *exact, fj_kcfg *dflt,
                                     void *stream)
{
    (void)stream;
    const fj_family *f = fj_family_choose(d, t, FAJIT_FAMILY_REF);
    if (f && f->id != FAJIT_FAMILY_REF)
        f = NULL;   /* the oracle or nothing */
    FJ_RETURN_IF(!f, ctx, FAJIT_UNSUPPORTED, "no kernel family computes %s for this problem "
                 "on sm_%d%s", fajit_op_name(d->op) ? fajit_op_name(d->op) : "?", t->sm,
                 " with the reference kernel (it does not read paged K/V)");
    f->default_cfg(d, t, dflt);
    *exact = *dflt;
    return FAJIT_OK;
}

const fj_chooser fj_reference_chooser = {choose_reference, NULL, NULL};

/* Builds the plan for a signature under the context's policies (the compile policy; the
 * chooser's validation gate, given the call's stream). */
static fajit_status make_plan(fajit_ctx *ctx, const fajit_attn_desc *d, const fj_chooser *ch,
                              const fj_plan_key *key, void *stream, fj_plan **out)
{
    const fj_target t = fj_target_of(ctx, NULL);
    fj_kcfg c, dc;
    FJ_CHECK(ch->choose(ctx, &t, d, &c, &dc, stream));
    fj_plan *p = calloc(1, sizeof *p);
    FJ_RETURN_IF(!p, ctx, FAJIT_OUT_OF_MEMORY, "allocating a plan");
    p->key = *key;
    unsigned flags = ctx->opts.policy == FAJIT_POLICY_BLOCKING ? FJ_KF_SERVING : FJ_KF_NO_COMPILE;
    p->first.cfg = c;
    fajit_status st = fj_kplan_load(ctx, &p->first, d, flags);
    if (st == FAJIT_CACHE_MISS && ctx->opts.policy == FAJIT_POLICY_FALLBACK) {
        if (ch->stand_in && ch->stand_in(ctx, d, &c, &p->first)) {
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
        ch->background(ctx, p, d);
    }
    fj_log(ctx, FAJIT_LOG_DEBUG, "dispatch: %s on %s (%d registers)", p->first.ks.v[0].name,
           ctx->arch, p->first.k[0]->regs);
    *out = p;
    return FAJIT_OK;
}

fajit_status fj_plan_run(fajit_ctx *ctx, const fajit_attn_desc *d, void *stream, int ref,
                         const fj_chooser *ch)
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

    const fj_plan_key key = fj_plan_key_of(ctx, ref, d);
    const unsigned b = fj_plan_bucket(&key);
    pthread_mutex_lock(&ctx->lock);
    fj_plan *p = ctx->plans[b];
    while (p && !fj_plan_same(&p->key, &key))
        p = p->next;
    pthread_mutex_unlock(&ctx->lock);
    if (p) {
        ctx->hits_memory++;
    } else {
        FJ_CHECK(make_plan(ctx, d, ch, &key, stream, &p));
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
