/* fj_sm90_prims.cuh - Hopper (sm_90a) PTX primitives for attn_fwd_sm90.cu: nothing in it
 * knows the kernel's tiles. Self-contained like every kernel source (no toolkit header).
 *
 * Has:
 *   smem_u32                   generic -> 32-bit shared address
 *   mbar_*                     mbarrier init / arrive (plain, count, expect_tx) / try_wait /
 *                              wait (per lane) / wait_warp (warp-uniform exit)
 *   named_sync, named_arrive   bar.sync / bar.arrive on a named barrier over N threads
 *   fj_tmap                    a tensor map as a kernel parameter
 *   tma_load4, tma_prefetch_desc, tma_prefetch_l2
 *                              one box of a 4-D tensor map into shared memory (completing on an
 *                              mbarrier) or into L2; prefetch.tensormap
 *   ld_shared_s32, ld_shared_u64   volatile shared loads (words written by other warps)
 *   wg_fence, wg_commit, wg_wait<N>, pin   wgmma fences and register pins
 *   desc_kmajor, desc_nmajor   wgmma shared-memory descriptors, 128-byte swizzle
 *   wgmma_ss_<N>, wgmma_rs_<N>, wgmma_rsk_<N>
 *                              wgmma m64nNk16, fp32 accumulators, 16-bit A/B: SS for N = 16..256
 *                              step 16; RS (A from registers) with B N-major (rs) or K-major
 *                              (rsk) for N = 16..256 step 16
 *   setmaxnreg_dec<N>, setmaxnreg_inc<N>   warpgroup register reallocation
 *   FA3_CAT(a, b)              token pasting after expansion
 * Limits: sm_90a only (wgmma, setmaxnreg, TMA are rejected for plain sm_90). Functions a
 * variant may not call are templates or [[maybe_unused]]: NVRTC warns about unreferenced
 * static functions otherwise.
 * Expects: FJ_DTYPE (FJ_DT_F16 or FJ_DT_BF16: the wgmma input type); ex2 and pack2 are fj_common.cuh's.
 */
#ifndef FJ_SM90_PRIMS_CUH
#define FJ_SM90_PRIMS_CUH

#include "fj_common.cuh"

#if FJ_DTYPE == FJ_DT_BF16
#define FA3_AB "bf16"
#else
#define FA3_AB "f16"
#endif
#define FA3_CAT_(a, b) a##b
#define FA3_CAT(a, b) FA3_CAT_(a, b)

/* ---- PTX wrappers ----------------------------------------------------------------------- */

