/* problem.c - what a problem and a target are called: the signature and shape bucket of a
 * descriptor in the tuning table (with the families' bucket suffixes), the plan key's
 * bucket index, and the compile target of a context or of a named arch. */
#include <stdio.h>
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
    p.features = (d->softcap > 0.f ? FJ_PROBLEM_SOFTCAP : 0u) |
                 (d->sinks ? FJ_PROBLEM_SINKS : 0u) | (d->alibi_slopes ? FJ_PROBLEM_ALIBI : 0u);
    p.head_dim_v = d->head_dim_v == d->head_dim ? 0 : d->head_dim_v;
    p.kv_dtype = (int)d->kv_dtype;
    if (fj_tune_signature(&p, sig, n) != 0 && n)
        sig[0] = 0;
}

void fj_problem_features(const fj_problem *p, fajit_attn_desc *d)
{
    const float *stand_in = (const float *)(uintptr_t)256;
    d->softcap = p->features & FJ_PROBLEM_SOFTCAP ? 30.f : 0.f;
    d->sinks = p->features & FJ_PROBLEM_SINKS ? stand_in : NULL;
    d->alibi_slopes = p->features & FJ_PROBLEM_ALIBI ? stand_in : NULL;
    d->head_dim_v = p->head_dim_v;
    d->kv_dtype = (fajit_kv_dtype)p->kv_dtype;
    d->k_descale = d->v_descale = p->kv_dtype ? stand_in : NULL;
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

/*------ targets ------*/

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
