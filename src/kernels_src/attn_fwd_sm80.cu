/* attn_fwd_sm80.cu - FlashAttention-2 forward: the portable path (sm_80 and every later
 * target, compiled as plain sm_XX code: no wgmma, no TMA).
 *
 * Variants (preamble macros, all required):
 *   FJ_DTYPE     FJ_DT_F16 | FJ_DT_BF16 (inputs and output; fp32 accumulation)
 *   FJ_HEAD_DIM  8..256, a multiple of 8 (padded to 16 inside, with zero-filled columns)
 *   FJ_HEAD_DIM_V  (optional; defined only where it differs) V's and O's head dim, a
 *                multiple of 8 at most FJ_HEAD_DIM: V tiles keep FJ_HEAD_DIM's shared rows
 *                with only FJ_HEAD_DIM_V columns loaded (the rest zero-filled), P V spans
 *                all of them (zeros past dv: the portable fallback, not tuned for it), O's
 *                rows go out with FJ_HEAD_DIM_V columns. Not run on a GPU yet.
 *   FJ_MASK      FJ_MASK_NONE | FJ_MASK_CAUSAL | FJ_MASK_WINDOW (the last two read
 *                p.window_left/right at run time; causal arrives as (-1, 0))
 *   FJ_BLOCK_M   query rows per CTA, a multiple of 16*FJ_WARPS
 *   FJ_BLOCK_N   keys per K/V tile, a multiple of 16
 *   FJ_WARPS     warps per CTA (1, 2, 4 or 8); warp w owns rows [w*BM/WARPS, (w+1)*BM/WARPS)
 *   FJ_STAGES    1: one K and one V buffer, FA2's schedule (V_j loads during S = QK_j^T,
 *                the next K during softmax and PV); 2: two K/V buffers, the next K and V
 *                load during all of the current block.
 * Run-time: seqlen_q/k, batch, heads (GQA/MQA), varlen (cu_seqlens), strides, LSE, scale.
 * Model features (fj_common.cuh, 0 unless set; any: fj_feat_params is the last parameter):
 *   FJ_SOFTCAP   scores become tanh(s_raw * scale / cap) (tanh.approx) and the exp2 scale
 *                cap * log2(e) (FA's trick: one multiply before the tanh, none after)
 *   FJ_ALIBI     -slope/unit * |i + sk - sq - j| added to the scores before the row max
 *                (unit: the natural-log value of one score unit, scale or cap)
 *   FJ_SINKS     exp(sink) joins each row's sum at the end, against max(row max, sink)
 *   Without any the kernel compiles to the same code as before the features.
 * Limits: scale > 0 (row maxima are taken on raw scores). Strides multiples of 8 elements
 *   and 16-byte aligned pointers (16-byte cp.async; checked by the host).
 *
 * Launch: grid (ceil(seqlen_q / FJ_BLOCK_M), heads_q, batch), FJ_WARPS*32 threads,
 *   dynamic shared memory (FJ_BLOCK_M + 2*FJ_STAGES*FJ_BLOCK_N) * LD * 2 bytes with
 *   LD = ((roundup16(FJ_HEAD_DIM)/8) | 1) * 8 elements (padded rows), or roundup16(FJ_HEAD_DIM)
 *   plus FJ_WARPS*32*4 bytes (swizzled rows, FA2_SWZ_ON: roundup16(head_dim) 128 with one
 *   stage, 192 unsplit, 256), plus FJ_WARPS*32*(FJ_BLOCK_N/16+1)*16
 *   bytes of P tiles on the split path (FA2_SPLIT_ON; fj_fa2_smem_bytes on the host).
 *   Masked variants walk query blocks in reverse (longest rows first).
 *
 * Algorithm (Dao 2023): each CTA owns BLOCK_M query rows and walks its visible key blocks
 * from the last to the first, so the blocks needing a mask (sequence end, diagonal) come
 * first and the rest run unmasked; fully masked blocks are never visited. Per block:
 * S = Q K^T with mma.sync m16n8k16 (operands by ldmatrix from shared memory), online
 * softmax in log2 units (exp2(s*scale_log2 - m*scale_log2) with ex2.approx), P converted in
 * registers into the A operand of O += P V (V by ldmatrix.trans). O is rescaled only when
 * a row max of the warp outgrows its reference by more than 2^8 (FA4's conditional
 * rescaling; exact, see the softmax); the 1/rowsum is applied once at the end. The 8 row
 * addresses of every ldmatrix hit 8 different bank groups: shared rows are unpadded with
 * chunk c of row r at c ^ (r & 7), FA2's layout, where a row is whole 128-byte segments
 * (FA2_SWZ_ON: roundup16(head_dim) 192 unsplit or 256, and 128 with one stage), else
 * padded to an odd number of 16-byte chunks. With padded rows each warp's 16-byte cp.async straddle 128-byte shared
 * segments; ncu at head_dim 256 on the H200: 1.5x the ideal L2 sectors, 2.75x the shared
 * store wavefronts, 12% of the stall samples long-scoreboard waits behind the copies;
 * swizzled: none of that, 0.91-0.95x -> 1.05-1.07x FLASH (means); at 128 (one stage)
 * 1.01 -> 1.04x unmasked. There the ldmatrix address form is chosen per operand so that
 * every default compiles spill-free (FA2_SWZ_XOR).
 * O goes out through the warp's own Q rows in shared memory as 16-byte stores.
 *
 * Split path (FA2_SPLIT_ON: roundup16(head_dim) > 128 and a multiple of 32, one m16 tile per
 * warp, BLOCK_N % 32 == 0): the 128-register O accumulator allows only 16 rows per warp, so
 * the warps pair up on 32 rows: each computes S for half of the keys and O for half of the
 * columns, exchanging row maxima, row sums and its half of P through shared memory (named
 * barrier per pair). A K or V fragment then feeds two m16 tiles (0.39 ldmatrix.x4 per mma
 * instead of 0.56 at head_dim 256; +4-7% on the H200 at 256, none measured at 192; with
 * swizzled rows +9%/+2% over the same kernel without the split, FLASH's exact schedule).
 *
 * Registers: MT = 2 tiles at head_dim 128 sit at 255 registers; the code keeps them
 * spill-free by recomputing addresses inside the loop (opaque()), parking a rarely used
 * value in shared memory (park()) and unrolling S = QK^T partially where needed. Check
 * every change with dev/fa2/sweep.py (all head_dims x dtypes x masks x targets).
 */
#include "fj_common.cuh"
#include "fj_sm80_prims.cuh"

#if !defined(FJ_DTYPE) || !defined(FJ_HEAD_DIM) || !defined(FJ_MASK) || !defined(FJ_BLOCK_M) || \
    !defined(FJ_BLOCK_N) || !defined(FJ_WARPS) || !defined(FJ_STAGES)
#error "attn_fwd_sm80.cu needs FJ_DTYPE FJ_HEAD_DIM FJ_MASK FJ_BLOCK_M FJ_BLOCK_N FJ_WARPS FJ_STAGES"
#endif

#define FA2_BF16 (FJ_DTYPE == FJ_DT_BF16)
#define FA2_MASKED (FJ_MASK != FJ_MASK_NONE)

/* Tuning knobs (defaults chosen on the H200; overridable with -D for experiments). */
#ifndef FA2_QK_UNROLL      /* unroll of the k16 loop of S = QK^T; 0: QK_UNROLL below */
#define FA2_QK_UNROLL 0
#endif
/* Log2 units a row max may outgrow its reference before O is rescaled. With a stale
 * reference the largest P is 2^c, not 1, and is rounded to 16 bits: at slack 8 the error
 * reached 2.1x that of a same-precision reference (gpu suite seed 1796004009, hdim 216; an
 * emulation of this kernel's numerics, 1000 random rows sets: worst 2.5x, 0.3-0.8% of sets
 * over 2x); at slack 1 the worst was 1.35-1.6x (bench/results/2026-11-30-h200-fa2-slack.md). */
