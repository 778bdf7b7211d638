/* attn_decode.cu - paged decode / chunked-prefill attention (FlashDecoding layout): the split
 * step fj_attn_decode and the combine step fj_attn_decode_combine. Portable: mma.sync
 * m16n8k16, ldmatrix, cp.async; plain code for sm_80 and every later target (sm_90a,
 * sm_100a included). Parameters: fj_decode_params (fajit_params.h), whose comment defines the
 * semantics (paging, seqused_k, varlen rows, mask, partials).
 *
 * Macros. The combine step needs only FJ_DTYPE and FJ_HEAD_DIM, so one combine kernel serves
 * every split configuration: a translation unit without FJ_DEC_BN holds fj_attn_decode_combine
 * alone; with FJ_DEC_BN it holds fj_attn_decode alone (every split-step macro is then
 * required), so each compile log reports one kernel's registers and spills.
 *   FJ_DTYPE        FJ_DT_F16 | FJ_DT_BF16 (Q, K, V, O; fp32 accumulation, fp32 partials)
 *   FJ_HEAD_DIM     8..256, a multiple of 8 (padded to DP = roundup16 inside: zero columns)
 *   FJ_DEC_BN       keys per K/V tile: 16..256, a multiple of 16*FJ_DEC_WN
 *   FJ_DEC_STAGES   pipeline depth, 2..6 (tiles in flight: STAGES - 1)
 *   FJ_DEC_WM       warps along M, 1..4: the M tile is MT = 16*FJ_DEC_WM packed rows
 *   FJ_DEC_WN       warps along the keys, 1..8: warp (wm, wn) takes keys
 *                   [wn*BN/WN, (wn+1)*BN/WN) of every tile with its own m, l, O; the warps'
 *                   results are merged through shared memory at the end
 *   FJ_DEC_CHECKED  0 | 1: validate seqused_k and page ids (below)
 *   FJ_DEC_HP       1 (default) | 2 | 4: KV heads per CTA (head packing, cp.async only,
 *                   head_dim * FJ_DEC_HP <= 256). The host passes heads_kv / HP as
 *                   heads_kv and HP times the K and V head strides, so the CTA's K/V rows
 *                   are the HP heads side by side: a row of HP*head_dim columns, read as
 *                   one (heads contiguous in the row: head stride == head_dim, which the
 *                   host checks). G = heads_q / (heads_kv / HP) then counts the query heads
 *                   of all HP heads, and packed row r = i*G + g is query head hk*G + g as
 *                   before; its Q row sits in columns [s*head_dim, (s+1)*head_dim) of the
 *                   wide row (s = g / (G / HP), its own KV head), zeros elsewhere, so
 *                   S = Q K^T sees only its head's columns, and its O is those columns of
 *                   P V. Everything else (masks, splits, partials, merges, LSE) is per
 *                   packed row and real head, as with HP = 1. The MMAs do HP times the
 *                   work (decode is bound by the bytes; at head_dim <= 64 a head's row is
 *                   64-128 bytes, a fraction of what the DRAM reads at once). A NaN or Inf
 *                   in one head's K (keys in use) spoils its CTA's other heads too (0 x Inf
 *                   in S); HP = 1 keeps heads apart.
 *   FJ_DEC_TMA      0 (default) | 1: K/V tiles by TMA (sm_90 and later; head_dim a multiple
 *                   of 64): the kernel then takes two more parameters, the K and V tensor
 *                   maps (fj_dec_load_tma.cuh). Dynamic shared memory + 64 (barriers) + 1024
 *                   (alignment slack).
 *   FJ_KV_FP8       0 (default) | 1 (e4m3) | 2 (e5m2): K and V in FP8 (fj_common.cuh;
 *                   cp.async, HP 1), their strides in bytes; the kernel then takes
 *                   fj_feat_params: each tile's raw bytes are widened to FJ_DTYPE in
 *                   shared memory (dec_widen8), the descale factors folded into the
 *                   softmax scale (K) and the output's normalization (V).
 *   FJ_DEC_QMAX     0 (default) | 1: serve only the sequences with at most q_len query rows
 *                   (varlen; the mixed plan's decode launch, q_len 16): the CTAs of a longer
 *                   sequence leave before touching anything (no partials, no count, no
 *                   cluster barrier: a group's CTAs all leave), and the combine step skips
 *                   its rows (a binary search of cu_seqlens_q per row), so the rows that
 *                   another launch writes stay untouched. Both steps take it.
 *
 * Split step fj_attn_decode. G = heads_q / heads_kv (heads_q % heads_kv == 0, any G).
 *   Packed row r = i*G + g (query position i of the sequence, head hk*G + g); sequence b
 *   has nrows_b = q_len_b * G packed rows, tile qt the rows [qt*MT, qt*MT + MT).
 *   Grid (splits * q_tiles, heads_kv, batch) with q_tiles = ceil(q_len * G / MT) (q_len =
 *   the most rows of any sequence), CTA x = split * q_tiles + qt; threads 32*WM*WN.
 *   Dynamic shared memory, bytes (all integer arithmetic):
 *     DP   = (FJ_HEAD_DIM * FJ_DEC_HP + 15) / 16 * 16
 *     LDB  = DP % 64 == 0 ? 2*DP : 2*DP + 16                       (shared row, bytes)
 *                                            (TMA: 64-column boxes of 128-byte rows instead)
 *     MAIN = 16*WM*LDB + 2*FJ_DEC_STAGES*FJ_DEC_BN*LDB              (Q tile + K/V ring)
 *     RED  = WM*WN*16*(DP + 8)*4 + WM*WN*16*8                       (epilogue, overlays MAIN)
 *     smem = max(MAIN, RED)
 *   (above 48 KiB the host sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
 *   A CTA walks the BN-aligned key tiles that meet [kb, ke): its split's keys
 *   [split*split_keys, (split+1)*split_keys) (the last split: to len_b, so a sequence longer
 *   than seqlen_k is still whole, only slower) intersected with [0, len_b) and with the union
 *   of the visible ranges of its valid rows; an empty range writes the empty result (O = 0,
 *   LSE = -inf; partials O = 0, LSE = -inf). Keys outside [kb, ke) are zero-filled in shared
 *   memory (never read: no NaN from unused page slots can leak in) and masked, so split_keys
 *   need not be a multiple of BN (it should be: edge tiles cost a whole tile's time).
 *   K/V rows: key j of sequence b at element page*page_stride + (j % page_size)*row_stride +
 *   hk*head_stride with page = block_table[b*bt_stride + j/page_size], or page = b and
 *   row j without a block table; the loaders (fj_dec_load_async.cuh: cp.async, every
 *   target; fj_dec_load_tma.cuh) read the page ids a tile ahead.
 *   Output: splits == 1: O (dtype, o strides) and LSE (if p.lse: natural log; fixed length
 *   lse[(b*heads_q + h)*q_len + i], varlen lse[h*cu_seqlens_q[batch] + cu_seqlens_q[b] + i],
 *   as attn_ref.cu); splits > 1: part_o[split][R][h][0..head_dim) (O already divided by its
 *   row sum) and part_lse[split][R][h], R = b*q_len + i or cu_seqlens_q[b] + i, row count
 *   p.total_rows (>= every R + 1). Packed rows past nrows_b are never written.
 *   Checked mode (FJ_DEC_CHECKED 1): len_b must lie in [0, bt_stride*page_size] with a block
 *   table and in [0, seqlen_k] without; every page id of the CTA's key range in
 *   [0, num_pages). The first violation goes to p.err (if set) by atomicCAS on err[0]:
 *   {1, b, block-table index, page id} or {2, b, the bound, len_b}; the CTA then reads
 *   nothing from K/V and writes the empty result.
 *
 *   The splits merged within the launch: the fused combine (splits > 1 and p.counters set:
 *   the last CTA of a group to arrive merges its rows, fj_dec_merge_fused.cuh), or the
 *   cluster merge (p.cluster, sm_90+: the splits of a group are one thread-block cluster,
 *   CTA x = qt * splits + split, and merge through distributed shared memory,
 *   fj_dec_merge_cluster.cuh); otherwise the combine step below.
 *
 * Combine step fj_attn_decode_combine (splits > 1 without counters): a thread per (R, h,
 *   4 columns), grid (total_rows, ceil(heads_q * HD/4 / FJ_DEC_COMBINE_THREADS), 1),
 *   FJ_DEC_COMBINE_THREADS = 128 threads, no dynamic shared memory. Rows R past the
 *   real rows (R >= batch*q_len, or >= cu_seqlens_q[batch] when varlen) are skipped, so
 *   total_rows may be an upper bound. O = sum_s w_s O_s with
 *   w_s = exp(lse_s - M) / sum exp(lse_s - M), M = max lse_s; all splits empty: O = 0,
 *   LSE = -inf. One pass with a running maximum, 8 splits' loads in flight per step (16
 *   where there are more than 8 splits).
 *
 * Limits: scale > 0 (row maxima are taken on raw scores); Q/K/V/O strides multiples of 8
 *   elements, pointers 16-byte aligned (cp.async / vector stores; host-checked); page
 *   strides, row strides and page ids make 64-bit offsets (or 32-bit ones in 16-byte units
 *   where the host sets off16); keys, rows and split_keys*splits below 2^31.
 * Algorithm per warp and tile: S = Q K^T (Q and K by ldmatrix), a mask for keys outside the
 *   row's [lo, hi) (split, sequence, window, causal bottom-right: shift = i + len_b - q_len_b),
 *   online softmax in log2 units (exp2(s*scale_log2 - m*scale_log2); O rescaled only when a
 *   row maximum of the warp moved, up to head_dim 128), P in registers as the A operand of
 *   O += P V (V by ldmatrix.trans). Epilogue: every warp puts m, l and its raw O (fp32) of
 *   the rows that exist into shared memory; all threads then merge the WN warps of each row
 *   and store 16 bytes per thread. Shared rows: 16-byte chunk c of row r at c ^ (r & 7) when
 *   DP % 64 == 0 (whole 128-byte segments), else an odd number of chunks per row (LDB
 *   above); both keep the 8 row addresses of every ldmatrix on 8 different bank groups.
 *
 * Files: this one holds the traits, the split step's kernel and the combine step. Headers,
 * one #if axis each: fj_dec_load_async.cuh / fj_dec_load_tma.cuh (FJ_DEC_TMA),
 * fj_dec_merge_cluster.cuh (sm_90+), fj_dec_merge.cuh and fj_dec_merge_fused.cuh (none).
 */
