/* fj_sm80_prims.cuh - the warp-level PTX of the mma.sync kernels (attn_fwd_sm80.cu, the portable
 * FlashAttention-2 design, and attn_decode.cu), valid on sm_80 and every later target:
 *   smem_addr          generic -> 32-bit shared address
 *   cp_async16         16-byte cp.async.cg (src_bytes 0 zero-fills and reads nothing),
 *   cp_async_commit, cp_async_wait<N>, cp_async_wait_all
 *   ldsm_x4, ldsm_x4_t ldmatrix x4 (and .trans) of 16-bit 8x8 tiles
 *   mma16816           c += a * b, one m16n8k16 tile, FJ_DTYPE inputs, fp32 accumulation
 * (pack2 and ex2 are fj_common.cuh's, shared with the Hopper and Blackwell kernels.)
 * Expects: FJ_DTYPE (FJ_DT_F16 or FJ_DT_BF16), fj_common.cuh.
 */
#ifndef FJ_SM80_PRIMS_CUH
#define FJ_SM80_PRIMS_CUH

FJ_DEVICE fj_u32 smem_addr(const void *p)
{
    fj_u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
/* 16-byte copy; src_bytes 0 zero-fills the destination and reads nothing. */
FJ_DEVICE void cp_async16(fj_u32 dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
FJ_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
FJ_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
FJ_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

FJ_DEVICE void ldsm_x4(fj_u32 a, fj_u32 &r0, fj_u32 &r1, fj_u32 &r2, fj_u32 &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}
FJ_DEVICE void ldsm_x4_t(fj_u32 a, fj_u32 &r0, fj_u32 &r1, fj_u32 &r2, fj_u32 &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

/* c += a * b for one m16n8k16 tile, fp32 accumulation. */
FJ_DEVICE void mma16816(float *c, const fj_u32 *a, fj_u32 b0, fj_u32 b1)
{
#if FJ_DTYPE == FJ_DT_BF16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#endif
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif /* FJ_SM80_PRIMS_CUH */
