/* cpu_ref.h - float64 attention on the host over the parameter block's layout: the
 * ground truth of the gpu suite. Host arrays; 16-bit inputs as raw bits. */
#ifndef FJ_CPU_REF_H
#define FJ_CPU_REF_H
#include <stdint.h>
#include "fajit_params.h"

float fj_half_to_f32(uint16_t h, int dtype);
uint16_t fj_f32_to_half(float f, int dtype);

/* p's pointers are host pointers (q, k, v: uint16_t; cu_seqlens: int32_t). Writes
 * o[...] as double in O's layout (o_out, indexed with p's o strides) and, if lse_out,
 * natural-log LSE in the kernel's LSE layout. */
void fj_cpu_attention(const fj_attn_params *p, int dtype, double *o_out, double *lse_out);
/* The same with the model features of f (host pointers: sinks [heads_q], alibi slopes at
 * b * alibi_batch_stride + h; softcap > 0 on; NULL: none, as fj_cpu_attention):
 * s = scale * q.k, softcap: s = cap * tanh(s / cap), ALiBi: s -= slope * |i + sk - sq - j|,
 * then the mask; a sink adds exp(sink) to the row's denominator (no value): a row without
 * visible keys gets O = 0 and LSE = sink. head_dim_v: the columns of V and O where they
 * differ from p->head_dim (Q's and K's; 0: p->head_dim); O's columns past it are not
 * written. */
void fj_cpu_attention_feat(const fj_attn_params *p, int dtype, const fj_feat_params *f,
                           int head_dim_v, double *o_out, double *lse_out);

/* What fj_cpu_attn_cond_rescale did, summed over all rows: key blocks whose maximum grew
 * by more than the threshold (O and l rescaled), blocks whose maximum grew by at most the
 * threshold (rescaling skipped: exponentials against the stale maximum), and the largest
 * probability it produced (at most 2^threshold). */
typedef struct fj_cond_rescale_stats {
    long rescaled, skipped;
    float p_max;
} fj_cond_rescale_stats;

/* The FA4-design forward's arithmetic, emulated in float32 over p's layout (host
 * pointers as for fj_cpu_attention): fp32 scores, key blocks of block_n walked from the
 * last to the first as the kernels do, online softmax in log2 units whose running maximum
 * is raised only when a block's maximum exceeds it by more than `threshold` (0: the
 * classic online softmax; 8: FA4), probabilities rounded to the dtype before P@V, O and
 * the row sum in fp32, exact (double) final normalization, O rounded to the dtype as the
 * kernel stores it. Exponentials use exp2f (standing in for MUFU ex2) except for keys j
 * with poly_every > 0 and j % poly_every == 0, which use fj_exp2_poly (fj_exp2.cuh).
 * Writes o_out (float, O's layout and strides); st may be NULL. */
void fj_cpu_attn_cond_rescale(const fj_attn_params *p, int dtype, float threshold, int block_n,
                              int poly_every, float *o_out, fj_cond_rescale_stats *st);
#endif
