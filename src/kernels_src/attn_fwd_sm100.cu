/* attn_fwd_sm100.cu - FlashAttention-4 style forward for Blackwell datacenter GPUs: sm_100a
 * (B200/GB200) and sm_103a (B300/GB300) only (tcgen05, TMEM, TMA). COMPILED AND CHECKED
 * (NVRTC, ptxas resource figures), NEVER RUN: no Blackwell GPU was available when it was
 * written; the family carries that note (fj_family.status_note) and is validated on first use.
 *
 * Variants (preamble macros):
 *   FJ_DTYPE        FJ_DT_F16 | FJ_DT_BF16 (inputs and output; fp32 accumulation in TMEM)
 *   FJ_HEAD_DIM     64, 96, 128, 192 or 256 (a multiple of 32 in 32..256)
 *   FJ_MASK         FJ_MASK_NONE | FJ_MASK_CAUSAL | FJ_MASK_WINDOW (p.window_left/right)
 *   FJ_BLOCK_M      query rows per CTA: 256 (two 128-row Q tiles, two softmax warpgroups
 *                   that take turns) or 128 (one tile: head_dim 256, whose O takes half of TMEM)
 *   FJ_BLOCK_N      keys per K/V tile: 64 or 128
 *   FJ_FA4_STAGES   K/V ring slots (each holds one K or one V tile), 2..8
 *   FJ_FA4_EMU      software exp2: 0 = none, else element c of each row block uses
 *                   fj_exp2_poly (FMA pipe) when c % FJ_FA4_EMU == FJ_FA4_EMU - 1, MUFU ex2
 *                   for the rest (1 in FJ_FA4_EMU on the FMA pipe)
 *   FJ_FA4_RESCALE  conditional rescaling threshold in log2 units (0: rescale whenever a row
 *                   maximum grows); per-warp decision, final normalisation exact
 *   FJ_FA4_SCHED    0: static persistent round robin; 1: dynamic longest-first (atomic
 *                   counter, the kernel's last argument) - fj_sm90_sched.cuh's order
 * Run-time: batch, heads (GQA/MQA), seqlen_q/k, varlen (cu_seqlens; tensor maps over the
 *   total rows), strides, LSE, scale (> 0). Limits: 16-byte aligned pointers, strides
 *   multiples of 8 elements (TMA and the 16-byte O stores); compute capability 10.0 / 10.3.
 *
 * Launch (src/families/fa4.c): fj_attn_fwd_sm100(params, tmap_q, tmap_k, tmap_v, sched_ctr),
 *   the maps 4-D {head_dim, rows, heads, batch}, box {64, 128 (Q) or FJ_BLOCK_N (K, V), 1, 1},
 *   128-byte swizzle (the same encoder as the Hopper family); persistent grid min(SMs,
 *   tiles); block 128 * (FJ_BLOCK_M / 128 + 2) threads; dynamic shared memory
 *   fa4::SMEM_BYTES (fj_fa4_smem_bytes on the host computes the same number).
 *
 * Design (Zadouri et al. 2026, FA4; the numbers are this file's):
 *   warpgroups 0..QT-1  softmax: one thread per row of its 128-row Q tile; tcgen05.ld of the S
 *                       row (32x32b), mask, row max, conditional rescale decision (per warp),
 *                       exponentials (1 in FJ_FA4_EMU in software), row sum, P converted to
 *                       16 bit and written back into TMEM over the upper half of S (tcgen05.st)
 *   warpgroup QT        correction: rescales O_t in TMEM when its warp of the softmax decided
 *                       so, then (epilogue) normalises O, converts and stores it, and the LSE
 *   warpgroup QT+1      warp 0 load (TMA: Q tiles, K/V ring in consumption order; the tile
 *                       scheduler), warp 1 MMA (TMEM allocation; one thread issues every
 *                       tcgen05.mma: S_t = Q_t K^T (SS), O_t += P_t V (TS, P from TMEM)),
 *                       warps 2, 3 idle
 *   MMA order per K/V block j: O_0 += P_0 V_{j-1}; S_0 = Q_0 K_j; O_1 += P_1 V_{j-1};
 *   S_1 = Q_1 K_j - while softmax 0 works on S_0 the tensor core runs tile 1's GEMMs and
 *   the other way round (the ping-pong of FA4, from the in-order MMA pipe: S_t of block j
 *   overwrites P_t only after the PV that reads it, issued before it by the same thread).
 *
 * TMEM (128 lanes x 512 columns of 32 bit): S_t at columns t*BN, P_t (16-bit pairs) at
 *   t*BN + BN/2, O_t at QT*BN + t*HD; QT*(BN + HD) <= 512.
 * Shared memory: [Q tile 0][Q tile 1][K/V slot 0..ST-1][512 B barriers and words][stats
 *   QT*128*12 B], each tile ceil(hd/64) column chunks of rows x 128 bytes (the TMA box), 16-byte
 *   units XOR-swizzled by row % 8 (128B swizzle), chunks 1024-byte aligned. Descriptors:
 *   Q, K K-major (SBO 1024, k16 step +32 B inside a chunk, next chunk at rows*128); V
 *   MN-major (LBO = chunk bytes: the next 64 columns of head_dim, SBO 1024: 8-key groups,
 *   k16 step +2048 B).
 */