#include "fj_common.cuh"
#include "fj_sm80_prims.cuh"
#ifndef FJ_DEC_TMA
#define FJ_DEC_TMA 0
#endif

#if !defined(FJ_DTYPE) || !defined(FJ_HEAD_DIM)
#error "attn_decode.cu needs FJ_DTYPE and FJ_HEAD_DIM"
#endif
#ifndef FJ_DEC_QMAX
#define FJ_DEC_QMAX 0
#endif
#if defined(FJ_DEC_BN) && (!defined(FJ_DEC_STAGES) || !defined(FJ_DEC_WM) || \
                           !defined(FJ_DEC_WN) || !defined(FJ_DEC_CHECKED))
#error "attn_decode.cu split step needs FJ_DEC_BN FJ_DEC_STAGES FJ_DEC_WM FJ_DEC_WN FJ_DEC_CHECKED"
#endif
#define FJ_DEC_COMBINE_THREADS 128
/* The cluster merge's code exists where clusters do (sm_90+): elsewhere p.cluster is never
 * set, and none of its code is compiled (sm_80's registers stay as they were). */
#if __CUDA_ARCH__ >= 900
#define DEC_CLUSTER 1
#else
#define DEC_CLUSTER 0
#endif
/* The most partial bytes the fused combine stages in one CTA's shared memory (decode.c's
 * DEC_STAGE_MAX): beyond, one SM pulling them is slower than the combine kernel. */
#define DEC_STAGE_MAX 49152

#define DEC_BF16 (FJ_DTYPE == FJ_DT_BF16)
#ifndef FJ_DEC_HP
#define FJ_DEC_HP 1
#endif

