/* fj_dec_merge_cluster.cuh - the cluster merge of attn_decode.cu's split step (p.cluster,
 * sm_90 and later; the host sets it only with 2..8 splits and where CL_FITS): the splits of a
 * group are one thread-block cluster of p.splits CTAs along x (CTA x = qt * splits + split,
 * rank = split). Each CTA leaves its partials in its own shared memory (at CL_OFF), then
 * every CTA merges a share of the group's items from all ranks' shared memory into O and
 * LSE: no counters, no part_o/part_lse, no L2 round trip, the merge spread over the group's
 * SMs. The kernel includes it only for sm_90 and later (DEC_CLUSTER).
 *
 * Has:
 *   dec_cluster_sync          barrier.cluster with release / acquire
 *   dec_ld_dsm, dec_ld_dsm4   loads from another CTA's shared memory (mapa)
 *   dec_merge_cluster         this CTA's share of the merge
 * Expects: namespace dec (traits: CL_OFF, MT, HD, THREADS), dec_seq, dec_store_lse
 * (attn_decode.cu), fj_dec_merge.cuh.
 */
#ifndef FJ_DEC_MERGE_CLUSTER_CUH
#define FJ_DEC_MERGE_CLUSTER_CUH

/* Every thread of every CTA of the cluster: the shared-memory writes before it (release) are
 * visible to the reads after it in any CTA of the cluster (acquire). */
FJ_DEVICE void dec_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* A float / 4 floats at shared address `a` of this CTA's layout, in the CTA of rank `rank`. */
FJ_DEVICE float dec_ld_dsm(fj_u32 a, int rank)
{
    float v;
    asm volatile("{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %1, %2;\n"
                 " ld.shared::cluster.f32 %0, [ra];\n}\n"
                 : "=f"(v) : "r"(a), "r"(rank) : "memory");
    return v;
}
FJ_DEVICE float4 dec_ld_dsm4(fj_u32 a, int rank)
{
    float4 v;
    asm volatile("{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %4, %5;\n"
                 " ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [ra];\n}\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(a), "r"(rank) : "memory");
    return v;
}

/* Cluster merge (p.cluster, sm_90+): the splits of a group are the CTAs of one cluster
 * (rank = split), each of which left its partials of the group's rows in its own shared
 * memory at CL_OFF and passed a cluster barrier. Every CTA merges its share of the (row, 4
 * columns) items, a contiguous 1/S of them (neighbouring threads read neighbouring 16 bytes;
 * items S apart per thread made every remote 16-byte load an 8-way bank conflict: q_len 8 at
 * 2 x 2k-4k 2.5 us slower on the H200), reading the S <= 8 ranks' partials through distributed shared memory: a
 * thread reads 4 ranks, so where S > 4 a lane pair shares an item (ranks 0-3 and 4-7, its
 * two partial merges combined by a shuffle) and every load is in flight at once. (All 8 in
 * one thread spilled 4 B on sm_90a at 128x2 m1n4, head_dim 96.) No L2 round trip, no
 * arrival count, the merge spread over the group's SMs. The caller passes a second barrier
 * before leaving (its partials are read until then). */
FJ_DEVICE void dec_merge_cluster(const fj_decode_params &p, unsigned char *sm, int b,
                                 const dec_seq &so, int r0, int rows, int hk, int G, int rank,
                                 int tid)
{
    using namespace dec;
    constexpr int C4 = HD / 4, U = 4;
    constexpr float LOG2E = 1.4426950408889634f;
    const int S = p.splits, T = S > U ? 2 : 1;   /* threads per item */
    const int sub = tid % T, lane = tid & 31;
    const fj_u32 base = smem_addr(sm) + CL_OFF;
    const int items = rows * C4, per = (items + S - 1) / S;
    const int beg = rank * per, mine = min(items, beg + per) - beg;
#pragma unroll 1
    for (int k = tid / T; k < mine; k += THREADS / T) {   /* (a pair shares k: same trips) */
        const int item = beg + k, rl = item / C4, c4 = item - rl * C4;
        const fj_u32 ao = base + (fj_u32)((rl * HD + c4 * 4) * 4);
        const fj_u32 al = base + (fj_u32)((MT * HD + rl) * 4);
        float ls[U];
        float4 x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int s = sub * U + u;
            ls[u] = dec_ld_dsm(al, s < S ? s : 0);   /* (past S: weighed 0 below) */
            x[u] = dec_ld_dsm4(ao, s < S ? s : 0);
            if (s >= S)
                ls[u] = -FJ_INF;
        }
        float m = -FJ_INF, l = 0.f;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
        dec_fold<U>(m, l, acc, ls, x);
        if (T == 2) {   /* the pair's two partial merges into one */
            const unsigned pair = 3u << (lane & 30);
            const float mo = __shfl_xor_sync(pair, m, 1), lo = __shfl_xor_sync(pair, l, 1);
            float4 ao4;
            ao4.x = __shfl_xor_sync(pair, acc.x, 1), ao4.y = __shfl_xor_sync(pair, acc.y, 1);
            ao4.z = __shfl_xor_sync(pair, acc.z, 1), ao4.w = __shfl_xor_sync(pair, acc.w, 1);
            const float mn = fmaxf(m, mo);
            if (mn != -FJ_INF) {
                const float a = ex2((m - mn) * LOG2E), c = ex2((mo - mn) * LOG2E);
                l = l * a + lo * c;
                acc.x = acc.x * a + ao4.x * c, acc.y = acc.y * a + ao4.y * c;
                acc.z = acc.z * a + ao4.z * c, acc.w = acc.w * a + ao4.w * c;
                m = mn;
            }
        }
        if (sub)
            continue;
        float4 o;
        const float lse = dec_fold_end(m, l, acc, o);
        const int r = r0 + rl, i = r / G, h = hk * G + (r - i * G);
        dec_st4((fj_u16 *)p.o + so.o + (fj_i64)i * p.o_row_stride + (fj_i64)h * p.o_head_stride +
                    c4 * 4,
                o);
        if (p.lse && c4 == 0)
            dec_store_lse(p, b, so.row0, i, h, lse);
    }
}

#endif /* FJ_DEC_MERGE_CLUSTER_CUH */
