/* attn_fwd_sm90.cu - FlashAttention-3 style forward for Hopper: sm_90a only (wgmma,
 * setmaxnreg, TMA). The portable path is attn_fwd_sm80.cu.
 *
 * Variants (preamble macros):
 *   FJ_DTYPE       FJ_DT_F16 | FJ_DT_BF16 (inputs and output; fp32 accumulation)
 *   FJ_HEAD_DIM    multiple of 16 in 16..256 (tested: 64, 96, 128, 192, 256)
 *   FJ_HEAD_DIM_V  V's and O's head dim where it differs from FJ_HEAD_DIM (the preamble
 *                  defines it only then; default FJ_HEAD_DIM): a multiple of 16, at most
 *                  FJ_HEAD_DIM (DeepSeek's 192 / 128). Q and K tiles, S = Q K^T and the
 *                  Q buffers keep FJ_HEAD_DIM columns; V tiles, the N of O += P V, the O
 *                  accumulators and O's rows (staged in the Q-layout buffer, whose first
 *                  ceil(dv/64) chunks they take) FJ_HEAD_DIM_V. Not run on a GPU yet.
 *   FJ_MASK        FJ_MASK_NONE | FJ_MASK_CAUSAL | FJ_MASK_WINDOW (window reads
 *                  p.window_left/right at run time; causal is (-1, 0), bottom-right aligned)
 *   FJ_BLOCK_M     query rows per CTA: 128 (2 consumer warpgroups, 24/240 registers) or
 *                  192 (3 consumer warpgroups, 24/160 registers)
 *   FJ_BLOCK_N     keys per K/V tile: multiple of 16 in 16..256
 *   FJ_FA3_OVERLAP   1 (default): intra-warpgroup overlap (S_{j+1} = Q K_{j+1}^T and
 *                    O += P_j V_j in flight during the softmax of j+1); 0: serial schedule
 *   FJ_FA3_PINGPONG  1 (default when FJ_BLOCK_M == 128 and OVERLAP): the two consumer
 *                    warpgroups take turns issuing their GEMMs (named barriers 2, 3), so the
 *                    softmax of one runs under the GEMMs of the other
 *   FJ_FA3_PERSISTENT 1: a persistent grid (one CTA per SM) walks the work tiles in a static
 *                    round-robin (masked: longest tiles first, serpentine, see sched_tile);
 *                    the next tile's Q and K/V load under the current tile's last GEMMs and
 *                    epilogue (O then goes out through an O slot or the Q buffer (OQ)
 *                    where shared memory allows, else from registers)
 *   FJ_FA3_SCHED     persistent only: 0 (default) the static order above; 1 dynamic: each CTA
 *                    takes its first tile by blockIdx.x and then the next free one from a
 *                    global atomic counter (the kernel's last argument), in the same tile order
 *                    (masked: longest first within L2-sized groups of heads, always grouped),
 *                    i.e. greedy LPT; see "Dynamic schedule" below. fj_fa3_config.persistent 2.
 *   FJ_FA3_PAGED     1: K/V in pages through a block table (fj_kv_pages, the kernel's last
 *                    argument): K and V tensor maps over [num_pages][page_size][heads_kv]
 *                    [head_dim]; each K/V block is BN / R boxes of R rows (R = BN where pages
 *                    hold whole blocks, else page_size: the host takes this variant only where
 *                    page_size % BN == 0, or BN % page_size == 0 with page_size % 8 == 0, so
 *                    each box is whole 8-row swizzle atoms), each from the page the block
 *                    table names; boxes past the sequence end come from page num_pages
 *                    (outside the map: zeros). Key counts from seqused_k (or seqlen_k); the
 *                    V rows of a sequence's last block past its end are zeroed in shared
 *                    memory before P V (unused page slots may hold NaN). Varlen
 *                    sequences with fewer than pg.min_q query rows are skipped (0: none;
 *                    the mixed plan sets 17 and its decode launch serves them). 0 (default):
 *                    contiguous K/V (fixed length or varlen rows).
 *   FJ_SOFTCAP, FJ_SINKS, FJ_ALIBI  model features (fj_common.cuh; 0 = off, and the kernel is
 *                    the one of before): each 1 adds fj_feat_params as the last argument.
 *                    Per K/V block, in the consumer after S = Q K^T: the softcap (FA3's way:
 *                    the host passes p.scale = softmax_scale / cap and p.scale_log2 = cap *
 *                    log2(e), the kernel takes tanh.approx of scale * s, so the scores are in
 *                    units of cap), then the ALiBi bias -slope * |i + sk - sq - j| (slope of
 *                    (b, h) loaded once per tile, in score units), then the mask, then the
 *                    row maximum and the online softmax. Sinks at the row's end (row_end_sink):
 *                    exp(sink[h]) joins the denominator, LSE = log(sum + exp(sink)), a row
 *                    with no visible key gets O = 0 and LSE = sink. i, j, sq, sk are the
 *                    sequence's own (varlen, paged: per sequence).
 * Variant features derived from the macros above (no overrides; each removed dev knob's code
 * is a patch in dev/fa3/patches/FJ_FA3_<name>.patch, with its measurements):
 *   FA3_LAZY (lazy rescaling), FA3_UCW (uniform warpgroup index), FA3_WGSKIP / FA3_WGSKIP_PP
 *   (skip of blocks a warpgroup does not see), FA3_OQ_ (O through the Q buffer), FA3_OCOPY (O
 *   copied out by the producer's idle warps), FA3_AHEAD (next tile's first K/V block ahead),
 *   FA3_QREG (Q in registers), FA3_L2GROUP / FA3_L2_BYTES* (L2 groups of the masked order).
 * Sources: this file (knobs, traits, the kernel), fj_sm90_prims.cuh (PTX primitives),
 * fj_sm90_sched.cuh (tile order), fj_sm90_consumer.cuh (per-tile consumer pieces).
 * Run-time: batch, heads (GQA/MQA), seqlen_q/k (any), varlen (cu_seqlens), strides, LSE,
 *   scale. Limits: scale > 0 (row maxima are taken on raw scores); 16-byte aligned
 *   pointers and strides that are multiples of 8 elements (TMA); compute capability 9.0.
 *
 * Launch (fj_fa3_* in src/autotune/fa3_config.h builds all of it):
 *   kernel fj_attn_fwd_sm90(params, tmap_q, tmap_k, tmap_v, sched_ctr[, pages][, feat]) (pages:
 *   the fj_kv_pages of FJ_FA3_PAGED, feat: fj_feat_params with a model feature, by value), each
 *   tensor map a
 *   128-byte CUtensorMap passed by value (const __grid_constant__); sched_ctr (int *, used by
 *   FJ_FA3_SCHED 1 only, may be 0 otherwise) a zeroed device int the kernel leaves zeroed
 *   (one per launch in flight: see "Dynamic schedule"). Maps are 4-D {head_dim, rows,
 *   heads, batch} over 16-bit elements, box {64, FJ_BLOCK_M or FJ_BLOCK_N, 1, 1},
 *   128-byte swizzle, zero fill out of bounds; rows = seqlen (fixed length) or the total
 *   row count with batch 1 (varlen). grid (ceil(seqlen_q / FJ_BLOCK_M), heads_q, batch), or
 *   with FJ_FA3_PERSISTENT (min(SM count, that product), 1, 1); block 128 * (FJ_BLOCK_M / 64
 *   + 1) threads, dynamic shared memory
 *   (ceil(hd/64) * 128 * (q * FJ_BLOCK_M + 4 * FJ_BLOCK_N) + 320 + 1024) bytes, q = 3 or 2
 *   for FJ_FA3_PERSISTENT where that fits in 227 KiB, else 1 (fj_fa3_smem_bytes; with
 *   FJ_HEAD_DIM_V the V stages take ceil(dv/64) chunks: fj_fa3_smem_bytes_v). V's tensor map
 *   has FJ_HEAD_DIM_V columns.
 *
 * Design (Shah et al. 2024). Warpgroup 0 is the producer: after setmaxnreg.dec one thread
 * issues TMA loads: Q once, then K_j and V_j into a 2-stage ring, each stage guarded by a
 * "full" mbarrier (transaction bytes) and an "empty" mbarrier (one arrival per consumer
 * warp). Warpgroups 1.. are consumers, 64 query rows each: S = Q K^T by wgmma with both
 * operands in shared memory (K-major, 128B swizzle), online softmax in log2 units on the
 * fp32 accumulators, P converted in registers into the A operand of O += P V (wgmma RS, V
 * read N-major from the same TMA layout). KV blocks are walked from the last to the first
 * so the blocks that need a mask (sequence end, diagonal, window edge) come first and the
 * rest run mask-free. Rows of a warpgroup that see no key of a tile stay exact (-inf max
 * handled). O is normalised once at the end and written through the warpgroup's own Q
 * rows in shared memory (stmatrix) as 16-byte stores (persistent: through an O
 * slot after the Q buffer, as the next Q already loads into the only Q buffer; where no slot
 * fits, through the Q buffer freed after the epilogue (FA3_OQ_) or straight from registers);
 * LSE (natural log) per row. ptxas quirk worked around: see the st.shared "anchor" below.
 *
 * O copy (FA3_OCOPY 1). The consumers only stage O (stmatrix into the O slot or the Q buffer,
 * as without it), write the global address of their first row and the count of rows inside
 * the sequence into shared words, and arrive on their warpgroup's "O full" mbarrier; then they
 * go on with the next tile. Warps 1..3 of the producer warpgroup (otherwise idle) take the
 * handoffs in order (tile by tile, warpgroup by warpgroup), copy the rows with 16-byte loads
 * and stores (as copy_o_out: rows past the sequence end are never written), and release the
 * buffer: the warpgroup's "O empty" mbarrier (its next handoff, i.e. the O slot and the words,
 * waits for it) and, for a Q buffer, after fence.proxy.async, the Q buffer's empty mbarrier
 * the producer's next TMA load waits for. A handoff with a negative row count ends the work.
 *
 * Shared memory: [Q buffers (QST)][O slot (OSLOT)][K stage 0][K stage 1][V stage 0]
 * [V stage 1][256 bytes: barriers and words, see the map at `bar` in the kernel], each tile
 * stored as ceil(hd/64) column chunks of rows x 128 bytes (the TMA box), 16-byte units
 * XOR-swizzled by (row % 8), every chunk 1024-byte aligned. Descriptors: K-major (Q, K):
 * SBO 1024 (8-row groups), LBO unused, k16 step = +32 bytes inside a chunk; N-major (V):
 * SBO 1024 (8-key groups), LBO = chunk size (next 64 columns), k16 step = +2048 bytes.
 */