namespace dec {
constexpr int HD = FJ_HEAD_DIM;
static_assert(FJ_DTYPE == FJ_DT_F16 || FJ_DTYPE == FJ_DT_BF16, "FJ_DTYPE");
static_assert(HD % 8 == 0 && HD >= 8 && HD <= 256, "FJ_HEAD_DIM: a multiple of 8 in 8..256");
#ifdef FJ_DEC_BN   /* (the split step's; the combine step needs only HD) */
constexpr int HP = FJ_DEC_HP;            /* KV heads per CTA (head packing) */
constexpr int HV = HD * HP;              /* columns of a K/V row the CTA reads: HP heads */
constexpr int DP = (HV + 15) / 16 * 16;  /* padded to the k16 of the MMA */
constexpr int CH = DP / 8;               /* 16-byte chunks per shared row */
constexpr int CHG = HV / 8;              /* chunks of a K/V row that exist in global memory */
constexpr int CHQ = HD / 8;              /* chunks of a Q or O row (one head) */
constexpr int BN = FJ_DEC_BN, STAGES = FJ_DEC_STAGES, WM = FJ_DEC_WM, WN = FJ_DEC_WN;
constexpr int WARPS = WM * WN, THREADS = 32 * WARPS;
constexpr int MT = 16 * WM;               /* packed rows per CTA */
constexpr int KW = BN / WN;               /* keys per warp and tile */
constexpr bool SWZ = DP % 64 == 0;
constexpr int LDB = SWZ ? 2 * DP : 2 * DP + 16;  /* shared row stride, bytes */
constexpr int Q_BYTES = MT * LDB, KV_BYTES = BN * LDB;  /* one K (or V) tile */
constexpr int MAIN_BYTES = Q_BYTES + 2 * STAGES * KV_BYTES;
constexpr int RLD = DP + 8;               /* epilogue O row stride, floats */
constexpr int RED_O_BYTES = WARPS * 16 * RLD * 4, RED_BYTES = RED_O_BYTES + WARPS * 16 * 8;
constexpr int SMEM_USE = MAIN_BYTES > RED_BYTES ? MAIN_BYTES : RED_BYTES;
/* Cluster merge (p.cluster): the CTA's partials, O [MT][HD] then LSE [MT] (fp32), after the
 * epilogue's reduction area; the host asks for it only where they fit (decode.c) */
constexpr int CL_OFF = (RED_BYTES + 15) / 16 * 16, CL_BYTES = MT * HD * 4 + MT * 4;
constexpr bool CL_FITS = CL_OFF + CL_BYTES <= SMEM_USE;
constexpr bool TMA = FJ_DEC_TMA != 0;
/* TMA: STAGES mbarriers after the used bytes, 1024 bytes of slack to align the base (the
 * 128-byte swizzle is a function of the address) */
constexpr int SMEM_BYTES = SMEM_USE + (TMA ? 64 + 1024 : 0);
constexpr int NT = KW / 8;                /* n8 tiles of a warp's S */
constexpr int KD = DP / 16;               /* k16 steps of S = Q K^T */
constexpr int ND = DP / 8;                /* n8 tiles of O */
constexpr int KN = KW / 16;               /* k16 steps of O += P V */
constexpr int SEGS = (CH + 7) / 8;        /* 8-chunk groups per row (one chunk per thread) */
constexpr int RSTEP = THREADS / 8;        /* rows copied per pass (8 threads per row) */
[[maybe_unused]] constexpr int ITERS = (BN + RSTEP - 1) / RSTEP;   /* K/V rows per thread and
                                                                     tile (cp.async) */
constexpr int QITERS = (MT + RSTEP - 1) / RSTEP;  /* Q rows per thread */
static_assert(WM >= 1 && WM <= 4, "FJ_DEC_WM: 1..4");
static_assert(WN >= 1 && WN <= 8 && WARPS <= 16, "FJ_DEC_WN: 1..8, WM*WN <= 16");
static_assert(BN % (16 * WN) == 0 && BN >= 16 && BN <= 256, "FJ_DEC_BN: multiple of 16*WN, <= 256");
static_assert(STAGES >= 2 && STAGES <= 6, "FJ_DEC_STAGES: 2..6");
static_assert(!TMA || (SWZ && BN % 8 == 0 && STAGES <= 8),
              "FJ_DEC_TMA: head_dim a multiple of 64 (128-byte swizzled 64-column boxes)");
static_assert(FJ_DEC_CHECKED == 0 || FJ_DEC_CHECKED == 1, "FJ_DEC_CHECKED: 0 or 1");
static_assert((HP == 1 || HP == 2 || HP == 4) && HV <= 256 && (HP == 1 || !TMA),
              "FJ_DEC_HP: 1, 2 or 4, head_dim * FJ_DEC_HP <= 256, cp.async loads");
static_assert((ND + NT) * 4 + 2 * KN * 4 <= 200, "accumulators exceed the register file");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory over 227 KiB");
/* FP8 K/V (FJ_KV_FP8): the K/V ring's first stage becomes the FJ_DTYPE K and V tiles the
 * MMAs read, and the rest holds STAGES raw FP8 stages of RAW bytes per tile, widened into
 * them a tile at a time (so the shared memory is the 16-bit configuration's). */
constexpr bool KV8 = FJ_KV_FP8 != 0;
constexpr int RAW = BN * HD;
static_assert(!KV8 || (HP == 1 && !TMA && HD % 16 == 0 && 2 * STAGES * RAW <= 2 * (STAGES - 1) * KV_BYTES),
              "FJ_KV_FP8: cp.async loads, one KV head per CTA, head_dim a multiple of 16");
#endif
}  // namespace dec

/* ---- merging the splits (the combine kernel and the fused combine) ------------------- */
#include "fj_dec_merge.cuh"

/* ---- the split step ------------------------------------------------------------------ */
#ifdef FJ_DEC_BN
/* (PTX: cp.async, ldmatrix, mma from fj_sm80_prims.cuh; pack2, ex2 from fj_common.cuh) */

FJ_DEVICE void dec_st16(void *g, fj_u32 x0, fj_u32 x1, fj_u32 x2, fj_u32 x3)
{
    asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(g), "r"(x0), "r"(x1), "r"(x2),
                 "r"(x3)
                 : "memory");
}

/* Byte offset of 16-byte chunk `c` of shared row `r` of a tile of ROWS rows (Q: MT, K/V: BN).
 * cp.async: rows of LDB bytes. TMA: the layout of its 128-byte swizzle, 64-column boxes one
 * after the other ([DP/64][ROWS][128 bytes], chunk c & 7 of a box row at (c & 7) ^ (r & 7)),
 * every box 1024-byte aligned. */
template <int ROWS> FJ_DEVICE int dec_off(int r, int c)
{
    using namespace dec;
    if (TMA)
        return ((c >> 3) * ROWS + r) * 128 + (((c & 7) ^ (r & 7)) << 4);
    return r * LDB + ((SWZ ? c ^ (r & 7) : c) << 4);
}

/* Where the rows of sequence b live and how many there are. */
struct dec_seq {
    fj_i64 q, o;       /* element offsets of row 0 (head 0) in Q and O */
    int row0;          /* R of row 0: b*q_len, or cu_seqlens_q[b] (partials) */
    int qlen;          /* query rows q_len_b */
};
FJ_DEVICE dec_seq dec_seq_of(const fj_decode_params &p, int b)
{
    dec_seq s;
    if (p.cu_seqlens_q) {
        const int *cq = (const int *)p.cu_seqlens_q;
        const int q0 = cq[b];
        s.q = (fj_i64)q0 * p.q_row_stride;
        s.o = (fj_i64)q0 * p.o_row_stride;
        s.row0 = q0;
        s.qlen = cq[b + 1] - q0;
    } else {
        s.q = (fj_i64)b * p.q_batch_stride;
        s.o = (fj_i64)b * p.o_batch_stride;
        s.row0 = b * p.q_len;
        s.qlen = p.q_len;
    }
    return s;
}

/* LSE of query row i (head h) of sequence b, in attn_ref.cu's layout: fixed length
 * lse[(b*heads_q + h)*q_len + i], varlen lse[h*cu_seqlens_q[batch] + cu_seqlens_q[b] + i]. */
FJ_DEVICE void dec_store_lse(const fj_decode_params &p, int b, int row0, int i, int h, float lse)
{
    float *gl = (float *)p.lse;
    if (p.cu_seqlens_q)
        gl[(fj_i64)((const int *)p.cu_seqlens_q)[p.batch] * h + row0 + i] = lse;
    else
        gl[((fj_i64)b * p.heads_q + h) * p.q_len + i] = lse;
}

#if FJ_DEC_CHECKED
FJ_DEVICE void dec_report(const fj_decode_params &p, int code, int b, int index, int value)
{
    if (!p.err)
        return;
    int *e = (int *)p.err;
    if (atomicCAS(e, 0, code) == 0) {
        e[1] = b;
        e[2] = index;
        e[3] = value;
    }
}
#endif