FJ_DEVICE fj_u32 smem_u32(const void *p)
{
    fj_u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

FJ_DEVICE void mbar_init(fj_u32 bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
FJ_DEVICE void mbar_expect_tx(fj_u32 bar, fj_u32 bytes)
{
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
FJ_DEVICE void mbar_arrive(fj_u32 bar)
{
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }\n" ::"r"(bar) : "memory");
}
/* One try_wait on the phase of `bar` with parity `parity`: 1 when it has completed. */
[[maybe_unused]] FJ_DEVICE fj_u32 mbar_try(fj_u32 bar, int parity)
{
    fj_u32 ok;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p; }\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return ok;
}
/* Waits for the phase of `bar` with parity `parity` to complete. */
FJ_DEVICE void mbar_wait(fj_u32 bar, int parity)
{
    while (!mbar_try(bar, parity)) {
    }
}

/* mbar_wait with a warp-uniform exit (every lane's try_wait succeeded): for waits inside the
 * consumers' GEMM stream, where a per-lane loop exit made ptxas move the wgmma descriptors
 * after it out of uniform registers (FA3_OCOPY's O empty wait in the former cross-tile
 * stream: +74 instructions per K/V block at hd128). */
template <int UNUSED = 0> FJ_DEVICE void mbar_wait_warp(fj_u32 bar, int parity)
{
    while (!__all_sync(0xffffffffu, mbar_try(bar, parity))) {
    }
}

/* A CUtensorMap as a kernel parameter (const __grid_constant__, 64-byte aligned, 128 bytes). */
struct __align__(64) fj_tmap {
    fj_u64 w[16];
};

/* One TMA box of a 4-D tensor map into shared memory, completing on `bar`. */
FJ_DEVICE void tma_load4(fj_u32 dst, const void *tmap, int c0, int c1, int c2, int c3, fj_u32 bar)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
        "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}
FJ_DEVICE void tma_prefetch_desc(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
}
/* One box of a 4-D tensor map into L2 (no shared memory, no barrier). */
template <int UNUSED = 0> FJ_DEVICE void tma_prefetch_l2(const void *tmap, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n" ::"l"(tmap),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
/* Used only for FA3_OCOPY's handoff words (the racecheck marks below name that
 * hand-over; tests/racecheck_reviewed.md has its proof). */
template <int UNUSED = 0> FJ_DEVICE int ld_shared_s32(fj_u32 addr)
{
    int v;
    /* racecheck: o-words */
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

/* FA3_OCOPY's handoff words and the count form of mbarrier.arrive */
template <int UNUSED = 0> FJ_DEVICE fj_u64 ld_shared_u64(fj_u32 addr)
{
    fj_u64 v;
    /* racecheck: o-words */
    asm volatile("ld.shared.b64 %0, [%1];\n" : "=l"(v) : "r"(addr) : "memory");
    return v;
}
template <int UNUSED = 0> FJ_DEVICE void mbar_arrive_n(fj_u32 bar, fj_u32 n)
{
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0], %1; }\n" ::"r"(bar), "r"(n) : "memory");
}

/* Named barrier `id` over N threads (templates: no unused-function warnings). */
template <int N> FJ_DEVICE void named_sync(int id) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(N) : "memory"); }
template <int N> FJ_DEVICE void named_arrive(int id) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(N) : "memory"); }

FJ_DEVICE void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FJ_DEVICE void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> FJ_DEVICE void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

/* Warpgroup register reallocation (takes effect only with __launch_bounds__(threads, 1)). */
template <int N> FJ_DEVICE void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> FJ_DEVICE void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

/* Pins registers at this point of the program (no instruction): keeps the compiler from
 * moving accesses to wgmma operands across the fence / wait around them. */
template <int N> FJ_DEVICE void pin(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(r[i])::"memory");
}
template <int N, int M> FJ_DEVICE void pin(fj_u32 (&r)[N][M])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < M; ++j)
            asm volatile("" : "+r"(r[i][j])::"memory");
}

/* Shared-memory matrix descriptors, 128-byte swizzle (mode 1 in bits 62-63). */
FJ_DEVICE fj_u64 desc_kmajor(fj_u32 addr)
{
    return (fj_u64)((addr & 0x3FFFF) >> 4) | ((fj_u64)1 << 16) | ((fj_u64)(1024 >> 4) << 32) |
           ((fj_u64)1 << 62);
}
FJ_DEVICE fj_u64 desc_nmajor(fj_u32 addr, fj_u32 lbo)
{
    return (fj_u64)((addr & 0x3FFFF) >> 4) | ((fj_u64)(lbo >> 4) << 16) |
           ((fj_u64)(1024 >> 4) << 32) | ((fj_u64)1 << 62);
}

/* wgmma m64nNk16 with fp32 accumulators d[OFF .. OFF + N/2): SS (A, B descriptors) and RS
 * (A = 4 registers of 16-bit pairs). acc = 0: d = A*B; otherwise d += A*B. The operand lists
 * are spelled by the preprocessor: FA3_L<g> is "%0,...,%(8g-1)", FA3_C<g> the matching
 * "+f" constraints, and the numbers of the operands after them are passed literally. */