#ifndef FA2_RESCALE_SLACK
#define FA2_RESCALE_SLACK 1.0f
#endif
#ifndef FA2_EARLY_K        /* stages 1: issue K_{j-1} before the softmax (FA2 order) */
#define FA2_EARLY_K 1
#endif

#ifndef FA2_SPLIT          /* 0: never take the split path (A/B); see FA2_SPLIT_ON */
#define FA2_SPLIT 1
#endif
#ifndef FA2_P_STORE_LATE   /* split path: store P for the partner after the own half of PV */
#define FA2_P_STORE_LATE 1
#endif
/* FA2_NO_KV_LOAD: measurement only (wrong results): no K/V loads in the KV loop (kv_step's and the
 * split path's K) */
#ifndef FA2_NO_KV_LOAD
#define FA2_NO_KV_LOAD 0
#endif
/* Swizzled shared rows, see FA2_SWZ_ON. 0: padded rows everywhere (A/B); 2: swizzled at
 * every roundup16(head_dim) of 64 and 128 regardless of FA2_SWZ_SMALL (measurement only;
 * spill-free except 128x64w4s2 unmasked, 8 bytes on sm_90). */
#ifndef FA2_SWIZZLE
#define FA2_SWIZZLE 1
#endif
#ifndef FA2_SWZ_WHOLE      /* swizzled copies above head_dim 128: a select-free path for whole
                            * tiles (0: A/B; at 64/128 it costs registers: spills) */
#define FA2_SWZ_WHOLE 1
#endif
/* ldmatrix addresses on swizzled rows (non-split path), a bit per operand (1 Q, 2 K, 4 V):
 * set, the lane's whole swizzle sits in its base and step k reads (base ^ 32*(k&3)) +
 * 128*(k>>2); clear, base + 128*(k>>2) + (32*(k&3) ^ lane bits) (one add, 4 lane offsets
 * live). Which form stays spill-free at 255 registers is ptxas's call, per target
 * (dev/fa2/sweep.py); default FA2_SWZ_XOR_DEF below. */
#ifndef FA2_SWZ_XOR
#define FA2_SWZ_XOR -1
#endif
#ifndef FJ_HEAD_DIM_V
#define FJ_HEAD_DIM_V FJ_HEAD_DIM
#endif
#define FA2_DP ((FJ_HEAD_DIM + 15) / 16 * 16)
/* Swizzled rows at roundup16(head_dim) 128 with one stage (head_dim 120, 128): measured on
 * the H200 (bf16, same call, mean over S = 512..16k vs FLASH) 128x64w4s1 1.04 vs 1.01
 * unmasked, 1.015 vs 0.987 causal. Not at 64 (128x128w4s1 1.04/1.06 vs 1.04/1.07) nor with two
 * stages (128x64w4s2 1.01-1.02 vs 1.02 both masks): no gain there, so those keep the padded
 * rows (identical SASS). 0: padded at 128 too (A/B); FA2_SWIZZLE=2 swizzles 64 and 128 s2. */
#ifndef FA2_SWZ_SMALL
#define FA2_SWZ_SMALL (FA2_DP == 128 && FJ_STAGES == 1)
#endif
/* ldmatrix address form per operand at 64 and 128 (FA2_SWZ_XOR): the choice that compiles
 * spill-free for every default and target (sweep with FA2_SWIZZLE=2, ptxas 13.0): V alone
 * at 128 (the add form everywhere, b87fe68's, spills 8-48 bytes in 128x64w4s1 on sm_80
 * and sm_90; all three XOR 12 bytes unmasked on sm_90; Q and K XOR 8-48 on sm_80), Q and
 * K at 64 (the add form spills 8 bytes in 128x128w4s1 on sm_90). */
#define FA2_SWZ_XOR_DEF (FA2_DP == 64 ? 3 : 4)
#define FA2_SPLIT_ON (FA2_SPLIT && FA2_DP > 128 && FA2_DP % 32 == 0 && \
                      FJ_BLOCK_M == 16 * FJ_WARPS && FJ_WARPS % 2 == 0 && FJ_BLOCK_N % 32 == 0)
/* Swizzled shared rows (unpadded, 16-byte chunk c of row r at c ^ (r & 7)) for head_dim >
 * 128 and, by FA2_SWZ_SMALL, 120/128 with one stage: rows of whole 128-byte segments, on
 * the split path whole segments per half (fj_fa2_smem_bytes). The other head_dims and
 * tiles keep the padded rows (SASS identical to before the swizzle). */
#define FA2_SWZ_ON (FA2_SWIZZLE && FA2_DP % 64 == 0 && (FA2_DP > 128 || FA2_SWIZZLE == 2 || \
                    FA2_SWZ_SMALL) && (!FA2_SPLIT_ON || FA2_DP % 128 == 0))

namespace fa2 {
constexpr int BM = FJ_BLOCK_M, BN = FJ_BLOCK_N, WARPS = FJ_WARPS, THREADS = FJ_WARPS * 32;
constexpr int STAGES = FJ_STAGES, HD = FJ_HEAD_DIM;
constexpr int DP = (HD + 15) / 16 * 16;  /* head_dim padded to the k16 of the MMA */
constexpr int CH = DP / 8;               /* 16-byte chunks per shared row */
constexpr int CHG = HD / 8;              /* chunks that exist in global memory */
constexpr int CHGV = FJ_HEAD_DIM_V / 8;  /* (of V's and O's rows) */
constexpr bool SWZ = FA2_SWZ_ON;
constexpr bool SWZ_WHOLE = FA2_SWZ_WHOLE && DP > 128;
[[maybe_unused]] constexpr int SWZ_XOR = !SWZ || DP > 128 ? 0 : FA2_SWZ_XOR >= 0 ? FA2_SWZ_XOR : FA2_SWZ_XOR_DEF;
constexpr int LDB = SWZ ? CH * 16        /* shared row stride in bytes: whole 128-byte */
                        : (CH | 1) * 16; /* segments (swizzled) or an odd chunk count */
constexpr int MT = BM / (16 * WARPS);    /* m16 tiles per warp */
constexpr int NT = BN / 8;               /* n8 tiles of S */
constexpr int KD = DP / 16;              /* k16 steps of S = Q K^T */
constexpr int ND = DP / 8;               /* n8 tiles of O */
constexpr int KN = BN / 16;              /* k16 steps of O += P V */
constexpr int Q_BYTES = BM * LDB, KV_BYTES = BN * LDB;

static_assert(FJ_DTYPE == FJ_DT_F16 || FJ_DTYPE == FJ_DT_BF16, "FJ_DTYPE");
static_assert(HD % 8 == 0 && HD >= 8 && HD <= 256, "FJ_HEAD_DIM: multiple of 8 in 8..256");
static_assert(FJ_HEAD_DIM_V % 8 == 0 && FJ_HEAD_DIM_V >= 8 && FJ_HEAD_DIM_V <= HD,
              "FJ_HEAD_DIM_V: multiple of 8 in 8..FJ_HEAD_DIM");
static_assert(FJ_MASK == FJ_MASK_NONE || FJ_MASK == FJ_MASK_CAUSAL || FJ_MASK == FJ_MASK_WINDOW,
              "FJ_MASK");
static_assert(WARPS == 1 || WARPS == 2 || WARPS == 4 || WARPS == 8, "FJ_WARPS: 1, 2, 4 or 8");
static_assert(BM % (16 * WARPS) == 0 && MT >= 1 && MT <= 4, "FJ_BLOCK_M: 16*WARPS*(1..4)");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "FJ_BLOCK_N: multiple of 16 up to 256");
static_assert(STAGES == 1 || STAGES == 2, "FJ_STAGES: 1 or 2");
static_assert(MT * (ND + NT) * 4 <= 256, "accumulators alone exceed the register file");
static_assert(CH % 2 == 0 && (SWZ ? CH % 8 == 0 : LDB == (CH + 1) * 16), "shared row layout");
/* Masked variants park a value per thread (park_slot): in the pad chunk of the Q rows, or
 * without pads (SWZ) in THREADS * 4 bytes after everything else (fj_fa2_smem_bytes). */