#include "fj_common.cuh"
#include "fj_sm90_prims.cuh"

#if !defined(FJ_DTYPE) || !defined(FJ_HEAD_DIM) || !defined(FJ_MASK) || !defined(FJ_BLOCK_M) || \
    !defined(FJ_BLOCK_N)
#error "attn_fwd_sm90.cu needs FJ_DTYPE FJ_HEAD_DIM FJ_MASK FJ_BLOCK_M FJ_BLOCK_N"
#endif
#ifndef FJ_HEAD_DIM_V
#define FJ_HEAD_DIM_V FJ_HEAD_DIM
#endif
#ifndef FJ_FA3_OVERLAP
#define FJ_FA3_OVERLAP 1
#endif
#ifndef FJ_FA3_PINGPONG
#define FJ_FA3_PINGPONG (FJ_BLOCK_M == 128 && FJ_FA3_OVERLAP)
#endif
/* FA3_LAZY t: lazy rescaling (FA4's conditional rescaling). A row keeps its running
 * maximum (the exponent base) until a block's maximum exceeds it by more than t in log2 units,
 * so P <= 2^t (exact in fp32 sums, in range for bf16/fp16 P); O is rescaled only when some row
 * of the warp moved its base (a warp-uniform branch over the OREG multiplies). 0: the base
 * follows every new maximum and O is rescaled every block (the kernel before the knob).
 * Default 8, except persistent hdim <= 64 with a mask. Run 19 (dev/fa3/NOTES.md, medians of 5
 * interleaved, 512..16k): hdim 128 unmasked 128x128P +4/+6/+5/+7/+8/+7% (657 TFLOP/s at 16k),
 * hdim 256 unmasked +3..+5%, causal +1..+10%, hdim 128 causal 128x128D -0.4..+2%, hdim 64
 * unmasked 192x128P -0.6..+3%; hdim 64 causal -0..-3% (128x128D, 192x128D): off there. Run 22
 * (with FA3_UCW): the same, but the hdim 64 causal 192x128 grid +1.8/+3.5/+2.9% at 4k/8k/16k
 * (-2..-4% at <= 2k, where it is no default): on for the grid. */
#define FA3_LAZY (FJ_HEAD_DIM <= 64 && FJ_MASK != 0 && FJ_FA3_PERSISTENT ? 0 : 8)
/* FA3_UCW: the consumer warpgroup index through a shuffle (warp-uniform for ptxas), so Q's
 * wgmma descriptors live in uniform registers: no R2UR / 64-bit vector adds between the QK
 * HGMMAs, i.e. inside the ping-pong turn. Default: block_m 128 or a mask. Run 21 (medians of 5
 * interleaved, 512..16k): hd64 causal 128x128D +0.7/+1.4/+3.0/+1.8/+1.8/+3.6%, hd64 causal
 * 192x128 grid +1..+3%, hd128 unmasked 128x128P and causal 128x128D -0.7..+2.4% (mostly
 * +0..1%), hd256 -3..+5% (mixed); hd64 unmasked 192x128P (3 consumer warpgroups, no ping-pong)
 * -1..-3% in every length: off there. With the softcap on too: without it the 192x128 hd64
 * unmasked variant spilled Q's descriptors (16 bytes, reloaded per K block). */
#define FA3_UCW (FJ_BLOCK_M == 128 || FJ_MASK != 0 || FJ_SOFTCAP)
#ifndef FJ_FA3_PERSISTENT
#define FJ_FA3_PERSISTENT 0
#endif
#ifndef FJ_FA3_SCHED
#define FJ_FA3_SCHED 0
#endif
#ifndef FJ_FA3_PAGED
#define FJ_FA3_PAGED 0
#endif
#if FJ_FA3_SCHED && !FJ_FA3_PERSISTENT
#error "FJ_FA3_SCHED 1 (dynamic tile schedule) needs FJ_FA3_PERSISTENT"
#endif
#define FA3_DYN (FJ_FA3_PERSISTENT && FJ_FA3_SCHED)

#define FA3_MASKED (FJ_MASK != 0)
/* FA3_WGSKIP (masked; with ping-pong
 * only as FA3_WGSKIP_PP says): a consumer warpgroup skips the top blocks of a tile's band
 * that none of its 64 rows sees (with 192-row tiles over 128-key blocks, the lower warpgroups of
 * two in three tiles; before, they computed QK, softmax and PV on them). Run 23 (medians of 5
 * interleaved, hd64 causal, 512/1k/2k/4k/8k/16k): 192x128 dynamic order +14.1/+13.7/+7.2/+7.4/
 * +3.6/+2.5%, 192x128 grid +18.9/+20.6/+9.3/+6.6/+2.3/+2.5%. */
/* FA3_WGSKIP_PP: the skip with ping-pong too (an empty turn per skipped block keeps the
 * other warpgroup's turns in step); with block_n < block_m the top block can be invisible to
 * warpgroup 0 (128x80: most tiles). Run 24 (medians of 5, causal, 512..16k): hd256 128x80 grid
 * +4.0/+4.0/+3.5/+2.3/+4.6/+1.8%, 128x64 grid +3.9/+1.8/+1.1/-2.3/-0.4/+0.1%, but the dynamic
 * order lost (hd256 128x80 -0..-4%, and where nothing is skipped, 128x128: hd128 -0.5..-3.8%,
 * hd64 -0.8..-3.6%). Default: grids with block_n < block_m. */
#define FA3_WGSKIP_PP (!FJ_FA3_PERSISTENT && FJ_BLOCK_N < FJ_BLOCK_M)
#define FA3_WGSKIP (FA3_MASKED && (!FJ_FA3_PINGPONG || FA3_WGSKIP_PP))
/* FA3_L2GROUP (1: L2 groups when batch*heads >= SMs/2, 0 never, 2 always): static order: on for hd >= 128 only. Run 6 (medians of 3, masked
 * persistent): hd256 128x80 +17%/+6% at 512/1k, hd128 128x128 +1..+3% at 512-2k, but hd64
 * 128x128 -10%/-5%/-1% at 512/1k/2k (suspect then: the group arithmetic, a 64-bit division
 * per tile_coords call; now computed once per CTA, see fa3_sched). Dynamic order: always (2):
 * the groups' sawtooth only unbalanced the static round robin. */
