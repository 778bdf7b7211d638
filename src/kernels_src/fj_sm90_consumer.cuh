/* fj_sm90_consumer.cuh - the consumer warpgroups' per-tile pieces of attn_fwd_sm90.cu: the
 * two GEMMs of a K/V block, the mask, the online softmax, and O's epilogue (1/rowsum, LSE,
 * staging O in shared memory and copying it out). Included by the kernel after its traits.
 *
 * Has:
 *   row_inv, row_lse      1/rowsum and the natural-log LSE of a row
 *   gemm_qk               S = Q K^T (wgmma SS; with FA3_QREG the first k16 steps RS from
 *                         registers: fa3_qop, load_q)
 *   gemm_pv               O += P V (wgmma RS, V N-major)
 *   apply_mask            -inf outside the sequence and the causal / window band
 *   softcap_tile, alibi_tile, row_end_sink
 *                         the model features (FJ_SOFTCAP, FJ_ALIBI, FJ_SINKS): tanh capping
 *                         and the ALiBi bias of a tile's scores, a row's end with its sink
 *   softmax_tile, rescale_o, convert_p
 *                         online softmax in log2 units (lazy rescaling: FA3_LAZY), P to the
 *                         A-operand layout
 *   stage_o, copy_o_unit, copy_o_out
 *                         O (16-bit) into a swizzled Q-layout buffer (stmatrix), and from it to
 *                         global memory as 16-byte rows
 * Limits: one consumer warpgroup = 64 query rows; the fp32 accumulator layouts of wgmma
 * m64nNk16 (SREG = BN/2, OREG = HDV/2 registers per thread).
 * Expects: namespace fa3 (BM, BN, HD, HDV, DC, DCV, KSTEPS, PSTEPS, SREG, OREG, Q_CHUNK,
 * KV_CHUNK), FJ_BLOCK_N, FJ_HEAD_DIM_V, FJ_DTYPE, and the kernel's FA3_LAZY, FA3_QREG. O has
 * HDV columns (FJ_HEAD_DIM_V; HD unless V's head dim differs).
 */
#ifndef FJ_SM90_CONSUMER_CUH
#define FJ_SM90_CONSUMER_CUH

/* 1/rowsum (0 for an empty row) and the natural-log LSE of a row: m * scale + ln(l), with
 * rcp.approx / lg2.approx (about 1 ulp; rowsums are >= 1 wherever a key is visible) instead of
 * IEEE division and logf (run 8 of dev/fa3/NOTES.md: +1..+3.5% at 512-1k). */
FJ_DEVICE float row_inv(float l)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(l));
    return l > 0.f ? r : 0.f;
}
FJ_DEVICE float row_lse(float m, float l, float scale)
{
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(l));
    return l > 0.f ? fmaf(r, 0.6931471805599453f, m * scale) : -FJ_INF;
}

/* ---- consumer pieces ---------------------------------------------------------------------- */

/* S = Q K^T over the head dim: k16 step kk reads chunk kk/4 at byte 32*(kk%4). */
template <int UNUSED = 0>
FJ_DEVICE void gemm_qk(float (&s)[fa3::SREG], fj_u64 dq, fj_u64 dk)
{
    using namespace fa3;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        const fj_u64 a = dq + (fj_u64)(((kk >> 2) * Q_CHUNK + (kk & 3) * 32) >> 4);
        const fj_u64 b = dk + (fj_u64)(((kk >> 2) * KV_CHUNK + (kk & 3) * 32) >> 4);
        FA3_CAT(wgmma_ss_, FJ_BLOCK_N)<0>(s, a, b, kk > 0);
    }
}

#if FA3_QREG
/* Q as the A operand of S = Q K^T with FA3_QREG: the fragments of the first FA3_QREG k16
 * steps (load_q), and the descriptor of the buffer for the rest. */