/* The K/V loader: TMA (FJ_DEC_TMA 1, sm_90 and later) or cp.async (every target). */
#if FJ_DEC_TMA
#include "fj_dec_load_tma.cuh"
#else
#include "fj_dec_load_async.cuh"
#endif
/* The merges of the splits within the split step's launch. */
#include "fj_dec_merge_fused.cuh"
#if DEC_CLUSTER
#include "fj_dec_merge_cluster.cuh"
#endif

/* The Q tile into shared memory: packed row r -> (i = r / G, head hk*G + r % G); rows past
 * nrows zero-filled. */
FJ_DEVICE void dec_issue_q(const fj_decode_params &p, const dec_seq &sq, fj_u32 s_q, int r0,
                           int nrows, int G, int hk, int tid)
{
    using namespace dec;
    const fj_u16 *gq = (const fj_u16 *)p.q + sq.q;
#pragma unroll
    for (int it = 0; it < QITERS; ++it) {
        const int rl = (tid >> 3) + it * RSTEP;
        if (MT % RSTEP == 0 || rl < MT) {
            const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
            const bool ok = r < nrows;
            const fj_i64 off = (fj_i64)i * p.q_row_stride + (fj_i64)h * p.q_head_stride;
            /* (HP > 1: the row's own KV head's columns of the wide row, zeros elsewhere) */
            const int c0 = HP == 1 ? 0 : (r - i * G) / (G / HP) * CHQ;
#pragma unroll
            for (int sg = 0; sg < SEGS; ++sg) {
                const int cc = (tid & 7) + 8 * sg, qc = cc - c0;
                if (CH % 8 == 0 || cc < CH) {
                    const bool in = ok && (HP == 1 ? CHG == CH || cc < CHG : qc >= 0 && qc < CHQ);
                    cp_async16(s_q + dec_off<MT>(rl, cc), in ? gq + off + qc * 8 : gq, in ? 16 : 0);
                }
            }
        }
    }
}

/* The split step (the host looks it up by this name). Why one function of about 480 lines,
 * with the loaders' prologue and per-tile steps under #if FJ_DEC_TMA in it: this split moved
 * code without changing any compiled variant (dev/decode/sass_same.sh: the same CUBIN bytes
 * for every decode variant the library makes), and every piece of this function tried as a
 * function of its own (the two GEMMs, the softmax, the key range, the loaders' steps with a
 * state struct per loader, the epilogue) changed the order in which ptxas assigns registers
 * in some variants. Its parts, in order: the CTA's coordinates and the first page ids
 * (before the wait on the previous grid), checked mode, the key range, the loader's
 * prologue, the tile loop (loader step, S = Q K^T, mask, online softmax, O += P V), the
 * epilogue (the warps' m, l, O merged through shared memory; O and LSE, or partials), and
 * the merges of the splits (cluster, or the fused combine's last CTA). */
extern "C" __global__ void __launch_bounds__(dec::THREADS)
#if FJ_DEC_TMA
fj_attn_decode(const __grid_constant__ fj_decode_params p, const __grid_constant__ fj_tmap tk,
               const __grid_constant__ fj_tmap tv FJ_FEAT_PARAM)
#else
fj_attn_decode(const __grid_constant__ fj_decode_params p FJ_FEAT_PARAM)
#endif
{
    using namespace dec;
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *const sm = TMA ? smem + ((1024 - (smem_addr(smem) & 1023)) & 1023) : smem;

#if FJ_DEC_TMA
    if (threadIdx.x == 0) {   /* (the maps are parameters: ready before the previous grid) */
        tma_prefetch_desc(&tk);
        tma_prefetch_desc(&tv);
    }
#endif
    /* What needs only the parameters comes before the wait (a dependent launch's CTAs sit
     * there while the previous grid ends: this arithmetic, and fetching its code, is free). */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int hk = blockIdx.y, b = blockIdx.z;
    /* CTA x: split * q_tiles + qt, or qt * splits + split where the splits of a group are
     * one cluster (consecutive x) */
    const bool clu = DEC_CLUSTER && p.cluster;
    const int split = clu ? blockIdx.x % p.splits : blockIdx.x / p.q_tiles;
    const int qt = clu ? blockIdx.x / p.splits : blockIdx.x - split * p.q_tiles;
    const int G = p.heads_q / p.heads_kv;
    const int *bt = p.block_table ? (const int *)p.block_table + (fj_i64)b * p.bt_stride : nullptr;
    const int kg = split * p.split_keys;
    fj_pdl_wait();      /* (launched as a dependent on sm_90+: inputs are ready after this) */
    fj_pdl_trigger();   /* the next kernel may launch; its CTAs wait for this grid's end */
    /* Keys of the sequence: asked for first, its latency overlaps the page ids' below. */
    int len = p.seqused_k ? ((const int *)p.seqused_k)[b] : p.seqlen_k;
    /* The page ids of the split's first STAGES-1 tiles, read before the lengths (their loads
     * overlap; without a window the split starts at kg: refetched below otherwise). */
#if FJ_DEC_TMA
    const int R = dec_tma_rows(p, bt);   /* rows per TMA chunk; lane l of warp 0 loads chunk l */
    int tpage[STAGES - 1], trow[STAGES - 1];
    if (warp == 0 && lane < BN / R) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s)
            dec_tma_at(p, bt, b, R, kg + s * BN, lane, tpage[s], trow[s]);
    }
#else
    int ppg[STAGES - 1][ITERS], prip[STAGES - 1][ITERS];
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s)
        dec_fetch(p, bt, b, kg + s * BN, tid, ppg[s], prip[s]);
#endif
    const dec_seq sq = dec_seq_of(p, b);
    const int nrows = sq.qlen * G;
    const int r0 = qt * MT;  /* first packed row of this CTA */
    if (r0 >= nrows)
        return;  /* whole CTA: no barrier passed yet */
#if FJ_DEC_QMAX
    if (sq.qlen > p.q_len)
        return;  /* another launch serves this sequence (the whole group leaves alike) */
#endif

#if FJ_DEC_CHECKED   /* the keys of the sequence, checked */
    {
        const long long bound = bt ? (long long)p.bt_stride * p.page_size : (long long)p.seqlen_k;
        if (len < 0 || len > bound) {
            if (tid == 0)
                dec_report(p, 2, b, (int)(bound < 0x7fffffff ? bound : 0x7fffffff), len);
            len = 0;
        }
    }
#endif

    /* The CTA's key range [kb, ke): the split's keys within [0, len) seen by some row.
     * Rows see monotone ranges in i, so the union is lo(first row) .. hi(last row). */
    const int shift = len - sq.qlen;  /* row i's diagonal: key i + shift */
    const int i_first = r0 / G, i_last = (min(r0 + MT, nrows) - 1) / G;
    long long kb = (long long)split * p.split_keys, ke = kb + p.split_keys;
    if (ke > len || split == p.splits - 1)   /* the last split takes every key left */
        ke = len;
    if (kb < 0) kb = 0;
    if (p.window_left >= 0) kb = max(kb, (long long)i_first + shift - p.window_left);
    if (p.window_right >= 0) ke = min(ke, (long long)i_last + shift + p.window_right + 1);
    const int k_lo = (int)kb, k_hi = ke > kb ? (int)ke : (int)kb;  /* empty: k_hi == k_lo */
    const int kt0 = k_lo / BN * BN;
    int ntiles = k_hi > k_lo ? (k_hi - kt0 + BN - 1) / BN : 0;