#define FA3_L2GROUP (FA3_DYN ? 2 : FJ_HEAD_DIM >= 128)
#define FA3_L2_BYTES (32ll << 20)  /* K+V bytes of one L2 group (H100/H200: 50/60 MB of L2) */
/* The dynamic order's groups for keys of at most FA3_L2_SHORT_SEQ: FA3_L2_BYTES_SHORT (the
 * query blocks of a head then run close together in time). Run 29 (dev/fa3/NOTES.md,
 * medians of 5, causal, TFLOP/s with 32 / 4 / 1 MB / one head per group at 512 and 1k): hd128
 * 128x128D 314/332/328/327 and 441/441/436/437, hd64 128x128D 227/232/231/230 and
 * 306/313/310/312, hd64 192x128D 223/231/228/228 and 299/309/308/308, hd256 128x80D
 * 295/307/305/304 and 444/439/436/438; from 2k smaller groups lose (hd128 -4..-9%, hd256
 * -5..-8% at 2k-8k: the longest-first order is then only per group and the last tiles of the
 * launch are long ones). */
#define FA3_L2_BYTES_SHORT (4ll << 20)
#define FA3_L2_SHORT_SEQ 1024
/* a second Q-sized buffer (the O slot) fits (the same test as fj_fa3_smem_bytes) */
#define FA3_QST2_FITS (FJ_FA3_PERSISTENT && ((FJ_HEAD_DIM + 63) / 64) * 128 * (2 * FJ_BLOCK_M + 2 * FJ_BLOCK_N) + ((FJ_HEAD_DIM_V + 63) / 64) * 128 * 2 * FJ_BLOCK_N + 1344 <= 227 * 1024)
/* The O slot: persistent variants stage O in shared memory too, in a slot of its own after the Q buffer (the second Q slot, which fj_fa3_smem_bytes reserves
 * wherever two fit), then store it as 16-byte rows, rather than from the accumulators (4-byte
 * stores, 32 per thread at hd128). Run 8 (dev/fa3/NOTES.md, medians of 3 interleaved):
 * hd128 unmasked 128x128P 469/537 vs 422/515 TFLOP/s at 512/1k; hd64 192x128P +2% at 512, +-1%
 * from 1k. ncu at 512: the epilogue's 32 scattered 4-byte stores per thread backed up the LSU
 * (long-scoreboard waits on registers they held, the next tile's S2UR behind them). */
/* FA3_OQ_ 1: persistent without room for an O slot (hd 256,
 * hd 128 x 176): O staged in the tile's own Q buffer, as the non-persistent grid does, which is
 * then freed only after the epilogue (the next tile's Q load waits for it); 0: the Q buffer
 * freed at the tile's last S, O straight from the accumulators (4-byte stores). Default: 1 for
 * persistent variants with hd > 128. Run 10: hd256 causal 128x80 dynamic with it
 * 286/416/517/601/644 vs 274/398/497/584/642 TFLOP/s at 512..8k; hd128 unmasked 128x176 static
 * -1..-4% (not on there). hd256 unmasked 128x80 static persistent with it vs the grid, three
 * runs (10, 20, 22; the last two with lazy rescaling), 512/1k/2k/4k/8k/16k:
 * +1.3/+1.7/+2.7/0/0/-0.7, +1.5/+0.3/+1.7/-0.9/+1.0/+1.0, +2.9/+1.5/+0.4/+1.4/+0.3/+0.3%. */
/* FA3_OCOPY 1: the O copy to global memory by the producer warpgroup's idle warps (see "O
 * copy" above) in every persistent variant that stages O in shared memory (the O slot,
 * FA3_OQ_); elsewhere no effect. 0: the consumers copy
 * their rows themselves before the next tile (the same code as before the knob). FA3_OCOPY: in
 * effect for this variant (FA3_OSLOT_, FA3_OQ_: the O slot and OQ tests as macros for #if;
 * fa3::OSLOT and fa3::OQ below are defined from them).
 * Runs 15-16 (dev/fa3/NOTES.md, A/B in one call, medians of 3, TFLOP/s at 512/1k/2k/8k):
 * - O slot: a win. hd128 unmasked 128x128P 476/538/563/601 -> 493/547/583/606 (run 16; run 15
 *   +4.8/+4.5/+3.5/+0.9%), hd64 unmasked 192x128P +3.4/+4.6/+3.3/+1.4% (run 15 +2.8/+3.3/+2.3/
 *   +2.7%), hd64 causal dynamic 128x128 +2.3/+0.3% at 512/1k, 192x128 +2.0/+4.0% at 2k/8k.
 * - OQ (hd256 causal dynamic 128x80): -6/-4/-8/-2.5%: the next tile's Q load waits for the copy,
 *   which 96 store threads make one warpgroup's rows after the other (256 threads before).
 * So it pays where nothing waits for the staging buffer but the next handoff (the O slot):
 * the default there, 0 elsewhere. */
#define FA3_OSLOT_ (FJ_FA3_PERSISTENT && FA3_QST2_FITS)
#define FA3_OQ_ (FJ_FA3_PERSISTENT && FJ_HEAD_DIM > 128 && !FA3_OSLOT_)
/* FA3_QREG n: each consumer thread loads its warpgroup's Q fragments for the first n k16 steps
 * of S = Q K^T once per tile (ldmatrix from the swizzled Q buffer, 4 registers per step) and
 * those steps take A from registers (wgmma RS) instead of reading Q from shared memory again for
 * every K block; n >= hd/16: every step. Per-tile path with overlap
 * (elsewhere no effect); where the registers allow it (192x128 hd64: n = 1, hd256 128x80: 4-6).
 * 0: A from shared memory. Default: every step for the dynamic order's masked 128-row tiles of
 * hd 97..128 (the library's hd128 causal tiles), else 0. Timed as bench_attn.py times (300 ms per
 * sample, the GPU at its power cap; run 43 of dev/fa3/NOTES.md, medians of 5, both build
 * orders) hd128 causal 128x128D gains +0.5..+2.5% at 2k-16k in all 8 pairs; unmasked 128x128P
 * -0.6..+0.6%, 192x128P (n = 1) and hd256 128x80P (n = 4) within the spread. At 40 ms per sample
 * (runs 33-37) it was neutral everywhere: what it saves is shared-memory reads, i.e. power. */
#if FA3_DYN && FA3_MASKED && FJ_BLOCK_M == 128 && FJ_HEAD_DIM > 96 && FJ_HEAD_DIM <= 128 && FJ_FA3_OVERLAP
#define FA3_QREG (FJ_HEAD_DIM / 16)
#else
#define FA3_QREG 0
#endif
/* The dynamic order's tile words: the producer, which works out every tile's (batch,
 * head, query block) for its loads anyway, stores them beside the tile index (16 bytes at bar +
 * 256 + 16 qb) and the consumers read them with one load instead of repeating tile_coords (three
 * integer divisions, ~110 instructions of one dependent chain at the top of every tile: 12% of
 * the consumers' stall samples in hd64 causal 128x128D at 512, run 38 of dev/fa3/NOTES.md).
 * Run 38 (medians of 7, causal, TFLOP/s without / with at 512 / 1k): hd64 128x128D 234/246
 * 313/323, hd64 192x128D 232/241 308/317, hd128 128x128D 325/333 433/440, hd256 128x80D
 * 303/306 429/432; from 2k within +-1.6%. */
/* FA3_AHEAD 1: the producer of a persistent variant loads the next tile's first K/V block
 * right after this tile's last one, and prefetches its Q into L2 then, instead of waiting first
 * for the Q buffer (which FA3_OQ_ frees only after this tile's epilogue): the next tile's first
 * S waits for a Q load from L2 alone. (The consumers release that block's slot without waiting
 * for the next Q: a stream across tiles that waited would deadlock.) 0: Q, then the K/V blocks.
 * Default: with FA3_OQ_. Run 42 (dev/fa3/NOTES.md, medians of 7, both build orders):
 * hd256 unmasked 128x64P +2.9/+3.1% at 512, +1.0/+3.3% at 1k, 128x80P +3.2/+3.4% at 512, within
 * +-2% from 2k; hd256 causal 128x80D within +-1%; where the Q buffer is freed at the last S
 * (hd64, hd128: the O slot) -1..-8%: the next Q waits for the block's slot. */
#define FA3_AHEAD FA3_OQ_
#define FA3_OCOPY FA3_OSLOT_

