/* cpu_ref.c - the float64 oracle. Deliberately plain: two passes per row (max, then sum
 * and weighted values), the mask written out as the formula of fajit_params.h. Also a
 * float32 emulation of the FA4-design online softmax with conditional rescaling, whose
 * error the unit suite measures against the oracle (tests/test_sm100_host.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ref.h"
#include "../src/kernels_src/fj_exp2.cuh"

float fj_half_to_f32(uint16_t h, int dtype)
{
    if (dtype == FJ_DT_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

uint16_t fj_f32_to_half(float f, int dtype)
{
    uint16_t h;
    if (dtype == FJ_DT_BF16) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            return 0x7fc0;
        u += 0x7fff + ((u >> 16) & 1);   /* round to nearest even */
        return (uint16_t)(u >> 16);
    }
    _Float16 x = (_Float16)f;
    memcpy(&h, &x, 2);
    return h;
}

/* Sequence b: its lengths and the element offsets of its first Q, O, K and V rows (packed
 * rows with cu_seqlens, else the batch strides). */
typedef struct ref_seq {
    int sq, sk;
    int64_t q0, o0, k0, v0;
} ref_seq;
static ref_seq seq_of(const fj_attn_params *p, int b)
{
    const int32_t *cq = (const int32_t *)(uintptr_t)p->cu_seqlens_q;
    const int32_t *ck = (const int32_t *)(uintptr_t)p->cu_seqlens_k;
    ref_seq s;
    s.sq = cq ? cq[b + 1] - cq[b] : p->seqlen_q;
    s.sk = cq ? ck[b + 1] - ck[b] : p->seqlen_k;
    s.q0 = cq ? (int64_t)cq[b] * p->q_row_stride : b * p->q_batch_stride;
    s.o0 = cq ? (int64_t)cq[b] * p->o_row_stride : b * p->o_batch_stride;
    s.k0 = cq ? (int64_t)ck[b] * p->k_row_stride : b * p->k_batch_stride;
    s.v0 = cq ? (int64_t)ck[b] * p->v_row_stride : b * p->v_batch_stride;
    return s;
}

/* Whether key j is visible to query i of a sequence of sq queries and sk keys: the mask of
 * fajit_params.h, written out. */
static int visible(const fj_attn_params *p, int i, int j, int sq, int sk)
{
    const int shift = i + sk - sq;
    return (p->window_left < 0 || j >= shift - p->window_left) &&
           (p->window_right < 0 || j <= shift + p->window_right);
}

void fj_cpu_attention(const fj_attn_params *p, int dtype, double *o_out, double *lse_out)
{
    fj_cpu_attention_feat(p, dtype, NULL, 0, o_out, lse_out);
}

void fj_cpu_attention_feat(const fj_attn_params *p, int dtype, const fj_feat_params *f,
                           int head_dim_v, double *o_out, double *lse_out)
{
    const float *sinks = f ? (const float *)(uintptr_t)f->sinks : NULL;
    const float *alibi = f ? (const float *)(uintptr_t)f->alibi : NULL;
    const double cap = f && f->softcap > 0.f ? f->softcap : 0;
    const uint16_t *Q = (const uint16_t *)(uintptr_t)p->q;
    const uint16_t *K = (const uint16_t *)(uintptr_t)p->k;
    const uint16_t *V = (const uint16_t *)(uintptr_t)p->v;
    const int32_t *cq = (const int32_t *)(uintptr_t)p->cu_seqlens_q;
    const int d = p->head_dim, group = p->heads_q / p->heads_kv;
    const int dv = head_dim_v > 0 ? head_dim_v : d;
    int max_sk = 0;
    for (int b = 0; b < p->batch; b++) {
        const int sk = seq_of(p, b).sk;
        max_sk = sk > max_sk ? sk : max_sk;
    }
    double *s = malloc(sizeof(double) * (size_t)(max_sk ? max_sk : 1));
    double *acc = malloc(sizeof(double) * (size_t)dv);
    for (int b = 0; b < p->batch; b++) {
        const ref_seq S = seq_of(p, b);
        const int sq = S.sq, sk = S.sk;
        const int64_t q0 = S.q0, o0 = S.o0, k0 = S.k0, v0 = S.v0;
        for (int h = 0; h < p->heads_q; h++) {
            int hk = h / group;
            for (int i = 0; i < sq; i++) {
                const uint16_t *q = Q + q0 + i * p->q_row_stride + h * p->q_head_stride;
                double m = -INFINITY;
                for (int j = 0; j < sk; j++) {
                    if (!visible(p, i, j, sq, sk)) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    const uint16_t *k = K + k0 + (int64_t)j * p->k_row_stride + hk * p->k_head_stride;
                    double dot = 0;
                    for (int c = 0; c < d; c++)
                        dot += (double)fj_half_to_f32(q[c], dtype) * fj_half_to_f32(k[c], dtype);
                    s[j] = dot * p->scale;
                    if (cap > 0)
                        s[j] = cap * tanh(s[j] / cap);
                    if (alibi)
                        s[j] -= (double)alibi[(int64_t)b * f->alibi_batch_stride + h] *
                                fabs((double)(i + sk - sq - j));
                    if (s[j] > m)
                        m = s[j];
                }
                /* a sink joins the denominator: the reference max takes it in */
                const double sink = sinks ? sinks[h] : -INFINITY;
                const int any = m > -INFINITY;
                if (sink > m)
                    m = sink;
                double l = sinks ? exp(sink - m) : 0;
                memset(acc, 0, sizeof(double) * (size_t)dv);
                if (any)
                    for (int j = 0; j < sk; j++) {
                        if (s[j] == -INFINITY)
                            continue;
                        double pj = exp(s[j] - m);
                        l += pj;
                        const uint16_t *v = V + v0 + (int64_t)j * p->v_row_stride + hk * p->v_head_stride;
                        for (int c = 0; c < dv; c++)
                            acc[c] += pj * fj_half_to_f32(v[c], dtype);
                    }
                double *o = o_out + o0 + i * p->o_row_stride + h * p->o_head_stride;
                for (int c = 0; c < dv; c++)
                    o[c] = any && l > 0 ? acc[c] / l : 0;
                if (lse_out) {
                    int64_t idx = cq ? (int64_t)h * cq[p->batch] + cq[b] + i
                                     : ((int64_t)b * p->heads_q + h) * p->seqlen_q + i;
                    lse_out[idx] = l > 0 ? m + log(l) : -INFINITY;
                }
            }
        }
    }
    free(s);
    free(acc);
}