#if FJ_DEC_CHECKED
    if (bt && ntiles > 0) {  /* every page id the CTA will read, before reading any */
        bool bad = false;
        for (int x = k_lo / p.page_size + tid; x <= (k_hi - 1) / p.page_size; x += THREADS) {
            const int page = bt[x];
            if (page < 0 || page >= p.num_pages) {
                bad = true;
                dec_report(p, 1, b, x, page);
            }
        }
        if (__syncthreads_or(bad))
            ntiles = 0;
    }
#endif

    const fj_u32 s_q = smem_addr(sm);
    const fj_u32 s_kv = s_q + Q_BYTES;  /* stage s: K at s*2*KV_BYTES, V after it */
#if FJ_DEC_TMA
    const fj_u32 s_bar = s_q + SMEM_USE;   /* stage s's full barrier at s_bar + 8*s */
    if (tid == 0) {
        for (int st = 0; st < STAGES; ++st)
            mbar_init(s_bar + 8 * st, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
#endif
#if FJ_KV_FP8   /* (byte strides; raw stage s at s_raw + s * 2 * RAW, K then V) */
    const unsigned char *gk = (const unsigned char *)p.k + (fj_i64)hk * p.k_head_stride;
    const unsigned char *gv = (const unsigned char *)p.v + (fj_i64)hk * p.v_head_stride;
    const fj_u32 s_raw = s_kv + 2 * KV_BYTES;
#elif !FJ_DEC_TMA
    const fj_u16 *gk = (const fj_u16 *)p.k + (fj_i64)hk * p.k_head_stride;   /* (HP heads' */
    const fj_u16 *gv = (const fj_u16 *)p.v + (fj_i64)hk * p.v_head_stride;   /*  strides) */
#endif

#if FJ_DEC_TMA
    int npage = 0, nrow = 0;   /* warp 0: chunk `lane` of the next tile to load */
#else
    int pg[ITERS], rip[ITERS];
#endif
    if (ntiles > 0) {
#if FJ_DEC_TMA
        dec_issue_q(p, sq, s_q, r0, nrows, G, hk, tid);
        cp_async_commit();   /* Q: waited for below, published by the loop's first barrier */
        if (warp == 0 && lane < BN / R) {
#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s)
                if (s < ntiles) {
                    if (kt0 != kg)   /* a window moved the start */
                        dec_tma_at(p, bt, b, R, kt0 + s * BN, lane, tpage[s], trow[s]);
                    tpage[s] = dec_tma_clip(p, R, kt0 + s * BN, lane, k_lo, k_hi, tpage[s]);
                }
            if (STAGES - 1 < ntiles) {
                dec_tma_at(p, bt, b, R, kt0 + (STAGES - 1) * BN, lane, npage, nrow);
                npage = dec_tma_clip(p, R, kt0 + (STAGES - 1) * BN, lane, k_lo, k_hi, npage);
            }
        }
        if (warp == 0) {
#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s)
                if (s < ntiles)
                    dec_tma_issue(tk, tv, s_kv + s * 2 * KV_BYTES, s_kv + s * 2 * KV_BYTES + KV_BYTES,
                                  s_bar + 8 * s, lane, R, hk, tpage[s], trow[s]);
        }
        cp_async_wait<0>();
#else
        /* Prologue: tiles 0 .. STAGES-2 (their page ids read at the top), then the ids of
         * tile STAGES-1 for the loop's first copy. Tile 0's K/V leave first (the chain to
         * the first byte is the latency of a short call), Q after them in their group. */
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (kt0 != kg && s < ntiles)   /* a window moved the start */
                dec_fetch(p, bt, b, kt0 + s * BN, tid, ppg[s], prip[s]);
            dec_clip(kt0 + s * BN, k_lo, k_hi, tid, prip[s]);
        }
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < ntiles)
#if FJ_KV_FP8
                dec_issue8(p, gk, gv, s_raw + s * 2 * RAW, s_raw + s * 2 * RAW + RAW, tid, ppg[s],
                           prip[s]);
#else
                dec_issue(p, gk, gv, s_kv + s * 2 * KV_BYTES, s_kv + s * 2 * KV_BYTES + KV_BYTES,
                          tid, ppg[s], prip[s]);
#endif
            if (s == 0)
                dec_issue_q(p, sq, s_q, r0, nrows, G, hk, tid);
            cp_async_commit();
        }
        if (STAGES - 1 < ntiles) {
            dec_fetch(p, bt, b, kt0 + (STAGES - 1) * BN, tid, pg, rip);
            dec_clip(kt0 + (STAGES - 1) * BN, k_lo, k_hi, tid, rip);
        }
#endif
    }

    /* Per-row key limits of this thread's two rows (lane>>2 and +8 of the warp's 16): key j
     * counts iff lo <= j < hi. Rows past nrows get an empty range. */
    int row_lo[2], row_hi[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int r = r0 + wm * 16 + (lane >> 2) + hf * 8;
        const int i = r / G;
        long long lo = k_lo, hi = k_hi;
        if (p.window_left >= 0) lo = max(lo, (long long)i + shift - p.window_left);
        if (p.window_right >= 0) hi = min(hi, (long long)i + shift + p.window_right + 1);
        const bool ok = r < nrows && hi > lo;
        row_lo[hf] = ok ? (int)lo : 0;
        row_hi[hf] = ok ? (int)hi : 0;
    }

    float acc_o[ND][4];
    float row_max[2] = {-FJ_INF, -FJ_INF}, row_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            acc_o[nd][e] = 0.f;

    /* Per-lane ldmatrix rows and chunk halves (FA2's fragment layouts). Q: rows lane & 15
     * at chunk hi = lane >> 4 -> a0..a3. K: keys (lane & 7) + 8*(lane >> 4) at chunk
     * (lane >> 3) & 1 -> b0, b1 of n-tile 2np, b2, b3 of 2np+1. V (trans): keys lane & 15 at
     * chunk lane >> 4 -> b0, b1 of d-tile 2dp, b2, b3 of 2dp+1. */
    const int q_row = wm * 16 + (lane & 15), q_half = lane >> 4;
    const int k_row = wn * KW + (lane & 7) + ((lane >> 4) << 3), k_half = (lane >> 3) & 1;
    const int v_row = wn * KW + (lane & 15), v_half = lane >> 4;
#if FJ_KV_FP8   /* the descale factors, with the power of two the widening leaves out */
    const fj_i64 dsc = (fj_i64)b * fp.descale_batch_stride + (fj_i64)hk * fp.descale_head_stride;
    const float kfac = ((const float *)fp.k_descale)[dsc] * fj_fp8_unit();
    const float vfac = ((const float *)fp.v_descale)[dsc] * fj_fp8_unit();
