/* fa2_config.c - see fa2_config.h. */
#include "fa2_config.h"

#include <stdio.h>

#define KIB 1024u

size_t fj_fa2_smem_bytes(const fj_fa2_config *c, int head_dim)
{
    const int dp = (head_dim + 15) / 16 * 16;
    /* the kernel's split path (FA2_SPLIT_ON): a P tile of 32 rows x (block_n/2 + 8)
     * elements per warp */
    const int split = dp > 128 && dp % 32 == 0 && c->block_m == 16 * c->warps &&
                      c->warps % 2 == 0 && c->block_n % 32 == 0;
    const size_t p_tiles = split ? (size_t)c->warps * 32u * (size_t)(c->block_n / 16 + 1) * 16u : 0;
    /* shared rows (FA2_SWZ_ON): swizzled without padding where they are whole 128-byte
     * segments above 128 (192 unsplit, 256; each half on the split path) and at 128 with
     * one stage (FA2_SWZ_SMALL), plus a 4-byte slot per thread; else padded to an odd
     * number of 16-byte chunks */
    const int swz = dp % 64 == 0 && (dp > 128 || (dp == 128 && c->stages == 1)) &&
                    (!split || dp % 128 == 0);
    const size_t row = swz ? (size_t)dp * 2u : ((size_t)(dp / 8) | 1u) * 16u;
    const size_t park = swz ? (size_t)c->warps * 32u * 4u : 0;
    return (size_t)(c->block_m + 2 * c->stages * c->block_n) * row + p_tiles + park;
}

static fj_fa2_config cfg(int m, int n, int w, int s)
{
    fj_fa2_config c = {m, n, w, s};
    return c;
}

fj_fa2_config fj_fa2_default(int sm, int head_dim, int mask)
{
    const size_t lim = fj_smem_limit(sm);
    const int chunks = (head_dim + 15) / 16 * 2;  /* 16-byte chunks per padded row */
    if (head_dim <= 64)  /* a chunk count that is not a power of two (head_dim 40, 48) takes
                          * the generic copy path, whose extra registers spill at 128 x 128 */
        return (chunks & (chunks - 1)) ? cfg(128, 64, 4, 1) : cfg(128, 128, 4, 1);
    if (head_dim <= 128) {
        if (lim < 163 * KIB)
            return cfg(64, 64, 4, 1);   /* FA2's sm86/sm89 choice (causal) */
        if (sm >= 100)
            return cfg(128, 32, 4, 1);  /* 128 x 64 spills a few bytes with ptxas for sm_100 */
        if (sm == 90 && mask != 0 && head_dim == 128)
            return cfg(128, 64, 4, 2);  /* H200: 2-4% over one stage when masked */
        return cfg(128, 64, 4, 1);      /* FA2 on A100 and H100 */
    }
    /* 136..256 (the kernel's split path where roundup16(head_dim) % 32 == 0) */
    if (lim >= 227 * KIB)
        return cfg(64, 64, 4, 1);   /* FA2 on H100: two CTAs per SM; H200 at 256 (swizzled
                                     * rows): 1.07x FLASH unmasked, 128x64w8s2 1.02x */
    if (lim >= 163 * KIB)
        return cfg(128, 64, 8, 1);  /* FA2 on A100 */
    return cfg(64, 32, 4, 1);
}

int fj_fa2_check(const fj_fa2_config *c, int head_dim, int sm, char *why, size_t n)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        n = sizeof dummy;
    }
    if (sm < 80) {
        snprintf(why, n, "the FA2 kernel needs sm_80 or newer, got sm_%d", sm);
        return -1;
    }
    if (head_dim < 8 || head_dim > 256 || head_dim % 8) {
        snprintf(why, n, "head_dim must be a multiple of 8 in 8..256, got %d", head_dim);
        return -1;
    }
    if (c->warps != 1 && c->warps != 2 && c->warps != 4 && c->warps != 8) {
        snprintf(why, n, "warps must be 1, 2, 4 or 8, got %d", c->warps);
        return -1;
    }
    const int mt = c->block_m / (16 * c->warps);
    if (c->block_m <= 0 || c->block_m % (16 * c->warps) || mt > 4) {
        snprintf(why, n, "block_m must be 16*warps*(1..4) = 16*%d*(1..4), got %d", c->warps,
                 c->block_m);
        return -1;
    }
    if (c->block_n < 16 || c->block_n > 256 || c->block_n % 16) {
        snprintf(why, n, "block_n must be a multiple of 16 in 16..256, got %d", c->block_n);
        return -1;
    }
    if (c->stages != 1 && c->stages != 2) {
        snprintf(why, n, "stages must be 1 or 2, got %d", c->stages);
        return -1;
    }
    const int acc = 4 * mt * ((head_dim + 15) / 16 * 2 + c->block_n / 8);
    if (acc > 192) {
        snprintf(why, n,
                 "accumulators need %d registers per thread > 192 (block_m/warps %d rows, "
                 "block_n %d, head_dim %d)",
                 acc, 16 * mt, c->block_n, head_dim);
        return -1;
    }
    const size_t smem = fj_fa2_smem_bytes(c, head_dim), lim = fj_smem_limit(sm);
    if (smem > lim) {
        snprintf(why, n, "smem %zu KiB > %zu KiB on sm_%d", (smem + KIB - 1) / KIB, lim / KIB,
                 sm);
        return -1;
    }
    if (n)
        why[0] = 0;
    return 0;
}

int fj_fa2_candidates(int sm, int head_dim, int mask, fj_fa2_config *out, int max)
{
    static const fj_fa2_config pool[] = {
        {128, 128, 4, 1}, {128, 128, 4, 2}, {128, 64, 4, 1}, {128, 64, 4, 2},
        {128, 32, 4, 1},  {128, 32, 4, 2},  {64, 64, 4, 1},  {64, 64, 4, 2},
        {64, 128, 4, 1},  {64, 128, 4, 2},  {64, 32, 4, 1},  {64, 32, 4, 2},
        {128, 64, 8, 1},  {128, 64, 8, 2},  {128, 128, 8, 1}, {128, 128, 8, 2},
        {256, 64, 8, 1},  {256, 128, 8, 1},
    };
    int k = 0;
    if (max <= 0)
        return 0;
    const fj_fa2_config d = fj_fa2_default(sm, head_dim, mask);
    if (fj_fa2_check(&d, head_dim, sm, NULL, 0) == 0)
        out[k++] = d;
    for (size_t i = 0; i < sizeof pool / sizeof pool[0] && k < max; i++) {
        const fj_fa2_config *c = &pool[i];
        if (c->block_m == d.block_m && c->block_n == d.block_n && c->warps == d.warps &&
            c->stages == d.stages)
            continue;
        if (fj_fa2_check(c, head_dim, sm, NULL, 0) == 0)
            out[k++] = *c;
    }
    return k;
}