/* Split path (FA2_SPLIT_ON): warp `half` of a pair computes S for the pair's 32 rows and
 * keys [half*BN/2, (half+1)*BN/2), and O for columns [half*DP/2, (half+1)*DP/2). The P
 * tiles (SPL_BYTES) follow K/V in shared memory; fj_fa2_smem_bytes adds them. */
#if FA2_SPLIT_ON
constexpr int HN = BN / 2;                 /* keys per half */
constexpr int NTS = HN / 8;                /* n8 tiles of a half's S */
constexpr int KH = HN / 16;                /* k16 steps of a half's P */
constexpr int DPH = DP / 2;                /* O columns per warp */
constexpr int NDS = DPH / 8;               /* n8 tiles of a warp's O */
constexpr int PLDB = (HN / 8 + 1) * 16;    /* P row stride in bytes: odd chunk count; the pad
                                            * chunk holds the row max (+HN*2) and sum (+4) */
constexpr int SPL_BYTES = WARPS * 32 * PLDB;
static_assert(KN == 2 * KH && NTS % 2 == 0 && NDS % 2 == 0 && SPL_BYTES > 0, "split tiles");
#endif
/* Full unroll where the registers allow it (measured on the H200: +3-4% at head_dim 128
 * unmasked); a partial unroll keeps MT = 2 tiles spill-free with 128 keys, a mask or the
 * generic copy path (a chunk count that is not a power of two). */
constexpr bool CH_POW2 = (CH & (CH - 1)) == 0;
constexpr int QK_UNROLL = FA2_QK_UNROLL > 0 ? FA2_QK_UNROLL
                          : (MT == 1 || (!FA2_MASKED && NT <= 8 && CH_POW2)) ? KD : 2;
static_assert(QK_UNROLL >= 1 && KN >= 1, "tiles");
}  // namespace fa2

#if FJ_FEATURES
/* ---- model features: the scores in units of feat_unit() natural-log units ---- */
FJ_DEVICE float tanh_approx(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
/* The natural-log value of one score unit, and the exp2 factor of a score. */
FJ_DEVICE float feat_unit(const fj_attn_params &p, const fj_feat_params &fp)
{
    return FJ_SOFTCAP ? fp.softcap : p.scale;
}
FJ_DEVICE float feat_sl2(const fj_attn_params &p, const fj_feat_params &fp)
{
    return FJ_SOFTCAP ? fp.softcap * 1.4426950408889634f : p.scale_log2;
}
#if FJ_SOFTCAP
/* x * y computed where it is written: a product of two parameters, hoisted out of the KV
 * loop, holds a register through it (and spilled at 255 registers). */
FJ_DEVICE float mul_here(float x, float y)
{
    float r;
    asm volatile("mul.f32 %0, %1, %2;\n" : "=f"(r) : "f"(x), "f"(y));
    return r;
}
#endif
/* Softcap and ALiBi on a tile of raw scores S = QK^T, before the mask: element (mt, nt,
 * 2*hf + e) is row i = r + mt*16 + hf*8 and key j = c + nt*8 + e, dd = r + sk - sq - c.
 * The slope of (batch, head) is read here, per tile (an L1 hit), rather than held in a
 * register through the KV loop. */
template <int M, int N>
FJ_DEVICE void feat_scores(float (&acc_s)[M][N][4], const fj_attn_params &p,
                           const fj_feat_params &fp, int dd)
{
#if FJ_SOFTCAP
    const float mul = mul_here(p.scale, fp.softcap_inv);
#else
    const float mul = 1.f;
#endif
#if FJ_ALIBI
    const float ab = ((const float *)fp.alibi)[(fj_i64)blockIdx.z * fp.alibi_batch_stride +
                                               blockIdx.y] / feat_unit(p, fp);
#endif
    (void)mul, (void)dd;
#pragma unroll
    for (int mt = 0; mt < M; ++mt)
#pragma unroll
        for (int nt = 0; nt < N; ++nt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float x = acc_s[mt][nt][2 * hf + e];
#if FJ_SOFTCAP
                    x = tanh_approx(x * mul);
#endif
#if FJ_ALIBI
                    x -= ab * fabsf((float)(dd + mt * 16 + hf * 8 - nt * 8 - e));
#endif
                    acc_s[mt][nt][2 * hf + e] = x;
                }
}
/* The end of a row: its sum l (over the whole row) against reference max m (score
 * units); with a sink, exp(sink) joins l against max(m, sink). Returns the factor of O
 * (0 for a row without keys) and sets *lse (natural log). */
FJ_DEVICE float feat_final(const fj_attn_params &p, const fj_feat_params &fp, int h, float m,
                           float l, float sl2, float *lse)
{
    const float unit = feat_unit(p, fp);
#if FJ_SINKS
    const float s = ((const float *)fp.sinks)[h] / unit;
    const float mf = fmaxf(m, s);
    const float alpha = ex2((m - mf) * sl2);  /* 0 without keys (m = -inf) */
    l = l * alpha + ex2((s - mf) * sl2);
    *lse = mf * unit + logf(l);
    return alpha / l;
#else
    (void)h, (void)sl2;
    *lse = l > 0.f ? m * unit + logf(l) : -FJ_INF;
    return l > 0.f ? 1.f / l : 0.f;
#endif
}
#endif

/* ---- inline PTX (cp.async, ldmatrix, mma: fj_sm80_prims.cuh; pack2, ex2: fj_common.cuh) */

#if FA2_SPLIT_ON
/* Barrier of the two warps of pair `pair` (named barrier 1 + pair, 64 threads). */
FJ_DEVICE void pair_sync(int pair)
{
    asm volatile("bar.sync %0, 64;\n" ::"r"(1 + pair) : "memory");
}
#endif

#if FA2_SPLIT_ON
/* This warp's half of P (A fragments, 32 rows x HN keys) as a row-major tile at `pw`
 * (this lane's first element; row stride PLDB), for the partner's ldmatrix. */
FJ_DEVICE void store_p(fj_u32 pw, const fj_u32 (&pa)[2][fa2::KH][4])
{
    using namespace fa2;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int kk = 0; kk < KH; ++kk)
#pragma unroll
            for (int q = 0; q < 4; ++q)  /* a0..a3: (row +8*(q&1), keys +8*(q>>1)) */
                asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pw + (mt * 16 + (q & 1) * 8) * PLDB +
                                                               kk * 32 + (q >> 1) * 16),
                             "r"(pa[mt][kk][q])
                             : "memory");
}
#endif