#else
    constexpr float kfac = 1.f;
#endif
    /* Scores in the loop are in "kernel units": the raw Q.K, or tanh(scale * Q.K / cap)
     * with a softcap; sc turns them into natural-log logits, sl2 into log2 ones. */
#if FJ_SOFTCAP
    const float sc_in = p.scale * kfac * fp.softcap_inv, sc = fp.softcap;
    const float sl2 = sc * 1.4426950408889634f;
#elif FJ_KV_FP8 || FJ_SINKS || FJ_ALIBI
    const float sc = p.scale * kfac, sl2 = p.scale_log2 * kfac;
#else
    const float sl2 = p.scale_log2;
#endif
#if FJ_ALIBI   /* each of this thread's two rows: its slope in kernel units, its diagonal */
    float row_slope[2];
    int row_diag[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int r = r0 + wm * 16 + (lane >> 2) + hf * 8, i = r / G;
        row_diag[hf] = i + shift;
        row_slope[hf] = r < nrows ? ((const float *)fp.alibi)[(fj_i64)b * fp.alibi_batch_stride +
                                                              hk * G + (r - i * G)] / sc
                                  : 0.f;
    }
#endif
    const int key_lane = wn * KW + 2 * (lane & 3);  /* + nt*8 + e, + k0 */

    for (int t = 0; t < ntiles; ++t) {
#if FJ_DEC_TMA
        mbar_wait(s_bar + 8 * (t % STAGES), (t / STAGES) & 1);
        dec_tma_zero(s_kv + (t % STAGES) * 2 * KV_BYTES + KV_BYTES, kt0 + t * BN, k_lo, k_hi, tid);
        __syncthreads();  /* V's edge rows zeroed; every warp is done with tile t - 1 */
        if (warp == 0) {
            const int u = t + STAGES - 1;
            const fj_u32 st = s_kv + (u % STAGES) * 2 * KV_BYTES;
            if (u < ntiles)
                dec_tma_issue(tk, tv, st, st + KV_BYTES, s_bar + 8 * (u % STAGES), lane, R, hk,
                              npage, nrow);
            if (u + 1 < ntiles && lane < BN / R) {   /* the next tile's ids, a tile ahead */
                dec_tma_at(p, bt, b, R, kt0 + (u + 1) * BN, lane, npage, nrow);
                npage = dec_tma_clip(p, R, kt0 + (u + 1) * BN, lane, k_lo, k_hi, npage);
            }
        }
#else
        cp_async_wait<STAGES - 2>();
        __syncthreads();  /* tile t landed for all; every warp is done with tile t - 1 */
        {
            const int u = t + STAGES - 1;
#if FJ_KV_FP8
            const fj_u32 st = s_raw + (u % STAGES) * 2 * RAW;
            if (u < ntiles)
                dec_issue8(p, gk, gv, st, st + RAW, tid, pg, rip);
#else
            const fj_u32 st = s_kv + (u % STAGES) * 2 * KV_BYTES;
            if (u < ntiles)
                dec_issue(p, gk, gv, st, st + KV_BYTES, tid, pg, rip);
#endif
            cp_async_commit();
            if (u + 1 < ntiles) {  /* ids for the next copy: their latency hides behind this tile */
                dec_fetch(p, bt, b, kt0 + (u + 1) * BN, tid, pg, rip);
                dec_clip(kt0 + (u + 1) * BN, k_lo, k_hi, tid, rip);
            }
        }
#endif
#if FJ_KV_FP8   /* tile t's raw bytes into the MMA tiles (every warp is done with t - 1) */
        const fj_u32 s_k = s_kv, s_v = s_kv + KV_BYTES;
        dec_widen8(s_raw + (t % STAGES) * 2 * RAW, s_k, tid);
        dec_widen8(s_raw + (t % STAGES) * 2 * RAW + RAW, s_v, tid);
        __syncthreads();
#else
        const fj_u32 s_k = s_kv + (t % STAGES) * 2 * KV_BYTES, s_v = s_k + KV_BYTES;
#endif
        const int k0 = kt0 + t * BN;

        /* S = Q K^T for the warp's 16 rows and KW keys */
        float acc_s[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc_s[nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
            fj_u32 a[4];
            ldsm_x4(s_q + dec_off<MT>(q_row, 2 * kk + q_half), a[0], a[1], a[2], a[3]);
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4(s_k + dec_off<BN>(k_row + np * 16, 2 * kk + k_half), b0, b1, b2, b3);
                mma16816(acc_s[2 * np], a, b0, b1);
                mma16816(acc_s[2 * np + 1], a, b2, b3);
            }
        }

#if FJ_SOFTCAP   /* s = cap * tanh(scale * Q.K / cap): kernel units tanh(...) */
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc_s[nt][e] = fj_tanh_approx(acc_s[nt][e] * sc_in);
#endif
#if FJ_ALIBI   /* - slope * |i + len - q_len - j| */
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int j = k0 + key_lane + nt * 8 + e;
                    acc_s[nt][2 * hf + e] -= row_slope[hf] * fabsf((float)(row_diag[hf] - j));
                }
#endif
        /* Mask: key j = k0 + key_lane + nt*8 + e counts for row hf iff lo <= j < hi. Covers the
         * split and sequence ends, the keys zero-filled outside [kb, ke), window and causal. */
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const int lo = row_lo[hf] - k0 - key_lane, hi = row_hi[hf] - k0 - key_lane;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int x = nt * 8 + e;
                    if (x < lo || x >= hi)
                        acc_s[nt][2 * hf + e] = -FJ_INF;
                }
        }

        /* Online softmax (log2 units). A row with no visible key so far keeps m = -inf and
         * uses base 0, so its P is exp2(-inf) = 0 and nothing moves. */
        fj_u32 pa[KN][4];
        float alpha0 = 1.f, alpha1 = 1.f;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float m = row_max[hf];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                m = fmaxf(m, fmaxf(acc_s[nt][2 * hf], acc_s[nt][2 * hf + 1]));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            const float base = m == -FJ_INF ? 0.f : m * sl2;
            const float alpha = ex2(row_max[hf] * sl2 - base);  /* 0 from -inf, 1 if m stays */
            if (hf)
                alpha1 = alpha;
            else
                alpha0 = alpha;
            row_max[hf] = m;
            float sum = row_sum[hf] * alpha;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const float p0 = ex2(fmaf(acc_s[nt][2 * hf], sl2, -base));
                const float p1 = ex2(fmaf(acc_s[nt][2 * hf + 1], sl2, -base));
                sum += p0 + p1;
                /* A operand of k16 step nt/2: a0/a1 from n-tile 2k, a2/a3 from 2k+1 */
                pa[nt >> 1][(nt & 1) * 2 + hf] = pack2(p0, p1);
            }
            row_sum[hf] = sum;
        }
        /* O *= alpha, skipped where no row maximum of the warp moved (alpha exactly 1: the
         * product would change nothing): after the first tiles most tiles of a long split.
         * Up to head_dim 128 (at 240 the branch cost ptxas a spill on sm_100a). */
        if (DP > 128 || __any_sync(0xffffffffu, alpha0 != 1.f || alpha1 != 1.f)) {
#pragma unroll
            for (int nd = 0; nd < ND; ++nd) {
                acc_o[nd][0] *= alpha0;
                acc_o[nd][1] *= alpha0;
                acc_o[nd][2] *= alpha1;
                acc_o[nd][3] *= alpha1;
            }
        }

        /* O += P V */
