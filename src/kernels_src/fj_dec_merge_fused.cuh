/* fj_dec_merge_fused.cuh - the fused combine of attn_decode.cu's split step (splits > 1 and
 * p.counters set): the last CTA of a group to arrive merges the group's rows from every
 * split's partials into O and LSE, so the combine kernel is not launched. Staged where the
 * group's partials fit its shared memory (splits * rows * (4*HD + 4) bytes, at most
 * DEC_STAGE_MAX), direct from L2 otherwise.
 *
 * Has:
 *   dec_count_arrival  the arrival count (acq_rel at gpu scope)
 *   dec_merge_staged   all partials into shared memory at once, then the merge
 *   dec_merge_direct   dec_merge4 per (row, 4 columns) from L2
 * Expects: namespace dec (traits: HD, THREADS, WARPS), dec_seq, dec_store_lse
 * (attn_decode.cu), fj_dec_merge.cuh, fj_sm80_prims.cuh.
 */
#ifndef FJ_DEC_MERGE_FUSED_CUH
#define FJ_DEC_MERGE_FUSED_CUH

/* The fused combine's arrival count: an atomic add with release and acquire semantics at
 * gpu scope (publishes this CTA's partials, sees every earlier arrival's); the old value. */
FJ_DEVICE int dec_count_arrival(int *cnt)
{
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n"
                 : "=r"(old)
                 : "l"(cnt)
                 : "memory");
    return old;
}

/* Fused combine, the last CTA of a group: O and LSE of its `rows` packed rows from every
 * split's partials. Staged: all partials into shared memory at once (one round trip to L2:
 * 16-byte cp.async.cg for O, 4-byte ld.cg for the LSEs), then a warp per row turns the
 * row's LSEs into weights (shuffles), and each thread merges 4 columns of a row. Direct:
 * dec_merge4 from L2, 6 splits' loads in flight per step, for groups whose partials do not
 * fit (decode.c sets counters only where they fit, the combine kernel
 * being faster than both beyond; this keeps the kernel right for any counters it gets).
 * (Both in compact loops: this code runs once per launch in a few CTAs, at the end of
 * the critical path, and a cold call fetches its instructions from DRAM: the same merge
 * fully unrolled in registers was 0.5 us faster in graph replay and 2.4 us slower after an
 * L2 flush, H200.) */
