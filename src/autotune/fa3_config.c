/* fa3_config.c - see fa3_config.h. */
#include "fa3_config.h"

#include <stdio.h>
#include <string.h>

#define KIB 1024u

static fj_fa3_config cfg(int m, int n)
{
    fj_fa3_config c = {m, n, 1, m == 128, 0};
    return c;
}

/* 0 (head_dim) or head_dim_v */
static int dv_of(int head_dim, int head_dim_v) { return head_dim_v ? head_dim_v : head_dim; }

size_t fj_fa3_smem_bytes_v(const fj_fa3_config *c, int head_dim, int head_dim_v)
{
    /* persistent: a third or second Q buffer where it fits (FA3_QST3_FITS / FA3_QST2_FITS in
     * the kernel: the same tests); Q buffers and K stages of head_dim columns, V stages of
     * head_dim_v */
    const size_t chunks = (size_t)(head_dim + 63) / 64;
    const size_t vchunks = (size_t)(dv_of(head_dim, head_dim_v) + 63) / 64;
    const size_t kv = chunks * 128u * (size_t)(2 * c->block_n) +
                      vchunks * 128u * (size_t)(2 * c->block_n);
    for (int q = 3; q >= 2; q--) {
        const size_t b = chunks * 128u * (size_t)(q * c->block_m) + kv + 320u + 1024u;
        if (c->persistent && b <= 227 * KIB)
            return b;
    }
    return chunks * 128u * (size_t)c->block_m + kv + 320u + 1024u;
}

size_t fj_fa3_smem_bytes(const fj_fa3_config *c, int head_dim)
{
    return fj_fa3_smem_bytes_v(c, head_dim, 0);
}

int fj_fa3_length_class(int seqlen_q)
{
    if (seqlen_q > 1 && seqlen_q <= FJ_FA3_SHORT_SEQ)
        return FJ_FA3_CLASS_SHORT;
    if (seqlen_q > FJ_FA3_SHORT_SEQ && seqlen_q <= FJ_FA3_MID_SEQ)
        return FJ_FA3_CLASS_MID;
    return seqlen_q > FJ_FA3_LONG_SEQ ? FJ_FA3_CLASS_VLONG : FJ_FA3_CLASS_LONG;
}

int fj_fa3_class_seqlen(int length_class)
{
    static const int seq[FJ_FA3_CLASSES] = {0, FJ_FA3_SHORT_SEQ, 2 * FJ_FA3_LONG_SEQ,
                                             FJ_FA3_MID_SEQ};
    return length_class >= 0 && length_class < FJ_FA3_CLASSES ? seq[length_class] : 0;
}

