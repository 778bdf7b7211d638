/* fj_dec_load_async.cuh - attn_decode.cu's K/V loader by cp.async (FJ_DEC_TMA 0, every
 * target). Every thread copies rows of a tile: 16-byte cp.async.cg, 8 threads per 128 bytes
 * of a row, RSTEP rows per pass. The page ids of a tile are read one tile ahead into
 * registers (their latency hides behind a tile of math): one id per tile when page_size % BN
 * == 0 (no lookup at all without a block table), one per row otherwise (a shift where
 * page_shift >= 0). A row's address is one 32-bit multiply-add in 16-byte units where the
 * host set off16 (64-bit element arithmetic otherwise). Keys outside the CTA's [kb, ke) are
 * zero-filled (copied as 0 bytes, never read from the pages: no NaN from an unused page slot
 * reaches the MMAs) and masked.
 *
 * Has:
 *   dec_fetch        page id and row in the page of each row this thread copies in a tile
 *   dec_clip         rows outside [kb, ke) marked (zero-filled)
 *   dec_issue_rows   the cp.async of one tile's K and V rows (NARROW: 32-bit offsets)
 *   dec_issue        dec_issue_rows as p.off16 says
 *   dec_issue8       FP8 K/V (FJ_KV_FP8): the rows' bytes into raw stage buffers
 *   dec_widen8       a raw FP8 tile into the FJ_DTYPE tile the MMAs read
 * Expects: namespace dec (traits: ITERS, RSTEP, BN, CH, CHG, SEGS), dec_off (attn_decode.cu),
 * fj_sm80_prims.cuh.
 */
#ifndef FJ_DEC_LOAD_ASYNC_CUH
#define FJ_DEC_LOAD_ASYNC_CUH

/* The page id and row within the page of each row this thread copies in the tile at key k0,
 * read before the sequence's length is known (speculatively: rows up to the end of the
 * block-table row, which the host bounds above seqlen_k, so no read leaves the table).
 * Without a block table the "page" is b and the row is j (page_stride = batch stride). */
FJ_DEVICE void dec_fetch(const fj_decode_params &p, const int *bt, int b, int k0, int tid,
                         int (&pg)[dec::ITERS], int (&rip)[dec::ITERS])
{
    using namespace dec;
    const int r0 = tid >> 3;
    if (!bt) {
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            pg[it] = b;
            rip[it] = k0 + r0 + it * RSTEP;
        }
    } else if (p.page_size % BN == 0) {  /* the tile lies in one page */
        const int pidx = (unsigned)k0 / (unsigned)p.page_size;
        const int page = pidx < p.bt_stride ? bt[pidx] : 0;
        const int in0 = k0 - pidx * p.page_size;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            pg[it] = page;
            rip[it] = in0 + r0 + it * RSTEP;
        }
    } else if (p.page_shift >= 0) {   /* a power of two: shifts, not divisions */
        const int sh = p.page_shift, msk = (1 << sh) - 1;
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int j = k0 + r0 + it * RSTEP;
            const int pidx = j >> sh;
            pg[it] = pidx < p.bt_stride ? bt[pidx] : 0;
            rip[it] = j & msk;
        }
    } else {
#pragma unroll
        for (int it = 0; it < ITERS; ++it) {
            const int j = k0 + r0 + it * RSTEP;
            const int pidx = (unsigned)j / (unsigned)p.page_size;
            const bool ok = pidx < p.bt_stride;
            pg[it] = ok ? bt[pidx] : 0;
            rip[it] = j - pidx * p.page_size;
        }
    }
}

/* Marks the rows of the tile at k0 outside [kb, ke) (rip = -1: zero-filled, never read). */
FJ_DEVICE void dec_clip(int k0, int kb, int ke, int tid, int (&rip)[dec::ITERS])
{
    using namespace dec;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int j = k0 + (tid >> 3) + it * RSTEP;
        if (j < kb || j >= ke)
            rip[it] = -1;
    }
}

/* K and V rows of one tile into stage buffers sk/sv (rows from dec_fetch). NARROW (p.off16):
 * a row's offset is one 32-bit multiply-add in 16-byte units (a clipped row: offset 0, the
 * tensor's first row, copied as 0 bytes, so no select where every chunk lies in the row);
 * else 64-bit element arithmetic. */