struct fa3_qop {
    fj_u32 f[FA3_QREG][4];
    fj_u64 d;
};
FJ_DEVICE void gemm_qk(float (&s)[fa3::SREG], const fa3_qop &q, fj_u64 dk)
{
    using namespace fa3;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        const fj_u64 b = dk + (fj_u64)(((kk >> 2) * KV_CHUNK + (kk & 3) * 32) >> 4);
        if (kk < FA3_QREG)
            FA3_CAT(wgmma_rsk_, FJ_BLOCK_N)<0>(s, q.f[kk < FA3_QREG ? kk : 0], b, kk > 0);
        else
            FA3_CAT(wgmma_ss_, FJ_BLOCK_N)<0>(s, q.d + (fj_u64)(((kk >> 2) * Q_CHUNK + (kk & 3) * 32) >> 4), b,
                                              kk > 0);
    }
}

/* This warpgroup's Q fragments (FA3_QREG): k16 step kk of each warp's 16 rows as the four
 * 8x8 matrices of the wgmma A layout (rows 0-7 / 8-15 by columns 0-7 / 8-15 of the step), one
 * ldmatrix x4 from the swizzled Q buffer `buf` (the layout stage_o writes: lane 8j+i gives row i
 * of matrix j). */
FJ_DEVICE void load_q(fj_u32 (&qf)[FA3_QREG][4], fj_u32 buf, int cw, int warp, int lane)
{
    using namespace fa3;
    const int mj = lane >> 3, mi = lane & 7;
    const fj_u32 rowa = buf + (64 * cw + 16 * warp + 8 * (mj & 1) + mi) * 128;
#pragma unroll
    for (int kk = 0; kk < FA3_QREG; ++kk) {
        const int u = 2 * kk + (mj >> 1);  /* 16-byte unit of the row, over the chunks */
        const fj_u32 a = rowa + (u >> 3) * Q_CHUNK + (((u & 7) ^ mi) << 4);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(qf[kk][0]), "=r"(qf[kk][1]), "=r"(qf[kk][2]), "=r"(qf[kk][3])
                     : "r"(a)
                     : "memory");
    }
}
#endif

/* O += P V (acc0 = 0: O = P V, the old O ignored): k16 step kk reads keys 16kk.. at
 * +2048*kk bytes; N spans the chunks via LBO. */
FJ_DEVICE void gemm_pv(float (&o)[fa3::OREG], const fj_u32 (&pr)[fa3::PSTEPS][4], fj_u64 dv, int acc0 = 1)
{
    using namespace fa3;
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
        FA3_CAT(wgmma_rs_, FJ_HEAD_DIM_V)<0>(o, pr[kk], dv + (fj_u64)((kk * 2048) >> 4), kk > 0 || acc0);
    }
}

/* Scores of keys past the sequence end or outside the (causal / window) band to -inf.
 * Element (nt, hf, e) is key k0 + nt*8 + col_lane + e of query row row0 + 8*hf. */
FJ_DEVICE void apply_mask(float (&s)[fa3::SREG], int k0, int row0, int col_lane, int sk, int shift,
                          int wl, int wr)
{
    using namespace fa3;
    const int lim_s = sk - k0 - col_lane;  /* masked when x >= lim_s, x = nt*8 + e */
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int dg = row0 + 8 * hf + shift - k0 - col_lane;  /* x of the diagonal */
        const int lim_r = wr >= 0 ? dg + wr : (1 << 30);       /* masked when x > lim_r */
        const int lim_l = wl >= 0 ? dg - wl : -(1 << 30);      /* masked when x < lim_l */
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int x = nt * 8 + e;
                if (x >= lim_s || x > lim_r || x < lim_l)
                    s[4 * nt + 2 * hf + e] = -FJ_INF;
            }
    }
}

#if FJ_SOFTCAP
/* Softcap, FA3's way: raw scores times k = softmax_scale / cap through tanh.approx.f32 (one
 * MUFU.TANH each), so the tile holds tanh(scale * q.k / cap) and one unit of it is cap in the
 * natural-log domain (the kernel's sl2 is then cap * log2(e), its LSE unit cap). Applied to the
 * GEMM's finite scores before the ALiBi bias and the mask (a -inf mask then stays -inf; tanh of
 * it would be -1), so the row maxima are taken on capped values. */