fj_fa3_config fj_fa3_default(int head_dim, int mask, int seqlen_q)
{
    const int cls = fj_fa3_length_class(seqlen_q);
    /* FA3's tiles, trimmed to what fits the shared memory with hdim in between, then
     * checked on the H200 (dev/fa3/NOTES.md): hdim 64 is fastest with 3 consumer
     * warpgroups; hdim 128 causal with 128x128. */
    /* hdim 97..128 unmasked: 128x128 persistent at every length since lazy rescaling
     * (FA3_LAZY in the kernel; run 19 of dev/fa3/NOTES.md, medians of 5 interleaved,
     * TFLOP/s at 512/1k/2k/4k/8k/16k): 505/581/619/639/649/657 against 434/513/558/594/617/638
     * for 128x176 and 407/485/571/601/635/649 for 128x192 (the previous long-class tiles, which
     * gained nothing from it: 437/519/558/596/626/634 and 426/485/576/606/635/650 without). */
    fj_fa3_config c;
    if (head_dim <= 64)
        c = cfg(192, 128);
    else if (head_dim <= 128)
        c = cfg(128, 128);
    else if (head_dim <= 192)
        c = cfg(128, 112);
    else
        c = cfg(128, 80);
    /* Persistent measured +1..15% for hdim 64/128 without a mask, hdim 256 lost 0..10%.
     * With a mask (longest-first order since run 3) it wins only at 512-1k tokens (hdim 64
     * causal 128x128: +27% / +14%) and loses 5-20% from 2k on: a candidate, not the default
     * (dev/fa3/results/run3_bench.log). hdim 256 unmasked since O goes out through the Q
     * buffer (FA3_OQ_, the kernel's default for persistent hdim > 128): +0..3% at 512-2k,
     * level above, in three runs (10, 20, 22 of dev/fa3/NOTES.md). */
    c.persistent = mask == FJ_MASK_NONE && (head_dim <= 128 || head_dim > 192);
    /* Prefill of at most 1k tokens (dev/fa3/NOTES.md runs 4-6, same-run A/B):
     * hdim 64 causal 128x128 persistent 206/272 TFLOP/s vs 164/235 for 192x128 at 512/1k
     * (slower from 2k). */
    if (cls == FJ_FA3_CLASS_SHORT && head_dim <= 64 && mask == FJ_MASK_CAUSAL) {
        c = cfg(128, 128);
        c.persistent = 1;
    }
    /* Causal, the dynamic tile order (persistent 2: atomic counter, longest first within
     * L2-sized groups of heads), runs 9-10 (dev/fa3/NOTES.md, medians of 3 interleaved,
     * same run as CUDNN), TFLOP/s at 512/1k/2k/4k/8k/16k:
     * - hdim 128 128x128: 305/406/494/560/593/612 vs the grid's 274/368/464/518/564/603 (run
     *   10; static persistent 288/357/409/497/561/584 in run 9): every length;
     * - hdim 64 128x128 (without the cross-tile stream, since removed from the kernel) at <= 1k:
     *   222/300 vs 206/276 with it (the previous default); longer: 192x128 359/411/459/473 vs the
     *   grid's 349/401/453/484 at 2k..16k;
     * - hdim 256 128x80 (O through the Q buffer, FA3_OQ_) from 2k: 517/601/644/647 vs the
     *   grid's 509/566/619/701 (the 16k loss against 4k-8k, where the grid missed 1.10x CUDNN);
     *   at <= 1k the grid stays (299/416 vs 286/416).
     * The long class takes it at the measured hdim 64 and 256 only: hdim 48 (192x128) and 240
     * (128x80) spill 4 bytes with it. Above FJ_FA3_LONG_SEQ (the very long class) hdim 64
     * and 256 keep the grid: 484 vs 473 and 701 vs 647 at 16k (run 10; at 8k the dynamic
     * order leads, 459 vs 453 and 644 vs 619). */
    if (mask == FJ_MASK_CAUSAL &&
        ((head_dim > 96 && head_dim <= 128) || (head_dim <= 64 && cls == FJ_FA3_CLASS_SHORT) ||
         ((cls == FJ_FA3_CLASS_LONG || cls == FJ_FA3_CLASS_MID) &&
          (head_dim == 64 || head_dim == 256))))
        c.persistent = 2;
    /* The autotuner over the benchmark shapes (bench/results/2026-11-30-h200-tuned-vs-default.md
     * and 2026-11-30-h200-tuning.md: two runs, every candidate timed, a winner kept only > 3% ahead):
     * - hdim 256 causal at <= 1k: 128x64 (grid) 0.1095/0.1093 ms vs 128x80 0.1138/0.1134 at
     *   512 (+4% both runs), level at 1k (0.1573 vs 0.1572);
     * - hdim 256 unmasked at <= 1k (2026-11-30, H200, the tuning run's full table):
     *   128x64 persistent 0.1289 vs
     *   0.1326 ms for 128x80 at 512 (+2.8%; 512 keys are 6.4 blocks of 80: the last one 60%
     *   empty, 8.6% of the work wasted), level at 1k (0.2076 vs 0.2066); run 22 of
     *   dev/fa3/NOTES.md: the 128x64 grid +3.5% over the 128x80 grid at 512;
     * - (before lazy rescaling, superseded above: hdim 128 unmasked 128x192 above
     *   FJ_FA3_LONG_SEQ, 128x176 to it, 128x128 in the mid class, which was made for it and
     *   now has the long class's defaults everywhere; it stays a bucket of its own for tuning
     *   winners.) */
    if (cls == FJ_FA3_CLASS_SHORT && (mask == FJ_MASK_CAUSAL || mask == FJ_MASK_NONE) &&
        head_dim > 192) {
        c = cfg(128, 64);
        c.persistent = mask == FJ_MASK_NONE;
    }
    return c;
}

fj_fa3_config fj_fa3_default_v(int head_dim, int head_dim_v, int mask, int seqlen_q)
{
    fj_fa3_config c = fj_fa3_default(head_dim, mask, seqlen_q);
    /* V's head dim below Q's: the tile of head_dim, which fits (V's stages and O's
     * accumulators only shrink), except DeepSeek's 192 / 128 (and any dv <= 128 of head_dim
     * 129..192) without a window, where FA3 (hopper/tile_size.h) takes 128x128: 64 + 96
     * accumulator registers as head_dim 128's 128x128, 209 KiB of shared memory. Its schedule
     * stays head_dim 192's (the grid: not measured on a GPU yet). */
    const int dv = dv_of(head_dim, head_dim_v);
    if (dv < head_dim && head_dim > 128 && head_dim <= 192 && dv <= 128 && c.block_m == 128 &&
        mask != FJ_MASK_WINDOW)
        c.block_n = 128;
    return c;
}

int fj_fa3_check(const fj_fa3_config *c, int head_dim, int sm, char *why, size_t n)
{
    return fj_fa3_check_v(c, head_dim, 0, sm, why, n);
}