#define FA3_G0 "%0,%1,%2,%3,%4,%5,%6,%7"
#define FA3_G1 "%8,%9,%10,%11,%12,%13,%14,%15"
#define FA3_G2 "%16,%17,%18,%19,%20,%21,%22,%23"
#define FA3_G3 "%24,%25,%26,%27,%28,%29,%30,%31"
#define FA3_G4 "%32,%33,%34,%35,%36,%37,%38,%39"
#define FA3_G5 "%40,%41,%42,%43,%44,%45,%46,%47"
#define FA3_G6 "%48,%49,%50,%51,%52,%53,%54,%55"
#define FA3_G7 "%56,%57,%58,%59,%60,%61,%62,%63"
#define FA3_G8 "%64,%65,%66,%67,%68,%69,%70,%71"
#define FA3_G9 "%72,%73,%74,%75,%76,%77,%78,%79"
#define FA3_G10 "%80,%81,%82,%83,%84,%85,%86,%87"
#define FA3_G11 "%88,%89,%90,%91,%92,%93,%94,%95"
#define FA3_G12 "%96,%97,%98,%99,%100,%101,%102,%103"
#define FA3_G13 "%104,%105,%106,%107,%108,%109,%110,%111"
#define FA3_G14 "%112,%113,%114,%115,%116,%117,%118,%119"
#define FA3_G15 "%120,%121,%122,%123,%124,%125,%126,%127"
#define FA3_L1 FA3_G0
#define FA3_L2 FA3_L1 "," FA3_G1
#define FA3_L3 FA3_L2 "," FA3_G2
#define FA3_L4 FA3_L3 "," FA3_G3
#define FA3_L5 FA3_L4 "," FA3_G4
#define FA3_L6 FA3_L5 "," FA3_G5
#define FA3_L7 FA3_L6 "," FA3_G6
#define FA3_L8 FA3_L7 "," FA3_G7
#define FA3_L9 FA3_L8 "," FA3_G8
#define FA3_L10 FA3_L9 "," FA3_G9
#define FA3_L11 FA3_L10 "," FA3_G10
#define FA3_L12 FA3_L11 "," FA3_G11
#define FA3_L13 FA3_L12 "," FA3_G12
#define FA3_L14 FA3_L13 "," FA3_G13
#define FA3_L15 FA3_L14 "," FA3_G14
#define FA3_L16 FA3_L15 "," FA3_G15
#define FA3_R8(d, o) "+f"(d[(o) + 0]), "+f"(d[(o) + 1]), "+f"(d[(o) + 2]), "+f"(d[(o) + 3]), \
                     "+f"(d[(o) + 4]), "+f"(d[(o) + 5]), "+f"(d[(o) + 6]), "+f"(d[(o) + 7])
#define FA3_C1(d, o) FA3_R8(d, o)
#define FA3_C2(d, o) FA3_C1(d, o), FA3_R8(d, (o) + 8)
#define FA3_C3(d, o) FA3_C2(d, o), FA3_R8(d, (o) + 16)
#define FA3_C4(d, o) FA3_C3(d, o), FA3_R8(d, (o) + 24)
#define FA3_C5(d, o) FA3_C4(d, o), FA3_R8(d, (o) + 32)
#define FA3_C6(d, o) FA3_C5(d, o), FA3_R8(d, (o) + 40)
#define FA3_C7(d, o) FA3_C6(d, o), FA3_R8(d, (o) + 48)
#define FA3_C8(d, o) FA3_C7(d, o), FA3_R8(d, (o) + 56)
#define FA3_C9(d, o) FA3_C8(d, o), FA3_R8(d, (o) + 64)
#define FA3_C10(d, o) FA3_C9(d, o), FA3_R8(d, (o) + 72)
#define FA3_C11(d, o) FA3_C10(d, o), FA3_R8(d, (o) + 80)
#define FA3_C12(d, o) FA3_C11(d, o), FA3_R8(d, (o) + 88)
#define FA3_C13(d, o) FA3_C12(d, o), FA3_R8(d, (o) + 96)
#define FA3_C14(d, o) FA3_C13(d, o), FA3_R8(d, (o) + 104)
#define FA3_C15(d, o) FA3_C14(d, o), FA3_R8(d, (o) + 112)
#define FA3_C16(d, o) FA3_C15(d, o), FA3_R8(d, (o) + 120)