namespace fa3 {
constexpr int BM = FJ_BLOCK_M, BN = FJ_BLOCK_N, HD = FJ_HEAD_DIM, HDV = FJ_HEAD_DIM_V;
constexpr int NWG = BM / 64;                 /* consumer warpgroups */
constexpr int THREADS = 128 * (NWG + 1);
constexpr int DC = (HD + 63) / 64;           /* 64-column chunks (one 128-byte swizzle row) */
constexpr int DCV = (HDV + 63) / 64;         /* V's and O's chunks */
constexpr int KSTEPS = HD / 16;              /* k16 steps of S = Q K^T */
constexpr int PSTEPS = BN / 16;              /* k16 steps of O += P V */
constexpr int SREG = BN / 2, OREG = HDV / 2; /* fp32 accumulators per thread */
constexpr int Q_CHUNK = BM * 128, KV_CHUNK = BN * 128;
constexpr int Q_BYTES = DC * Q_CHUNK, KV_BYTES = DC * KV_CHUNK;  /* K's stage (V's: V_BYTES) */
constexpr int V_BYTES = DCV * KV_CHUNK;
/* V's stage in wgmma descriptor units (K's: the consumers' KV_STEP). Here rather than beside
 * KV_STEP: a second local constant there, even of the same value, changed the SASS of a
 * variant without FJ_HEAD_DIM_V (hd 256 causal 128x80 paged, dynamic order). */
constexpr fj_u64 V_STEP = V_BYTES >> 4;
/* Q buffers: one, freed at the tile's last S (FA3_OQ_: after the epilogue) */
constexpr int QST = 1;
constexpr int OSLOT = FA3_OSLOT_;  /* O slot */
constexpr bool OQ = FA3_OQ_;       /* O via Q buffer */
static_assert(!OQ || QST == 1, "FA3_OQ_: one Q buffer");
static_assert((QST + OSLOT) * Q_BYTES + 2 * KV_BYTES + 2 * V_BYTES + 320 + 1024 <= 227 * 1024, "QST");
constexpr int OFF_K = (QST + OSLOT) * Q_BYTES, OFF_V = OFF_K + 2 * KV_BYTES, OFF_BAR = OFF_V + 2 * V_BYTES;
constexpr int SMEM_BYTES = OFF_BAR + 320 + 1024;  /* + barriers, scratch, alignment slack */
/* Paged: 32 producer registers (the page arithmetic beside the dynamic order's claims spilled
 * at 24), so 232 per consumer with 2 consumer warpgroups: the total must stay within what the
 * launch allocated (384 x 168 = 64,512; 512 x 128 = 65,536 with 3), or setmaxnreg.inc waits
 * forever. */
constexpr int REG_PRODUCER = FJ_FA3_PAGED ? 32 : 24;
constexpr int REG_CONSUMER = NWG == 2 ? (FJ_FA3_PAGED ? 232 : 240) : 160;
constexpr bool PINGPONG = FJ_FA3_PINGPONG && NWG == 2 && FJ_FA3_OVERLAP;

static_assert(FJ_DTYPE == FJ_DT_F16 || FJ_DTYPE == FJ_DT_BF16, "FJ_DTYPE");
static_assert(FJ_MASK == FJ_MASK_NONE || FJ_MASK == FJ_MASK_CAUSAL || FJ_MASK == FJ_MASK_WINDOW,
              "FJ_MASK");
static_assert(HD % 16 == 0 && HD >= 16 && HD <= 256, "FJ_HEAD_DIM: multiple of 16 in 16..256");
static_assert(HDV % 16 == 0 && HDV >= 16 && HDV <= HD,
              "FJ_HEAD_DIM_V: multiple of 16 in 16..FJ_HEAD_DIM (O is staged in Q's buffer)");
static_assert(BM == 128 || BM == 192, "FJ_BLOCK_M: 128 or 192");
static_assert(BN % 16 == 0 && BN >= 16 && BN <= 256, "FJ_BLOCK_N: multiple of 16 in 16..256");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory over 227 KiB");
static_assert(128 * (REG_PRODUCER + NWG * REG_CONSUMER) <= THREADS * (65536 / THREADS / 8 * 8),
              "setmaxnreg budget: within the registers the launch allocates");
}  // namespace fa3

#include "fj_sm90_sched.cuh"
#include "fj_sm90_consumer.cuh"

/* ---- the kernel --------------------------------------------------------------------------- */

/* Sequence b's offsets and lengths: fj_seq_of, or with paged K/V its query side and the key
 * count from seqused_k (no K/V offsets: the block table says where keys are); a varlen
 * sequence of fewer than pg.min_q rows counts as empty (producer and consumers alike skip
 * its tiles). */
FJ_DEVICE fj_seq fa3_seq(const fj_attn_params &p, const fj_kv_pages &pg, int b)
{
#if FJ_FA3_PAGED
    fj_seq s;
    if (p.cu_seqlens_q) {
        const int *cq = (const int *)p.cu_seqlens_q;
        const int q0 = cq[b];
        s.q = (fj_i64)q0 * p.q_row_stride;
        s.o = (fj_i64)q0 * p.o_row_stride;
        s.sq = cq[b + 1] - q0;
        if (s.sq < pg.min_q)   /* (the mixed plan: the decode launch serves it) */
            s.sq = 0;
        s.lse_head_stride = cq[p.batch];
        s.lse_base = q0;
    } else {
        s.q = (fj_i64)b * p.q_batch_stride;
        s.o = (fj_i64)b * p.o_batch_stride;
        s.sq = p.seqlen_q;
        s.lse_head_stride = p.seqlen_q;
        s.lse_base = (fj_i64)b * p.heads_q * p.seqlen_q;
    }
    s.k = s.v = 0;
    s.sk = pg.seqused_k ? ((const int *)pg.seqused_k)[b] : p.seqlen_k;
    return s;
#else
    (void)pg;
    return fj_seq_of(p, b);
#endif
}

/* The KV blocks [nb_lo, nb_hi) that some row of query block m0 sees, and the band. */
struct fa3_band {
    int nb_lo, nb_hi, shift, wl, wr;
};
FJ_DEVICE fa3_band key_blocks(const fj_attn_params &p, const fj_seq &sq, int m0)
{
    using namespace fa3;
    fa3_band r;
    r.shift = sq.sk - sq.sq;
    int kbeg = 0, kend = sq.sk;
#if FJ_MASK == FJ_MASK_CAUSAL
    r.wl = -1;
    r.wr = 0;
#elif FJ_MASK == FJ_MASK_WINDOW
    r.wl = p.window_left;
    r.wr = p.window_right;
#else
    (void)p;
    r.wl = r.wr = -1;
#endif
#if FA3_MASKED
    const int m_last = min(m0 + BM, sq.sq) - 1;
    if (r.wr >= 0)
        kend = min(kend, m_last + r.shift + r.wr + 1);
    if (r.wl >= 0)
        kbeg = max(0, m0 + r.shift - r.wl);
#endif
    r.nb_lo = kbeg / BN;
    r.nb_hi = kend > kbeg ? (kend + BN - 1) / BN : r.nb_lo;
    return r;
}

/* What the producer loads for work tile t: batch, head, query block, its first row m0; skip: a
 * query block past a varlen sequence's end; its K/V blocks, n of them from nb_hi - 1 down (n <=
 * 0: none). Then (load_rows) Q's first row qrow (the tensor map's row coordinate), K/V's row of
 * key 0, KV head hk and batch coordinate bb. */
struct fa3_load {
    int b, h, mb, m0, n, nb_hi, qrow, krow, hk, bb;
#if FJ_FA3_PAGED
    int sk;  /* the sequence's keys */
#endif
    bool skip;
};
FJ_DEVICE fa3_load load_plan(const fj_attn_params &p, const fj_kv_pages &pg, const fa3_sched &sc,
                             int t)
{
    fa3_load l;
    tile_coords(p, sc, t, l.b, l.h, l.mb);
    const fj_seq sq = fa3_seq(p, pg, l.b);
#if FJ_FA3_PAGED
    l.sk = sq.sk;
#endif
    l.m0 = l.mb * fa3::BM;
    l.skip = l.m0 >= sq.sq;
    const fa3_band bd = key_blocks(p, sq, l.m0);
    l.n = bd.nb_hi - bd.nb_lo;
    l.nb_hi = bd.nb_hi;
    return l;
}
FJ_DEVICE void load_rows(const fj_attn_params &p, fa3_load &l)
{
    const bool varlen = p.cu_seqlens_q != 0;
    l.qrow = (varlen ? ((const int *)p.cu_seqlens_q)[l.b] : 0) + l.m0;
    l.krow = varlen && !FJ_FA3_PAGED ? ((const int *)p.cu_seqlens_k)[l.b] : 0;
    l.bb = varlen ? 0 : l.b;
    l.hk = l.h / (p.heads_q / p.heads_kv);
}