#pragma unroll
        for (int kk = 0; kk < KN; ++kk)
#pragma unroll
            for (int dp = 0; dp < ND / 2; ++dp) {
                fj_u32 b0, b1, b2, b3;
                ldsm_x4_t(s_v + dec_off<BN>(v_row + kk * 16, 2 * dp + v_half), b0, b1, b2, b3);
                mma16816(acc_o[2 * dp], pa[kk], b0, b1);
                mma16816(acc_o[2 * dp + 1], pa[kk], b2, b3);
            }
    }
    cp_async_wait<0>();
    __syncthreads();  /* every warp is done with Q and K/V: the epilogue overlays them */

    /* Epilogue 1: each warp's m, l (quad-summed) and raw O into shared memory. */
    float *red_o = (float *)sm;                         /* [warp][16][RLD] */
    float *red_m = (float *)(sm + RED_O_BYTES);         /* [warp][16] */
    float *red_l = red_m + WARPS * 16;                  /* [warp][16] */
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        float l = row_sum[hf];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int rr = (lane >> 2) + hf * 8;
        if (r0 + wm * 16 + rr >= nrows)
            continue;   /* a padding row (decode: rows = heads per KV head): never read */
        if ((lane & 3) == 0) {
            red_m[warp * 16 + rr] = row_max[hf];
            red_l[warp * 16 + rr] = l;
        }
        float *dst = red_o + (warp * 16 + rr) * RLD + 2 * (lane & 3);
#pragma unroll
        for (int nd = 0; nd < ND; ++nd)
            *(float2 *)(dst + nd * 8) = make_float2(acc_o[nd][2 * hf], acc_o[nd][2 * hf + 1]);
    }
    __syncthreads();

    /* Epilogue 2: merge the WN warps of each row. TPR threads per row, each CPT chunks of 8
     * columns (cc = its lane in the row + j * TPR: neighbouring threads, neighbouring 32
     * bytes), so that the row's weights are computed once per thread and the loads of all
     * its chunks are in flight together (32 rows over 256 threads: 2 chunks; one chunk per
     * item in turn cost q_len 8 a second chain of 0.6 us at 1 x 1k, H200).
     * A row has CHQ chunks out (one head's: CHQ < CHG only with head packing). */
    const dec_seq so = dec_seq_of(p, b);
    constexpr int CPT0 = (MT * CHQ + THREADS - 1) / THREADS;
    constexpr int CPT = CPT0 < 2 ? CPT0 : 2;          /* chunks per thread and row (4 spilled
                                                       * at 64x3m4n1, head_dim 56, sm_90a) */
    constexpr int TPR = (CHQ + CPT - 1) / CPT;        /* threads per row */
    constexpr int RPP = THREADS / TPR;                /* rows per pass */
    const int nrl = min(MT, nrows - r0);              /* real rows of this CTA */
    const int c0 = tid % TPR;
#pragma unroll 1
    for (int rl = tid / TPR; rl < nrl && tid < RPP * TPR; rl += RPP) {
        const int w0 = (rl >> 4) * WN, rr = rl & 15;
        /* (HP > 1: the row's O is its own KV head's columns of the wide row) */
        const int cs = HP == 1 ? 0 : (r0 + rl) % G / (G / HP) * CHQ;
        float M = -FJ_INF;
#pragma unroll
        for (int w = 0; w < WN; ++w)
            M = fmaxf(M, red_m[(w0 + w) * 16 + rr]);
#if FJ_SINKS   /* the sink joins the denominator of split 0's partial (merges unchanged) */
        const float sink = split == 0 ? ((const float *)fp.sinks)[hk * G + (r0 + rl) % G] / sc
                                      : -FJ_INF;
        M = fmaxf(M, sink);
#endif
        float wt[WN], L = 0.f;
#pragma unroll
        for (int w = 0; w < WN; ++w) {
            const float mw = red_m[(w0 + w) * 16 + rr];
            wt[w] = mw == -FJ_INF ? 0.f : ex2((mw - M) * sl2);
            L += red_l[(w0 + w) * 16 + rr] * wt[w];
        }
#if FJ_SINKS
        if (sink != -FJ_INF)
            L += ex2((sink - M) * sl2);
#endif
#if FJ_KV_FP8
        const float inv = L > 0.f ? vfac / L : 0.f;
#else
        const float inv = L > 0.f ? 1.f / L : 0.f;
#endif
        float o[CPT][8];
#pragma unroll
        for (int j = 0; j < CPT; ++j) {
            const int cc = c0 + j * TPR;
#pragma unroll
            for (int e = 0; e < 8; ++e)
                o[j][e] = 0.f;
            if (TPR * CPT == CHQ || cc < CHQ) {
#pragma unroll
                for (int w = 0; w < WN; ++w) {
                    const float4 *src =
                        (const float4 *)(red_o + ((w0 + w) * 16 + rr) * RLD + (cs + cc) * 8);
                    const float4 x = src[0], y = src[1];
                    const float f = wt[w] * inv;
                    o[j][0] += f * x.x; o[j][1] += f * x.y; o[j][2] += f * x.z; o[j][3] += f * x.w;
                    o[j][4] += f * y.x; o[j][5] += f * y.y; o[j][6] += f * y.z; o[j][7] += f * y.w;
                }
            }
        }
#if FJ_KV_FP8 || FJ_SOFTCAP || FJ_SINKS || FJ_ALIBI
        const float lse = L > 0.f ? M * sc + logf(L) : -FJ_INF;
#else
        const float lse = L > 0.f ? M * p.scale + logf(L) : -FJ_INF;
#endif
        const int r = r0 + rl;
        const int i = r / G, h = hk * G + (r - i * G);
        if (p.splits == 1) {
            fj_u16 *go = (fj_u16 *)p.o + so.o + (fj_i64)i * p.o_row_stride + (fj_i64)h * p.o_head_stride;
#pragma unroll
            for (int j = 0; j < CPT; ++j) {
                const int cc = c0 + j * TPR;
                if (TPR * CPT == CHQ || cc < CHQ)
                    dec_st16(go + cc * 8, pack2(o[j][0], o[j][1]), pack2(o[j][2], o[j][3]),
                             pack2(o[j][4], o[j][5]), pack2(o[j][6], o[j][7]));
            }
            if (p.lse && c0 == 0)
                dec_store_lse(p, b, so.row0, i, h, lse);
        } else if (CL_FITS && clu) {   /* this CTA's shared memory (cluster merge) */
            float *po = (float *)(sm + CL_OFF) + rl * HD;
#pragma unroll
            for (int j = 0; j < CPT; ++j) {
                const int cc = c0 + j * TPR;
                if (TPR * CPT == CHQ || cc < CHQ) {
                    *(float4 *)(po + cc * 8) = make_float4(o[j][0], o[j][1], o[j][2], o[j][3]);
                    *(float4 *)(po + cc * 8 + 4) = make_float4(o[j][4], o[j][5], o[j][6], o[j][7]);
                }
            }
            if (c0 == 0)
                ((float *)(sm + CL_OFF))[MT * HD + rl] = lse;
        } else {
            const fj_i64 prow = ((fj_i64)split * p.total_rows + so.row0 + i) * p.heads_q + h;
            float *po = (float *)p.part_o + prow * HD;
#pragma unroll
            for (int j = 0; j < CPT; ++j) {
                const int cc = c0 + j * TPR;
                if (TPR * CPT == CHQ || cc < CHQ) {
                    dec_st16(po + cc * 8, __float_as_uint(o[j][0]), __float_as_uint(o[j][1]),
                             __float_as_uint(o[j][2]), __float_as_uint(o[j][3]));
                    dec_st16(po + cc * 8 + 4, __float_as_uint(o[j][4]), __float_as_uint(o[j][5]),
                             __float_as_uint(o[j][6]), __float_as_uint(o[j][7]));
                }
            }
            if (c0 == 0)
                ((float *)p.part_lse)[prow] = lse;
        }
    }

    /* Fused combine: the group's (q tile, kv head, b) CTAs of every split count their
     * arrival once their partials are stored; the last to arrive merges all splits of the
     * group's rows and puts the counter back to 0 for the next launch. No CTA waits for
     * another, so any number of them may be resident. Saves the combine kernel's launch.
     * Ordering (the PTX memory model; CUTLASS's GenericBarrier does the same): the barrier
     * puts every thread's partial stores before thread 0's count, whose release at gpu
     * scope is cumulative over them; the last CTA's count acquires every earlier one's,
     * and its barrier puts all its threads' reads after that. No fence per thread. */
