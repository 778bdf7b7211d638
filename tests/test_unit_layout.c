/* test_unit_layout.c - the `unit` suite's checks of what the host shares with the kernels
 * (no NVRTC): the parameter blocks' layouts (the kernels static_assert the same offsets) and
 * the persistent kernels' tile orders (fj_tile_order.h, the code the kernels run). */
#include <check.h>
#include <stdlib.h>

#include "../src/api/internal.h"
#include "../src/kernels_src/fj_tile_order.h"

/* The persistent tile orders of the fa3 and fa4 kernels (fj_tile_order.h, the code the kernels
 * run): each visits every tile of the problem exactly once; the masked order puts the longest
 * tiles (the last query blocks) first within each L2 group of heads; the static round robin
 * gives every tile index to exactly one (round, CTA), and its serpentine keeps the CTAs' work
 * within one tile of each other where every CTA gets at least two tiles. */
START_TEST(tile_orders)
{
    static const struct { int batch, heads_q, heads_kv, num_mb, seqlen_k; long long bytes; } k[] = {
        {1, 1, 1, 1, 128, 1 << 20},    {1, 4, 1, 5, 4096, 1 << 20},  {3, 6, 2, 16, 8192, 3 << 20},
        {2, 8, 8, 7, 1000, 1},         {4, 32, 8, 9, 2048, 32 << 20}, {1, 64, 4, 64, 16384, 32 << 20},
        {5, 12, 3, 3, 256, 200000},
    };
    static const int grids[] = {1, 7, 132};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const int bhn = k[i].batch * k[i].heads_q, nmb = k[i].num_mb, total = bhn * nmb;
        const int g = fj_order_group(bhn, k[i].heads_q, k[i].heads_kv, k[i].seqlen_k, 128,
                                     k[i].bytes);
        const int ratio = k[i].heads_q / k[i].heads_kv;
        ck_assert_msg(g >= 1 && g <= bhn && (g == bhn || g % ratio == 0), "case %zu: group %d", i, g);
        if (g > ratio)   /* more than one GQA group: their K + V fit the budget */
            ck_assert_int_le((long long)(g / ratio) * 4 * k[i].seqlen_k * 128, k[i].bytes);
        char *seen = calloc((size_t)total, 1), *seen_plain = calloc((size_t)total, 1);
        int prev_mb = nmb, prev_group = -1;
        for (int t = 0; t < total; t++) {
            int b, h, mb;
            fj_order_masked(t, nmb, bhn, g, k[i].heads_q, &b, &h, &mb);
            ck_assert_msg(b >= 0 && b < k[i].batch && h >= 0 && h < k[i].heads_q && mb >= 0 &&
                              mb < nmb, "case %zu tile %d: (%d, %d, %d)", i, t, b, h, mb);
            const int id = (b * k[i].heads_q + h) * nmb + mb;
            ck_assert_msg(!seen[id], "case %zu: tile %d visits (%d, %d, %d) twice", i, t, b, h, mb);
            seen[id] = 1;
            const int group = (b * k[i].heads_q + h) / g;
            if (group != prev_group) {   /* a new L2 group starts at the longest blocks */
                ck_assert_int_eq(mb, nmb - 1);
                ck_assert_int_eq(group, prev_group + 1);
                prev_group = group;
            } else {
                ck_assert_msg(mb <= prev_mb, "case %zu tile %d: block %d after %d", i, t, mb, prev_mb);
            }
            prev_mb = mb;
            fj_order_plain(t, nmb, k[i].heads_q, &b, &h, &mb);
            ck_assert(b >= 0 && b < k[i].batch && h >= 0 && h < k[i].heads_q && mb >= 0 && mb < nmb);
            ck_assert_msg(!seen_plain[(b * k[i].heads_q + h) * nmb + mb], "plain order twice");
            seen_plain[(b * k[i].heads_q + h) * nmb + mb] = 1;
        }
        for (int id = 0; id < total; id++)   /* (both are bijections: every tile was visited) */
            ck_assert(seen[id] && seen_plain[id]);
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
            const int G = grids[gi], rounds = (total + G - 1) / G;
            for (int serp = 0; serp < 2; serp++) {
                int *count = calloc((size_t)rounds * G, sizeof(int));
                long long *work = calloc((size_t)G, sizeof(long long));
                for (int r = 0; r < rounds; r++)
                    for (int cta = 0; cta < G; cta++) {
                        const int t = fj_order_round(r, cta, G, serp);
                        ck_assert(t >= 0 && t < rounds * G);
                        count[t]++;
                        if (t < total) {   /* causal work of the tile: its query block + 1 */
                            int b, h, mb;
                            fj_order_masked(t, nmb, bhn, g, k[i].heads_q, &b, &h, &mb);
                            work[cta] += mb + 1;
                        }
                    }
                for (int t = 0; t < rounds * G; t++)
                    ck_assert_int_eq(count[t], 1);
                long long lo = work[0], hi = work[0];
                for (int cta = 0; cta < G; cta++)
                    lo = work[cta] < lo ? work[cta] : lo, hi = work[cta] > hi ? work[cta] : hi;
                if (serp && g == bhn && total >= 2 * G)   /* one group: the serpentine balance */
                    ck_assert_msg(hi - lo <= nmb, "case %zu grid %d: CTA work %lld..%lld over %d",
                                  i, G, lo, hi, nmb);
                free(count), free(work);
            }
        }
        free(seen), free(seen_plain);
    }
}
END_TEST

/* The parameter block's layout as the kernels see it (they static_assert the same). */
START_TEST(params_layout)
{
    ck_assert_uint_eq(sizeof(fj_attn_params), FJ_PARAMS_SIZE);
    ck_assert_uint_eq(offsetof(fj_attn_params, batch), 152);
    ck_assert_uint_eq(offsetof(fj_attn_params, scale), 184);
    ck_assert_uint_eq(offsetof(fj_attn_params, lse), 32);
    ck_assert_uint_eq(offsetof(fj_attn_params, k_batch_stride), 80);
    /* the decode kernels' block: the offsets its comments give */
    ck_assert_uint_eq(sizeof(fj_decode_params), FJ_DECODE_PARAMS_SIZE);
    ck_assert_uint_eq(offsetof(fj_decode_params, counters), 88);
    ck_assert_uint_eq(offsetof(fj_decode_params, q_batch_stride), 96);
    ck_assert_uint_eq(offsetof(fj_decode_params, batch), 192);
    ck_assert_uint_eq(offsetof(fj_decode_params, num_pages), 224);
    ck_assert_uint_eq(offsetof(fj_decode_params, scale), 248);
    ck_assert_uint_eq(offsetof(fj_decode_params, total_rows), 256);
    ck_assert_uint_eq(offsetof(fj_decode_params, page_shift), 260);
    ck_assert_uint_eq(offsetof(fj_decode_params, k_page16), 264);
    ck_assert_uint_eq(offsetof(fj_decode_params, off16), 280);
    /* the Hopper kernel's paged K/V */
    ck_assert_uint_eq(sizeof(fj_kv_pages), FJ_KV_PAGES_SIZE);
    ck_assert_uint_eq(offsetof(fj_kv_pages, bt_stride), 16);
    ck_assert_uint_eq(offsetof(fj_kv_pages, num_pages), 28);
    ck_assert_uint_eq(offsetof(fj_kv_pages, min_q), 32);
}
END_TEST

TCase *fj_tcase_layout(void)
{
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, tile_orders);
    tcase_add_test(tc, params_layout);
    return tc;
}