template <bool NARROW>
FJ_DEVICE void dec_issue_rows(const fj_decode_params &p, const fj_u16 *gk, const fj_u16 *gv,
                              fj_u32 sk, fj_u32 sv, int tid, const int (&pg)[dec::ITERS],
                              const int (&rip)[dec::ITERS])
{
    using namespace dec;
    const int r0 = tid >> 3, c = tid & 7;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int r = r0 + it * RSTEP;
        if (BN % RSTEP == 0 || r < BN) {
            const bool ok = rip[it] >= 0;
            const fj_u16 *srck, *srcv;
            if (NARROW) {
                const fj_u32 ok_k = ok ? (fj_u32)pg[it] * p.k_page16 + (fj_u32)rip[it] * p.k_row16 : 0u;
                const fj_u32 ok_v = ok ? (fj_u32)pg[it] * p.v_page16 + (fj_u32)rip[it] * p.v_row16 : 0u;
                srck = gk + (fj_u64)ok_k * 8, srcv = gv + (fj_u64)ok_v * 8;
            } else {
                srck = gk + ((fj_i64)pg[it] * p.k_page_stride + (fj_i64)rip[it] * p.k_row_stride);
                srcv = gv + ((fj_i64)pg[it] * p.v_page_stride + (fj_i64)rip[it] * p.v_row_stride);
            }
#pragma unroll
            for (int sg = 0; sg < SEGS; ++sg) {
                const int cc = c + 8 * sg;
                if (CH % 8 == 0 || cc < CH) {
                    const bool in = ok && (CHG == CH || cc < CHG);
                    const bool direct = NARROW && CHG == CH;   /* (the address is valid) */
                    const fj_u32 d = dec_off<BN>(r, cc);
                    cp_async16(sk + d, direct || in ? srck + cc * 8 : gk, in ? 16 : 0);
                    cp_async16(sv + d, direct || in ? srcv + cc * 8 : gv, in ? 16 : 0);
                }
            }
        }
    }
}
FJ_DEVICE void dec_issue(const fj_decode_params &p, const fj_u16 *gk, const fj_u16 *gv, fj_u32 sk,
                         fj_u32 sv, int tid, const int (&pg)[dec::ITERS],
                         const int (&rip)[dec::ITERS])
{
    if (p.off16)
        dec_issue_rows<true>(p, gk, gv, sk, sv, tid, pg, rip);
    else
        dec_issue_rows<false>(p, gk, gv, sk, sv, tid, pg, rip);
}

#if FJ_KV_FP8
/* FP8 K and V rows of one tile (rows from dec_fetch) into raw stage buffers sk/sv: row r's
 * HD bytes at r * HD, unswizzled (dec_widen8 reads them in order). Strides count bytes;
 * NARROW (p.off16): in 16-byte units. 8 threads per row, one 16-byte chunk each per pass. */
template <bool NARROW>
FJ_DEVICE void dec_issue_rows8(const fj_decode_params &p, const unsigned char *gk,
                               const unsigned char *gv, fj_u32 sk, fj_u32 sv, int tid,
                               const int (&pg)[dec::ITERS], const int (&rip)[dec::ITERS])
{
    using namespace dec;
    constexpr int C8 = HD / 16, SEG8 = (C8 + 7) / 8;
    const int r0 = tid >> 3, c = tid & 7;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int r = r0 + it * RSTEP;
        if (BN % RSTEP == 0 || r < BN) {
            const bool ok = rip[it] >= 0;
            const unsigned char *srck, *srcv;
            if (NARROW) {
                const fj_u32 ok_k = ok ? (fj_u32)pg[it] * p.k_page16 + (fj_u32)rip[it] * p.k_row16 : 0u;
                const fj_u32 ok_v = ok ? (fj_u32)pg[it] * p.v_page16 + (fj_u32)rip[it] * p.v_row16 : 0u;
                srck = gk + (fj_u64)ok_k * 16, srcv = gv + (fj_u64)ok_v * 16;
            } else {
                srck = gk + ((fj_i64)pg[it] * p.k_page_stride + (fj_i64)rip[it] * p.k_row_stride);
                srcv = gv + ((fj_i64)pg[it] * p.v_page_stride + (fj_i64)rip[it] * p.v_row_stride);
            }
#pragma unroll
            for (int sg = 0; sg < SEG8; ++sg) {
                const int cc = c + 8 * sg;
                if (C8 % 8 == 0 || cc < C8) {
                    const fj_u32 d = r * HD + cc * 16;
                    cp_async16(sk + d, ok ? srck + cc * 16 : gk, ok ? 16 : 0);
                    cp_async16(sv + d, ok ? srcv + cc * 16 : gv, ok ? 16 : 0);
                }
            }
        }
    }
}
FJ_DEVICE void dec_issue8(const fj_decode_params &p, const unsigned char *gk,
                          const unsigned char *gv, fj_u32 sk, fj_u32 sv, int tid,
                          const int (&pg)[dec::ITERS], const int (&rip)[dec::ITERS])
{
    if (p.off16)
        dec_issue_rows8<true>(p, gk, gv, sk, sv, tid, pg, rip);
    else
        dec_issue_rows8<false>(p, gk, gv, sk, sv, tid, pg, rip);
}

/* The raw FP8 tile at `raw` (dec_issue_rows8's layout) as FJ_DTYPE rows in the MMA tile at
 * `dst` (dec_off's layout): each 16-byte chunk of 16 values becomes two 16-byte chunks,
 * off by fj_fp8_unit() (fj_fp8x4_widen). */
FJ_DEVICE void dec_widen8(fj_u32 raw, fj_u32 dst, int tid)
{
    using namespace dec;
    constexpr int C8 = HD / 16, N = BN * C8;
#pragma unroll
    for (int x0 = 0; x0 < N; x0 += THREADS) {
        const int x = x0 + tid;
        if (N % THREADS == 0 || x < N) {
            const int r = x / C8, c = x - r * C8;
            fj_u32 w0, w1, w2, w3, o[8];
            asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3) : "r"(raw + x * 16));
            fj_fp8x4_widen(w0, o[0], o[1]);
            fj_fp8x4_widen(w1, o[2], o[3]);
            fj_fp8x4_widen(w2, o[4], o[5]);
            fj_fp8x4_widen(w3, o[6], o[7]);
            asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst + dec_off<BN>(r, 2 * c)),
                         "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3]) : "memory");
            asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst + dec_off<BN>(r, 2 * c + 1)),
                         "r"(o[4]), "r"(o[5]), "r"(o[6]), "r"(o[7]) : "memory");
        }
    }
}
#endif

#endif /* FJ_DEC_LOAD_ASYNC_CUH */
