/* params.c - see params.h. */
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

fajit_status fj_grid_args(const fajit_attn_desc *d, int block_m, fj_args *a)
{
    fj_attn_params p;
    fj_params_from_desc(d, &p);
    a->grid[0] = (unsigned)fj_tiles(d->seqlen_q, block_m);
    a->grid[1] = (unsigned)d->heads_q;
    a->grid[2] = (unsigned)d->batch;
    return fj_args_push(a, &p, sizeof p, 8) == 0 ? FAJIT_OK : FAJIT_UNSUPPORTED;
}