#include "fj_common.cuh"
#include "fj_sm100_prims.cuh"
#include "fj_exp2.cuh"

#if !defined(FJ_DTYPE) || !defined(FJ_HEAD_DIM) || !defined(FJ_MASK) || !defined(FJ_BLOCK_M) || \
    !defined(FJ_BLOCK_N)
#error "attn_fwd_sm100.cu needs FJ_DTYPE FJ_HEAD_DIM FJ_MASK FJ_BLOCK_M FJ_BLOCK_N"
#endif
#ifndef FJ_FA4_STAGES
#define FJ_FA4_STAGES 3
#endif
#ifndef FJ_FA4_EMU
#define FJ_FA4_EMU 0
#endif
#ifndef FJ_FA4_RESCALE
#define FJ_FA4_RESCALE 8
#endif
#ifndef FJ_FA4_SCHED
#define FJ_FA4_SCHED 0
#endif

/* fj_sm90_sched.cuh's knobs: always a persistent grid; the dynamic order with FJ_FA4_SCHED.
 * L2 groups of the masked order: the Hopper figures (32 MB of K/V per group, 4 MB at <= 1k
 * keys); B200 has 126 MB of L2, so these are conservative, not measured. */
#define FJ_FA3_PERSISTENT 1
#define FJ_FA3_SCHED FJ_FA4_SCHED
#define FA3_MASKED (FJ_MASK != 0)
#define FA3_DYN FJ_FA4_SCHED
#define FA3_L2GROUP (FA3_DYN ? 2 : FJ_HEAD_DIM >= 128)
#define FA3_L2_BYTES (32ll << 20)
#define FA3_L2_BYTES_SHORT (4ll << 20)
#define FA3_L2_SHORT_SEQ 1024

namespace fa4 {
constexpr int BM = FJ_BLOCK_M, BN = FJ_BLOCK_N, HD = FJ_HEAD_DIM, ST = FJ_FA4_STAGES;
constexpr int QT = BM / 128;                  /* 128-row Q tiles = softmax warpgroups */
constexpr int THREADS = 128 * (QT + 2);
constexpr int DC = (HD + 63) / 64;            /* 64-column chunks (one 128-byte swizzle row) */
constexpr int Q_CHUNK = 128 * 128, KV_CHUNK = BN * 128;
constexpr int Q_BYTES = DC * Q_CHUNK, KV_BYTES = DC * KV_CHUNK;
constexpr int OFF_KV = QT * Q_BYTES, OFF_BAR = OFF_KV + ST * KV_BYTES, BAR_BYTES = 512;
constexpr int OFF_STAT = OFF_BAR + BAR_BYTES, STAT_BYTES = QT * 128 * 12;
constexpr int SMEM_BYTES = OFF_STAT + STAT_BYTES + 1024;  /* + alignment slack */
/* TMEM columns */
constexpr int S_COL = 0, O_COL = QT * BN, P_OFF = BN / 2;
constexpr int TM_USED = QT * (BN + HD);
constexpr int TM_COLS = TM_USED <= 32 ? 32 : TM_USED <= 64 ? 64 : TM_USED <= 128 ? 128
                      : TM_USED <= 256 ? 256 : 512;
/* setmaxnreg per warpgroup: softmax, correction, load/MMA; 128 * sum = the launch's
 * registers (65536 / THREADS rounded down to 8, times THREADS) */
constexpr int REG_S = QT == 2 ? 176 : 232, REG_C = QT == 2 ? 80 : 160, REG_O = QT == 2 ? 80 : 112;
constexpr int REG_LAUNCH = (65536 / THREADS) / 8 * 8;
constexpr float THRESH = (float)FJ_FA4_RESCALE;

static_assert(FJ_DTYPE == FJ_DT_F16 || FJ_DTYPE == FJ_DT_BF16, "FJ_DTYPE");
static_assert(FJ_MASK == FJ_MASK_NONE || FJ_MASK == FJ_MASK_CAUSAL || FJ_MASK == FJ_MASK_WINDOW,
              "FJ_MASK");
static_assert(HD % 32 == 0 && HD >= 32 && HD <= 256, "FJ_HEAD_DIM: multiple of 32 in 32..256");
static_assert(BM == 128 || BM == 256, "FJ_BLOCK_M: 128 or 256");
static_assert(BN == 64 || BN == 128, "FJ_BLOCK_N: 64 or 128");
static_assert(ST >= 2 && ST <= 8, "FJ_FA4_STAGES: 2..8");
static_assert(FJ_FA4_EMU >= 0 && FJ_FA4_EMU <= 64, "FJ_FA4_EMU");
static_assert(FJ_TC_SHAPE_OK(128, BN) && FJ_TC_SHAPE_OK(128, HD), "tcgen05.mma shapes");
static_assert(TM_USED <= 512, "TMEM: QT * (BN + HD) columns over 512");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory over 227 KiB");
static_assert(128 * (QT * REG_S + REG_C + REG_O) <= REG_LAUNCH * THREADS, "setmaxnreg budget");
}  // namespace fa4

