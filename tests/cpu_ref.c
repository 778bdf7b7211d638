/* cpu_ref.c - the float64 oracle. Deliberately plain: two passes per row (max, then sum
 * and weighted values), the mask written out as the formula of fajit_params.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ref.h"

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

void fj_cpu_attention(const fj_attn_params *p, int dtype, double *o_out, double *lse_out)
{
    const uint16_t *Q = (const uint16_t *)(uintptr_t)p->q;
    const uint16_t *K = (const uint16_t *)(uintptr_t)p->k;
    const uint16_t *V = (const uint16_t *)(uintptr_t)p->v;
    const int32_t *cq = (const int32_t *)(uintptr_t)p->cu_seqlens_q;
    const int32_t *ck = (const int32_t *)(uintptr_t)p->cu_seqlens_k;
    const int d = p->head_dim, group = p->heads_q / p->heads_kv;
    int max_sk = 0;
    for (int b = 0; b < p->batch; b++) {
        int sk = cq ? ck[b + 1] - ck[b] : p->seqlen_k;
        max_sk = sk > max_sk ? sk : max_sk;
    }
    double *s = malloc(sizeof(double) * (size_t)(max_sk ? max_sk : 1));
    double *acc = malloc(sizeof(double) * (size_t)d);
    for (int b = 0; b < p->batch; b++) {
        int sq = cq ? cq[b + 1] - cq[b] : p->seqlen_q;
        int sk = cq ? ck[b + 1] - ck[b] : p->seqlen_k;
        int64_t q0 = cq ? (int64_t)cq[b] * p->q_row_stride : b * p->q_batch_stride;
        int64_t o0 = cq ? (int64_t)cq[b] * p->o_row_stride : b * p->o_batch_stride;
        int64_t k0 = cq ? (int64_t)ck[b] * p->k_row_stride : b * p->k_batch_stride;
        int64_t v0 = cq ? (int64_t)ck[b] * p->v_row_stride : b * p->v_batch_stride;
        for (int h = 0; h < p->heads_q; h++) {
            int hk = h / group;
            for (int i = 0; i < sq; i++) {
                const uint16_t *q = Q + q0 + i * p->q_row_stride + h * p->q_head_stride;
                double m = -INFINITY;
                for (int j = 0; j < sk; j++) {
                    int shift = i + sk - sq;
                    int visible = (p->window_left < 0 || j >= shift - p->window_left) &&
                                  (p->window_right < 0 || j <= shift + p->window_right);
                    if (!visible) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    const uint16_t *k = K + k0 + (int64_t)j * p->k_row_stride + hk * p->k_head_stride;
                    double dot = 0;
                    for (int c = 0; c < d; c++)
                        dot += (double)fj_half_to_f32(q[c], dtype) * fj_half_to_f32(k[c], dtype);
                    s[j] = dot * p->scale;
                    if (s[j] > m)
                        m = s[j];
                }
                double l = 0;
                memset(acc, 0, sizeof(double) * (size_t)d);
                if (m > -INFINITY)
                    for (int j = 0; j < sk; j++) {
                        if (s[j] == -INFINITY)
                            continue;
                        double pj = exp(s[j] - m);
                        l += pj;
                        const uint16_t *v = V + v0 + (int64_t)j * p->v_row_stride + hk * p->v_head_stride;
                        for (int c = 0; c < d; c++)
                            acc[c] += pj * fj_half_to_f32(v[c], dtype);
                    }
                double *o = o_out + o0 + i * p->o_row_stride + h * p->o_head_stride;
                for (int c = 0; c < d; c++)
                    o[c] = l > 0 ? acc[c] / l : 0;
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
