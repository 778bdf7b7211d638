/* fj_sm100_desc.cuh - the bit encodings of Blackwell (sm_100a) tcgen05: the instruction
 * descriptor of tcgen05.mma kind::f16, the shared-memory matrix descriptor, Tensor Memory
 * addresses and tcgen05.alloc column counts. Pure integer arithmetic, compiled by NVRTC
 * (inside the sm_100a kernel) and by the host C compiler (tests/test_sm100_host.c checks
 * every field), so an encoding mistake shows up in the unit suite, not as a hung MMA.
 *
 * Sources (NVIDIA PTX ISA 9.1, section 9.7.16 "TensorCore 5th Generation Family
 * Instructions"; cross-checked against CUTLASS include/cute/arch/mma_sm100_desc.hpp,
 * UMMA::InstrDescriptor and UMMA::SmemDescriptor, which agree bit for bit):
 *
 *   Instruction descriptor, 32 bits (9.7.16.4.2 "Instruction descriptor", Table 42
 *   "Instruction descriptor format for .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8"):
 *     bits  0-1  sparsity selector          0 (dense)
 *     bit   2    sparsity                   0 = dense
 *     bit   3    saturate (integer kinds)   0
 *     bits  4-5  dtype, matrix D            F16 = 0, F32 = 1            -> 1
 *     bit   6    reserved                   0
 *     bits  7-9  atype                      kind::f16: F16 = 0, BF16 = 1
 *     bits 10-12 btype                      same codes as atype
 *     bit  13    negate A                   0
 *     bit  14    negate B                   0
 *     bit  15    transpose A                0 = K-major, 1 = MN-major
 *     bit  16    transpose B                0 = K-major, 1 = MN-major
 *     bits 17-22 N >> 3
 *     bit  23    reserved                   0
 *     bits 24-28 M >> 4                     (M=64: 4, M=128: 8)
 *     bit  29    reserved                   0
 *     bits 30-31 max shift (.ws only)       0
 *   Valid shapes (the tcgen05.mma "Matrix shape" table, kind::f16, cta_group::1, dense): M = 64 with
 *   N a multiple of 8 in 8..256, M = 128 with N a multiple of 16 in 16..256. Transpose is
 *   not supported with the 128B-base-32B swizzle for kind::f16 (note under Table 42).
 *
 *   Shared-memory descriptor, 64 bits (9.7.16.4.1 "Shared memory descriptor"):
 *     bits  0-13 matrix start address       encode(addr)
 *     bits 16-29 leading dim byte offset    encode(LBO)
 *     bits 32-45 stride dim byte offset     encode(SBO)
 *     bits 46-48 fixed constant             0b001 (new on sm_100: the wgmma descriptor
 *                                            of sm_90 has 0 here)
 *     bits 49-51 matrix base offset         0 (pattern starts on its 1024/512/256 B
 *                                            boundary for 128/64/32 B swizzle)
 *     bit  52    LBO mode                   0 = relative byte offset
 *     bits 53-60 fixed constant             0
 *     bits 61-63 swizzle mode               0 none, 1 128B with 32B atoms, 2 128B,
 *                                            4 64B, 6 32B (3, 5, 7 invalid)
 *   where encode(x) = (x & 0x3FFFF) >> 4; all three must be 16-byte aligned. Note the
 *   sm_100 swizzle codes differ from sm_90's 2-bit field at bits 62-63.
 *
 *   Tensor Memory address (9.7.16.1.1 "Tensor Memory Addressing"): 32 bits, lane in bits
 *   31-16, column in bits 15-0. 128 lanes x 512 columns of 32-bit cells per CTA on sm_100a.
 *   Allocation (9.7.16.1.2 "Tensor Memory Allocation", tcgen05.alloc): in columns, a power
 *   of two, at least 32; at most the 512 columns that exist.
 */
#ifndef FJ_SM100_DESC_CUH
#define FJ_SM100_DESC_CUH