/* fj_sm90_sched.cuh reads its tile size and head_dim from namespace fa3: the CTA's rows. */
namespace fa3 {
constexpr int BM = fa4::BM, HD = fa4::HD, HDV = fa4::HD;   /* (V of head_dim columns) */
static_assert(HD == fa4::HD && HDV == HD, "");  /* (read by the masked order only) */
}
#include "fj_sm90_sched.cuh"

/* The K/V blocks [nb_lo, nb_hi) that some row of the CTA tile at query row m0 sees. */
struct fa4_band {
    int nb_lo, nb_hi;
};
FJ_DEVICE fa4_band band_of(const fj_attn_params &p, const fj_seq &sq, int m0)
{
    using namespace fa4;
    int kbeg = 0, kend = sq.sk;
#if FA3_MASKED
    const int shift = sq.sk - sq.sq, m_last = min(m0 + BM, sq.sq) - 1;
    if (p.window_right >= 0)
        kend = min(kend, m_last + shift + p.window_right + 1);
    if (p.window_left >= 0)
        kbeg = max(0, m0 + shift - p.window_left);
#else
    (void)p, (void)m0;
#endif
    fa4_band r;
    r.nb_lo = kbeg / BN;
    r.nb_hi = kend > kbeg ? (kend + BN - 1) / BN : r.nb_lo;
    return r;
}

/* The tile word the load warp hands over: {index (-1: end), batch, head, query block}. */
struct fa4_tile {
    int t, b, h, mb;
};
FJ_DEVICE fa4_tile read_tile(fj_u32 w)
{
    fa4_tile r;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r.t), "=r"(r.b), "=r"(r.h), "=r"(r.mb)
                 : "r"(w)
                 : "memory");
    return r;
}
FJ_DEVICE void st_f32(fj_u32 a, float v) { asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(a), "f"(v) : "memory"); }
FJ_DEVICE float ld_f32(fj_u32 a)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(a) : "memory");
    return v;
}

FJ_DEVICE void st_global_v4(void *ptr, fj_u32 a, fj_u32 b, fj_u32 c, fj_u32 d)
{
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ptr), "r"(a), "r"(b), "r"(c), "r"(d)
                 : "memory");
}

FJ_DEVICE fj_u64 desc_k(fj_u32 addr) { return fj_tc_smem_desc(addr, 16, 1024, FJ_TC_SWZ_128B); }
FJ_DEVICE fj_u64 desc_mn(fj_u32 addr)
{
    return fj_tc_smem_desc(addr, fa4::KV_CHUNK, 1024, FJ_TC_SWZ_128B);
}