extern "C" __global__ void __launch_bounds__(fa3::THREADS, 1)
fj_attn_fwd_sm90(const __grid_constant__ fj_attn_params p, const __grid_constant__ fj_tmap tq,
                 const __grid_constant__ fj_tmap tk, const __grid_constant__ fj_tmap tv,
                 int *sched_ctr
#if FJ_FA3_PAGED
                 , const __grid_constant__ fj_kv_pages pg
#endif
                 FJ_FEAT_PARAM)
{
    using namespace fa3;
#if !FJ_FA3_PAGED
    const fj_kv_pages pg{};  /* (unused) */
#endif
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    /* The schedule's constants (fa3_sched) and the tile count are computed in each role, after
     * its setmaxnreg: a value live across the producer's drop to 24 registers was spilled. */
#if FJ_FA3_PERSISTENT
#define FA3_TOTAL(sc) ((sc).num_mb * (sc).bhn)
    const int t_step = gridDim.x;
    (void)t_step;  /* (the dynamic schedule has no rounds) */
#define FA3_TILE(r) sched_tile(r)
#else
#define FA3_TOTAL(sc) 1
    const int t_step = 1;
#define FA3_TILE(r) 0
    {   /* nothing to do (varlen: this sequence is shorter): leave before any setup */
        int b, h, mb;
        tile_coords(p, fa3_sched{}, 0, b, h, mb);
        if (mb * BM >= fa3_seq(p, pg, b).sq)
            return;
    }
#endif

    const fj_u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const fj_u32 s_q = base, s_k = base + OFF_K, s_v = base + OFF_V;
    /* The 320 bytes at bar: 0 qfull[0]; 8, 16 kfull; 24, 32 vfull; 40, 48 kempty; 56, 64
     * vempty; 72 qempty[0]; 80, 88 qfull[1], qempty[1]; 96, 104 qfull[2], qempty[2]; 112..128
     * Q_TILE words (dynamic order); 128..256 the anchor scratch, or with FA3_OCOPY 128..160
     * the anchor, 160.. O_FULL, 184.. O_EMPTY, 208..256 O_WORDS; 256..320 the dynamic order's tile words. */
    const fj_u32 bar = base + OFF_BAR;
    const fj_u32 b_kf = bar + 8, b_vf = bar + 24, b_ke = bar + 40, b_ve = bar + 56;
    /* Q buffer qb: full barrier QF_BAR(qb), empty barrier QE_BAR(qb), data s_q + qb*Q_BYTES */
#define QF_BAR(qb) (bar + ((qb) == 0 ? 0 : 64 + 16 * (qb)))
#define QE_BAR(qb) (bar + 72 + 16 * (qb))
    /* dynamic schedule: the index of the tile whose Q goes into buffer qb (-1: no more) */
#if FA3_DYN
#define Q_TILE(qb) (bar + 256 + 16 * (qb))  /* {index, batch, head, query block} */
#else
#define Q_TILE(qb) (bar + 112 + 4 * (qb))
#endif
    static_assert(QST <= 3, "Q barriers end at bar + 112, where the Q_TILE words start");
#if FA3_OCOPY
    /* O copy: per consumer warpgroup cw an "O full" mbarrier (one arrival per consumer thread),
     * an "O empty" one (one per store warp) and 16 bytes of words: the global address of its
     * first row (u64), the rows to copy (s32, < 0: the end), the Q buffer (s32, OQ). They take
     * bar + 160 .. 256; the anchor scratch shrinks to bar + 128 .. 160. */
#define O_FULL(cw) (bar + 160 + 8 * (cw))
#define O_EMPTY(cw) (bar + 184 + 8 * (cw))
#define O_WORDS(cw) (bar + 208 + 16 * (cw))
    static_assert(NWG <= 3, "O copy words end at bar + 256");
    /* the row count and the Q buffer at these offsets in the words (o_handoff stores them as
     * one v2) */
    constexpr int OW_ROWS = 8, OW_QB = OW_ROWS + 4;
    constexpr int STORE_WARPS = 3;  /* warps 1..3 of the producer warpgroup */
#endif

    if (threadIdx.x == 0) {
        for (int i = 0; i < QST; ++i) {
            mbar_init(QF_BAR(i), 1);
            mbar_init(QE_BAR(i), NWG * 4);
        }
        for (int i = 0; i < 2; ++i) {
            mbar_init(b_kf + 8 * i, 1);
            mbar_init(b_vf + 8 * i, 1);
            /* one arrival per consumer warp */
            mbar_init(b_ke + 8 * i, NWG * 4);
            mbar_init(b_ve + 8 * i, NWG * 4);
        }
#if FA3_OCOPY
        for (int i = 0; i < NWG; ++i) {
            mbar_init(O_FULL(i), 128);
            mbar_init(O_EMPTY(i), STORE_WARPS);
        }
#endif
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();

    const int wg = threadIdx.x >> 7;
    if (wg == 0) {
        /* ---- producer: one thread; g counts K/V tiles, qi Q tiles, over all work tiles ---- */
        setmaxnreg_dec<REG_PRODUCER>();
#if FA3_OCOPY
        /* (the warp index through a shuffle: warp-uniform for ptxas, as CUTLASS's
         * canonical_warp_idx_sync; with threadIdx.x >= 32 the producer thread's code below left
         * the uniform datapath and spilled) */
        if (__shfl_sync(0xffffffffu, threadIdx.x >> 5, 0) != 0) {
            /* ---- store warps (warps 1..3): the consumers' O handoffs, in their order ---- */
            constexpr int UNITS = HDV / 8;  /* 16-byte units of an O row */
            const int si = threadIdx.x - 32, lane = threadIdx.x & 31;
            for (int k = 0;; ++k) {
                for (int cw = 0; cw < NWG; ++cw) {
                    mbar_wait(O_FULL(cw), k & 1);
                    const int nrows = ld_shared_s32(O_WORDS(cw) + OW_ROWS);
                    if (nrows < 0)  /* the end (every warpgroup ends at the same handoff) */
                        return;
                    const int qb = ld_shared_s32(O_WORDS(cw) + OW_QB);
                    fj_u16 *const go = (fj_u16 *)ld_shared_u64(O_WORDS(cw));
                    const fj_u32 buf = s_q + (OSLOT ? QST : qb) * Q_BYTES;
#pragma unroll 1
                    for (int idx = si; idx < nrows * UNITS; idx += 32 * STORE_WARPS) {
                        const int r = (unsigned)idx / UNITS, u = (unsigned)idx % UNITS;
                        copy_o_unit(buf, 64 * cw + r, u, go, r, p.o_row_stride);
                    }
                    if (!OSLOT)  /* generic reads of a Q buffer before the producer's next TMA write */
                        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    __syncwarp();
                    if (lane == 0) {
                        /* the consumer warpgroup's 4 arrivals on QE_BAR (initialised to NWG * 4,
                         * one per consumer warp, as its warps make them without the O copy): one
                         * per store warp, the first store warp making the rest */
                        if (!OSLOT)
                            mbar_arrive_n(QE_BAR(qb), si < 32 ? 4 - (STORE_WARPS - 1) : 1);
                        mbar_arrive(O_EMPTY(cw));
                    }
                }
            }
        }
#endif
        /* The producer: one thread; with paged K/V its whole warp, lane 0 (`lead`) doing what
         * one thread does and every lane issuing the boxes of one page (below) */
#if FJ_FA3_PAGED
        if (threadIdx.x < 32) {
            const bool lead = threadIdx.x == 0;
#define FA3_CLAIM() __shfl_sync(0xffffffffu, lead ? atomicAdd(sched_ctr, 1) : 0, 0)
#else
        if (threadIdx.x == 0) {
            constexpr bool lead = true;
#define FA3_CLAIM() atomicAdd(sched_ctr, 1)
#endif
            const fa3_sched sc = sched_of(p);
            const int total = FA3_TOTAL(sc);

            if (lead) {
                tma_prefetch_desc(&tq);
                tma_prefetch_desc(&tk);
                tma_prefetch_desc(&tv);
            }
            int g = 0, qi = 0;
#if FJ_FA3_PAGED
            /* K/V block nb of tile L as block gi (of all the CTA's blocks) into ring slot
             * gi & 1: BN / R boxes of R rows, each from its page, lane i issuing box i's (its
             * page number read by itself before the slot's wait); a box past the sequence end
             * from page num_pages (outside the maps: zeros, no block-table read). One thread
             * issuing every box made pages of 16 0.50-0.63x the contiguous time at head_dim 128
             * (16 boxes per K block there, 2 with pages of 128: 0.90x). */
            const int R = pg.page_size % BN == 0 ? BN : pg.page_size;
            const int lane = threadIdx.x;
            static_assert(BN / 8 <= 32, "a lane per box");
            auto load_kv = [&](int gi, const fa3_load &L, int nb) {
                const int st = gi & 1, ph = (gi >> 1) & 1;
                const int j0 = nb * BN;
                const int p0 = pg.page_shift >= 0 ? j0 >> pg.page_shift
                                                  : (int)((unsigned)j0 / (unsigned)pg.page_size);
                const int row0 = j0 - p0 * pg.page_size;  /* 0 unless a page holds blocks */
                const int r = lane * R;                    /* this lane's box: rows r.. */
                const int *bt = (const int *)pg.block_table + (fj_i64)L.b * pg.bt_stride;
                const int page = r < BN && j0 + r < L.sk && p0 + lane < pg.bt_stride
                                     ? bt[p0 + lane] : pg.num_pages;
                /* (nc chunks of a stage of `bytes`: K's DC, V's DCV) */
                auto one = [&](fj_u32 empty, fj_u32 full, fj_u32 dst, const void *tm, int nc,
                               int bytes) {
                    mbar_wait(empty + 8 * st, ph ^ 1);
                    if (lead)
                        mbar_expect_tx(full + 8 * st, bytes);
                    __syncwarp();
                    if (r < BN) {
#pragma unroll
                        for (int c = 0; c < nc; ++c)
                            tma_load4(dst + st * bytes + c * KV_CHUNK + r * 128, tm, c * 64, row0,
                                      L.hk, page, full + 8 * st);
                    }
                };
                one(b_ke, b_kf, s_k, &tk, DC, KV_BYTES);
                one(b_ve, b_vf, s_v, &tv, DCV, V_BYTES);
            };
#else
            /* K/V block nb of tile L as block gi (of all the CTA's blocks) into ring slot gi & 1 */
            auto load_kv = [&](int gi, const fa3_load &L, int nb) {
                const int row = L.krow + nb * BN, hk = L.hk, bb = L.bb;
                const int st = gi & 1, ph = (gi >> 1) & 1;
                /* K or V of the block, once its slot is empty */
                /* (nc chunks of a stage of `bytes`: K's DC, V's DCV) */
                auto one = [&](fj_u32 empty, fj_u32 full, fj_u32 dst, const void *tm, int nc,
                               int bytes) {
                    mbar_wait(empty + 8 * st, ph ^ 1);
                    mbar_expect_tx(full + 8 * st, bytes);
#pragma unroll
                    for (int c = 0; c < nc; ++c)
                        tma_load4(dst + st * bytes + c * KV_CHUNK, tm, c * 64, row, hk, bb, full + 8 * st);
                };
                one(b_ke, b_kf, s_k, &tk, DC, KV_BYTES);
                one(b_ve, b_vf, s_v, &tv, DCV, V_BYTES);
            };
#endif
#if FA3_AHEAD
            int ahead = -1;  /* the tile whose first K/V block is loaded already */
#endif
#if FA3_DYN
            /* claims: see "Dynamic schedule" in the header: a launch makes exactly `total`
             * claims (a CTA with blockIdx.x >= total, which fj_fa3_launch_shape never makes,
             * none). v: this tile's claim of the next one (-1: not yet made). */
            auto next_tile = [&](int v) -> int {
                if (v < 0)
                    v = FA3_CLAIM();
                if (v == total - 1 && lead)
                    atomicExch(sched_ctr, 0);  /* the launch's last claim: reset for the next */
                return v + (int)gridDim.x;
            };
            int v = -1, tn = -1;  /* tn: the next tile when the look-ahead claimed it */
            for (int t = blockIdx.x; t < total; t = tn >= 0 ? tn : next_tile(v)) {
                v = -1;
                tn = -1;
#else
            for (int r = 0; r * t_step < total; ++r) {
                const int t = FA3_TILE(r);
                if (t >= total)
                    continue;
#endif
                fa3_load L = load_plan(p, pg, sc, t);
                if (L.skip)
                    continue;
                const int n = L.n;
                if (n <= 0) {
#if FA3_DYN
                    /* no key: the consumers write its zeros; handed over without data */
                    const int qb = qi % QST;
                    mbar_wait(QE_BAR(qb), ((qi / QST) & 1) ^ 1);
                    if (lead) {
                        put_tile(Q_TILE(qb), t, L.b, L.h, L.mb);
                        mbar_arrive(QF_BAR(qb));
                    }
                    ++qi;
#endif
                    continue;
                }
                load_rows(p, L);
                const int qb = qi % QST;
#if FJ_FA3_PERSISTENT
                /* the consumers' release of the tile that used this buffer before */
                mbar_wait(QE_BAR(qb), ((qi / QST) & 1) ^ 1);
#endif
                if (lead) {
#if FA3_DYN
                    put_tile(Q_TILE(qb), t, L.b, L.h, L.mb);
#endif
                    mbar_expect_tx(QF_BAR(qb), Q_BYTES);
#pragma unroll
                    for (int c = 0; c < DC; ++c)
                        tma_load4(s_q + qb * Q_BYTES + c * Q_CHUNK, &tq, c * 64, L.qrow, L.h, L.bb,
                                  QF_BAR(qb));
                }
#if FA3_AHEAD
                const int it0 = ahead == t;  /* block 0 loaded ahead */
#else
                constexpr int it0 = 0;
#endif
#if FA3_DYN
#pragma unroll 1  /* (unrolled, the claim's state spilled from the producer's 24 registers) */
#endif
                for (int it = it0; it < n; ++it) {
#if FA3_DYN
                    if (it == n - 1)  /* claim the next tile; used after this block's loads */
                        v = FA3_CLAIM();
#endif
                    load_kv(g + it, L, L.nb_hi - 1 - it);
                }
                g += n;
                ++qi;
#if FA3_AHEAD
                /* the next tile's first K/V block now (its slot frees during this tile's last
                 * block), its Q into L2 first; the Q load itself waits for the Q buffer */
                ahead = -1;
#if FA3_DYN
                tn = next_tile(v);
                const int t2 = tn;
#else
                const int t2 = FA3_TILE(r + 1);
#endif
                if (t2 < total) {
                    fa3_load N = load_plan(p, pg, sc, t2);
                    if (!N.skip && N.n > 0) {
                        load_rows(p, N);
                        if (lead) {
#pragma unroll
                            for (int c = 0; c < DC; ++c)
                                tma_prefetch_l2(&tq, c * 64, N.qrow, N.h, N.bb);
                        }
                        load_kv(g, N, N.nb_hi - 1);
                        ahead = t2;
                    }
                }
#endif
            }
#if FA3_DYN
            {   /* no more tiles: -1 to the consumers through the next Q buffer's word */
                const int qb = qi % QST;
                mbar_wait(QE_BAR(qb), ((qi / QST) & 1) ^ 1);
                if (lead) {
                    /* racecheck: tile-word (after QE_BAR, before QF_BAR's arrive: proof in
                     * tests/racecheck_reviewed.md) */
                    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(Q_TILE(qb)), "r"(-1) : "memory");
                    mbar_arrive(QF_BAR(qb));
                }
            }
#endif
#undef FA3_CLAIM
        }
        return;
    }

    /* ---- consumers ---- */
    setmaxnreg_inc<REG_CONSUMER>();
    const fa3_sched sc = sched_of(p);
    const int total = FA3_TOTAL(sc);
    (void)total;
#if FA3_UCW
    /* warp-uniform for ptxas (a shuffle from lane 0): Q's descriptors in uniform registers */
    const int cw = __shfl_sync(0xffffffffu, wg - 1, 0);
#else
    const int cw = wg - 1;
#endif
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int col_lane = 2 * (lane & 3);
    /* (FJ_SOFTCAP: the host's p.scale_log2 is cap * log2(e), see the header) */
    const float sl2 = p.scale_log2;
#if FJ_SOFTCAP
#define FA3_UNIT fp.softcap  /* the natural-log value of one unit of the scores (LSE) */
#else
#define FA3_UNIT p.scale
#endif
#if FJ_ALIBI
#if FJ_SOFTCAP
    const float inv_unit = fp.softcap_inv;
#else
    const float inv_unit = __frcp_rn(p.scale);
#endif
#endif
    const fj_u64 dk0 = desc_kmajor(s_k);
    const fj_u64 dv0 = desc_nmajor(s_v, KV_CHUNK);
    constexpr fj_u64 KV_STEP = KV_BYTES >> 4;
#if FJ_FA3_OVERLAP
    const fj_u32 s_anchor = bar + 128 + 4 * (FA3_OCOPY ? lane & 7 : lane);  /* write-only scratch, see below */
#endif
    float s[SREG];
    fj_u32 pr[PSTEPS][4];
    int g = 0, qi = 0;
#if FA3_OCOPY
    /* O copy: this warpgroup's handoffs so far (the phase of its O full / O empty barriers).
     * o_wait_empty: the store warps have read its previous O and words (before O is staged in
     * the O slot again, before the words are rewritten). o_handoff: rows [0, nrows) of the 64
     * staged by stage_o in Q buffer qb (or the O slot) go to go_row and following rows;
     * nrows < 0 ends the store warps' work. */
    int ko = 0;
    auto o_wait_empty = [&]() { mbar_wait_warp(O_EMPTY(cw), (ko & 1) ^ 1); };
    auto o_handoff = [&](fj_u16 *go_row, int nrows, int qb) {
        if ((threadIdx.x & 127) == 0)  /* racecheck: o-words (ordered by O_FULL/O_EMPTY) */
            asm volatile("st.shared.b64 [%0], %1;\n"
                         "st.shared.v2.b32 [%0 + %4], {%2, %3};\n" ::"r"(O_WORDS(cw)),
                         "l"(go_row), "r"(nrows), "r"(qb), "n"(OW_ROWS)
                         : "memory");
        if constexpr (!OSLOT)  /* (a Q buffer: its next writer is the producer's TMA load) */
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        /* every thread releases its own stmatrix (a __syncwarp and one arrival per warp here
         * moved the former cross-tile stream's wgmma descriptors out of uniform registers, as
         * the per-lane wait did, see mbar_wait_warp) */
        mbar_arrive(O_FULL(cw));
        ++ko;
    };
    /* O of this warpgroup (times inv) of query block m0 to the store warps: staged in buf (Q
     * buffer qb, or the O slot), handed off with go's rows of this warpgroup, those inside the
     * sequence (0..64). */
    auto o_stage_handoff = [&](const float (&o)[OREG], const float (&inv)[2], fj_u32 buf, fj_u16 *go,
                               int m0, int sq_len, int qb) {
        o_wait_empty();
        stage_o(o, inv, buf, cw, warp, lane);
        o_handoff(go + (fj_i64)(m0 + 64 * cw) * p.o_row_stride,
                  max(0, min(64, sq_len - m0 - 64 * cw)), qb);
    };
#endif

#if FA3_DYN
    for (;;) {  /* the tile the producer handed over with the next Q buffer */
        const int qb = qi % QST, qpar = (qi / QST) & 1;
        mbar_wait(QF_BAR(qb), qpar);
        int t, b, h, mb;
        /* racecheck: tile-word (read after QF_BAR's wait, released by QE_BAR) */
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(t), "=r"(b), "=r"(h), "=r"(mb)
                     : "r"(Q_TILE(qb))
                     : "memory");
        if (t < 0)
            break;
#else
    for (int r = 0; r * t_step < total; ++r) {
        const int t = FA3_TILE(r);
        if (t >= total)
            continue;
        int b, h, mb;
        tile_coords(p, sc, t, b, h, mb);
#endif
        const fj_seq sq = fa3_seq(p, pg, b);
        const int m0 = mb * BM;
        if (m0 >= sq.sq)
            continue;
        const fa3_band bd = key_blocks(p, sq, m0);
        const int n = bd.nb_hi - bd.nb_lo, shift = bd.shift, wl = bd.wl, wr = bd.wr;
        const int row0 = m0 + 64 * cw + 16 * warp + (lane >> 2);  /* row of hf = 0 */
#if FJ_ALIBI
        /* -slope of (b, h) in the tile's units (alibi_tile) */
        const float nslope = -((const float *)fp.alibi)[(fj_i64)b * fp.alibi_batch_stride + h] *
                             inv_unit;
#endif
#if FJ_SINKS
        const float sink2 = ((const float *)fp.sinks)[h] * 1.4426950408889634f;  /* log2 units */
#endif

        float o[OREG];
#pragma unroll
        for (int i = 0; i < OREG; ++i)
            o[i] = 0.f;
        float mx[2] = {-FJ_INF, -FJ_INF}, l[2] = {0.f, 0.f}, alpha[2] = {1.f, 1.f};

        /* A block needs the per-element mask when it crosses the sequence end or an edge of
         * the band of some row of this CTA: with d = k0 - (m0 + shift), key k0 + x of row
         * m0 + y has j - i - shift = d + x - y. */
        auto need_mask = [&](int nb) -> bool {
            const int k0 = nb * BN;
            bool need = k0 + BN > sq.sk;
            const int d = k0 - (m0 + shift);
            if (wr >= 0)
                need |= d + BN - 1 > wr;
            if (wl >= 0)
                need |= d < BM - 1 - wl;
            return need;
        };
#if !FA3_DYN
        const int qb = qi % QST, qpar = (qi / QST) & 1;
#endif
        const fj_u64 dq = desc_kmajor(s_q + qb * Q_BYTES + cw * 64 * 128);
#if FA3_QREG
        fa3_qop qop;  /* fragments loaded after the Q wait (load_q) */
        qop.d = dq;
#else
        const fj_u64 qop = dq;
#endif
        (void)qop;  /* (the serial schedule takes dq) */
        /* After the last S = Q K^T of a work tile the producer may load the next Q (OQ: after
         * the epilogue, which stages O in the buffer). */
        auto release_q = [&]() {
            if (FA3_QREG && FJ_FA3_PERSISTENT && !OQ) {
                /* load_q's generic reads before the producer's next TMA write */
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                __syncwarp();
            }
            if (FJ_FA3_PERSISTENT && !OQ && lane == 0)
                mbar_arrive(QE_BAR(qb));
        };
#if FJ_FA3_PAGED
        /* The V rows of the tile's top block at and past the sequence end hold whatever the
         * last page holds there (unused slots may be NaN, and P = 0 times NaN is NaN): zeroed
         * before the first P V of a warpgroup whose first block is the top one. Both warpgroups
         * zero the same rows of the slot they share; every write is a zero, so their order
         * does not matter. vz: the first row to zero (BN: none). */
        const int vz = bd.nb_hi * BN > sq.sk ? sq.sk - (bd.nb_hi - 1) * BN : BN;
        auto zero_v = [&](int st, bool first) {
            if (!first || vz >= BN)
                return;
            const fj_u32 sv = s_v + st * V_BYTES;
#pragma unroll 1
            for (int x = (threadIdx.x & 127) + vz * DCV * 8; x < BN * DCV * 8; x += 128) {
                const int r = x / (DCV * 8), u = x % (DCV * 8);
                asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(
                                 sv + (u >> 3) * KV_CHUNK + r * 128 + (u & 7) * 16),
                             "r"(0)
                             : "memory");
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  /* before wgmma */
            named_sync<128>(4 + cw);
        };
#else
        auto zero_v = [](int, bool) {};
#endif
        /* O += P V of the block in K/V stage st (phase ph), waited for; its V slot released
         * (first: the warpgroup's first block of the tile) */
        auto pv_now = [&](int st, int ph, bool first) {
            mbar_wait(b_vf + 8 * st, ph);
            zero_v(st, first);
            pin(o);
            pin(pr);
            wg_fence();
            gemm_pv(o, pr, dv0 + st * V_STEP);
            wg_commit();
            wg_wait<0>();
            pin(o);
            if (lane == 0)
                mbar_arrive(b_ve + 8 * st);
        };
#if FA3_DYN
        if (n <= 0) {  /* handed over without data: free the buffer at once */
            __syncwarp();
            release_q();
            ++qi;
        }
#endif

        if (n > 0) {
            if (PINGPONG && cw == 0)
                named_arrive<256>(2);  /* warpgroup 0 goes first */
#if !FA3_DYN
            mbar_wait(QF_BAR(qb), qpar);
#else
            (void)qpar;
#endif
#if FA3_WGSKIP
            /* The first blocks (the top of the band) that no row of this warpgroup sees (192-row
             * tiles over 128-key blocks, 128-row tiles over 64..112-key blocks). They are
             * waited for and released without any math (a release needs the full wait first: an
             * early arrival would count towards the slot's previous phase). */
            int skip = 0;
            if (wr >= 0) {
                const int r_lo = m0 + 64 * cw, r_hi = min(r_lo + 63, sq.sq - 1);
                const int kend = r_hi + shift + wr + 1;  /* keys >= kend: seen by no row here */
                const int nbw = r_hi < r_lo || kend <= 0 ? bd.nb_lo
                                                         : min(bd.nb_hi, (kend + BN - 1) / BN);
                skip = bd.nb_hi - max(nbw, bd.nb_lo);
            }
            for (int i = 0; i < skip; ++i) {
                const int gi = g + i, st = gi & 1, ph = (gi >> 1) & 1;
                mbar_wait(b_kf + 8 * st, ph);
                if (PINGPONG) {  /* an empty turn: the other warpgroup's turns stay in step */
                    named_sync<256>(2 + cw);
                    if (!(cw == 1 && i == n - 1))
                        named_arrive<256>(3 - cw);
                }
                if (lane == 0)
                    mbar_arrive(b_ke + 8 * st);
                mbar_wait(b_vf + 8 * st, ph);
                if (lane == 0)
                    mbar_arrive(b_ve + 8 * st);
            }
            if (skip == n)
                release_q();
#else
            constexpr int skip = 0;
#endif
            const int nw = n - skip, g0 = g + skip, nbh = bd.nb_hi - skip;
            /* S of block nb (K slot st) is in the registers: the slot back to the producer, the
             * Q buffer too after the tile's last S, then the block's mask where it needs one and
             * the online softmax */
            auto s_landed = [&](int nb, int st, bool last) {
                if (lane == 0)
                    mbar_arrive(b_ke + 8 * st);
                if (last)
                    release_q();
#if FJ_SOFTCAP
                softcap_tile(s, p.scale);  /* (FJ_SOFTCAP: scale / cap) */
#endif
#if FJ_ALIBI
                alibi_tile(s, nb * BN, row0, col_lane, shift, nslope);
#endif
                if (need_mask(nb))
                    apply_mask(s, nb * BN, row0, col_lane, sq.sk, shift, wl, wr);
                softmax_tile(s, mx, l, alpha, sl2);
            };
            if (nw > 0) {
#if FA3_QREG
                load_q(qop.f, s_q + qb * Q_BYTES, cw, warp, lane);
#endif
#if FJ_FA3_OVERLAP
                {   /* the first block: S, softmax, P; its P V is issued in the next step */
                    const int nb = nbh - 1, st = g0 & 1, ph = (g0 >> 1) & 1;
                    mbar_wait(b_kf + 8 * st, ph);
                    if (PINGPONG)
                        named_sync<256>(2 + cw);
                    pin(s);
                    wg_fence();
                    gemm_qk(s, qop, dk0 + st * KV_STEP);
                    wg_commit();
                    if (PINGPONG && !(cw == 1 && nw == 1))
                        named_arrive<256>(3 - cw);
                    wg_wait<0>();
                    pin(s);
                    s_landed(nb, st, nw == 1);
                    convert_p(s, pr);
                }
                for (int it = 1; it < nw; ++it) {
                    const int nb = nbh - 1 - it, gi = g0 + it, st = gi & 1, ph = (gi >> 1) & 1;
                    const int pst = st ^ 1, pph = ((gi - 1) >> 1) & 1;
                    mbar_wait(b_kf + 8 * st, ph);
                    if (PINGPONG)
                        named_sync<256>(2 + cw);
                    pin(s);
                    wg_fence();
                    gemm_qk(s, qop, dk0 + st * KV_STEP);
                    wg_commit();
                    rescale_o(o, alpha);  /* for the previous block's P V, issued next */
                    mbar_wait(b_vf + 8 * pst, pph);
                    zero_v(pst, it == 1 && skip == 0);
                    pin(o);
                    pin(pr);
                    wg_fence();
                    gemm_pv(o, pr, dv0 + pst * V_STEP);
                    wg_commit();
                    if (PINGPONG && !(cw == 1 && it == nw - 1))
                        named_arrive<256>(3 - cw);
                    wg_wait<1>();  /* S done */
                    pin(s);
                    s_landed(nb, st, it == nw - 1);
                    /* ptxas hoists a wgmma wait up to the previous memory operation, which would
                     * put the softmax after P V instead of under it. A shared store of the row
                     * sums (which depend on every exp of the block) anchors the wait below.
                     * Write-only scratch: every consumer warp writes the same words and nothing
                     * reads them (racecheck's write-after-write reports are reviewed as benign,
                     * tests/racecheck_reviewed.md; a predicated store with one writer per word
                     * measured 1.5-3% slower at hd 128: ptxas schedules the loop differently). */
                    /* racecheck: anchor */
                    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(s_anchor), "f"(l[0] + l[1])
                                 : "memory");
                    wg_wait<0>();  /* P V done */
                    pin(o);
                    pin(pr);
                    pin(s);
                    if (lane == 0)
                        mbar_arrive(b_ve + 8 * pst);
                    convert_p(s, pr);
                }
                {   /* the last P V */
                    const int gl = g0 + nw - 1, st = gl & 1, ph = (gl >> 1) & 1;
                    rescale_o(o, alpha);
                    pv_now(st, ph, nw == 1 && skip == 0);
                }
#else
                for (int it = 0; it < nw; ++it) {
                    const int nb = nbh - 1 - it, gi = g0 + it, st = gi & 1, ph = (gi >> 1) & 1;
                    mbar_wait(b_kf + 8 * st, ph);
                    pin(s);
                    wg_fence();
                    gemm_qk(s, dq, dk0 + st * KV_STEP);
                    wg_commit();
                    wg_wait<0>();
                    pin(s);
                    s_landed(nb, st, it == nw - 1);
                    rescale_o(o, alpha);
                    convert_p(s, pr);
                    pv_now(st, ph, it == 0 && skip == 0);
                }
#endif
            }
            g += n;
            ++qi;
        }

        /* ---- epilogue: 1/rowsum, LSE, O ---- */
        fj_u16 *go = (fj_u16 *)p.o + sq.o + (fj_i64)h * p.o_head_stride;
        float *lse = (float *)p.lse;
        float inv[2];
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float tl = l[hf];
            tl += __shfl_xor_sync(0xffffffffu, tl, 1);
            tl += __shfl_xor_sync(0xffffffffu, tl, 2);
#if FJ_SINKS
            const int i = row0 + 8 * hf;
            float lv;
            row_end_sink(mx[hf], tl, sl2, sink2, inv[hf], lv);
            if (lse && (lane & 3) == 0 && i < sq.sq)
                lse[sq.lse_head_stride * h + sq.lse_base + i] = lv;
#else
            inv[hf] = row_inv(tl);
            const int i = row0 + 8 * hf;
            if (lse && (lane & 3) == 0 && i < sq.sq)
                lse[sq.lse_head_stride * h + sq.lse_base + i] = row_lse(mx[hf], tl, FA3_UNIT);
#endif
        }
#if FJ_FA3_PERSISTENT
        if (OQ && (FA3_DYN || n > 0)) {
            /* Through this warpgroup's own Q rows (its S GEMMs are done); the buffer goes back to
             * the producer after the copy-out (static order: a tile with no key has no buffer) */
            /* (buf opaque: hoisted out of the tile loop, copy_o_out's addresses were spilled) */
            fj_u32 buf;
            asm volatile("mov.u32 %0, %1;\n" : "=r"(buf) : "r"(s_q));
#if FA3_OCOPY
            /* (its O empty wait: for the words; the store warps freed the buffer before its Q
             * load) */
            o_stage_handoff(o, inv, buf, go, m0, sq.sq, 0);
#else
            stage_o(o, inv, buf, cw, warp, lane);
            named_sync<128>(4 + cw);
            copy_o_out(buf, cw, m0, sq.sq, go, p.o_row_stride);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            __syncwarp();
            if (lane == 0)
                mbar_arrive(QE_BAR(0));
#endif
        } else if constexpr (OSLOT) {
            /* Through this warpgroup's rows of the O slot (the Q buffer already holds the next
             * tile's Q); the first barrier: the warpgroup's reads of the last tile's O are done */
            const fj_u32 obuf = s_q + QST * Q_BYTES;
#if FA3_OCOPY
            /* (its O empty wait: the store warps have read the last O of this warpgroup) */
            o_stage_handoff(o, inv, obuf, go, m0, sq.sq, -1);
#else
            named_sync<128>(4 + cw);
            stage_o(o, inv, obuf, cw, warp, lane);
            named_sync<128>(4 + cw);
            copy_o_out(obuf, cw, m0, sq.sq, go, p.o_row_stride);
#endif
        } else {
            /* Straight from the accumulators (the Q buffer already holds the next tile's Q):
             * each store is 2 columns; the 4 lanes of a row fill 16 contiguous bytes. */
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int i = row0 + 8 * hf;
                if (i < sq.sq) {
                    fj_u16 *orow = go + (fj_i64)i * p.o_row_stride + col_lane;
#pragma unroll
                    for (int nt = 0; nt < OREG / 4; ++nt)
                        asm volatile("st.global.b32 [%0], %1;\n" ::"l"(orow + nt * 8),
                                     "r"(pack2(o[4 * nt + 2 * hf] * inv[hf], o[4 * nt + 2 * hf + 1] * inv[hf]))
                                     : "memory");
                }
            }
        }
#else
        /* Through this warpgroup's own Q rows (no other warpgroup reads them) */
        stage_o(o, inv, s_q, cw, warp, lane);
        named_sync<128>(4 + cw);
        copy_o_out(s_q, cw, m0, sq.sq, go, p.o_row_stride);
#endif
    }
#if FA3_OCOPY
    o_wait_empty();  /* the end of the store warps' work */
    o_handoff(nullptr, -1, 0);
#endif
}
