/* fj_dec_load_tma.cuh - attn_decode.cu's K/V loader by TMA (FJ_DEC_TMA 1: sm_90 and later,
 * head_dim a multiple of 64; the host takes it only where page_size % BN == 0, or BN %
 * page_size == 0 with page_size % 8 == 0). The kernel then takes two more parameters, the K
 * and V tensor maps [pages][page_size][heads_kv][head_dim] (boxes of 64 columns x R rows,
 * 128-byte swizzle; contiguous K/V: sequences as pages of seqlen_k rows). A tile is BN/R
 * chunks of R rows, R = BN without a block table or where pages hold whole tiles, else R =
 * page_size (whole 8-row swizzle atoms); each chunk is DP/64 boxes for K and for V. Lane l of
 * warp 0 reads the page id of chunk l a tile ahead and issues its boxes, all on one mbarrier
 * per stage. Boxes out of the tensor (a page id past num_pages, which is also how chunks
 * outside the CTA's keys are skipped) are zero-filled by the TMA unit and still count their
 * bytes, so every tile completes TILE_TX bytes. V rows outside [kb, ke) are zeroed in shared
 * memory after the copy (the TMA reads whole boxes; K's are masked in S). Shared memory: 64
 * bytes of barriers after the tiles and 1024 of slack to align the base (the swizzle is a
 * function of the address).
 *
 * Has:
 *   dec_tma_rows    rows per chunk (R)
 *   dec_tma_at      page and row of chunk l of a tile
 *   dec_tma_clip    a chunk without keys in [kb, ke) moved out of the tensor
 *   dec_tma_issue   warp 0: the K and V boxes of a tile
 *   dec_tma_zero    V rows outside [kb, ke) to zero
 * Expects: namespace dec (traits: BN, DP, CH, THREADS), dec_off (attn_decode.cu),
 * fj_sm90_prims.cuh (mbarriers, tma_load4).
 */
#ifndef FJ_DEC_LOAD_TMA_CUH
#define FJ_DEC_LOAD_TMA_CUH

#include "fj_sm90_prims.cuh"   /* mbarriers, tensor maps, tma_load4 (sm_90 and later) */

namespace dec {
constexpr fj_u32 TILE_TX = 2u * BN * DP * 2u;   /* K + V bytes of a tile */
}
FJ_DEVICE int dec_tma_rows(const fj_decode_params &p, const int *bt)
{
    return !bt || p.page_size % dec::BN == 0 ? dec::BN : p.page_size;
}
/* The page (or sequence) and row of chunk l of the tile at k0, read before the lengths are
 * known: a chunk past the block-table row gets page num_pages (out of the tensor). */
FJ_DEVICE void dec_tma_at(const fj_decode_params &p, const int *bt, int b, int R, int k0, int l,
                          int &page, int &row)
{
    if (!bt) {
        page = b, row = k0;
        return;
    }
    const int j = k0 + l * R, pidx = (unsigned)j / (unsigned)p.page_size;
    page = pidx < p.bt_stride ? bt[pidx] : p.num_pages;
    row = j - pidx * p.page_size;
}
/* A chunk without a key in [kb, ke) is not read: its page moves out of the tensor. */
FJ_DEVICE int dec_tma_clip(const fj_decode_params &p, int R, int k0, int l, int kb, int ke,
                           int page)
{
    const int j = k0 + l * R;
    return j + R <= kb || j >= ke ? p.num_pages : page;
}
/* Warp 0: the K and V boxes of one tile into stage buffers sk/sv, completing on bar. */
FJ_DEVICE void dec_tma_issue(const fj_tmap &tk, const fj_tmap &tv, fj_u32 sk, fj_u32 sv,
                             fj_u32 bar, int lane, int R, int hk, int page, int row)
{
    using namespace dec;
    if (lane == 0)
        mbar_expect_tx(bar, TILE_TX);
    __syncwarp();
    if (lane < BN / R) {
        /* (the buffer's last generic writes, dec_tma_zero's, before the async proxy's) */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#pragma unroll
        for (int h = 0; h < DP / 64; ++h) {
            const fj_u32 off = (fj_u32)((h * BN + lane * R) * 128);
            tma_load4(sk + off, &tk, h * 64, row, hk, page, bar);
            tma_load4(sv + off, &tv, h * 64, row, hk, page, bar);
        }
    }
}
/* V rows of the tile at k0 outside [kb, ke) to zero: the TMA copied whatever the pages hold
 * there (unused slots may be NaN, and P = 0 times NaN is NaN). K's are masked in S. */
FJ_DEVICE void dec_tma_zero(fj_u32 sv, int k0, int kb, int ke, int tid)
{
    using namespace dec;
    if (k0 >= kb && k0 + BN <= ke)
        return;
    for (int x = tid; x < BN * CH; x += THREADS) {
        const int r = x / CH, c = x - r * CH, j = k0 + r;
        if (j < kb || j >= ke)
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(sv + dec_off<BN>(r, c)),
                         "r"(0)
                         : "memory");
    }
}

#endif /* FJ_DEC_LOAD_TMA_CUH */