/* Byte offset of 16-byte chunk `c` of shared row `r` (Q, K, V tiles). */
FJ_DEVICE int sw_off(int r, int c)
{
    return r * fa2::LDB + ((fa2::SWZ ? c ^ (r & 7) : c) << 4);
}
/* ldmatrix addressing: lane `lane` reads chunk 2*k + hi of a row r with r & 7 == lane & 7
 * (every tile here starts at a multiple of 8 rows). Unswizzled that is base + 32*k with
 * base = row + 16*hi; swizzled, (2k + hi) ^ (lane & 7) splits into 16*(hi ^ (lane & 1)),
 * folded into the base (lane_hi), and 128*(k >> 2) + swz_k(k & 3, lane): one add per
 * address, the rest immediates. */
FJ_DEVICE int lane_hi(int hi, int lane) { return (fa2::SWZ ? hi ^ (lane & 1) : hi) << 4; }
FJ_DEVICE fj_u32 swz_k(int k, int lane)
{
    return fa2::SWZ ? ((k >> 2) << 7) + (((k & 3) << 5) ^ ((lane & 6) << 4)) : k * 32;
}
#if !FA2_SPLIT_ON
/* The same with a per-operand choice of form (FA2_SWZ_XOR bit `op`): the XOR form puts the
 * lane's whole swizzle into its base (every tile base is a multiple of 128 bytes, so the
 * chunk bits of the base are the lane's (hi ^ (lane & 7)) alone) and reads step k at
 * (base ^ 32*(k & 3)) + 128*(k >> 2). */
FJ_DEVICE int lane_at(int hi, int lane, int op)
{
    return (fa2::SWZ_XOR & op) ? (hi ^ (lane & 7)) << 4 : lane_hi(hi, lane);
}
FJ_DEVICE fj_u32 ldsm_at(fj_u32 base, int k, int lane, int op)
{
    return (fa2::SWZ_XOR & op) ? (base ^ ((k & 3) << 5)) + ((k >> 2) << 7) : base + swz_k(k, lane);
}
#endif

/* The value of x, unknown to the optimizer: keeps cheap address math where it is written
 * instead of letting it be hoisted and held in registers across the KV loop. */
FJ_DEVICE int opaque(int x)
{
    int y;
    asm volatile("mov.b32 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* Copies rows [row0, row0 + ROWS) of a [seq][head_dim] slice into shared memory (row
 * stride LDB), zero-filling rows at or past `rows` and the padding columns (chunks CG..:
 * CHG, V's CHGV). `g` is the
 * slice's row 0, a valid address even when nothing is read. The thread index goes through
 * opaque() so that the per-chunk address arithmetic stays here, in the loop, instead
 * of being hoisted out of the KV loop as a set of 64-bit pointers (which spills). */
template <int ROWS, int CG = fa2::CHG>
FJ_DEVICE void load_rows(fj_u32 dst, const fj_u16 *g, fj_i64 stride, int row0, int rows,
                         int tid_in)
{
    using namespace fa2;
    const int tid = opaque(tid_in);
    if constexpr (SWZ) {
        /* FA2's pattern: 8 threads per 128-byte segment of a row, a thread copies chunk c of
         * every segment (immediate offsets in global and, swizzled, in shared memory: the
         * XOR only permutes chunks inside a segment), RSTEP rows apart. A warp reads 4 whole
         * 128-byte lines and writes 4 whole 128-byte shared segments (a padded row would
         * straddle them: 1.5x the L2 sectors and 2.75x the shared wavefronts, measured). */
        constexpr int RSTEP = THREADS / 8, ITERS = (ROWS + RSTEP - 1) / RSTEP, SEGS = CH / 8;
        const int r0 = tid >> 3, c = tid & 7;
        const fj_u16 *src = g + (fj_i64)(row0 + r0) * stride + c * 8;
        const fj_i64 step = RSTEP * stride;
        const bool whole = row0 + ROWS <= rows;  /* the whole tile is inside the sequence */
        if (SWZ_WHOLE && whole) {  /* no per-copy selects (ncu: SEL was 6% of the work) */
#pragma unroll
            for (int it = 0; it < ITERS; ++it) {
                if (ROWS % RSTEP == 0 || r0 + it * RSTEP < ROWS) {
                    const int r = r0 + it * RSTEP;
                    const fj_u32 d = dst + r * LDB + ((c ^ (r & 7)) << 4);
#pragma unroll
                    for (int j = 0; j < SEGS; ++j) {
                        const bool ok = CG == CH || c + 8 * j < CG;
                        cp_async16(d + j * 128, ok ? src + it * step + j * 64 : g, ok ? 16 : 0);
                    }
                }
            }
            return;
        }
        const int lim = rows - row0 - r0;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            if (ROWS % RSTEP == 0 || r0 + it * RSTEP < ROWS) {
                const int r = r0 + it * RSTEP;
                const fj_u32 d = dst + r * LDB + ((c ^ (r & 7)) << 4);
                const bool row_ok = whole || it * RSTEP < lim;
#pragma unroll
                for (int j = 0; j < SEGS; ++j) {
                    const bool ok = row_ok && (CG == CH || c + 8 * j < CG);
                    cp_async16(d + j * 128, ok ? src + it * step + j * 64 : g, ok ? 16 : 0);
                }
            }
        }
    } else if constexpr (THREADS % CH == 0) {  /* each thread copies one column chunk */
        constexpr int RSTEP = THREADS / CH, ITERS = (ROWS + RSTEP - 1) / RSTEP;
        const int r0 = tid / CH, c = tid % CH;
        const bool col_ok = CG == CH || c < CG;
        const fj_u16 *src = g + (fj_i64)(row0 + r0) * stride + c * 8;
        const fj_i64 step = RSTEP * stride;
        const fj_u32 d = dst + r0 * LDB + c * 16;
        if (row0 + ROWS <= rows) {  /* the whole tile is inside the sequence */
#pragma unroll
            for (int it = 0; it < ITERS; ++it)
                if (ROWS % RSTEP == 0 || r0 + it * RSTEP < ROWS)
                    cp_async16(d + it * RSTEP * LDB, col_ok ? src + it * step : g, col_ok ? 16 : 0);
        } else {
            const int lim = rows - row0 - r0;
#pragma unroll
            for (int it = 0; it < ITERS; ++it) {
                if (ROWS % RSTEP == 0 || r0 + it * RSTEP < ROWS) {
                    const bool ok = it * RSTEP < lim && col_ok;
                    cp_async16(d + it * RSTEP * LDB, ok ? src + it * step : g, ok ? 16 : 0);
                }
            }
        }
    } else {
        constexpr int TOTAL = ROWS * CH;
#pragma unroll
        for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
            const int idx = tid + it * THREADS;
            if (TOTAL % THREADS == 0 || idx < TOTAL) {
                const int r = idx / CH, c = idx % CH;
                const bool ok = row0 + r < rows && c < CG;
                const fj_u16 *src = ok ? g + (fj_i64)(row0 + r) * stride + c * 8 : g;
                cp_async16(dst + r * LDB + c * 16, src, ok ? 16 : 0);
            }
        }
    }
}

#if FA2_MASKED
/* A per-thread 4-byte slot in the unused pad chunk of the Q rows (2 threads per row; the
 * loads, ldmatrix and the epilogue only touch chunks < CH). Values needed only now and
 * then in the KV loop wait here instead of holding a register through it. */
FJ_DEVICE fj_u32 park_slot(fj_u32 s_q, int tid)
{
    using namespace fa2;
    if constexpr (SWZ) {  /* after the tiles (and the split path's P tiles) */
#if FA2_SPLIT_ON
        constexpr int spl = SPL_BYTES;
#else
        constexpr int spl = 0;
#endif
        return s_q + Q_BYTES + 2 * STAGES * KV_BYTES + spl + tid * 4;
    }
    return s_q + (tid >> 1) * LDB + CH * 16 + (tid & 1) * 8;
}
FJ_DEVICE void park(fj_u32 slot, int v)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(slot), "r"(v));
}
FJ_DEVICE int unpark(fj_u32 slot)
{
    int v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(slot));
    return v;
}
#endif

