/* target.h - what the families share about a target beyond fj_target: the per-arch shared
 * memory (src/autotune/target.h, which the configuration rules use too) and the 4-D tensor
 * maps of Q, K and V that the Hopper and Blackwell kernels load by TMA. */
#ifndef FJ_FAMILY_TARGET_H
#define FJ_FAMILY_TARGET_H

#include <stddef.h>

#include "family.h"
#include "../autotune/target.h"
#include "../kernels_src/fajit_params.h"

/* One 4-D tensor map {head_dim, rows, heads, batch} of 16-bit elements with the given
 * strides (elements), box {64, box_rows, 1, 1}, 128-byte swizzle, zero fill; `name` ("Q")
 * in the reason. 0, or -1 with a reason (fj_tma_encode's). */
int fj_tmap_encode_4d(const fj_cuda *cu, fj_tmap *out, int data_type, fj_u64 addr, int head_dim,
                      long long rows, long long heads, long long batch, long long row_stride,
                      long long head_stride, long long batch_stride, unsigned box_rows,
                      const char *name, char *why, size_t n);

/* The Q, K, V tensor maps of `p` into out[0..2]: 4-D {head_dim, rows, heads, batch},
 * 16-bit elements, box {64, box_q (Q) or box_kv (K, V), 1, 1}, 128-byte swizzle, zero
 * fill. Fixed length: rows = seqlen_q / seqlen_k. Varlen (p->cu_seqlens_q != 0): rows =
 * total_q / total_k (the packed row counts, which the host must pass), batch 1. V's map has
 * head_dim_v columns (0: p->head_dim). 0, or -1 with a reason (fj_tma_encode's). */
int fj_qkv_encode_tmaps(const fj_cuda *cu, const fj_attn_params *p, int dtype, int box_q,
                        int box_kv, long long total_q, long long total_k, int head_dim_v,
                        fj_tmap out[3], char *why, size_t n);

#endif /* FJ_FAMILY_TARGET_H */