#if DEC_CLUSTER
    if (CL_FITS && clu) {   /* (the host sets it only with splits > 1) */
        dec_cluster_sync();   /* every split's partials are in its shared memory */
        dec_merge_cluster(p, sm, b, so, r0, min(MT, nrows - r0), hk, G, split, tid);
        dec_cluster_sync();   /* no CTA leaves while another reads its partials */
        return;
    }
#endif
    if (p.splits > 1 && p.counters) {
        __syncthreads();   /* every thread's partials are stored before thread 0 counts */
        int last = 0;
        if (tid == 0) {
            /* (from blockIdx, not the loop's registers: ptxas spilled one on sm_100a) */
            int *cnt = (int *)p.counters +
                       ((fj_i64)blockIdx.z * p.heads_kv + blockIdx.y) * p.q_tiles +
                       blockIdx.x % (unsigned)p.q_tiles;
            last = dec_count_arrival(cnt) == p.splits - 1;
            if (last)
                atomicExch(cnt, 0);   /* every split has arrived: nobody else touches it */
        }
        if (__syncthreads_or(last)) {   /* (the others' partials: read through L2, .cg) */
            const int rows = min(MT, nrows - r0);
            const fj_i64 bytes = (fj_i64)p.splits * rows * (HD * 4 + 4);
            if (bytes <= SMEM_USE && bytes <= DEC_STAGE_MAX)   /* (decode.c's rule) */
                dec_merge_staged(p, sm, b, so, r0, rows, hk, G, tid);
            else
                dec_merge_direct(p, b, so, r0, rows, hk, G, tid);
        }
    }
}
#endif /* FJ_DEC_BN */

/* ---- the combine step ---------------------------------------------------------------- */
#ifndef FJ_DEC_BN   /* a translation unit of its own: its ptxas report is its own */

/* Where row R, head h of the combine goes: element offset of O, index of LSE; false for R
 * past the real rows. Called again after the merge loop, so that the 64-bit offsets are not
 * held through it (ptxas spilled one on sm_100a at head_dim 256). */
FJ_DEVICE bool dec_cmb_row(const fj_decode_params &p, int R, int h, fj_i64 *o_off, fj_i64 *lse_at)
{
    if (p.cu_seqlens_q) {
        const int total = ((const int *)p.cu_seqlens_q)[p.batch];
        if (R >= total)
            return false;
        if (o_off) {
            *o_off = (fj_i64)R * p.o_row_stride + (fj_i64)h * p.o_head_stride;
            *lse_at = (fj_i64)h * total + R;
        }
    } else {  /* 32-bit division: a 64-bit one is a call with a stack frame */
        const int b = (unsigned)R / (unsigned)p.q_len, i = R - b * p.q_len;
        if (b >= p.batch)
            return false;
        if (o_off) {
            *o_off = (fj_i64)b * p.o_batch_stride + (fj_i64)i * p.o_row_stride +
                     (fj_i64)h * p.o_head_stride;
            *lse_at = ((fj_i64)b * p.heads_q + h) * p.q_len + i;
        }
    }
    return true;
}

#if FJ_DEC_QMAX
/* Whether row R (varlen) belongs to a sequence of at most q_len rows: the sequence b with
 * cu_seqlens_q[b] <= R < cu_seqlens_q[b + 1] (R below cu_seqlens_q[batch]). */
FJ_DEVICE bool dec_cmb_served(const fj_decode_params &p, int R)
{
    if (!p.cu_seqlens_q)
        return true;
    const int *cq = (const int *)p.cu_seqlens_q;
    int lo = 0, hi = p.batch - 1;   /* the last b with cq[b] <= R */
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (cq[mid] <= R)
            lo = mid;
        else
            hi = mid - 1;
    }
    return cq[lo + 1] - cq[lo] <= p.q_len;
}
#endif

/* A thread per (R, h, 4 columns): grid (total_rows, ceil(heads_q * HD/4 / 128)). */
extern "C" __global__ void __launch_bounds__(FJ_DEC_COMBINE_THREADS)
fj_attn_decode_combine(const __grid_constant__ fj_decode_params p)
{
    fj_pdl_wait();
    fj_pdl_trigger();
    constexpr int C4 = dec::HD / 4;
    const int R = blockIdx.x, item = blockIdx.y * FJ_DEC_COMBINE_THREADS + threadIdx.x;
    const int h = item / C4, c4 = item - h * C4;
    if (h >= p.heads_q || R >= p.total_rows || !dec_cmb_row(p, R, h, nullptr, nullptr))
        return;
#if FJ_DEC_QMAX
    if (!dec_cmb_served(p, R))
        return;
#endif
    float4 o;
    /* every split's loads in one step up to 16 splits (each step is a round trip to L2) */
    const float lse =
        p.splits > 8 ? dec_merge4<16>(p, R, h, c4, o) : dec_merge4<8>(p, R, h, c4, o);
    fj_i64 o_off, lse_at;
    dec_cmb_row(p, R, h, &o_off, &lse_at);
    dec_st4((fj_u16 *)p.o + o_off + c4 * 4, o);
    if (p.lse && c4 == 0)
        ((float *)p.lse)[lse_at] = lse;
}
#endif /* !FJ_DEC_BN */