/* Row 0 of K (or V) for sequence b, kv head hk (as fj_seq_of). Called inside the KV loop
 * with opaque() indices: two 64-bit pointers held through the loop cost more registers
 * than this bit of integer math (and an L1 hit for varlen) per tile. */
#if !FA2_SPLIT_ON
FJ_DEVICE const fj_u16 *kv_rows(const fj_attn_params &p, bool is_v, int b, int hk)
{
    const fj_i64 row_stride = is_v ? p.v_row_stride : p.k_row_stride;
    const fj_i64 off = p.cu_seqlens_k ? ((const int *)p.cu_seqlens_k)[b] * row_stride
                                      : b * (is_v ? p.v_batch_stride : p.k_batch_stride);
    return (const fj_u16 *)(is_v ? p.v : p.k) + off +
           hk * (is_v ? p.v_head_stride : p.k_head_stride);
}
#else
/* The same from kb = kv_seq(p, b), read once before the KV loop: the split path holds kb
 * (one register; on the other path it spills at head_dim 128), because the (predicated-
 * off) global load of cu_seqlens_k inside the loop waited behind the tile copies in the
 * load/store queue (ncu, head_dim 256: 1.5% of the stall samples). */
FJ_DEVICE int kv_seq(const fj_attn_params &p, int b)
{
    return p.cu_seqlens_k ? ((const int *)p.cu_seqlens_k)[b] : b;
}
FJ_DEVICE const fj_u16 *kv_rows_at(const fj_attn_params &p, bool is_v, int kb, int hk)
{
    const fj_i64 off = kb * (p.cu_seqlens_k ? (is_v ? p.v_row_stride : p.k_row_stride)
                                            : (is_v ? p.v_batch_stride : p.k_batch_stride));
    return (const fj_u16 *)(is_v ? p.v : p.k) + off +
           hk * (is_v ? p.v_head_stride : p.k_head_stride);
}
#endif

/* ---- pieces both paths of the kernel share --------------------------------------------- */

/* O, the running row maxima and sums at the start (M row tiles of 16, N d-tiles of 8) */
template <int M, int N>
FJ_DEVICE void zero_acc(float (&acc_o)[M][N][4], float (&row_max)[M][2], float (&row_sum)[M][2])
{
#pragma unroll
    for (int mt = 0; mt < M; ++mt) {
#pragma unroll
        for (int nd = 0; nd < N; ++nd)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc_o[mt][nd][e] = 0.f;
        row_max[mt][0] = row_max[mt][1] = -FJ_INF;
        row_sum[mt][0] = row_sum[mt][1] = 0.f;
    }
}

/* Row 0 of K or V inside the kernel: the split path from the KV sequence index it holds (x =
 * kv_seq(p, b), kv_rows_at), the other from the batch (x = b, kv_rows); opaque() as there. */
FJ_DEVICE const fj_u16 *kv(const fj_attn_params &p, bool is_v, int x, int hk)
{
#if FA2_SPLIT_ON
    return kv_rows_at(p, is_v, opaque(x), opaque(hk));
#else
    return kv_rows(p, is_v, opaque(x), opaque(hk));
#endif
}

/* Q and the first K/V tile (the last key block, nb_hi - 1) before the KV loop */
FJ_DEVICE void load_first(const fj_attn_params &p, const fj_seq &sq, int x, int hk, fj_u32 s_q,
                          fj_u32 s_k, fj_u32 s_v, const fj_u16 *gq, int m0, int nb_lo, int nb_hi,
                          int tid)
{
    using namespace fa2;
    if (nb_hi > nb_lo) {
        load_rows<BM>(s_q, gq, p.q_row_stride, m0, sq.sq, tid);
        load_rows<BN>(s_k, kv(p, false, x, hk), p.k_row_stride, (nb_hi - 1) * BN, sq.sk, tid);
#if FJ_STAGES == 2
        load_rows<BN, CHGV>(s_v, kv(p, true, x, hk), p.v_row_stride, (nb_hi - 1) * BN, sq.sk, tid);
#endif
        cp_async_commit();
    }
}

/* The head of step `it` of the KV loop (block nb): wait for its tiles, then issue the next
 * copies (two stages: K and V of nb - 1 into the other stage; one stage: V of nb, K having
 * come alone). Returns the stage offset of block nb's tiles. */
FJ_DEVICE fj_u32 kv_step(const fj_attn_params &p, const fj_seq &sq, int x, int hk, fj_u32 s_k,
                         fj_u32 s_v, int nb, int k0, int it, int nb_lo, int tid)
{
    using namespace fa2;  /* (k0 = nb * BN from the caller: computed here, it moved ptxas's
                           * schedule of the one-stage hd 8-32 kernels) */
#if FJ_STAGES == 2
    const fj_u32 stage = (it & 1) * KV_BYTES;
    cp_async_wait_all();
    __syncthreads();  /* tile nb landed; every warp is done with the other stage */
    if (!FA2_NO_KV_LOAD && nb > nb_lo) {
        load_rows<BN>(s_k + (stage ^ KV_BYTES), kv(p, false, x, hk), p.k_row_stride, k0 - BN, sq.sk,
                      tid);
        load_rows<BN, CHGV>(s_v + (stage ^ KV_BYTES), kv(p, true, x, hk), p.v_row_stride, k0 - BN, sq.sk,
                      tid);
    }
    cp_async_commit();
#else
    (void)it;
    (void)nb_lo;
    const fj_u32 stage = 0;
    cp_async_wait_all();
    __syncthreads();  /* K_nb landed; every warp is done with V_{nb+1} (split path: and the P tiles) */
    if (!FA2_NO_KV_LOAD)
        load_rows<BN, CHGV>(s_v, kv(p, true, x, hk), p.v_row_stride, k0, sq.sk, tid);
    cp_async_commit();
#endif
    return stage;
}

/* ---- the kernel ---------------------------------------------------------------------- */

