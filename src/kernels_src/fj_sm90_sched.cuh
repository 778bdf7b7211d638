/* fj_sm90_sched.cuh - the work-tile order of attn_fwd_sm90.cu: which (batch, head, query block)
 * a CTA computes, in a plain grid, a static persistent grid or the dynamic (atomic counter)
 * longest-first order. Included by the kernel after its traits (namespace fa3).
 *
 * Has:
 *   fa3_sched, sched_of   what the order needs of the problem, computed once per CTA (query
 *                         blocks per sequence, (batch, head) pairs, the L2 group size)
 *   tile_coords           tile index -> batch, head, query block (unmasked: query blocks
 *                         fastest; masked persistent: longest first within L2 groups of heads)
 *   sched_tile            static persistent: the tile of round r of this CTA (round robin;
 *                         masked: serpentine)
 *   put_tile              dynamic order: the producer's hand-over of a tile to the consumers
 * Limits: the dynamic order needs the zeroed counter argument (see below); tile indices are
 * int (batch * heads * query blocks < 2^31).
 * Expects: fa3::BM, fa3::HD (traits); FJ_MASK, FJ_FA3_PERSISTENT, FJ_FA3_SCHED (preamble); the
 * kernel's FA3_MASKED, FA3_DYN, FA3_L2GROUP, FA3_L2_BYTES, FA3_L2_BYTES_SHORT, FA3_L2_SHORT_SEQ.
 *
 * Dynamic schedule (FJ_FA3_SCHED 1). The producer thread claims tiles: its CTA's first is
 * blockIdx.x (the longest ones, no atomic), every next one atomicAdd(sched_ctr, 1) + gridDim.x
 * (issued before the current tile's last K/V load, so its latency hides under that wait),
 * until the value passes the tile count. It hands each tile index to the consumers in a word
 * next to the Q buffer it loads into, written before the arrive.expect_tx of that buffer's
 * full barrier (the arrive releases, the consumers' wait acquires; the word is rewritten only
 * after the buffer's empty barrier, i.e. after every consumer warp read it). A tile with no
 * visible key is handed over without data (plain arrive; its zeros are written like any O,
 * and the buffer freed after them); a tile past a varlen sequence's end is skipped; index -1
 * ends the work.
 * Every CTA with a first tile claims until it fails once, so a launch makes exactly `tiles`
 * claims; the claim that returns tiles - 1 is the launch's last and resets the counter
 * to 0 for the next launch (nothing else touches it after that). The host (fj_sched_counter,
 * src/api/ctx.c) gives plain launches counters from a ring of 64 and each launch captured
 * into a CUDA graph one of its own (4096, then reused, logged). Unsafe: two launches that
 * share a counter running at the same time (more than 64 plain launches executing at once,
 * or graphs captured more than 4096 captures apart running together), and a launch that
 * traps (its context is lost anyway).
 */
#ifndef FJ_SM90_SCHED_CUH
#define FJ_SM90_SCHED_CUH

#include "fj_tile_order.h"   /* the orders' arithmetic, host-tested */

/* The dynamic order's hand-over of tile t (batch b, head h, query block mb) at `w` (Q_TILE):
 * the index and its coordinates, one 16-byte store (the consumers skip tile_coords). */
template <int UNUSED = 0> FJ_DEVICE void put_tile(fj_u32 w, int t, int b, int h, int mb)
{
    /* racecheck: tile-word (the caller waited on QE_BAR and arrives on QF_BAR after this:
     * proof in tests/racecheck_reviewed.md) */
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(w), "r"(t), "r"(b), "r"(h), "r"(mb)
                 : "memory");
}

/* What the persistent order needs of the problem, computed once per CTA: query blocks per
 * sequence, (batch, head) pairs, and (masked) the (batch, head) per L2 group. */
struct fa3_sched {
    int num_mb, bhn, gsz;
};
FJ_DEVICE fa3_sched sched_of(const fj_attn_params &p)
{
    fa3_sched s;
    s.num_mb = (p.seqlen_q + fa3::BM - 1) / fa3::BM;
    s.bhn = p.heads_q * p.batch;
    s.gsz = s.bhn;
#if FJ_FA3_PERSISTENT && FA3_MASKED
    /* Longest first within groups of (batch, head) whose K+V fit in about 32 MB of L2 (the
     * dynamic order with at most 1k keys: 4 MB, FA3_L2_BYTES_SHORT). Static
     * order (FA3_L2GROUP 1): only when there are at least half as many (batch, head) as
     * CTAs: then a round of tiles holds at most about two query blocks of a head, the blocks of
     * one head run rounds apart, and over all heads at once their K/V (134 MB in the 16k-token
     * bench shapes) has left L2 by then. With fewer (batch, head) the query blocks of a head
     * that share K/V run in the same round, and the groups' sawtooth order only unbalances the
     * static round robin (run 4: -7..-36% at 4k-16k with groups always on, +9..+17% at
     * 512-1k). FA3_L2GROUP 0: never, 2: always (the dynamic order's default). */
    if (FA3_L2GROUP == 2 || (FA3_L2GROUP == 1 && 2 * s.bhn >= (int)gridDim.x)) {
        const long long bytes = FA3_DYN && p.seqlen_k <= FA3_L2_SHORT_SEQ
                                    ? (long long)FA3_L2_BYTES_SHORT : (long long)FA3_L2_BYTES;
        s.gsz = fj_order_group(s.bhn, p.heads_q, p.heads_kv, p.seqlen_k, (fa3::HD + fa3::HDV) / 2, bytes);  /* (K and V) */
    }
#endif
    return s;
}

/* Tile t of the persistent schedule, or this CTA's one tile: batch b, head h, query block
 * mb. Unmasked: query blocks vary fastest (CTAs that run together share K/V in L2). Masked
 * (persistent): longest-processing-time first: the query blocks from the last (most keys) to
 * the first, all (batch, head) of one block together (heads of a GQA group adjacent), within
 * groups of heads whose K and V fit in L2 (the groups one after the other); with
 * sched_tile's serpentine this balances the CTAs to within about one tile, and the dynamic
 * schedule takes the tiles greedily in this order. Non-persistent masked: the last query
 * blocks first. */
FJ_DEVICE void tile_coords(const fj_attn_params &p, const fa3_sched &s, int t, int &b, int &h, int &mb)
{
#if FJ_FA3_PERSISTENT
#if FA3_MASKED
    fj_order_masked(t, s.num_mb, s.bhn, s.gsz, p.heads_q, &b, &h, &mb);
#else
    fj_order_plain(t, s.num_mb, p.heads_q, &b, &h, &mb);
#endif
#else
    (void)s;
    (void)t;
    b = blockIdx.z;
    h = blockIdx.y;
    mb = FA3_MASKED ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
#endif
}

/* The work tile of round r of this CTA (persistent): round robin over the CTAs, for masked
 * variants in serpentine order (odd rounds walk the CTAs backwards), so that a CTA that got
 * a heavy tile in one round gets a light one in the next. Rounds cover [r*G, r*G + G). */
#if FJ_FA3_PERSISTENT && !FA3_DYN
FJ_DEVICE int sched_tile(int r)
{
    return fj_order_round(r, (int)blockIdx.x, (int)gridDim.x, FA3_MASKED);
}
#endif

#endif
