/* attn_merge.cu - fajit_attn_merge: two partial attention results of the same queries over
 * disjoint key sets (cascade / shared-prefix attention) merged by their log-sum-exp:
 *   M = max(lse_a, lse_b), w_x = exp(lse_x - M), O = (w_a O_a + w_b O_b) / (w_a + w_b),
 *   LSE = M + log(w_a + w_b); both -inf (no key on either side): O = 0, LSE = -inf.
 * A side whose weight is 0 contributes nothing, not even a NaN from its O.
 * Parameters: fj_merge_params (fajit_params.h). Only FJ_DTYPE is compiled in; head_dim is
 * a parameter (a multiple of 4), so one kernel per dtype serves every shape.
 * Grid (ceil(batch*seqlen*heads / 4)), 128 threads: a warp per (row, head), lanes over
 * 4-column chunks (8-byte loads and stores). Every lane reads both LSEs before lane 0
 * writes the merged one (__syncwarp between), so lse may alias lse_a or lse_b, and each
 * lane writes only the columns it read, so o may alias o_a or o_b.
 */
#include "fj_common.cuh"

#if !defined(FJ_DTYPE)
#error "attn_merge.cu needs FJ_DTYPE"
#endif
static_assert(FJ_DTYPE == FJ_DT_F16 || FJ_DTYPE == FJ_DT_BF16, "FJ_DTYPE");

#define FJ_MERGE_WARPS 4

FJ_DEVICE float4 mrg_load4(const fj_u16 *g)
{
    fj_u32 x0, x1;
    asm volatile("ld.global.v2.b32 {%0,%1}, [%2];\n" : "=r"(x0), "=r"(x1) : "l"(g));
    return make_float4(fj_load((fj_u16)(x0 & 0xffffu)), fj_load((fj_u16)(x0 >> 16)),
                       fj_load((fj_u16)(x1 & 0xffffu)), fj_load((fj_u16)(x1 >> 16)));
}
FJ_DEVICE void mrg_store4(fj_u16 *g, float4 o)
{
    const fj_u32 x0 = (fj_u32)fj_store(o.x) | (fj_u32)fj_store(o.y) << 16;
    const fj_u32 x1 = (fj_u32)fj_store(o.z) | (fj_u32)fj_store(o.w) << 16;
    asm volatile("st.global.v2.b32 [%0], {%1,%2};\n" ::"l"(g), "r"(x0), "r"(x1) : "memory");
}

extern "C" __global__ void __launch_bounds__(FJ_MERGE_WARPS * 32)
fj_attn_merge(const __grid_constant__ fj_merge_params p)
{
    fj_pdl_wait();
    fj_pdl_trigger();
    constexpr float LOG2E = 1.4426950408889634f;
    const int lane = threadIdx.x & 31;
    const long long pair = (long long)blockIdx.x * FJ_MERGE_WARPS + (threadIdx.x >> 5);
    if (pair >= (long long)p.batch * p.seqlen * p.heads)
        return;   /* warp-uniform */
    const int h = (int)(pair % p.heads);
    const long long r = pair / p.heads;
    const int b = (int)(r / p.seqlen), i = (int)(r - (long long)b * p.seqlen);
    const fj_i64 li = (fj_i64)b * p.lse_batch_stride + (fj_i64)h * p.lse_head_stride +
                      (fj_i64)i * p.lse_row_stride;
    const float la = ((const float *)p.lse_a)[li], lb = ((const float *)p.lse_b)[li];
    const float m = fmaxf(la, lb);
    float wa = 0.f, wb = 0.f, lse = -FJ_INF;
    if (m != -FJ_INF) {
        wa = exp2f((la - m) * LOG2E), wb = exp2f((lb - m) * LOG2E);   /* exp(-inf) = 0 */
        const float s = wa + wb;
        lse = m + logf(s);
        wa /= s, wb /= s;
    }
    const fj_u16 *ga = (const fj_u16 *)p.o_a + (fj_i64)b * p.a_batch_stride +
                       (fj_i64)i * p.a_row_stride + (fj_i64)h * p.a_head_stride;
    const fj_u16 *gb = (const fj_u16 *)p.o_b + (fj_i64)b * p.b_batch_stride +
                       (fj_i64)i * p.b_row_stride + (fj_i64)h * p.b_head_stride;
    fj_u16 *go = (fj_u16 *)p.o + (fj_i64)b * p.o_batch_stride + (fj_i64)i * p.o_row_stride +
                 (fj_i64)h * p.o_head_stride;
    for (int c = lane * 4; c < p.head_dim; c += 128) {
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
        if (wa > 0.f) {
            const float4 x = mrg_load4(ga + c);
            o.x += wa * x.x, o.y += wa * x.y, o.z += wa * x.z, o.w += wa * x.w;
        }
        if (wb > 0.f) {
            const float4 x = mrg_load4(gb + c);
            o.x += wb * x.x, o.y += wb * x.y, o.z += wb * x.z, o.w += wb * x.w;
        }
        mrg_store4(go + c, o);
    }
    __syncwarp();   /* every lane has read lse_a/lse_b: the merged LSE may overwrite them */
    if (p.lse && lane == 0)
        ((float *)p.lse)[li] = lse;
}
