/* attn_ref.cu - the naive reference attention forward: the oracle for every fast kernel.
 *
 * Variants: FJ_DTYPE (f16, bf16); the model features FJ_SOFTCAP, FJ_SINKS, FJ_ALIBI (0 | 1,
 * fj_common.cuh; any on: fj_feat_params is the last parameter); FJ_HEAD_DIM_V (defined only
 * where V's and O's head dim differs from p.head_dim: V rows and O rows of that many columns;
 * otherwise p.head_dim). Everything else is a run-time value: any head_dim up to
 * FJ_REF_MAX_DIM (256), every mask, GQA/MQA, varlen (empty sequences too), LSE.
 * Features: s = scale * q.k; softcap: s = cap * tanh(s / cap); ALiBi: s -= slope *
 * |i + sk - sq - j|; then the mask; a sink joins the row's softmax denominator as
 * exp(sink) (no value): the final max and sum take it in, and a row without keys gets
 * O = 0 and LSE = sink.
 * Limits: slow by design (one CTA per query row; fp32 arithmetic, precise expf/logf).
 * Macros expected: FJ_DTYPE.
 *
 * Launch: grid (seqlen_q, heads_q, batch), FJ_REF_THREADS threads, no dynamic smem.
 * Each CTA computes one output row: it walks the visible keys in chunks of FJ_REF_CHUNK,
 * computes the chunk's scores into shared memory, and keeps a running max m, sum l and
 * accumulator acc (one output column per thread, dv of them) with the usual rescale by
 * exp(m_old-m).
 */
#include "fj_common.cuh"

#define FJ_REF_THREADS 256
#define FJ_REF_MAX_DIM 256
#define FJ_REF_CHUNK 256

static __device__ float block_max(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < FJ_REF_THREADS / 32; w++)
        r = fmaxf(r, red[w]);
    return r;
}

extern "C" __global__ void __launch_bounds__(FJ_REF_THREADS)
fj_attn_ref(const __grid_constant__ fj_attn_params p FJ_FEAT_PARAM)
{
    __shared__ float q_row[FJ_REF_MAX_DIM];
    __shared__ float s[FJ_REF_CHUNK];
    __shared__ float red[FJ_REF_THREADS / 32];

    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, t = threadIdx.x;
    const fj_seq sq = fj_seq_of(p, b);
    if (i >= sq.sq)
        return;
    const int hk = h / (p.heads_q / p.heads_kv);
    const int d = p.head_dim;
#ifdef FJ_HEAD_DIM_V
    const int dv = FJ_HEAD_DIM_V;
    static_assert(FJ_HEAD_DIM_V >= 8 && FJ_HEAD_DIM_V <= FJ_REF_MAX_DIM, "FJ_HEAD_DIM_V");
#else
    const int dv = d;
#endif
    const fj_u16 *q = (const fj_u16 *)p.q + sq.q + (fj_i64)i * p.q_row_stride +
                      (fj_i64)h * p.q_head_stride;
    const fj_u16 *k = (const fj_u16 *)p.k + sq.k + (fj_i64)hk * p.k_head_stride;
    const fj_u16 *v = (const fj_u16 *)p.v + sq.v + (fj_i64)hk * p.v_head_stride;
    fj_u16 *o = (fj_u16 *)p.o + sq.o + (fj_i64)i * p.o_row_stride + (fj_i64)h * p.o_head_stride;

    for (int c = t; c < d; c += FJ_REF_THREADS)
        q_row[c] = fj_load(q[c]);

    int lo, hi;
    fj_key_range(p, i, sq.sq, sq.sk, &lo, &hi);
    float m = -FJ_INF, l = 0.f, acc = 0.f;  /* thread t owns output column t (dv <= 256) */
#if FJ_ALIBI
    const float slope = ((const float *)fp.alibi)[(fj_i64)b * fp.alibi_batch_stride + h];
    const int shift = i + sq.sk - sq.sq;  /* key j's distance is |shift - j| */
#endif
    for (int j0 = lo; j0 < hi; j0 += FJ_REF_CHUNK) {
        const int n = min(FJ_REF_CHUNK, hi - j0);
        __syncthreads();  /* q_row ready; previous chunk's s consumed */
        float local_max = -FJ_INF;
        for (int jj = t; jj < n; jj += FJ_REF_THREADS) {
            const fj_u16 *kr = k + (fj_i64)(j0 + jj) * p.k_row_stride;
            float dot = 0.f;
            for (int c = 0; c < d; c++)
                dot += q_row[c] * fj_load(kr[c]);
            float x = dot * p.scale;
#if FJ_SOFTCAP
            x = fp.softcap * tanhf(x / fp.softcap);
#endif
#if FJ_ALIBI
            x -= slope * fabsf((float)(shift - (j0 + jj)));
#endif
            s[jj] = x;
            local_max = fmaxf(local_max, s[jj]);
        }
        const float m_new = fmaxf(m, block_max(local_max, red));
        const float alpha = expf(m - m_new);  /* 0 on the first chunk (m = -inf) */
        float psum = 0.f, pv = 0.f;
        for (int jj = 0; jj < n; jj++) {
            const float pj = expf(s[jj] - m_new);
            psum += pj;
            if (t < dv)
                pv += pj * fj_load(v[(fj_i64)(j0 + jj) * p.v_row_stride + t]);
        }
        l = l * alpha + psum;
        acc = acc * alpha + pv;
        m = m_new;
    }
#if FJ_SINKS
    {   /* the sink joins the denominator: rescale to max(m, sink) */
        const float sink = ((const float *)fp.sinks)[h];
        const float mf = fmaxf(m, sink);
        const float alpha = expf(m - mf);  /* 0 without keys (m = -inf) */
        l = l * alpha + expf(sink - mf);
        acc *= alpha;
        m = mf;
    }
#endif
    if (t < dv)
        o[t] = fj_store(l > 0.f ? acc / l : 0.f);
    if (p.lse && t == 0) {
        float *lse = (float *)p.lse;
        lse[sq.lse_head_stride * h + sq.lse_base + i] = l > 0.f ? m + logf(l) : -FJ_INF;
    }
}
