/* target.c - the Q/K/V tensor maps the Hopper (fa3.c) and Blackwell (fa4.c) families encode
 * per call (target.h). */
#include "target.h"

int fj_tmap_encode_4d(const fj_cuda *cu, fj_tmap *out, int data_type, fj_u64 addr, int head_dim,
                      long long rows, long long heads, long long batch, long long row_stride,
                      long long head_stride, long long batch_stride, unsigned box_rows,
                      const char *name, char *why, size_t n)
{
    fj_tma_tile t = {
        .name = name, .addr = addr, .data_type = data_type, .elem_bytes = 2, .rank = 4,
        .dim = {head_dim, rows, heads, batch},
        .stride = {row_stride, head_stride, batch_stride},
        .box = {64, box_rows, 1, 1},
        .swizzle = FJ_TMA_SWIZZLE_128B, .l2_promotion = FJ_TMA_L2_256B,
    };
    return fj_tma_encode(cu, &t, out, why, n);
}

int fj_qkv_encode_tmaps(const fj_cuda *cu, const fj_attn_params *p, int dtype, int box_q,
                        int box_kv, long long total_q, long long total_k, int head_dim_v,
                        fj_tmap out[3], char *why, size_t n)
{
    const int dt = dtype == FJ_DT_BF16 ? FJ_TMA_BF16 : FJ_TMA_F16;
    const int varlen = p->cu_seqlens_q != 0;
    const long long rq = varlen ? total_q : p->seqlen_q, rk = varlen ? total_k : p->seqlen_k;
    const long long nb = varlen ? 1 : p->batch;
    if (fj_tmap_encode_4d(cu, &out[0], dt, p->q, p->head_dim, rq, p->heads_q, nb,
                          p->q_row_stride, p->q_head_stride, p->q_batch_stride,
                          (unsigned)box_q, "Q", why, n) ||
        fj_tmap_encode_4d(cu, &out[1], dt, p->k, p->head_dim, rk, p->heads_kv, nb,
                          p->k_row_stride, p->k_head_stride, p->k_batch_stride,
                          (unsigned)box_kv, "K", why, n) ||
        fj_tmap_encode_4d(cu, &out[2], dt, p->v, head_dim_v ? head_dim_v : p->head_dim, rk,
                          p->heads_kv, nb, p->v_row_stride, p->v_head_stride, p->v_batch_stride,
                          (unsigned)box_kv, "V", why, n))
        return -1;
    return 0;
}