FJ_DEVICE float fa3_tanh(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
FJ_DEVICE void softcap_tile(float (&s)[fa3::SREG], float k)
{
#pragma unroll
    for (int i = 0; i < fa3::SREG; ++i)
        s[i] = fa3_tanh(s[i] * k);
}
#endif

#if FJ_ALIBI
/* ALiBi: s += nslope * |i + sk - sq - j| for element (nt, hf, e) of the tile at key k0, i.e.
 * row i = row0 + 8*hf, key j = k0 + nt*8 + col_lane + e (the layout apply_mask reads); nslope is
 * -slope in the tile's units (-slope / scale, or -slope / cap with the softcap). Every block of
 * the band, masked or not, before the row maximum; distances exact in fp32 below 2^24. */
FJ_DEVICE void alibi_tile(float (&s)[fa3::SREG], int k0, int row0, int col_lane, int shift,
                          float nslope)
{
    using namespace fa3;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float dg = (float)(row0 + 8 * hf + shift - k0 - col_lane);  /* x of the diagonal */
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                s[4 * nt + 2 * hf + e] =
                    fmaf(nslope, fabsf(dg - (float)(nt * 8 + e)), s[4 * nt + 2 * hf + e]);
    }
}
#endif

#if FJ_SINKS
/* A row's end with an attention sink: its softmax denominator gets exp(sink) (sink2 = sink *
 * log2(e)). In log2 units the row holds l = sum 2^(s_j sl2 - m sl2); with top = max(m sl2,
 * sink2) the denominator is L = l 2^(m sl2 - top) + 2^(sink2 - top), O's factor (inv) that
 * 2^(m sl2 - top) / L, and LSE = ln 2 (top + log2 L). A row with no visible key (m = -inf,
 * l = 0): inv 0 (O = 0) and LSE = sink; a -inf sink too: LSE -inf. */
FJ_DEVICE void row_end_sink(float m, float l, float sl2, float sink2, float &inv, float &lse)
{
    const float m2 = m * sl2;
    float top = fmaxf(m2, sink2);
    if (top == -FJ_INF)
        top = 0.f;
    const float a = ex2(m2 - top);
    const float den = fmaf(l, a, ex2(sink2 - top));
    float r, lg;
    asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(den));
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(lg) : "f"(den));
    inv = den > 0.f ? a * r : 0.f;
    lse = den > 0.f ? (top + lg) * 0.6931471805599453f : -FJ_INF;
}
#endif

/* Online softmax of one tile in place: s becomes P = exp2(s*sl2 - m*sl2) (fp32), the row
 * maxima mx and the partial row sums l (this thread's columns) are updated, and alpha is
 * the factor O must be scaled by before this tile's P V is added. */
FJ_DEVICE void softmax_tile(float (&s)[fa3::SREG], float (&mx)[2], float (&l)[2], float (&alpha)[2],
                            float sl2)
{
    using namespace fa3;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        float m = mx[hf];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
            m = fmaxf(m, fmaxf(s[4 * nt + 2 * hf], s[4 * nt + 2 * hf + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
#if FA3_LAZY
        /* keep the base while the new maximum is within 2^t of it (false from -inf) */
        const bool keep = (m - mx[hf]) * sl2 <= (float)FA3_LAZY;
        if (keep)
            m = mx[hf];
#endif
        const float base = m == -FJ_INF ? 0.f : m * sl2;  /* no visible key yet */
#if FA3_LAZY
        alpha[hf] = keep ? 1.f : ex2(mx[hf] * sl2 - base);
#else
        alpha[hf] = ex2(mx[hf] * sl2 - base);              /* 0 from -inf */
#endif
        mx[hf] = m;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float xv = fmaf(s[4 * nt + 2 * hf + e], sl2, -base);
                const float pv = ex2(xv);
                s[4 * nt + 2 * hf + e] = pv;
                sum += pv;
            }
        l[hf] = l[hf] * alpha[hf] + sum;
    }
}

FJ_DEVICE void rescale_o(float (&o)[fa3::OREG], const float (&alpha)[2])
{
#if FA3_LAZY
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f))
        return;  /* no row of this warp moved its base */
#endif
#pragma unroll
    for (int i = 0; i < fa3::OREG; ++i)
        o[i] *= alpha[(i >> 1) & 1];
}

/* The fp32 accumulator layout of S (n8 tiles 2kk, 2kk+1) is the A-operand layout of k16
 * step kk: registers {row r cols 0-1, row r+8 cols 0-1, row r cols 8-9, row r+8 cols 8-9}. */