extern "C" __global__ void __launch_bounds__(FJ_WARPS * 32)
fj_attn_fwd_sm80(const __grid_constant__ fj_attn_params p FJ_FEAT_PARAM)
{
    using namespace fa2;
    extern __shared__ __align__(128) unsigned char smem[];

    const int b = blockIdx.z, h = blockIdx.y;
#if !FA2_MASKED
    const int mb = blockIdx.x;
#else
    const int mb = gridDim.x - 1 - blockIdx.x;  /* the longest rows first */
#endif
    const fj_seq sq = fj_seq_of(p, b);
    const int m0 = mb * BM;
    if (m0 >= sq.sq)
        return;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hk = h / (p.heads_q / p.heads_kv);
    const fj_u16 *gq = (const fj_u16 *)p.q + sq.q + (fj_i64)h * p.q_head_stride;

    /* Keys any row of this block can see: [kbeg, kend). */
    int kbeg = 0, kend = sq.sk;
#if FA2_MASKED
    const int shift = sq.sk - sq.sq;  /* key j is "on the diagonal" of row i at j = i+shift */
    const int m_last = min(m0 + BM, sq.sq) - 1;
    const int wl = p.window_left, wr = p.window_right;
    if (wr >= 0)
        kend = min(kend, m_last + shift + wr + 1);
    if (wl >= 0)
        kbeg = max(0, m0 + shift - wl);
#endif
    const int nb_lo = kbeg / BN;
    const int nb_hi = kend > kbeg ? (kend + BN - 1) / BN : nb_lo;

    const fj_u32 s_q = smem_addr(smem);
    const fj_u32 s_k = s_q + Q_BYTES;
    const fj_u32 s_v = s_k + STAGES * KV_BYTES;

#if FA2_SPLIT_ON
    /* ---- split path: warp pairs, see FA2_SPLIT_ON. Always FA2's order for one stage
     * (FA2_EARLY_K) and a full unroll of S = QK^T. ---- */
    const int pair = warp >> 1, half = warp & 1;
    const int kvb = kv_seq(p, b);  /* held (one register); recomputed on the other path */
    const int warp_row = pair * 32;
    const int koff = half * HN;  /* this warp's first key of a tile */
    const fj_u32 s_p = s_v + STAGES * KV_BYTES;
    const fj_u32 p_own = s_p + warp * 32 * PLDB, p_oth = s_p + (warp ^ 1) * 32 * PLDB;
    const fj_u32 q_lane = s_q + (warp_row + (lane & 15)) * LDB + lane_hi(lane >> 4, lane);
    const fj_u32 k_lane = s_k + (koff + (lane & 7) + ((lane >> 4) << 3)) * LDB +
                          lane_hi((lane >> 3) & 1, lane);
    const fj_u32 v_lane = s_v + (lane & 15) * LDB + lane_hi(lane >> 4, lane) + half * DPH * 2;
    const fj_u32 v_own = v_lane + koff * LDB, v_oth = v_lane + (HN - koff) * LDB;
    const fj_u32 pl_oth = p_oth + (lane & 15) * PLDB + (lane >> 4) * 16;  /* ldmatrix of P */
    const fj_u32 pw_own = p_own + (lane >> 2) * PLDB + (lane & 3) * 4;    /* P stores */
    const fj_u32 px_own = p_own + (lane >> 2) * PLDB + HN * 2;            /* row max / sum */
    const fj_u32 px_oth = p_oth + (lane >> 2) * PLDB + HN * 2;

#if FJ_FEATURES
    const float sl2 = feat_sl2(p, fp);
#else
    const float sl2 = p.scale_log2;
#endif
    const int row_lane = m0 + warp_row + (lane >> 2);  /* + mt*16 + hf*8 */
    const int col_lane = 2 * (lane & 3);               /* + koff + nt*8 + e */

    float acc_o[2][NDS][4];
    float row_max[2][2], row_sum[2][2];
    zero_acc(acc_o, row_max, row_sum);

#if FA2_MASKED
    const fj_u32 slot = park_slot(s_q, tid);
    park(slot, m0 + shift);
#endif
    load_first(p, sq, kvb, hk, s_q, s_k, s_v, gq, m0, nb_lo, nb_hi, tid);

    for (int nb = nb_hi - 1, it = 0; nb >= nb_lo; --nb, ++it) {
        const int k0 = nb * BN;
        const fj_u32 stage = kv_step(p, sq, kvb, hk, s_k, s_v, nb, k0, it, nb_lo, tid);
#if FJ_SOFTCAP
        const float sl2 = mul_here(fp.softcap, 1.4426950408889634f);  /* per tile: mul_here */
#endif

        /* S = Q K^T for 32 rows x this warp's HN keys */
        float acc_s[2][NTS][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc_s[mt][nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            fj_u32 a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                ldsm_x4(q_lane + mt * 16 * LDB + swz_k(kk, lane), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
            for (int np = 0; np < NTS / 2; ++np) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4(k_lane + stage + np * 16 * LDB + swz_k(kk, lane), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma16816(acc_s[mt][2 * np], a[mt], b0, b1);
                    mma16816(acc_s[mt][2 * np + 1], a[mt], b2, b3);
                }
            }
        }

#if FJ_FEATURES
        feat_scores(acc_s, p, fp, row_lane + sq.sk - sq.sq - (k0 + koff + col_lane));
#endif
        /* Masks as in the main path, with this warp's key offset. */
        bool need_mask = k0 + BN > sq.sk;
#if FA2_MASKED
        const int d = k0 - unpark(slot);  /* m0 + shift */
        if (wr >= 0)
            need_mask |= d + BN - 1 > wr;
        if (wl >= 0)
            need_mask |= d < BM - 1 - wl;
#endif
        if (need_mask) {
            const int lim_s = sq.sk - k0 - koff - col_lane;
            int lim_r = 1 << 30, lim_l = -(1 << 30);
#if FA2_MASKED
            const int lane_d = warp_row + (lane >> 2) - col_lane - koff;
            if (wr >= 0)
                lim_r = wr - d + lane_d;
            if (wl >= 0)
                lim_l = -wl - d + lane_d;
#endif
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                    for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int c = nt * 8 + e - mt * 16 - hf * 8;
                            if (nt * 8 + e >= lim_s || c > lim_r || c < lim_l)
                                acc_s[mt][nt][2 * hf + e] = -FJ_INF;
                        }
        }

        /* Row maxima of this half, to the partner through shared memory. */
        float mx[2][2];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float m = -FJ_INF;
#pragma unroll
                for (int nt = 0; nt < NTS; ++nt)
                    m = fmaxf(m, fmaxf(acc_s[mt][nt][2 * hf], acc_s[mt][nt][2 * hf + 1]));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
                mx[mt][hf] = m;
                if ((lane & 3) == 0)
                    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(px_own + (mt * 16 + hf * 8) * PLDB),
                                 "f"(m)
                                 : "memory");
            }
#if FJ_STAGES == 1
        cp_async_wait_all();
        __syncthreads();  /* V_nb landed; every warp is done with K_nb; maxima visible */
        if (!FA2_NO_KV_LOAD && nb > nb_lo)
            load_rows<BN>(s_k, kv(p, false, kvb, hk), p.k_row_stride, k0 - BN,
                          sq.sk, tid);
        cp_async_commit();
#else
        pair_sync(pair);  /* maxima visible */
#endif
        /* Both warps of a pair see the same maxima, so they take the same decisions. */
        {
            bool grow = false;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float o;
                    asm volatile("ld.shared.f32 %0, [%1];\n"
                                 : "=f"(o)
                                 : "r"(px_oth + (mt * 16 + hf * 8) * PLDB)
                                 : "memory");
                    const float m = fmaxf(row_max[mt][hf], fmaxf(mx[mt][hf], o));
                    mx[mt][hf] = m;
                    grow |= (m - row_max[mt][hf]) * sl2 > FA2_RESCALE_SLACK;
                }
            if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
                for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const float m = mx[mt][hf];
                        const float alpha =
                            ex2(row_max[mt][hf] * sl2 - (m == -FJ_INF ? 0.f : m * sl2));
                        row_max[mt][hf] = m;
                        row_sum[mt][hf] *= alpha;
#pragma unroll
                        for (int nd = 0; nd < NDS; ++nd) {
                            acc_o[mt][nd][2 * hf] *= alpha;
                            acc_o[mt][nd][2 * hf + 1] *= alpha;
                        }
                    }
            }
        }
        fj_u32 pa[2][KH][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const float m = row_max[mt][hf];
                const float base = m == -FJ_INF ? 0.f : m * sl2;
                float sum = row_sum[mt][hf];
#pragma unroll
                for (int nt = 0; nt < NTS; ++nt) {
                    const float p0 = ex2(fmaf(acc_s[mt][nt][2 * hf], sl2, -base));
                    const float p1 = ex2(fmaf(acc_s[mt][nt][2 * hf + 1], sl2, -base));
                    sum += p0 + p1;
                    pa[mt][nt >> 1][(nt & 1) * 2 + hf] = pack2(p0, p1);
                }
                row_sum[mt][hf] = sum;
            }