/* The FA4 emulation. Per row: a running maximum m (raw score units; m2 = m * scale_log2 in
 * log2 units) that a block raises only when its own maximum exceeds m by more than
 * `threshold` in log2 units. Otherwise the block's exponentials are taken against the stale
 * m, so they reach up to 2^threshold; the row sum and O then simply carry that common
 * factor, which the final O / l cancels. Saturation: with threshold T a probability is at
 * most 2^T (256 for T = 8: exact in bf16 and fp16, whose maxima are 3.4e38 and 65504), the
 * row sum at most n * 2^T and |O| at most n * 2^T * max|V|: for n = 2^31 keys that is
 * 2^39 * max|V|, so fp32 (3.4e38 = 2^128) cannot overflow for any |V| below 2^89. */
void fj_cpu_attn_cond_rescale(const fj_attn_params *p, int dtype, float threshold, int block_n,
                              int poly_every, float *o_out, fj_cond_rescale_stats *st)
{
    const uint16_t *Q = (const uint16_t *)(uintptr_t)p->q;
    const uint16_t *K = (const uint16_t *)(uintptr_t)p->k;
    const uint16_t *V = (const uint16_t *)(uintptr_t)p->v;
    const int d = p->head_dim, group = p->heads_q / p->heads_kv;
    const float sl2 = p->scale_log2;
    fj_cond_rescale_stats local = {0, 0, 0.f};
    float *s = malloc(sizeof(float) * (size_t)block_n);
    float *acc = malloc(sizeof(float) * (size_t)d);
    for (int b = 0; b < p->batch; b++) {
        const ref_seq S = seq_of(p, b);
        const int sq = S.sq, sk = S.sk;
        const int64_t q0 = S.q0, o0 = S.o0, k0 = S.k0, v0 = S.v0;
        for (int h = 0; h < p->heads_q; h++) {
            int hk = h / group;
            for (int i = 0; i < sq; i++) {
                const uint16_t *q = Q + q0 + i * p->q_row_stride + h * p->q_head_stride;
                float m = -INFINITY, l = 0;
                memset(acc, 0, sizeof(float) * (size_t)d);
                for (int nb = (sk + block_n - 1) / block_n - 1; nb >= 0; nb--) {
                    int j0 = nb * block_n, jn = sk - j0 < block_n ? sk - j0 : block_n;
                    float mb = -INFINITY;
                    for (int jj = 0; jj < jn; jj++) {
                        int j = j0 + jj;
                        s[jj] = -INFINITY;
                        if (!visible(p, i, j, sq, sk))
                            continue;
                        const uint16_t *k = K + k0 + (int64_t)j * p->k_row_stride + hk * p->k_head_stride;
                        float dot = 0;   /* fp32 accumulation, as the tensor cores */
                        for (int c = 0; c < d; c++)
                            dot += fj_half_to_f32(q[c], dtype) * fj_half_to_f32(k[c], dtype);
                        s[jj] = dot;
                        mb = dot > mb ? dot : mb;
                    }
                    if (mb == -INFINITY)
                        continue;   /* fully masked block: nothing to add */
                    if (m == -INFINITY) {
                        m = mb;     /* first visible block: nothing to rescale yet */
                    } else if (mb * sl2 - m * sl2 > threshold) {
                        float alpha = exp2f(m * sl2 - mb * sl2);
                        l *= alpha;
                        for (int c = 0; c < d; c++)
                            acc[c] *= alpha;
                        m = mb;
                        local.rescaled++;
                    } else if (mb > m) {
                        local.skipped++;
                    }
                    float m2 = m * sl2;
                    for (int jj = 0; jj < jn; jj++) {
                        if (s[jj] == -INFINITY)
                            continue;
                        int j = j0 + jj;
                        float x = fmaf(s[jj], sl2, -m2);
                        float pj = poly_every > 0 && j % poly_every == 0 ? fj_exp2_poly(x)
                                                                          : exp2f(x);
                        local.p_max = pj > local.p_max ? pj : local.p_max;
                        l += pj;
                        float pr = fj_half_to_f32(fj_f32_to_half(pj, dtype), dtype);
                        const uint16_t *v = V + v0 + (int64_t)j * p->v_row_stride + hk * p->v_head_stride;
                        for (int c = 0; c < d; c++)
                            acc[c] = fmaf(pr, fj_half_to_f32(v[c], dtype), acc[c]);
                    }
                }
                float *o = o_out + o0 + i * p->o_row_stride + h * p->o_head_stride;
                for (int c = 0; c < d; c++) {
                    float oc = l > 0 ? (float)((double)acc[c] / l) : 0.f;
                    o[c] = fj_half_to_f32(fj_f32_to_half(oc, dtype), dtype);
                }
            }
        }
    }
    free(s);
    free(acc);
    if (st)
        *st = local;
}