FJ_DEVICE void convert_p(const float (&s)[fa3::SREG], fj_u32 (&pr)[fa3::PSTEPS][4])
{
#pragma unroll
    for (int kk = 0; kk < fa3::PSTEPS; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r)
            pr[kk][r] = pack2(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

/* O (fp32 accumulators, times inv[hf] per row half) as 16-bit values into this warpgroup's 64
 * rows of the Q-layout buffer `buf` (the tile's own Q rows, which only this warpgroup reads):
 * row rr, 16-byte unit u of chunk c at c*Q_CHUNK + rr*128 + (u^(rr&7))*16. stmatrix x4 stores
 * four 8x8 matrices (hf 0/1 of n8 tiles nt, nt+1); lane 8j+i gives row i of matrix j; the XOR
 * swizzle spreads each matrix's 8 rows over 8 different 16-byte bank groups. */
template <int UNUSED = 0>
FJ_DEVICE void stage_o(const float (&o)[fa3::OREG], const float (&inv)[2], fj_u32 buf, int cw, int warp,
                       int lane)
{
    using namespace fa3;
    const int mj = lane >> 3, mi = lane & 7;
    const int rr = 64 * cw + 16 * warp + 8 * (mj & 1) + mi;
    const fj_u32 rowa = buf + rr * 128;
#pragma unroll
    for (int nt = 0; nt < HDV / 8; nt += 2) {
        const int ntj = nt + (mj >> 1);
        const fj_u32 a = rowa + (ntj >> 3) * Q_CHUNK + (((ntj & 7) ^ mi) << 4);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(a),
                     "r"(pack2(o[4 * nt] * inv[0], o[4 * nt + 1] * inv[0])),
                     "r"(pack2(o[4 * nt + 2] * inv[1], o[4 * nt + 3] * inv[1])),
                     "r"(pack2(o[4 * nt + 4] * inv[0], o[4 * nt + 5] * inv[0])),
                     "r"(pack2(o[4 * nt + 6] * inv[1], o[4 * nt + 7] * inv[1]))
                     : "memory");
    }
}

/* 16-byte unit u of row rr of a buffer staged by stage_o (its swizzled address, as there) to
 * unit u of row i of the global O at go: the copy step of copy_o_out and of the store warps.
 * The global address is computed after the shared load, and with one chunk (u < 8) the unit is
 * not masked, both as the callers had it inline: otherwise this code, simplified before it is
 * inlined, changed copy_o_out's register allocation (hd 64 grid; SASS compared). */
template <int UNUSED = 0>
FJ_DEVICE void copy_o_unit(fj_u32 buf, int rr, int u, fj_u16 *go, int i, fj_i64 row_stride)
{
    const int cu = fa3::DCV == 1 ? u : u & 7;  /* the unit within its chunk */
    fj_u32 x0, x1, x2, x3;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                 : "r"(buf + (u >> 3) * fa3::Q_CHUNK + rr * 128 + ((cu ^ (rr & 7)) << 4))
                 : "memory");
    asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(go + (fj_i64)i * row_stride + u * 8),
                 "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                 : "memory");
}

/* The rows of this warpgroup staged by stage_o (after a barrier over the warpgroup) to global
 * memory as 16-byte loads and stores, rows m0 + 64*cw + r < sq_len. */
template <int UNUSED = 0>
FJ_DEVICE void copy_o_out(fj_u32 buf, int cw, int m0, int sq_len, fj_u16 *go, fj_i64 row_stride)
{
    using namespace fa3;
    constexpr int UNITS = HDV / 8;  /* 16-byte units per row that exist in global memory */
#pragma unroll
    for (int k = 0; k < (64 * UNITS + 127) / 128; ++k) {
        const int idx = (threadIdx.x & 127) + 128 * k;
        if ((64 * UNITS) % 128 == 0 || idx < 64 * UNITS) {
            const int r = idx / UNITS, u = idx % UNITS;
            const int rr = 64 * cw + r, i = m0 + rr;
            if (i < sq_len)
                copy_o_unit(buf, rr, u, go, i, row_stride);
        }
    }
}

#endif