#if !FA2_P_STORE_LATE
        store_p(pw_own, pa);
#endif

        /* O += P V: this warp's keys first (P in registers), then the partner's. */
#pragma unroll
        for (int kk = 0; kk < KH; ++kk)
#pragma unroll
            for (int dp = 0; dp < NDS / 2; ++dp) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4_t(v_own + stage + kk * 16 * LDB + swz_k(dp, lane), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma16816(acc_o[mt][2 * dp], pa[mt][kk], b0, b1);
                    mma16816(acc_o[mt][2 * dp + 1], pa[mt][kk], b2, b3);
                }
            }
#if FA2_P_STORE_LATE
        store_p(pw_own, pa);  /* after the own half's ldmatrix of V, which a store would hold back */
#endif
        pair_sync(pair);  /* the partner's P is in shared memory */
#pragma unroll
        for (int kk = 0; kk < KH; ++kk) {
            fj_u32 a[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
                ldsm_x4(pl_oth + mt * 16 * PLDB + kk * 32, a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
            for (int dp = 0; dp < NDS / 2; ++dp) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4_t(v_oth + stage + kk * 16 * LDB + swz_k(dp, lane), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma16816(acc_o[mt][2 * dp], a[mt], b0, b1);
                    mma16816(acc_o[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }
    }
    cp_async_wait_all();

    /* Epilogue: the pair adds its partial row sums (same reference max in both warps). */
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float l = row_sum[mt][hf];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            row_sum[mt][hf] = l;
            if ((lane & 3) == 0)
                asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(px_own + (mt * 16 + hf * 8) * PLDB + 4),
                             "f"(l)
                             : "memory");
        }
    pair_sync(pair);  /* sums visible; the partner is done with Q (its last S = Q K^T) */
    const fj_seq so = fj_seq_of(p, opaque(b));
    fj_u16 *go = (fj_u16 *)p.o + so.o + (fj_i64)h * p.o_head_stride;
    float *lse = (float *)p.lse;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float o;
            asm volatile("ld.shared.f32 %0, [%1];\n"
                         : "=f"(o)
                         : "r"(px_oth + (mt * 16 + hf * 8) * PLDB + 4)
                         : "memory");
            const float l = row_sum[mt][hf] + o;
#if FJ_FEATURES
            float lse_v;
            const float inv = feat_final(p, fp, h, row_max[mt][hf], l, sl2, &lse_v);
#else
            const float inv = l > 0.f ? 1.f / l : 0.f;
#endif
#pragma unroll
            for (int nd = 0; nd < NDS; ++nd) {
                acc_o[mt][nd][2 * hf] *= inv;
                acc_o[mt][nd][2 * hf + 1] *= inv;
            }
            const int i = row_lane + mt * 16 + hf * 8;
            if (lse && half == 0 && (lane & 3) == 0 && i < so.sq)
                lse[so.lse_head_stride * h + so.lse_base + i] =
#if FJ_FEATURES
                    lse_v;
#else
                    l > 0.f ? row_max[mt][hf] * p.scale + logf(l) : -FJ_INF;
#endif
        }

    /* O through the pair's Q rows, this warp's columns. */
    unsigned char *s_o = smem + warp_row * LDB + half * DPH * 2;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nd = 0; nd < NDS; ++nd)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
                *(fj_u32 *)(s_o + (mt * 16 + hf * 8 + (lane >> 2)) * LDB +
                            (SWZ ? nd ^ (lane >> 2) : nd) * 16 + col_lane * 2) =
                    pack2(acc_o[mt][nd][2 * hf], acc_o[mt][nd][2 * hf + 1]);
    __syncwarp();
    constexpr int HCH = CH / 2, OUT_CHUNKS = 32 * HCH;
#pragma unroll
    for (int it = 0; it < OUT_CHUNKS / 32; ++it) {
        const int idx = lane + it * 32;
        const int r = idx / HCH, c = half * HCH + idx % HCH;
        const int i = m0 + warp_row + r;
        if (i < so.sq && (CHGV == CH || c < CHGV)) {
            fj_u32 x0, x1, x2, x3;
            asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                         : "r"(s_q + sw_off(warp_row + r, c))
                         : "memory");
            asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(
                             go + (fj_i64)i * p.o_row_stride + c * 8),
                         "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                         : "memory");
        }
    }
#else  /* !FA2_SPLIT_ON */
    /* Per-lane ldmatrix offsets. Q and V: lanes 0-15 address rows 0-15 of a 16x16 block
     * at chunk 0, lanes 16-31 the same rows at chunk 1; the x4 results are the quarters
     * (rows 0-7 | 8-15) x (chunk 0 | 1) in that order: a0..a3 of the m16k16 A tile (Q),
     * b0, b1 of d-tile 0 then b0, b1 of d-tile 1 (V, trans). K: lanes 0-7 / 8-15 address
     * keys 0-7 at chunks 0 / 1, lanes 16-31 keys 8-15: b0, b1 of n-tile 0 then of n-tile 1,
     * so that each mma's B operand is an adjacent register pair (no moves). */
    const int warp_row = warp * MT * 16;
    const fj_u32 q_lane = s_q + (warp_row + (lane & 15)) * LDB + lane_at(lane >> 4, lane, 1);
    const fj_u32 k_lane = s_k + ((lane & 7) + ((lane >> 4) << 3)) * LDB + lane_at((lane >> 3) & 1, lane, 2);
    const fj_u32 v_lane = s_v + (lane & 15) * LDB + lane_at(lane >> 4, lane, 4);

#if FJ_FEATURES
    const float sl2 = feat_sl2(p, fp);
#else
    const float sl2 = p.scale_log2;
#endif
    const int row_lane = m0 + warp_row + (lane >> 2);  /* + mt*16 + half*8 */
    const int col_lane = 2 * (lane & 3);               /* + nt*8 + e */

    float acc_o[MT][ND][4];
    float row_max[MT][2], row_sum[MT][2];
    zero_acc(acc_o, row_max, row_sum);

#if FA2_MASKED
    const fj_u32 slot = park_slot(s_q, tid);
    park(slot, m0 + shift);