#define FA3_DEF_SS(N, G, A, B, F)                                                                 \
    template <int OFF, int TOT>                                                                   \
    FJ_DEVICE void wgmma_ss_##N(float (&d)[TOT], fj_u64 da, fj_u64 db, int acc)                   \
    {                                                                                             \
        static_assert(OFF + N / 2 <= TOT, "accumulator range");                                   \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #F ", 0;\n"                             \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." FA3_AB "." FA3_AB " {" FA3_L##G \
                     "}, %" #A ", %" #B ", p, 1, 1, 0, 0;\n}\n"                                   \
                     : FA3_C##G(d, OFF)                                                           \
                     : "l"(da), "l"(db), "r"(acc)                                                 \
                     : "memory");                                                                 \
    }
#define FA3_DEF_RS_(NAME, N, G, A0, A1, A2, A3, B, F, TB)                                       \
    template <int OFF, int TOT>                                                                   \
    FJ_DEVICE void NAME(float (&d)[TOT], const fj_u32 (&a)[4], fj_u64 db, int acc)                \
    {                                                                                             \
        static_assert(OFF + N / 2 <= TOT, "accumulator range");                                   \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #F ", 0;\n"                             \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." FA3_AB "." FA3_AB " {" FA3_L##G \
                     "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, " #TB ";\n}\n" \
                     : FA3_C##G(d, OFF)                                                           \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc)             \
                     : "memory");                                                                 \
    }
/* RS with B N-major (V: wgmma_rs_N) and K-major (K, for FA3_QREG: wgmma_rsk_N) */
#define FA3_DEF_RS(N, G, A0, A1, A2, A3, B, F)                                                    \
    FA3_DEF_RS_(wgmma_rs_##N, N, G, A0, A1, A2, A3, B, F, 1)                                      \
    FA3_DEF_RS_(wgmma_rsk_##N, N, G, A0, A1, A2, A3, B, F, 0)
FA3_DEF_SS(16, 1, 8, 9, 10)
FA3_DEF_SS(32, 2, 16, 17, 18)
FA3_DEF_SS(48, 3, 24, 25, 26)
FA3_DEF_SS(64, 4, 32, 33, 34)
FA3_DEF_SS(80, 5, 40, 41, 42)
FA3_DEF_SS(96, 6, 48, 49, 50)
FA3_DEF_SS(112, 7, 56, 57, 58)
FA3_DEF_SS(128, 8, 64, 65, 66)
FA3_DEF_SS(144, 9, 72, 73, 74)
FA3_DEF_SS(160, 10, 80, 81, 82)
FA3_DEF_SS(176, 11, 88, 89, 90)
FA3_DEF_SS(192, 12, 96, 97, 98)
FA3_DEF_SS(208, 13, 104, 105, 106)
FA3_DEF_SS(224, 14, 112, 113, 114)
FA3_DEF_SS(240, 15, 120, 121, 122)
FA3_DEF_SS(256, 16, 128, 129, 130)
FA3_DEF_RS(32, 2, 16, 17, 18, 19, 20, 21)
FA3_DEF_RS(64, 4, 32, 33, 34, 35, 36, 37)
FA3_DEF_RS(96, 6, 48, 49, 50, 51, 52, 53)
FA3_DEF_RS(128, 8, 64, 65, 66, 67, 68, 69)
FA3_DEF_RS(160, 10, 80, 81, 82, 83, 84, 85)
FA3_DEF_RS(192, 12, 96, 97, 98, 99, 100, 101)
FA3_DEF_RS(224, 14, 112, 113, 114, 115, 116, 117)
FA3_DEF_RS(256, 16, 128, 129, 130, 131, 132, 133)
/* odd multiples of 16 (P V of head dims 16, 48, 80, ...) */
FA3_DEF_RS(16, 1, 8, 9, 10, 11, 12, 13)
FA3_DEF_RS(48, 3, 24, 25, 26, 27, 28, 29)
FA3_DEF_RS(80, 5, 40, 41, 42, 43, 44, 45)
FA3_DEF_RS(112, 7, 56, 57, 58, 59, 60, 61)
FA3_DEF_RS(144, 9, 72, 73, 74, 75, 76, 77)
FA3_DEF_RS(176, 11, 88, 89, 90, 91, 92, 93)
FA3_DEF_RS(208, 13, 104, 105, 106, 107, 108, 109)
FA3_DEF_RS(240, 15, 120, 121, 122, 123, 124, 125)

#endif
