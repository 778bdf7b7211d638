/* params.c - see params.h. */
#include <stdio.h>
#include <string.h>

#include "params.h"

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

fajit_status fj_grid_args(const fajit_attn_desc *d, int block_m, fj_args *a, char *why,
                          size_t n)
{
    fj_attn_params p;
    fj_params_from_desc(d, &p);
    a->grid[0] = (unsigned)fj_tiles(d->seqlen_q, block_m);
    a->grid[1] = (unsigned)d->heads_q;
    a->grid[2] = (unsigned)d->batch;
    const char *full = fj_args_push(a, &p, sizeof p, 8) != 0 ? "attention"
                       : fj_feat_push(d, a) != 0               ? "feature"
                                                               : NULL;
    if (full)
        snprintf(why, n, "the %s parameters exceed the argument block", full);
    return full ? FAJIT_UNSUPPORTED : FAJIT_OK;
}

/*------ model features ------*/

/* (the runtime features: those fj_feat_params carries) */
static int has_params(const fajit_attn_desc *d)
{
    return (fj_features(d) & (FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI |
                              FJ_FEAT_KV_FP8)) != 0;
}

void fj_feat_defines(const fajit_attn_desc *d, char *out, size_t n)
{
    const unsigned f = fj_features(d);
    if (!n)
        return;
    char dv[40] = "";
    if (f & FJ_FEAT_HDIM_V)
        snprintf(dv, sizeof dv, "#define FJ_HEAD_DIM_V %d\n", d->head_dim_v);
    snprintf(out, n, "%s%s%s%s%s", f & FJ_FEAT_SOFTCAP ? "#define FJ_SOFTCAP 1\n" : "",
             f & FJ_FEAT_SINKS ? "#define FJ_SINKS 1\n" : "",
             f & FJ_FEAT_ALIBI ? "#define FJ_ALIBI 1\n" : "",
             d->kv_dtype == FAJIT_KV_E4M3   ? "#define FJ_KV_FP8 1\n"
             : d->kv_dtype == FAJIT_KV_E5M2 ? "#define FJ_KV_FP8 2\n"
                                            : "", dv);
}

void fj_feat_tag(const fajit_attn_desc *d, char *out, size_t n)
{
    const unsigned f = fj_features(d);
    if (!n)
        return;
    char dv[16] = "";
    if (f & FJ_FEAT_HDIM_V)
        snprintf(dv, sizeof dv, " dv%d", d->head_dim_v);
    snprintf(out, n, "%s%s%s%s%s", d->kv_dtype == FAJIT_KV_E4M3   ? " kv-e4m3"
                                 : d->kv_dtype == FAJIT_KV_E5M2 ? " kv-e5m2"
                                                                : "",
             f & FJ_FEAT_SOFTCAP ? " softcap" : "", f & FJ_FEAT_SINKS ? " sinks" : "",
             f & FJ_FEAT_ALIBI ? " alibi" : "", dv);
}

void fj_feat_params_from_desc(const fajit_attn_desc *d, fj_feat_params *f)
{
    memset(f, 0, sizeof *f);
    f->sinks = (uintptr_t)d->sinks;
    f->alibi = (uintptr_t)d->alibi_slopes;
    f->alibi_batch_stride = d->alibi_batch_stride;
    f->k_descale = (uintptr_t)d->k_descale, f->v_descale = (uintptr_t)d->v_descale;
    f->descale_batch_stride = d->descale_batch_stride;
    f->descale_head_stride = d->descale_head_stride;
    if (d->softcap > 0.f)
        f->softcap = d->softcap, f->softcap_inv = 1.f / d->softcap;
}

int fj_feat_push(const fajit_attn_desc *d, fj_args *a)
{
    if (!has_params(d))
        return 0;
    fj_feat_params f;
    fj_feat_params_from_desc(d, &f);
    return fj_args_push(a, &f, sizeof f, 8);
}