#endif
    load_first(p, sq, b, hk, s_q, s_k, s_v, gq, m0, nb_lo, nb_hi, tid);

    for (int nb = nb_hi - 1, it = 0; nb >= nb_lo; --nb, ++it) {
        const int k0 = nb * BN;
        const fj_u32 stage = kv_step(p, sq, b, hk, s_k, s_v, nb, k0, it, nb_lo, tid);
#if FJ_SOFTCAP
        const float sl2 = mul_here(fp.softcap, 1.4426950408889634f);  /* per tile: mul_here */
#endif

        /* S = Q K^T */
        float acc_s[MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc_s[mt][nt][e] = 0.f;
#pragma unroll QK_UNROLL
        for (int kk = 0; kk < KD; ++kk) {
            fj_u32 a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                ldsm_x4(ldsm_at(q_lane + mt * 16 * LDB, kk, lane, 1), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4(ldsm_at(k_lane + stage + np * 16 * LDB, kk, lane, 2), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(acc_s[mt][2 * np], a[mt], b0, b1);
                    mma16816(acc_s[mt][2 * np + 1], a[mt], b2, b3);
                }
            }
        }

#if FJ_FEATURES
        feat_scores(acc_s, p, fp, row_lane + sq.sk - sq.sq - (k0 + col_lane));
#endif
        /* Mask only the blocks that cross the sequence end or a window edge. With
         * d = k0 - (m0 + shift), key j = k0 + x of row i = m0 + y has j - i - shift =
         * d + x - y; the row's window is wl >= i + shift - j and j - i - shift <= wr. */
        bool need_mask = k0 + BN > sq.sk;
#if FA2_MASKED
        const int d = k0 - unpark(slot);  /* m0 + shift */
        if (wr >= 0)
            need_mask |= d + BN - 1 > wr;
        if (wl >= 0)
            need_mask |= d < BM - 1 - wl;
#endif
        if (need_mask) {
            /* Element (mt, nt, e, hf) is x = nt*8 + col_lane + e, y = row_lane - m0 +
             * mt*16 + hf*8, so x - y = c - lane_d with the constant
             * c = nt*8 + e - mt*16 - hf*8 and lane_d = row_lane - m0 - col_lane. */
            const int lim_s = sq.sk - k0 - col_lane;  /* masked when nt*8+e >= lim_s */
            int lim_r = 1 << 30, lim_l = -(1 << 30);  /* masked when c > lim_r or c < lim_l */
#if FA2_MASKED
            const int lane_d = warp_row + (lane >> 2) - col_lane;
            if (wr >= 0)
                lim_r = wr - d + lane_d;
            if (wl >= 0)
                lim_l = -wl - d + lane_d;
#endif
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int c = nt * 8 + e - mt * 16 - hf * 8;
                            if (nt * 8 + e >= lim_s || c > lim_r || c < lim_l)
                                acc_s[mt][nt][2 * hf + e] = -FJ_INF;
                        }
        }

        /* Online softmax in log2 units, row sums per-thread partial until the end. A row's
         * reference max (row_max) moves only when some row of the warp outgrows its
         * reference by more than FA2_RESCALE_SLACK (FA4's conditional rescaling): O and
         * the sums are rescaled then, and otherwise P = exp2(s - ref) stays below
         * 2^slack. O/l and LSE = ref + log(l) use the same reference, so it is exact.
         * P goes straight into the A-operand registers of O += P V (the C layout of two
         * n8 tiles is the A layout of one k16 step). */
        {
            float mx[MT][2];
            bool grow = false;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    float m = row_max[mt][hf];
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
                        m = fmaxf(m, fmaxf(acc_s[mt][nt][2 * hf], acc_s[mt][nt][2 * hf + 1]));
                    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
                    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
                    mx[mt][hf] = m;
                    /* -inf to finite: +inf > slack; still -inf: NaN, false */
                    grow |= (m - row_max[mt][hf]) * sl2 > FA2_RESCALE_SLACK;
                }
            if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const float m = mx[mt][hf];
                        const float alpha =  /* 0 from -inf, 1 for an unchanged max */
                            ex2(row_max[mt][hf] * sl2 - (m == -FJ_INF ? 0.f : m * sl2));
                        row_max[mt][hf] = m;
                        row_sum[mt][hf] *= alpha;
#pragma unroll
                        for (int nd = 0; nd < ND; ++nd) {
                            acc_o[mt][nd][2 * hf] *= alpha;
                            acc_o[mt][nd][2 * hf + 1] *= alpha;
                        }
                    }
            }
        }
#if FJ_STAGES == 1 && FA2_EARLY_K
        cp_async_wait_all();
        __syncthreads();  /* V_nb landed; every warp is done with K_nb */
        if (nb > nb_lo)
            load_rows<BN>(s_k, kv(p, false, b, hk), p.k_row_stride, k0 - BN,
                          sq.sk, tid);
        cp_async_commit();
#endif
        fj_u32 pa[MT][KN][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const float m = row_max[mt][hf];
                const float base = m == -FJ_INF ? 0.f : m * sl2;  /* no visible key yet */
                float sum = row_sum[mt][hf];
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const float p0 = ex2(fmaf(acc_s[mt][nt][2 * hf], sl2, -base));
                    const float p1 = ex2(fmaf(acc_s[mt][nt][2 * hf + 1], sl2, -base));
                    sum += p0 + p1;
                    /* A operand of k16 step nt/2: a0/a1 from n-tile 2k, a2/a3 from 2k+1 */
                    pa[mt][nt >> 1][(nt & 1) * 2 + hf] = pack2(p0, p1);
                }
                row_sum[mt][hf] = sum;
            }

#if FJ_STAGES == 1 && !FA2_EARLY_K
        cp_async_wait_all();
        __syncthreads();  /* V_nb landed; every warp is done with K_nb */
        if (nb > nb_lo)
            load_rows<BN>(s_k, kv(p, false, b, hk), p.k_row_stride, k0 - BN, sq.sk, tid);
        cp_async_commit();
#endif

        /* O += P V */
#pragma unroll
        for (int kk = 0; kk < KN; ++kk) {
#pragma unroll
            for (int dp = 0; dp < ND / 2; ++dp) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4_t(ldsm_at(v_lane + stage + kk * 16 * LDB, dp, lane, 4), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(acc_o[mt][2 * dp], pa[mt][kk], b0, b1);
                    mma16816(acc_o[mt][2 * dp + 1], pa[mt][kk], b2, b3);
                }
            }
        }
    }
    cp_async_wait_all();

    /* Epilogue: 1/rowsum, LSE, O through this warp's own Q rows in shared memory. The
     * sequence bounds are recomputed rather than held in registers through the loop. */
    const fj_seq so = fj_seq_of(p, opaque(b));
    fj_u16 *go = (fj_u16 *)p.o + so.o + (fj_i64)h * p.o_head_stride;
    float *lse = (float *)p.lse;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float l = row_sum[mt][hf];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
#if FJ_FEATURES
            float lse_v;
            const float inv = feat_final(p, fp, h, row_max[mt][hf], l, sl2, &lse_v);
#else
            const float inv = l > 0.f ? 1.f / l : 0.f;
#endif
#pragma unroll
            for (int nd = 0; nd < ND; ++nd) {
                acc_o[mt][nd][2 * hf] *= inv;
                acc_o[mt][nd][2 * hf + 1] *= inv;
            }
            const int i = row_lane + mt * 16 + hf * 8;
            if (lse && (lane & 3) == 0 && i < so.sq)
                lse[so.lse_head_stride * h + so.lse_base + i] =
#if FJ_FEATURES
                    lse_v;
#else
                    l > 0.f ? row_max[mt][hf] * p.scale + logf(l) : -FJ_INF;
#endif
        }

    __syncwarp();
    unsigned char *s_o = smem + warp_row * LDB;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
                *(fj_u32 *)(s_o + (mt * 16 + hf * 8 + (lane >> 2)) * LDB +
                            (SWZ ? nd ^ (lane >> 2) : nd) * 16 + col_lane * 2) =
                    pack2(acc_o[mt][nd][2 * hf], acc_o[mt][nd][2 * hf + 1]);
    __syncwarp();
    constexpr int OUT_CHUNKS = MT * 16 * CHGV;
#pragma unroll
    for (int it = 0; it < (OUT_CHUNKS + 31) / 32; ++it) {
        const int idx = lane + it * 32;
        if (OUT_CHUNKS % 32 == 0 || idx < OUT_CHUNKS) {
            const int r = idx / CHGV, c = idx % CHGV;
            const int i = m0 + warp_row + r;
            if (i < so.sq) {
                fj_u32 x0, x1, x2, x3;
                asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                             : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                             : "r"(s_q + sw_off(warp_row + r, c))
                             : "memory");
                asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(
                                 go + (fj_i64)i * p.o_row_stride + c * 8),
                             "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                             : "memory");
            }
        }
    }
#endif /* FA2_SPLIT_ON */
}
