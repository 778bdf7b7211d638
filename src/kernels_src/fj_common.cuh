/* fj_common.cuh - device helpers shared by every kernel. Self-contained: NVRTC compiles
 * it with no toolkit headers, so 16-bit types are raw bit patterns (fj_u16) converted with
 * inline PTX; pack2 (two floats to the FJ_DTYPE pair) and ex2 (ex2.approx.ftz) for the
 * softmax of every fast kernel. Expects FJ_DTYPE (FJ_DT_F16 or FJ_DT_BF16) from the preamble.
 */
#ifndef FJ_COMMON_CUH
#define FJ_COMMON_CUH

#include "fajit_params.h"

typedef unsigned short fj_u16;

#define FJ_DEVICE static __device__ __forceinline__
#define FJ_INF __int_as_float(0x7f800000)

/* Model features (fajit_params.h, fj_feat_params), each 0 unless the family's preamble sets
 * it: FJ_SOFTCAP, FJ_SINKS, FJ_ALIBI 0 | 1; FJ_KV_FP8 0 | 1 (e4m3) | 2 (e5m2). A kernel with
 * any takes fj_feat_params as its last parameter (FJ_FEAT_PARAM after the others). */
#ifndef FJ_SOFTCAP
#define FJ_SOFTCAP 0
#endif
#ifndef FJ_SINKS
#define FJ_SINKS 0
#endif
#ifndef FJ_ALIBI
#define FJ_ALIBI 0
#endif
#ifndef FJ_KV_FP8
#define FJ_KV_FP8 0
#endif
#define FJ_FEATURES (FJ_SOFTCAP || FJ_SINKS || FJ_ALIBI || FJ_KV_FP8)
#if FJ_FEATURES
#define FJ_FEAT_PARAM , const __grid_constant__ fj_feat_params fp
#else
#define FJ_FEAT_PARAM
#endif

#if FJ_SOFTCAP
FJ_DEVICE float fj_tanh_approx(float x)   /* MUFU.TANH (sm_75+) */
{
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
#endif

#if FJ_KV_FP8
/* Four FP8 values (bytes of w, element 0 lowest) as two FJ_DTYPE pairs, exactly, by moving
 * bits: the byte b becomes the 16-bit value b << 8 with its exponent and mantissa shifted
 * right into the wider type's fields. That leaves each value off by a power of two whose
 * exponent is the bias difference (fj_fp8_unit: 2^120 e4m3 -> bf16, 2^8 e4m3 -> f16,
 * 2^112 e5m2 -> bf16, 1 e5m2 -> f16, the f16 bits of e5m2 being the byte itself), which
 * the kernels fold into the descale factors. Subnormals map to subnormals (exact); an e4m3
 * NaN (0x7f / 0xff) becomes +-480 and an e5m2 Inf/NaN a finite value outside f16 (FP8 KV
 * caches hold neither). Two integer operations per pair, no conversion instruction, on
 * every target. */
FJ_DEVICE void fj_fp8x4_widen(fj_u32 w, fj_u32 &lo, fj_u32 &hi)
{
    constexpr int SH = FJ_KV_FP8 == 1 ? (FJ_DTYPE == FJ_DT_BF16 ? 4 : 1)
                                      : (FJ_DTYPE == FJ_DT_BF16 ? 3 : 0);
    fj_u32 a, b;
    asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(a) : "r"(w));   /* b1 << 24 | b0 << 8 */
    asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(b) : "r"(w));   /* b3 << 24 | b2 << 8 */
    lo = SH ? (a & 0x80008000u) | ((a >> SH) & (0x7f007f00u >> SH)) : a;
    hi = SH ? (b & 0x80008000u) | ((b >> SH) & (0x7f007f00u >> SH)) : b;
}
/* The power of two fj_fp8x4_widen leaves out. */
FJ_DEVICE float fj_fp8_unit()
{
    return FJ_KV_FP8 == 1 ? (FJ_DTYPE == FJ_DT_BF16 ? 0x1p120f : 0x1p8f)
                          : (FJ_DTYPE == FJ_DT_BF16 ? 0x1p112f : 1.f);
}
#endif