FJ_DEVICE void dec_merge_staged(const fj_decode_params &p, unsigned char *smem, int b,
                                const dec_seq &so, int r0, int rows, int hk, int G, int tid)
{
    using namespace dec;
    constexpr int C4 = HD / 4;
    constexpr float LOG2E = 1.4426950408889634f;
    const int S = p.splits;
    float *s_o = (float *)smem;                      /* [split][row][HD] */
    float *s_l = s_o + S * rows * HD;                /* [split][row] */
    const fj_i64 sstride = (fj_i64)p.total_rows * p.heads_q;   /* one split, rows x heads */
    const fj_u32 s_base = smem_addr(smem);
    /* LSEs: a (split, row) per thread, loaded first so that their latency overlaps the
     * copies; O: an item (row, 4 columns) per thread, its splits' chunks one after another
     * (a division per item, not per chunk: the copies leave sooner) */
    const int nl = S * rows;
    float lv = 0.f;
    if (tid < nl) {
        const int rl = tid % rows, sp = tid / rows;
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        lv = dec_ldcg((const float *)p.part_lse + sp * sstride + (fj_i64)(so.row0 + i) * p.heads_q +
                      h);
    }
#pragma unroll 1
    for (int item = tid; item < rows * C4; item += THREADS) {
        const int rl = item / C4, c4 = item - rl * C4;
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        const float *src = (const float *)p.part_o +
                           (((fj_i64)(so.row0 + i) * p.heads_q + h) * HD + c4 * 4);
        fj_u32 dst = s_base + (fj_u32)((rl * HD + c4 * 4) * 4);
#pragma unroll 1
        for (int sp = 0; sp < S; ++sp, src += sstride * HD, dst += rows * HD * 4)
            cp_async16(dst, src, 16);
    }
    cp_async_commit();
    if (tid < nl)
        s_l[tid] = lv;
#pragma unroll 1
    for (int x = tid + THREADS; x < nl; x += THREADS) {   /* (more than THREADS: rare) */
        const int rl = x % rows, sp = x / rows;
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        s_l[x] = dec_ldcg((const float *)p.part_lse + sp * sstride +
                          (fj_i64)(so.row0 + i) * p.heads_q + h);
    }
    cp_async_wait<0>();
    __syncthreads();
    /* A warp per row (shuffle trees): M = the row's largest LSE, L = sum exp(lse_s - M),
     * the row's LSE M + log L out, and each LSE in shared memory replaced by its weight
     * exp(lse_s - M) / L (0 for an empty split; all 0, LSE -inf, when every split is). */
#pragma unroll 1
    for (int rl = tid >> 5; rl < rows; rl += WARPS) {
        const int lane = tid & 31;
        float m = -FJ_INF, l = 0.f;
#pragma unroll 1
        for (int sp = lane; sp < S; sp += 32)
            m = fmaxf(m, s_l[sp * rows + rl]);
#pragma unroll
        for (int o = 16; o; o >>= 1)
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float base = m == -FJ_INF ? 0.f : m;   /* (exp(-inf - 0) = 0) */
#pragma unroll 1
        for (int sp = lane; sp < S; sp += 32)
            l += ex2((s_l[sp * rows + rl] - base) * LOG2E);
#pragma unroll
        for (int o = 16; o; o >>= 1)
            l += __shfl_xor_sync(0xffffffffu, l, o);
        const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll 1
        for (int sp = lane; sp < S; sp += 32)
            s_l[sp * rows + rl] = ex2((s_l[sp * rows + rl] - base) * LOG2E) * inv;
        if (p.lse && lane == 0) {
            const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
            dec_store_lse(p, b, so.row0, i, h, l > 0.f ? m + logf(l) : -FJ_INF);
        }
    }
    __syncthreads();
#pragma unroll 1
    for (int item = tid; item < rows * C4; item += THREADS) {
        const int rl = item / C4, c4 = item - rl * C4;
        const int ol = rl, ox = rl * HD + c4 * 4;   /* split 0; split s at + s*rows (*HD) */
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 2
        for (int sp = 0; sp < S; ++sp) {   /* (independent loads: 2 in flight a step) */
            const float w = s_l[ol + sp * rows];
            const float4 x = *(const float4 *)(s_o + ox + sp * rows * HD);
            acc.x += w * x.x, acc.y += w * x.y, acc.z += w * x.z, acc.w += w * x.w;
        }
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        dec_st4((fj_u16 *)p.o + so.o + (fj_i64)i * p.o_row_stride + (fj_i64)h * p.o_head_stride +
                    c4 * 4,
                acc);
    }
}
FJ_DEVICE void dec_merge_direct(const fj_decode_params &p, int b, const dec_seq &so, int r0,
                                int rows, int hk, int G, int tid)
{
    using namespace dec;
    constexpr int C4 = HD / 4;
#pragma unroll 1
    for (int item = tid; item < rows * C4; item += THREADS) {
        const int rl = item / C4, c4 = item - rl * C4;
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        float4 o;
        /* (6 loads in flight: 8 spilled 4 B on sm_100a after the main loop) */
        const float lse = dec_merge4<6>(p, so.row0 + i, h, c4, o);
        dec_st4((fj_u16 *)p.o + so.o + (fj_i64)i * p.o_row_stride + (fj_i64)h * p.o_head_stride +
                    c4 * 4,
                o);
        if (p.lse && c4 == 0)
            dec_store_lse(p, b, so.row0, i, h, lse);
    }
}

#endif /* FJ_DEC_MERGE_FUSED_CUH */
