/* fj_tile_order.h - the arithmetic of the persistent tile orders of the Hopper (fa3) and
 * Blackwell (fa4) forward kernels: tile index -> (batch, head, query block), the round robin
 * of a static persistent grid, and the size of the L2 groups of heads. Plain integer
 * functions, compiled by NVRTC (through fj_sm90_sched.cuh, which holds the rest of the order:
 * the per-CTA setup and the dynamic order's hand-over) and by the host C compiler
 * (tests/test_unit.c, tile_orders, checks that every order visits each tile exactly once
 * and, masked, the longest tiles first).
 *
 * Work of a tile: query block mb of a causal (or bottom-right windowed) problem sees about
 * (mb + 1) key blocks, so "longest first" is query blocks from the last to the first.
 */
#ifndef FJ_TILE_ORDER_H
#define FJ_TILE_ORDER_H

#include "fajit_params.h"   /* FJ_HD */


/* Masked persistent order, longest-processing-time first: groups of gsz (batch, head) pairs
 * one after the other (the last group may be smaller); within a group the query blocks from
 * the last to the first, all pairs of one block together. bhn = batch * heads_q pairs,
 * num_mb query blocks per sequence; tiles t in [0, bhn * num_mb). */
FJ_HD void fj_order_masked(int t, int num_mb, int bhn, int gsz, int heads_q, int *b, int *h,
                           int *mb)
{
    const int gtiles = gsz * num_mb, gi = t / gtiles, local = t - gi * gtiles;
    const int gbh = gi * gsz, gn = bhn - gbh < gsz ? bhn - gbh : gsz;
    const int mi = local / gn, bh = gbh + (local - mi * gn);
    *mb = num_mb - 1 - mi;
    *h = bh % heads_q;
    *b = bh / heads_q;
}

/* Unmasked persistent order: query blocks fastest (tiles that run together share K/V). */
FJ_HD void fj_order_plain(int t, int num_mb, int heads_q, int *b, int *h, int *mb)
{
    const int mi = t % num_mb, bh = t / num_mb;
    *mb = mi;
    *h = bh % heads_q;
    *b = bh / heads_q;
}

/* Static persistent grid: the tile of round r of CTA `cta` of `grid`; serpentine (masked):
 * odd rounds walk the CTAs backwards, so a CTA with a heavy tile gets a light one next. */
FJ_HD int fj_order_round(int r, int cta, int grid, int serpentine)
{
    return r * grid + ((serpentine && (r & 1)) ? grid - 1 - cta : cta);
}

/* (batch, head) pairs per L2 group: whole GQA groups whose K + V (4 * seqlen_k * head_dim
 * bytes per KV head, 16-bit) fit in `bytes`, at least one GQA group, at most all bhn pairs. */
FJ_HD int fj_order_group(int bhn, int heads_q, int heads_kv, int seqlen_k, int head_dim,
                         long long bytes)
{
    const int grp_ratio = heads_q / heads_kv;
    const long long kv_head = 4ll * seqlen_k * head_dim;
    int g = (int)(bytes / (kv_head > 0 ? kv_head : 1));
    g = g < 1 ? grp_ratio : g * grp_ratio;
    return g > bhn ? bhn : g;
}

#endif /* FJ_TILE_ORDER_H */