int fj_fa3_check_v(const fj_fa3_config *c, int head_dim, int head_dim_v, int sm, char *why,
                   size_t n)
{
    const int dv = dv_of(head_dim, head_dim_v);
    char dummy[8];
    if (!why) {
        why = dummy;
        n = sizeof dummy;
    }
    if (sm != 90) {
        snprintf(why, n, "the sm_90a kernel needs compute capability 9.0, got sm_%d", sm);
        return -1;
    }
    if (head_dim < 16 || head_dim > 256 || head_dim % 16) {
        snprintf(why, n, "head_dim must be a multiple of 16 in 16..256, got %d", head_dim);
        return -1;
    }
    if (dv < 16 || dv > head_dim || dv % 16) {
        snprintf(why, n, "head_dim_v must be a multiple of 16 in 16..head_dim (%d), got %d",
                 head_dim, dv);
        return -1;
    }
    if (c->block_m != 128 && c->block_m != 192) {
        snprintf(why, n, "block_m must be 128 or 192, got %d", c->block_m);
        return -1;
    }
    if (c->block_n < 16 || c->block_n > 256 || c->block_n % 16) {
        snprintf(why, n, "block_n must be a multiple of 16 in 16..256, got %d", c->block_n);
        return -1;
    }
    if ((c->overlap != 0 && c->overlap != 1) || (c->pingpong != 0 && c->pingpong != 1) ||
        c->persistent < 0 || c->persistent > 2) {
        snprintf(why, n, "overlap and pingpong must be 0 or 1, persistent 0, 1 or 2, got %d, %d "
                 "and %d", c->overlap, c->pingpong, c->persistent);
        return -1;
    }
    if (c->pingpong && (c->block_m != 128 || !c->overlap)) {
        snprintf(why, n, "pingpong needs block_m 128 and overlap 1, got block_m %d overlap %d",
                 c->block_m, c->overlap);
        return -1;
    }
    const size_t smem = fj_fa3_smem_bytes_v(c, head_dim, dv);
    if (smem > 227 * KIB) {
        if (dv == head_dim)
            snprintf(why, n, "shared memory %zu bytes > 227 KiB (block_m %d, block_n %d, "
                     "head_dim %d)", smem, c->block_m, c->block_n, head_dim);
        else
            snprintf(why, n, "shared memory %zu bytes > 227 KiB (block_m %d, block_n %d, "
                     "head_dim %d, head_dim_v %d)", smem, c->block_m, c->block_n, head_dim, dv);
        return -1;
    }
    /* O's accumulators take head_dim_v / 2 */
    const int acc = dv / 2 + 3 * c->block_n / 4, lim = c->block_m == 128 ? 210 : 130;
    if (acc > lim) {
        snprintf(why, n,
                 "accumulators need %d registers per consumer thread (%s/2 + 3*block_n/4), "
                 "more than %d with block_m %d",
                 acc, dv == head_dim ? "head_dim" : "head_dim_v", lim, c->block_m);
        return -1;
    }
    return 0;
}

static int same(const fj_fa3_config *a, const fj_fa3_config *b)
{
    return a->block_m == b->block_m && a->block_n == b->block_n && a->overlap == b->overlap &&
           a->pingpong == b->pingpong && a->persistent == b->persistent;
}

static int add(fj_fa3_config *out, int k, int max, fj_fa3_config c, int head_dim, int dv)
{
    if (k >= max || fj_fa3_check_v(&c, head_dim, dv, 90, NULL, 0))
        return k;
    for (int i = 0; i < k; i++)
        if (same(&out[i], &c))
            return k;
    out[k] = c;
    return k + 1;
}

int fj_fa3_candidates(int head_dim, int mask, int seqlen_q, fj_fa3_config *out, int max)
{
    return fj_fa3_candidates_v(head_dim, 0, mask, seqlen_q, out, max);
}

int fj_fa3_candidates_v(int head_dim, int head_dim_v, int mask, int seqlen_q, fj_fa3_config *out,
                        int max)
{
    static const int tiles[][2] = {{128, 128}, {128, 176}, {128, 192}, {192, 128}, {128, 112},
                                   {128, 80},  {128, 144}, {128, 64},  {192, 96}};
    const int dv = dv_of(head_dim, head_dim_v);
    const fj_fa3_config d = fj_fa3_default_v(head_dim, dv, mask, seqlen_q);
    fj_fa3_config c = d;
    int k = 0;
    if (max <= 0 || (dv != head_dim && fj_fa3_check_v(&d, head_dim, dv, 90, NULL, 0)))
        return 0;   /* (a head_dim_v the kernel does not take: none) */
    out[k++] = d;
    c.persistent = !d.persistent;  /* the other scheduler (grid <-> persistent) */
    k = add(out, k, max, c, head_dim, dv);
    if (mask != FJ_MASK_NONE) {
        /* masked + persistent (longest-first order), the dynamic and the static order, of the
         * default tile and of 128x128 (runs 3-10: 128x128 fastest for hdim 64 causal at
         * 512-1k tokens, the dynamic order the default for causal hdim 64/128, 256 from 2k) */
        for (int ps = 2; ps >= 1; ps--) {
            c = d;
            c.persistent = ps;
            k = add(out, k, max, c, head_dim, dv);
            c = cfg(128, 128);
            c.persistent = ps;
            k = add(out, k, max, c, head_dim, dv);
        }
    }
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        c = cfg(tiles[i][0], tiles[i][1]);
        c.persistent = d.persistent;
        k = add(out, k, max, c, head_dim, dv);
    }
    if (d.pingpong) {  /* the default without ping-pong */
        c = d;
        c.pingpong = 0;
        k = add(out, k, max, c, head_dim, dv);
    }
    return k;
}