FJ_DEVICE float fj_f16_to_f32(fj_u16 h)
{
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
FJ_DEVICE fj_u16 fj_f32_to_f16(float f)
{
    fj_u16 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
/* Two floats into one register of two 16-bit values, `lo` in the low half. */
FJ_DEVICE fj_u32 pack2(float lo, float hi)
{
    fj_u32 r;
#if FJ_DTYPE == FJ_DT_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

FJ_DEVICE float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

FJ_DEVICE float fj_bf16_to_f32(fj_u16 h) { return __uint_as_float(((fj_u32)h) << 16); }
FJ_DEVICE fj_u16 fj_f32_to_bf16(float f)
{
    fj_u16 h;
    asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}

/* Programmatic dependent launch (sm_90+; no-ops before). wait: until the grids this one
 * depends on (the stream's previous kernel) have finished and their memory is visible —
 * first, before any global access; trigger: lets the stream's next kernel start launching
 * (it waits the same way before touching memory). */
FJ_DEVICE void fj_pdl_wait()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
FJ_DEVICE void fj_pdl_trigger()
{
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* The element type of this translation unit. */
#if FJ_DTYPE == FJ_DT_BF16
FJ_DEVICE float fj_load(fj_u16 h) { return fj_bf16_to_f32(h); }
FJ_DEVICE fj_u16 fj_store(float f) { return fj_f32_to_bf16(f); }
#else
FJ_DEVICE float fj_load(fj_u16 h) { return fj_f16_to_f32(h); }
FJ_DEVICE fj_u16 fj_store(float f) { return fj_f32_to_f16(f); }
#endif

/* Where sequence b lives: element offsets of its row 0 in Q, K, V, O (head 0), its
 * lengths, and its LSE row for head h is lse[lse_head_stride*h + lse_base + i]. */
struct fj_seq {
    fj_i64 q, k, v, o;
    fj_i64 lse_base, lse_head_stride;
    int sq, sk;
};

FJ_DEVICE fj_seq fj_seq_of(const fj_attn_params &p, int b)
{
    fj_seq s;
    if (p.cu_seqlens_q) {
        const int *cq = (const int *)p.cu_seqlens_q, *ck = (const int *)p.cu_seqlens_k;
        int q0 = cq[b], k0 = ck[b];
        s.q = (fj_i64)q0 * p.q_row_stride;
        s.o = (fj_i64)q0 * p.o_row_stride;
        s.k = (fj_i64)k0 * p.k_row_stride;
        s.v = (fj_i64)k0 * p.v_row_stride;
        s.sq = cq[b + 1] - q0;
        s.sk = ck[b + 1] - k0;
        s.lse_head_stride = cq[p.batch];
        s.lse_base = q0;
    } else {
        s.q = (fj_i64)b * p.q_batch_stride;
        s.o = (fj_i64)b * p.o_batch_stride;
        s.k = (fj_i64)b * p.k_batch_stride;
        s.v = (fj_i64)b * p.v_batch_stride;
        s.sq = p.seqlen_q;
        s.sk = p.seqlen_k;
        s.lse_head_stride = p.seqlen_q;
        s.lse_base = (fj_i64)b * p.heads_q * p.seqlen_q;
    }
    return s;
}

/* Visible key range [lo, hi) of query row i for a sequence of lengths sq, sk. */
FJ_DEVICE void fj_key_range(const fj_attn_params &p, int i, int sq, int sk, int *lo, int *hi)
{
    int shift = i + sk - sq;
    int l = 0, h = sk;
    if (p.window_left >= 0 && shift - p.window_left > l) l = shift - p.window_left;
    if (p.window_right >= 0 && shift + p.window_right + 1 < h) h = shift + p.window_right + 1;
    *lo = l;
    *hi = h;
}

#endif /* FJ_COMMON_CUH */