#include "fajit_params.h"


/* Swizzle modes of the shared-memory descriptor (bits 61-63). */
#define FJ_TC_SWZ_NONE 0
#define FJ_TC_SWZ_128B_BASE32B 1
#define FJ_TC_SWZ_128B 2
#define FJ_TC_SWZ_64B 4
#define FJ_TC_SWZ_32B 6

/* A constant expression (usable in static_assert and #if): is (m, n) a dense
 * kind::f16 cta_group::1 shape? */
#define FJ_TC_SHAPE_OK(m, n)                                                             \
    (((m) == 64 && (n) >= 8 && (n) <= 256 && (n) % 8 == 0) ||                            \
     ((m) == 128 && (n) >= 16 && (n) <= 256 && (n) % 16 == 0))

/* Instruction descriptor of tcgen05.mma.cta_group::1.kind::f16 with an F32 accumulator:
 * A and B both F16 (bf16 = 0) or both BF16 (bf16 = 1), dense, no negation, no
 * saturation, no .ws shift. a_major_mn / b_major_mn: 0 = K-major, 1 = MN-major (the
 * ISA's "transpose" bits). Only meaningful for FJ_TC_SHAPE_OK(m, n); other values are
 * encoded as given, truncated to the field widths. */
FJ_HD fj_u32 fj_tc_idesc_f16(int bf16, int m, int n, int a_major_mn, int b_major_mn)
{
    fj_u32 ab = bf16 ? 1u : 0u;
    return (1u << 4)                                 /* D type F32 */
           | (ab << 7) | (ab << 10)                  /* A and B types */
           | ((a_major_mn ? 1u : 0u) << 15)          /* transpose A = MN-major */
           | ((b_major_mn ? 1u : 0u) << 16)          /* transpose B = MN-major */
           | ((((fj_u32)n >> 3) & 0x3fu) << 17)      /* N >> 3 */
           | ((((fj_u32)m >> 4) & 0x1fu) << 24);     /* M >> 4; bit 23 stays 0 */
}

/* Shared-memory matrix descriptor: smem_byte_addr is the shared-window address (as from
 * cvta.to.shared), lbo_bytes / sbo_bytes the leading / stride byte offsets of the ISA's
 * tables, swizzle one of FJ_TC_SWZ_*. Base offset 0 and relative LBO mode: the operand
 * must start on its swizzle pattern's boundary (1024 B for 128B swizzle). Addresses
 * and offsets keep bits 4-17, as the ISA's encode() does. */
FJ_HD fj_u64 fj_tc_smem_desc(fj_u32 smem_byte_addr, fj_u32 lbo_bytes, fj_u32 sbo_bytes,
                             int swizzle)
{
    return (fj_u64)((smem_byte_addr & 0x3ffffu) >> 4)
           | ((fj_u64)((lbo_bytes & 0x3ffffu) >> 4) << 16)
           | ((fj_u64)((sbo_bytes & 0x3ffffu) >> 4) << 32)
           | ((fj_u64)1 << 46)                       /* fixed 0b001 in bits 46-48 */
           | ((fj_u64)((fj_u32)swizzle & 7u) << 61);
}

/* Tensor Memory address of (lane, col) relative to base (the address tcgen05.alloc
 * wrote): lane in the high half, column in the low half. */
FJ_HD fj_u32 fj_tmem_addr(fj_u32 base, int lane, int col)
{
    return base + ((fj_u32)lane << 16) + (fj_u32)col;
}

/* Column count to pass to tcgen05.alloc for `cols` columns: the next power of two, at
 * least 32; 0 when more than the 512 columns of an SM are asked for. */
FJ_HD int fj_tmem_alloc_cols(int cols)
{
    if (cols > 512)
        return 0;
    int c = 32;
    while (c < cols)
        c <<= 1;
    return c;
}

#endif /* FJ_SM100_DESC_CUH */