extern "C" __global__ void __launch_bounds__(fa4::THREADS, 1)
fj_attn_fwd_sm100(const __grid_constant__ fj_attn_params p, const __grid_constant__ fj_tmap tq,
                  const __grid_constant__ fj_tmap tk, const __grid_constant__ fj_tmap tv,
                  int *sched_ctr)
{
    using namespace fa4;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const fj_u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const fj_u32 s_q = base, s_kv = base + OFF_KV, bar = base + OFF_BAR, stat = base + OFF_STAT;
    /* Barrier map (8 bytes each; t = Q tile, i = ring slot):
     *   Q_FULL(t)  load -> MMA: Q tile t landed (tx bytes)      count 1
     *   Q_EMPTY(t) MMA commit after the tile's last S: reload     count 1
     *   S_FULL(t)  MMA commit: S_t in TMEM (and the PV before it) count 1
     *   P_FULL(t)  softmax t: P_t written to TMEM                count 128
     *   O_READY(t) correction: O_t rescaled (or left) for the PV  count 128
     *   O_FINAL(t) MMA commit after the tile's last PV            count 1
     *   O_EMPTY(t) correction: O_t read out, the next tile may overwrite it  count 128
     *   SC_FULL(t) / SC_EMPTY(t)  softmax t <-> correction: the per-row words (rescale
     *              factor each block; l and m at the end)       count 128 / 128
     *   TI_FULL(k) / TI_EMPTY(k)  load warp -> every consumer warp: tile words, 2 slots
     *              count 1 / (1 MMA + 4*QT softmax + 4 correction warps)
     *   TM_FREE    softmax + correction threads done with TMEM: dealloc  count 128*(QT+1)
     *   KV_FULL(i) / KV_EMPTY(i)  the K/V ring                 count 1 / 1
     * then at +384 the TMEM base word, at +400 the two 16-byte tile words. */
#define Q_FULL(t) (bar + 8 * (0 + (t)))
#define Q_EMPTY(t) (bar + 8 * (2 + (t)))
#define S_FULL(t) (bar + 8 * (4 + (t)))
#define P_FULL(t) (bar + 8 * (6 + (t)))
#define O_READY(t) (bar + 8 * (8 + (t)))
#define O_FINAL(t) (bar + 8 * (10 + (t)))
#define O_EMPTY(t) (bar + 8 * (12 + (t)))
#define SC_FULL(t) (bar + 8 * (14 + (t)))
#define SC_EMPTY(t) (bar + 8 * (16 + (t)))
#define TI_FULL(k) (bar + 8 * (18 + (k)))
#define TI_EMPTY(k) (bar + 8 * (20 + (k)))
#define TM_FREE (bar + 8 * 22)
#define KV_FULL(i) (bar + 8 * (24 + (i)))
#define KV_EMPTY(i) (bar + 8 * (32 + (i)))
#define TM_WORD (bar + 384)
#define TI_WORD(k) (bar + 400 + 16 * (k))
    /* per-row words of softmax t, row r: k = 0 factor (each block) or l (the end), 1 m */
#define STAT(k, t, r) (stat + 4 * ((k) * QT * 128 + (t) * 128 + (r)))
    constexpr int TI_CONSUMERS = 1 + 4 * QT + 4;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
    constexpr int MMA_WARP = 4 * (QT + 1) + 1, LOAD_WARP = 4 * (QT + 1);

    if (threadIdx.x == 0) {
        for (int t = 0; t < QT; ++t) {
            mbar_init(Q_FULL(t), 1);
            mbar_init(Q_EMPTY(t), 1);
            mbar_init(S_FULL(t), 1);
            mbar_init(P_FULL(t), 128);
            mbar_init(O_READY(t), 128);
            mbar_init(O_FINAL(t), 1);
            mbar_init(O_EMPTY(t), 128);
            mbar_init(SC_FULL(t), 128);
            mbar_init(SC_EMPTY(t), 128);
        }
        for (int k = 0; k < 2; ++k) {
            mbar_init(TI_FULL(k), 1);
            mbar_init(TI_EMPTY(k), TI_CONSUMERS);
        }
        mbar_init(TM_FREE, 128 * (QT + 1));
        for (int i = 0; i < ST; ++i) {
            mbar_init(KV_FULL(i), 1);
            mbar_init(KV_EMPTY(i), 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    if (warp == MMA_WARP) {  /* the whole warp: .sync.aligned */
        tmem_alloc(TM_WORD, TM_COLS);
        tmem_relinquish();
    }
    tc_fence_before();
    __syncthreads();
    tc_fence_after();
    const fj_u32 tmem = (fj_u32)ld_shared_s32(TM_WORD);

    /* Every consumer role walks the tiles the load warp hands over, in the same order. */
    auto next_word = [&](int ti) -> fa4_tile {
        mbar_wait(TI_FULL(ti & 1), (ti >> 1) & 1);
        const fa4_tile w = read_tile(TI_WORD(ti & 1));
        __syncwarp();
        if (lane == 0)
            mbar_arrive(TI_EMPTY(ti & 1));
        return w;
    };

    if (wg == QT + 1) {
        setmaxnreg_dec<REG_O>();
        if (warp == LOAD_WARP) {
            /* ---- load warp, one thread: the tile order and the TMA loads ---- */
            if (lane != 0)
                return;
            const fa3_sched sc = sched_of(p);
            const int total = sc.num_mb * sc.bhn;
            tma_prefetch_desc(&tq);
            tma_prefetch_desc(&tk);
            tma_prefetch_desc(&tv);
            int g = 0, qi = 0, ti = 0;
            auto load_kv = [&](const fj_tmap *tm, int row, int hk, int bb) {
                const int st = g % ST, ph = (g / ST) & 1;
                mbar_wait(KV_EMPTY(st), ph ^ 1);
                mbar_expect_tx(KV_FULL(st), KV_BYTES);
#pragma unroll
                for (int c = 0; c < DC; ++c)
                    tma_load4(s_kv + st * KV_BYTES + c * KV_CHUNK, tm, c * 64, row, hk, bb, KV_FULL(st));
                ++g;
            };
            auto hand_over = [&](int t, int b, int h, int mb) {
                const int k = ti & 1;
                mbar_wait(TI_EMPTY(k), ((ti >> 1) & 1) ^ 1);
                put_tile(TI_WORD(k), t, b, h, mb);
                mbar_arrive(TI_FULL(k));
                ++ti;
            };
#if FA3_DYN
            /* fj_sm90_sched.cuh's claims: first tile blockIdx.x, then atomicAdd + gridDim.x;
             * the launch's last claim (tiles - 1) resets the counter. */
            auto next_tile = [&](int v) -> int {
                if (v < 0)
                    v = atomicAdd(sched_ctr, 1);
                if (v == total - 1)
                    atomicExch(sched_ctr, 0);
                return v + (int)gridDim.x;
            };
            int v = -1;
            for (int t = blockIdx.x; t < total; t = next_tile(v)) {
                v = -1;
#else
            (void)sched_ctr;
            for (int r = 0; r * (int)gridDim.x < total; ++r) {
                const int t = sched_tile(r);
                if (t >= total)
                    continue;
#endif
                int b, h, mb;
                tile_coords(p, sc, t, b, h, mb);
                const fj_seq sq = fj_seq_of(p, b);
                const int m0 = mb * BM;
                if (m0 >= sq.sq)  /* past a varlen sequence's end */
                    continue;
                hand_over(t, b, h, mb);
                const fa4_band bd = band_of(p, sq, m0);
                const int n = bd.nb_hi - bd.nb_lo;
                if (n <= 0)  /* no key: the correction warpgroup writes zeros */
                    continue;
                const bool varlen = p.cu_seqlens_q != 0;
                const int qrow = (varlen ? ((const int *)p.cu_seqlens_q)[b] : 0) + m0;
                const int krow = varlen ? ((const int *)p.cu_seqlens_k)[b] : 0;
                const int bb = varlen ? 0 : b, hk = h / (p.heads_q / p.heads_kv);
                for (int qt = 0; qt < QT; ++qt) {
                    mbar_wait(Q_EMPTY(qt), (qi & 1) ^ 1);
                    mbar_expect_tx(Q_FULL(qt), Q_BYTES);
#pragma unroll
                    for (int c = 0; c < DC; ++c)
                        tma_load4(s_q + qt * Q_BYTES + c * Q_CHUNK, &tq, c * 64, qrow + 128 * qt, h, bb,
                                  Q_FULL(qt));
                }
                ++qi;
                /* consumption order: K_0, then K_j, V_{j-1}, then V_{n-1} */
                load_kv(&tk, krow + bd.nb_lo * BN, hk, bb);
#pragma unroll 1
                for (int j = 1; j < n; ++j) {
                    load_kv(&tk, krow + (bd.nb_lo + j) * BN, hk, bb);
                    load_kv(&tv, krow + (bd.nb_lo + j - 1) * BN, hk, bb);
                }
#if FA3_DYN
                v = atomicAdd(sched_ctr, 1);  /* the next claim under the last load's wait */
#endif
                load_kv(&tv, krow + (bd.nb_hi - 1) * BN, hk, bb);
            }
            hand_over(-1, 0, 0, 0);
            return;
        }
        if (warp != MMA_WARP)
            return;  /* warps 2, 3 of the warpgroup: idle */
        /* ---- MMA warp: the whole warp walks the work (waits with warp-uniform exits, descriptors
         * in uniform registers), one elected lane issues every tcgen05.mma and commit; the
         * warp deallocates TMEM at the end ---- */
        const bool leader = elect_one();
        const fj_u32 ID_QK = fj_tc_idesc_f16(FJ_DTYPE == FJ_DT_BF16, 128, BN, 0, 0);
        const fj_u32 ID_PV = fj_tc_idesc_f16(FJ_DTYPE == FJ_DT_BF16, 128, HD, 0, 1);
        int g = 0, qi = 0, blk = 0, of = 0;
        /* S_t = Q_t K^T for the K tile in ring slot st */
        auto gemm_s = [&](int t, int st) {
#pragma unroll
            for (int kk = 0; kk < HD / 16; ++kk) {
                const fj_u32 off = (kk & 3) * 32;  /* k16 step inside a 64-column chunk */
                const fj_u64 da = desc_k(s_q + t * Q_BYTES + (kk >> 2) * Q_CHUNK + off);
                const fj_u64 db = desc_k(s_kv + st * KV_BYTES + (kk >> 2) * KV_CHUNK + off);
                if (leader)
                    umma_ss(tmem + S_COL + t * BN, da, db, ID_QK, kk > 0);
            }
            if (leader)
                umma_commit(S_FULL(t));
        };
        /* O_t (+)= P_t V for the V tile in ring slot st; first: the tile's first block */
        auto gemm_o = [&](int t, int st, bool first) {
            mbar_wait_warp(P_FULL(t), blk & 1);
            mbar_wait_warp(O_READY(t), blk & 1);
            if (first)
                mbar_wait_warp(O_EMPTY(t), (of & 1) ^ 1);
            tc_fence_after();
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk)
                if (leader)
                    umma_ts(tmem + O_COL + t * HD, tmem + S_COL + t * BN + P_OFF + kk * 8,
                            desc_mn(s_kv + st * KV_BYTES + kk * 2048), ID_PV, !first || kk > 0);
        };
        for (int ti = 0;; ++ti) {
            const fa4_tile w = next_word(ti);
            if (w.t < 0)
                break;
            const fj_seq sq = fj_seq_of(p, w.b);
            const fa4_band bd = band_of(p, sq, w.mb * BM);
            const int n = bd.nb_hi - bd.nb_lo;
            if (n <= 0)
                continue;
            for (int t = 0; t < QT; ++t)
                mbar_wait_warp(Q_FULL(t), qi & 1);
            tc_fence_after();
            int vst = 0;  /* ring slot of V_{j-1} */
#pragma unroll 1
            for (int j = 0; j < n; ++j) {
                const int kst = g % ST;
                mbar_wait_warp(KV_FULL(kst), (g / ST) & 1);
                ++g;
                tc_fence_after();
                if (j > 0) {
                    vst = g % ST;
                    mbar_wait_warp(KV_FULL(vst), (g / ST) & 1);
                    ++g;
                    tc_fence_after();
                }
                for (int t = 0; t < QT; ++t) {
                    if (j > 0)
                        gemm_o(t, vst, j == 1);
                    gemm_s(t, kst);
                }
                if (j > 0)
                    ++blk;
                if (leader)
                    umma_commit(KV_EMPTY(kst));
                if (j > 0 && leader)
                    umma_commit(KV_EMPTY(vst));
            }
            for (int t = 0; t < QT; ++t)
                if (leader)
                    umma_commit(Q_EMPTY(t));
            ++qi;
            /* the last block's PV */
            vst = g % ST;
            mbar_wait_warp(KV_FULL(vst), (g / ST) & 1);
            ++g;
            tc_fence_after();
            for (int t = 0; t < QT; ++t) {
                gemm_o(t, vst, n == 1);
                if (leader)
                    umma_commit(O_FINAL(t));
            }
            ++blk;
            ++of;
            if (leader)
                umma_commit(KV_EMPTY(vst));
        }
        mbar_wait_warp(TM_FREE, 0);
        tc_fence_after();
        tmem_dealloc(tmem, TM_COLS);
        return;
    }

    const int row = threadIdx.x & 127, wl = 32 * (warp & 3);  /* TMEM lane quadrant */
    if (wg < QT) {
        /* ---- softmax warpgroup t: one thread per row of Q tile t ---- */
        setmaxnreg_inc<REG_S>();
        const int t = wg;
        const float sl2 = p.scale_log2;
        const fj_u32 s_tm = fj_tmem_addr(tmem, wl, S_COL + t * BN);
        int blk = 0, rnd = 0;
        for (int ti = 0;; ++ti) {
            const fa4_tile w = next_word(ti);
            if (w.t < 0)
                break;
            const fj_seq sq = fj_seq_of(p, w.b);
            const int m0 = w.mb * BM;
            const fa4_band bd = band_of(p, sq, m0);
            const int n = bd.nb_hi - bd.nb_lo;
            int lo = 0, hi = sq.sk;
#if FA3_MASKED
            fj_key_range(p, m0 + 128 * t + row, sq.sq, sq.sk, &lo, &hi);
#endif
            float m_base = -FJ_INF, l = 0.f;  /* exponent base (log2 units), row sum */
#pragma unroll 1
            for (int j = 0; j < n; ++j, ++blk, ++rnd) {
                mbar_wait(S_FULL(t), blk & 1);
                tc_fence_after();
                fj_u32 s[BN / 32][32];
#pragma unroll
                for (int c = 0; c < BN / 32; ++c)
                    tmem_ld32(s[c], s_tm + 32 * c);
                tmem_wait_ld();
                /* mask: keys outside [lo, hi) (sequence end, diagonal, window), only in blocks
                 * where some row of the warp needs it */
                const int k0 = (bd.nb_lo + j) * BN;
                if (__any_sync(0xffffffffu, k0 < lo || k0 + BN > hi)) {
#pragma unroll
                    for (int c = 0; c < BN / 32; ++c)
#pragma unroll
                        for (int e = 0; e < 32; ++e) {
                            const int k = k0 + 32 * c + e;
                            if (k < lo || k >= hi)
                                s[c][e] = __float_as_uint(-FJ_INF);
                        }
                }
                float mx4[4] = {-FJ_INF, -FJ_INF, -FJ_INF, -FJ_INF};
#pragma unroll
                for (int c = 0; c < BN / 32; ++c)
#pragma unroll
                    for (int e = 0; e < 32; ++e)
                        mx4[e & 3] = fmaxf(mx4[e & 3], __uint_as_float(s[c][e]));
                const float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3])) * sl2;
                /* conditional rescaling: the base moves only when some row of the warp grew by
                 * more than THRESH (then every row of the warp takes its new maximum) */
                float factor = 1.f;
                if (__any_sync(0xffffffffu, mx > m_base + THRESH)) {
                    const float m_new = fmaxf(m_base, mx);
                    if (m_new != -FJ_INF) {
                        factor = ex2(m_base - m_new);  /* 0 while the row had no key */
                        m_base = m_new;
                        l *= factor;
                    }
                }
                mbar_wait(SC_EMPTY(t), (rnd & 1) ^ 1);
                st_f32(STAT(0, t, row), factor);
                mbar_arrive(SC_FULL(t));
                /* P = 2^(s * scale_log2 - base): 1 in FJ_FA4_EMU on the FMA pipe */
                const float mu = m_base == -FJ_INF ? 0.f : m_base;
                float rs[2] = {0.f, 0.f};
                fj_u32 pk[BN / 64][32];
#pragma unroll
                for (int c = 0; c < BN / 32; ++c)
#pragma unroll
                    for (int e = 0; e < 32; e += 2) {
                        const int idx = 32 * c + e, col = idx / 2;
                        const float xa = fmaf(__uint_as_float(s[c][e]), sl2, -mu);
                        const float xb = fmaf(__uint_as_float(s[c][e + 1]), sl2, -mu);
                        const float pa = FJ_FA4_EMU && idx % FJ_FA4_EMU == FJ_FA4_EMU - 1
                                             ? fj_exp2_poly(xa) : ex2(xa);
                        const float pb = FJ_FA4_EMU && (idx + 1) % FJ_FA4_EMU == FJ_FA4_EMU - 1
                                             ? fj_exp2_poly(xb) : ex2(xb);
                        rs[0] += pa;
                        rs[1] += pb;
                        pk[col / 32][col % 32] = pack2(pa, pb);
                    }
                l += rs[0] + rs[1];
#pragma unroll
                for (int c = 0; c < BN / 64; ++c)
                    tmem_st32(s_tm + P_OFF + 32 * c, pk[c]);
                tmem_wait_st();
                tc_fence_before();
                mbar_arrive(P_FULL(t));
            }
            /* the tile's end: l and the base to the epilogue */
            mbar_wait(SC_EMPTY(t), (rnd & 1) ^ 1);
            st_f32(STAT(0, t, row), l);
            st_f32(STAT(1, t, row), m_base);
            mbar_arrive(SC_FULL(t));
            ++rnd;
        }
        tc_fence_before();
        mbar_arrive(TM_FREE);
        return;
    }

    /* ---- correction warpgroup: O rescale in TMEM, then the epilogue ---- */
    setmaxnreg_dec<REG_C>();
    int rnd = 0, of = 0;
    for (int ti = 0;; ++ti) {
        const fa4_tile w = next_word(ti);
        if (w.t < 0)
            break;
        const fj_seq sq = fj_seq_of(p, w.b);
        const int m0 = w.mb * BM;
        const fa4_band bd = band_of(p, sq, m0);
        const int n = bd.nb_hi - bd.nb_lo;
#pragma unroll 1
        for (int j = 0; j < n; ++j, ++rnd)
            for (int t = 0; t < QT; ++t) {
                mbar_wait(SC_FULL(t), rnd & 1);
                const float f = ld_f32(STAT(0, t, row));
                mbar_arrive(SC_EMPTY(t));
                /* O_t holds the PVs before block j (S_FULL of j was committed after them);
                 * block 0's PV overwrites O, so nothing to scale there */
                if (j > 0 && __any_sync(0xffffffffu, f != 1.f)) {
                    tc_fence_after();
                    const fj_u32 o_tm = fj_tmem_addr(tmem, wl, O_COL + t * HD);
#pragma unroll 1
                    for (int c = 0; c < HD / 32; ++c) {
                        fj_u32 o[32];
                        tmem_ld32(o, o_tm + 32 * c);
                        tmem_wait_ld();
#pragma unroll
                        for (int e = 0; e < 32; ++e)
                            o[e] = __float_as_uint(__uint_as_float(o[e]) * f);
                        tmem_st32(o_tm + 32 * c, o);
                    }
                    tmem_wait_st();
                }
                tc_fence_before();
                mbar_arrive(O_READY(t));
            }
        /* epilogue: O / l (exact), 16-bit, to global; LSE */
        for (int t = 0; t < QT; ++t) {
            mbar_wait(SC_FULL(t), rnd & 1);
            const float l = ld_f32(STAT(0, t, row)), m = ld_f32(STAT(1, t, row));
            mbar_arrive(SC_EMPTY(t));
            const int qrow = m0 + 128 * t + row;
            const bool valid = qrow < sq.sq, none = m == -FJ_INF;
            const float inv = none ? 0.f : 1.f / l;
            fj_u16 *const go = (fj_u16 *)p.o + sq.o + (fj_i64)qrow * p.o_row_stride +
                               (fj_i64)w.h * p.o_head_stride;
            if (n > 0) {
                mbar_wait(O_FINAL(t), of & 1);
                tc_fence_after();
                const fj_u32 o_tm = fj_tmem_addr(tmem, wl, O_COL + t * HD);
#pragma unroll 1
                for (int c = 0; c < HD / 32; ++c) {
                    fj_u32 o[32];
                    tmem_ld32(o, o_tm + 32 * c);
                    tmem_wait_ld();
                    fj_u32 h[16];
#pragma unroll
                    for (int e = 0; e < 16; ++e)
                        h[e] = pack2(__uint_as_float(o[2 * e]) * inv, __uint_as_float(o[2 * e + 1]) * inv);
                    if (valid)
#pragma unroll
                        for (int q = 0; q < 4; ++q)
                            st_global_v4(go + 32 * c + 8 * q, h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
                }
                tc_fence_before();
                mbar_arrive(O_EMPTY(t));
            } else if (valid) {
#pragma unroll 1
                for (int c = 0; c < HD / 8; ++c)
                    st_global_v4(go + 8 * c, 0u, 0u, 0u, 0u);
            }
            if (p.lse && valid)
                ((float *)p.lse)[sq.lse_base + sq.lse_head_stride * w.h + qrow] =
                    none ? -FJ_INF : (m + __log2f(l)) * 0.6931471805599453f;
        }
        ++rnd;
        if (n > 0)
            ++of;
    }
    tc_fence_before();
    mbar_arrive(TM_FREE);
}
