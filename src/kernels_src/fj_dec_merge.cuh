/* fj_dec_merge.cuh - merging the splits of attn_decode.cu, the pieces that both steps use:
 * the combine kernel merges a row's partials from L2 with dec_merge4, and the split step's
 * fused combine and cluster merge fold with dec_fold. Every merge is one pass with a running
 * maximum: O = sum_s w_s O_s with w_s = exp(lse_s - M) / sum exp(lse_s - M), M = max lse_s;
 * an empty split (O = 0, LSE = -inf) weighs 0, and all empty gives O = 0, LSE = -inf.
 *
 * Has:
 *   dec_ldcg, dec_ldcg4   4- and 16-byte loads through L2 only (ld.global.cg)
 *   dec_fold              one step of a merge: U splits into (m, l, acc)
 *   dec_fold_end          acc / l and the natural-log LSE
 *   dec_merge4            4 columns of one row and head over all p.splits partials
 *   dec_st4               4 columns of O as 16-bit values
 * Expects: FJ_HEAD_DIM, fj_decode_params (fajit_params.h), fj_common.cuh (ex2, pack2).
 */
#ifndef FJ_DEC_MERGE_CUH
#define FJ_DEC_MERGE_CUH

/* 16-byte / 4-byte loads through L2 only: the partials were written by other CTAs of this
 * launch (fused combine), which this SM's L1 does not see. */
FJ_DEVICE float4 dec_ldcg4(const float *g)
{
    float4 r;
    asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                 : "=f"(r.x), "=f"(r.y), "=f"(r.z), "=f"(r.w)
                 : "l"(g));
    return r;
}
FJ_DEVICE float dec_ldcg(const float *g)
{
    float r;
    asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(r) : "l"(g));
    return r;
}

/* One step of a merge: U splits' LSEs and 4-column O chunks into the running maximum m,
 * weight sum l and weighted sum acc (LSE -inf: an empty split, or past the last; weight 0). */
template <int U>
FJ_DEVICE void dec_fold(float &m, float &l, float4 &acc, const float (&ls)[U], const float4 (&x)[U])
{
    constexpr float LOG2E = 1.4426950408889634f;
    float mn = m;
#pragma unroll
    for (int u = 0; u < U; ++u)
        mn = fmaxf(mn, ls[u]);
    if (mn == -FJ_INF)
        return;   /* nothing seen yet */
    const float a = ex2((m - mn) * LOG2E);   /* 0 when m = -inf */
    l *= a, acc.x *= a, acc.y *= a, acc.z *= a, acc.w *= a;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const float w = ex2((ls[u] - mn) * LOG2E);
        l += w;
        acc.x += w * x[u].x, acc.y += w * x[u].y, acc.z += w * x[u].z, acc.w += w * x[u].w;
    }
    m = mn;
}

/* The merged 4 columns (acc / l) and the natural-log LSE; O = 0, LSE = -inf when empty. */
FJ_DEVICE float dec_fold_end(float m, float l, float4 acc, float4 &out)
{
    const float inv = l > 0.f ? 1.f / l : 0.f;
    out = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    return l > 0.f ? m + logf(l) : -FJ_INF;
}

/* Merges the p.splits partials of row R, head h for columns [4*c4, 4*c4 + 4): O (already
 * divided by its row sum) weighted by exp(lse_s - M) / sum exp(lse_s - M). One pass with a
 * running maximum, U splits' loads in flight per step (the chain of steps is the latency of
 * the merge: 32 splits in 4 steps at U = 8). Empty splits wrote O = 0 and LSE = -inf and
 * weigh 0; all empty: O = 0 and the natural-log LSE returned is -inf. */
template <int DEC_MERGE_U>
FJ_DEVICE float dec_merge4(const fj_decode_params &p, int R, int h, int c4, float4 &out)
{
    const fj_i64 sstride = (fj_i64)p.total_rows * p.heads_q;  /* one split, in rows x heads */
    const float *pl = (const float *)p.part_lse + (fj_i64)R * p.heads_q + h;
    const float *po = (const float *)p.part_o + ((fj_i64)R * p.heads_q + h) * FJ_HEAD_DIM + c4 * 4;
    float m = -FJ_INF, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < p.splits; s0 += DEC_MERGE_U) {
        float ls[DEC_MERGE_U];
        float4 x[DEC_MERGE_U];
#pragma unroll
        for (int u = 0; u < DEC_MERGE_U; ++u) {
            const int s = s0 + u < p.splits ? s0 + u : s0;   /* in range; weighed 0 below */
            ls[u] = dec_ldcg(pl + s * sstride);
            x[u] = dec_ldcg4(po + s * sstride * FJ_HEAD_DIM);
            if (s0 + u >= p.splits)
                ls[u] = -FJ_INF;
        }
        dec_fold<DEC_MERGE_U>(m, l, acc, ls, x);
    }
    return dec_fold_end(m, l, acc, out);
}

/* 4 columns of O as two packed 16-bit pairs. */
FJ_DEVICE void dec_st4(fj_u16 *g, float4 o)
{
    const fj_u32 x0 = pack2(o.x, o.y), x1 = pack2(o.z, o.w);
    asm volatile("st.global.v2.b32 [%0], {%1,%2};\n" ::"l"(g), "r"(x0), "r"(x1) : "memory");
}

#endif /* FJ_DEC_MERGE_CUH */
