/* fj_sm100_prims.cuh - Blackwell (sm_100a / sm_103a) tcgen05 PTX wrappers for
 * attn_fwd_sm100.cu: Tensor Memory allocation, the fifth-generation tensor-core MMA (SS and
 * TS forms), its commit to an mbarrier, TMEM loads and stores, and the tcgen05 fences.
 * Nothing here knows the kernel's tiles. The generation-independent pieces (mbarrier, TMA,
 * the tensor-map parameter, named barriers, setmaxnreg) come from fj_sm90_prims.cuh, which
 * this header includes; ex2 and pack2 from fj_common.cuh; the descriptor encodings from
 * fj_sm100_desc.cuh.
 *
 * Has (PTX ISA 9.7.16, CUTLASS include/cute/arch/{tmem_allocator,mma_sm100_umma,
 * copy_sm100}.hpp and include/cutlass/arch/barrier.h spell the same instructions):
 *   tmem_alloc, tmem_relinquish, tmem_dealloc
 *                    tcgen05.alloc / relinquish_alloc_permit / dealloc, cta_group::1; warp-wide
 *                    (.sync.aligned: every lane of one warp, converged)
 *   elect_one        elect.sync: the warp's one issuing lane
 *   umma_ss, umma_ts tcgen05.mma.cta_group::1.kind::f16: D (TMEM) (+)= A * B; A from a shared
 *                    memory descriptor (SS) or from TMEM (TS), B from a descriptor; one thread
 *   umma_commit      tcgen05.commit ... mbarrier::arrive::one: the mbarrier gets one arrival when
 *                    every earlier tcgen05 async operation of this thread has completed
 *   tmem_ld32, tmem_st32   tcgen05.ld / st .32x32b.x32: 32 consecutive 32-bit columns of this
 *                    thread's lane (warp w % 4 of a warpgroup owns lanes 32*(w%4) .. +31)
 *   tmem_wait_ld, tmem_wait_st, tc_fence_before, tc_fence_after
 *                    tcgen05.wait::ld / wait::st, tcgen05.fence::before_thread_sync /
 *                    after_thread_sync (order tcgen05 operations across a thread barrier)
 * Limits: sm_100a / sm_103a only (tcgen05 is rejected for plain sm_100 and for sm_120).
 * Expects: FJ_DTYPE (through fj_sm90_prims.cuh).
 */
#ifndef FJ_SM100_PRIMS_CUH
#define FJ_SM100_PRIMS_CUH

#include "fj_common.cuh"
#include "fj_sm90_prims.cuh"
#include "fj_sm100_desc.cuh"

/* ---- Tensor Memory allocation (one warp) ---------------------------------------------- */

/* Allocates `cols` columns (a power of two >= 32) and writes the TMEM base address to the
 * shared word at `dst`. */
FJ_DEVICE void tmem_alloc(fj_u32 dst, fj_u32 cols)
{
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n" ::"r"(dst),
                 "r"(cols)
                 : "memory");
}
/* After the allocation: lets the other CTAs on this SM allocate (none wait here: one CTA
 * per SM, but a relinquished permit is what CUTLASS and FA4 leave behind). */
FJ_DEVICE void tmem_relinquish()
{
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n" ::: "memory");
}
FJ_DEVICE void tmem_dealloc(fj_u32 taddr, fj_u32 cols)
{
    asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" ::"r"(taddr), "r"(cols)
                 : "memory");
}

/* ---- MMA (one thread issues) ---------------------------------------------------------- */

/* elect.sync over the full warp: 1 in exactly one lane (the same one while all 32 run). The
 * MMA warp's issuer: its loop stays warp-uniform, only the issue is predicated. */
FJ_DEVICE bool elect_one()
{
    fj_u32 r;
    asm volatile("{\n.reg .pred p;\n.reg .b32 t;\nelect.sync t|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(r));
    return r != 0;
}

/* D[tmem d] = A * B (acc == 0) or D += A * B: A and B shared-memory descriptors. */
FJ_DEVICE void umma_ss(fj_u32 d, fj_u64 adesc, fj_u64 bdesc, fj_u32 idesc, int acc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n" ::"r"(d),
                 "l"(adesc), "l"(bdesc), "r"(idesc), "r"(acc)
                 : "memory");
}
/* The same with A read from Tensor Memory at `a` (16-bit elements, two per column). */
FJ_DEVICE void umma_ts(fj_u32 d, fj_u32 a, fj_u64 bdesc, fj_u32 idesc, int acc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n}\n" ::"r"(d),
                 "r"(a), "l"(bdesc), "r"(idesc), "r"(acc)
                 : "memory");
}
/* One arrival on the mbarrier at `bar` once this thread's earlier tcgen05.mma completed. */
FJ_DEVICE void umma_commit(fj_u32 bar)
{
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n" ::"r"(
                     bar)
                 : "memory");
}

/* ---- TMEM <-> registers (a whole warp, its 32 lanes) ---------------------------------- */

#define FJ_TM32_L                                                                              \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "  \
    "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FJ_TM32_S                                                                              \
    "{%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "  \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32}"
#define FJ_TM8(c, r, o) c(r[(o) + 0]), c(r[(o) + 1]), c(r[(o) + 2]), c(r[(o) + 3]), \
                        c(r[(o) + 4]), c(r[(o) + 5]), c(r[(o) + 6]), c(r[(o) + 7])
#define FJ_TM32(c, r, o) FJ_TM8(c, r, o), FJ_TM8(c, r, (o) + 8), FJ_TM8(c, r, (o) + 16), \
                         FJ_TM8(c, r, (o) + 24)

/* 32 columns from `taddr` (lane = this thread's) into r, as raw bits; valid after
 * tmem_wait_ld. (Callers pass rows of a 2-D array indexed by unrolled constants, so the
 * values stay in registers.) */
FJ_DEVICE void tmem_ld32(fj_u32 (&r)[32], fj_u32 taddr)
{
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x32.b32 " FJ_TM32_L ", [%32];\n"
                 : FJ_TM32("=r", r, 0)
                 : "r"(taddr)
                 : "memory");
}
/* r into 32 columns from `taddr`; complete (for this thread) after tmem_wait_st. */
FJ_DEVICE void tmem_st32(fj_u32 taddr, const fj_u32 (&r)[32])
{
    asm volatile("tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], " FJ_TM32_S ";\n" ::"r"(taddr),
                 FJ_TM32("r", r, 0)
                 : "memory");
}
FJ_DEVICE void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory"); }
FJ_DEVICE void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;\n" ::: "memory"); }
FJ_DEVICE void tc_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }
FJ_DEVICE void tc_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

#endif /* FJ_SM100_PRIMS_CUH */
