/* test_gpu_decode_merge.c - the decode tests of split-KV merges (harness: gpu_decode.h):
 * the LSE of a split call against one split (lse_merge_consistency), the cluster, last-CTA
 * and combine-kernel merges against the oracle (combine_paths), and fajit_attn_merge of two
 * partial attentions (merge_partials). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_decode.h"

/*------ 5. lse_merge_consistency ------*/

START_TEST(lse_merge_consistency)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x15e15eull);
    dcase c;
    dbufs B;
    do {   /* a random paged case long enough for 7 splits of 64-key tiles */
        draw_case(&c);
        c.paged = 1, c.page_size = c.page_size ? c.page_size : 16, c.spare = 3;
        c.varlen = 0, c.batch = urange(1, 4), c.q_len = urange(1, 4);
        c.seqlen_k = urange(7 * 64 + 1, 3000);
        c.use_seqused = 0, c.poison = 0, c.want_lse = 1;
        c.mask = rnd() % 2 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        preset_lengths(&c);
    } while (ref_cost(&c) > REF_BUDGET);
    setup(&B, &c, NULL);
    char text[512];
    case_text(&B, text, sizeof text);
    uint16_t *o1 = malloc(2 * B.n_o);
    float *l1 = malloc(sizeof(float) * B.n_lse);
    B.desc.num_splits = B.c.num_splits = 1;
    ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "splits 1: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "splits 1");
    memcpy(o1, B.h_o, 2 * B.n_o);
    memcpy(l1, B.h_lse, sizeof(float) * B.n_lse);
    B.desc.num_splits = B.c.num_splits = 7;
    ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "splits 7: %s", fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "splits 7");
    /* O: within 2 ulp at the row's largest |O| (elements near 0 of a row carry the absolute
     * error of the row's scale, so an element-wise ulp would be meaningless there) */
    double worst_ulps = 0, worst_lse = 0;
    int worst_elem = 0;
    for (int64_t r = 0; r < B.rows; r++)
        for (int h = 0; h < B.hq; h++) {
            const size_t base = (size_t)((r * B.hq + h) * c.hd);
            double rmax = 0;
            for (int e = 0; e < c.hd; e++) {
                double x = fabs(fj_half_to_f32(o1[base + e], c.dtype));
                rmax = x > rmax ? x : rmax;
            }
            const double u = ulp_at(rmax, c.dtype);
            for (int e = 0; e < c.hd; e++) {
                double a = fj_half_to_f32(o1[base + e], c.dtype);
                double b = fj_half_to_f32(B.h_o[base + e], c.dtype);
                double d = fabs(a - b) / u;
                worst_ulps = d > worst_ulps ? d : worst_ulps;
                int eu = ulp_dist(o1[base + e], B.h_o[base + e]);
                worst_elem = eu > worst_elem ? eu : worst_elem;
            }
        }
    for (size_t i = 0; i < B.n_lse; i++) {
        const double a = l1[i], b = B.h_lse[i];
        if (isinf(a) || isinf(b)) {
            ck_assert_msg(a == b, "LSE[%zu]: %g with 1 split, %g with 7", i, a, b);
            continue;
        }
        const double d = fabs(a - b) / (fabs(a) > 1 ? fabs(a) : 1);
        worst_lse = d > worst_lse ? d : worst_lse;
    }
    printf("lse_merge_consistency: %s: splits 1 vs 7: O max %.3g ulp of the row max (%d ulp "
           "element-wise), LSE max rel diff %.3g\n", text, worst_ulps, worst_elem, worst_lse);
    ck_assert_msg(worst_ulps <= 2, "%s: O with 7 splits differs from 1 split by %.3g ulp of the "
                  "row max", text, worst_ulps);
    ck_assert_msg(worst_lse <= 1e-4, "%s: LSE with 7 splits differs from 1 split by %.3g "
                  "(relative, tol 1e-4)", text, worst_lse);
    free(o1), free(l1);
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 6. combine_paths ------*/

/* The three ways splits are merged: as one thread-block cluster per (b, kv head, q tile)
 * group (sm_90+, the default where the GPU runs it), by the last CTA of each group with a
 * counter per group from the context's ring (FAJIT_DECODE_CLUSTER=0 here), and by the
 * combine kernel where the counters would not fit a ring slot (here 8 sequences x 4 KV heads
 * x 19 q tiles of a 300-row chunked prefill = 608 groups; also without clusters). All
 * against the float64 oracle. (That the fused path leaves its counters at zero is
 * graph_replay's: the replays of one capture share one slot.) */
START_TEST(combine_paths)
{
    fajit_ctx *cctx = new_ctx(0), *ctx = new_ctx_nocluster(0);
    reseed(g_seed ^ 0xc0b1eull);
    /* (the cluster runs: few enough groups that the clusters take one wave, so the cluster
     * merge is what runs, not only what describe offers) */
    static const struct {
        const char *what, *want;
        int varlen, splits, cluster, batch, hkv;
    } runs[] = {
        {"cluster", "a cluster per group merges", 0, 5, 1, 2, 4},
        {"cluster, chunked prefill", "a cluster per group merges", 1, 3, 1, 2, 1},
        {"fused", "the last CTA of each group combines", 0, 5, 0, 8, 4},
        {"kernel", "the combine kernel", 1, 3, 0, 8, 4},
    };
    for (int i = 0; i < 4; i++) {
        if (runs[i].cluster && cctx->cc < 90)
            continue;   /* (no clusters before sm_90) */
        dcase c = {.batch = runs[i].batch, .hkv = runs[i].hkv, .group = 4, .hd = 128,
                   .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_CAUSAL, .q_len = 2, .seqlen_k = 1000, .paged = 1,
                   .page_size = 16, .use_seqused = 1, .spare = 5, .want_lse = 1,
                   .num_splits = runs[i].splits, .varlen = runs[i].varlen};
        if (c.varlen) {
            for (int b = 0; b < c.batch; b++)
                c.qlens[b] = b == c.batch / 2 ? 300 : 1 + b % 2;
            c.give_total_q = 1;
        }
        dbufs B;
        setup(&B, &c, NULL);
        char buf[1024];
        fajit_ctx *x = runs[i].cluster ? cctx : ctx;
        ck_assert_int_eq(fajit_dispatch_describe(x, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
        printf("combine_paths: %s: %s\n", runs[i].what, buf);
        ck_assert_msg(strstr(buf, runs[i].want), "%s: expected '%s' in: %s", runs[i].what,
                      runs[i].want, buf);
        ck_assert_msg(launch(x, &B, NULL) == FAJIT_OK, "%s: %s", runs[i].what,
                      fajit_errmsg(x));
        fetch(&B);
        verdict v = check_against_reference(&B, runs[i].what);
        printf("combine_paths: %s: ok (err %.3g, LSE err %.3g)\n", runs[i].what, v.err,
               v.lse_err);
        teardown(&B);
    }
    fajit_ctx_destroy(cctx);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 7. merge_partials ------*/

/* The largest difference between two O tensors in ulps of each (row, head)'s largest |O|. */
static double row_ulps(const uint16_t *x, const uint16_t *y, int64_t rows, int hq, int hd, int dt)
{
    double worst = 0;
    for (int64_t r = 0; r < rows * hq; r++) {
        double rmax = 0;
        for (int e = 0; e < hd; e++) {
            const double a = fabs(fj_half_to_f32(x[r * hd + e], dt));
            rmax = a > rmax ? a : rmax;
        }
        const double u = ulp_at(rmax, dt);
        for (int e = 0; e < hd; e++) {
            const double d = fabs(fj_half_to_f32(x[r * hd + e], dt) -
                                  fj_half_to_f32(y[r * hd + e], dt)) / u;
            worst = d > worst ? d : worst;
        }
    }
    return worst;
}

/* fajit_attn_merge: attention over keys [0, 400) and over [400, 1000), merged, equals the
 * attention over all 1000 keys (and the float64 oracle); into a third buffer and in place
 * (o = o_a, lse = lse_a). */
START_TEST(merge_partials)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x3e4ce5ull);
    for (int dt = 0; dt < 2; dt++) {
        dcase c = {.batch = 3, .hkv = 2, .group = 4, .hd = dt ? 128 : 80, .dtype = dt,
                   .mask = FAJIT_MASK_NONE, .q_len = 3, .seqlen_k = 1000, .want_lse = 1,
                   .num_splits = 1};
        dbufs B;
        setup(&B, &c, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "full: %s", fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "all keys");
        uint16_t *want = malloc(2 * B.n_o), *got = malloc(2 * B.n_o);
        float *want_lse = malloc(4 * B.n_lse), *got_lse = malloc(4 * B.n_lse);
        memcpy(want, B.h_o, 2 * B.n_o);
        memcpy(want_lse, B.h_lse, 4 * B.n_lse);
        const CUdeviceptr oa = dalloc(2 * B.n_o), ob = dalloc(2 * B.n_o);
        const CUdeviceptr la = dalloc(4 * B.n_lse), lb = dalloc(4 * B.n_lse);
        fajit_attn_desc A = B.desc, Z = B.desc;
        A.seqlen_k = 400, A.o = (void *)oa, A.lse = (float *)la;
        const size_t skip = (size_t)400 * (size_t)B.desc.k_row_stride * 2;
        Z.k = (const char *)B.desc.k + skip, Z.v = (const char *)B.desc.v + skip;
        Z.seqlen_k = 600, Z.o = (void *)ob, Z.lse = (float *)lb;
        ck_assert_msg(fajit_attn_fwd(ctx, &A, NULL) == FAJIT_OK, "keys 0..400: %s",
                      fajit_errmsg(ctx));
        ck_assert_msg(fajit_attn_fwd(ctx, &Z, NULL) == FAJIT_OK, "keys 400..1000: %s",
                      fajit_errmsg(ctx));
        for (int in_place = 0; in_place < 2; in_place++) {
            CU(cu->cuMemsetD8(B.d_o, 0xff, 2 * B.n_o));   /* NaN: every element must be written */
            CU(cu->cuMemsetD8(B.d_lse, 0xff, 4 * B.n_lse));
            const CUdeviceptr out = in_place ? oa : B.d_o, out_lse = in_place ? la : B.d_lse;
            fajit_merge_desc m;
            fajit_merge_desc_init(&m, (void *)oa, (float *)la, (void *)ob, (float *)lb,
                                  (void *)out, (float *)out_lse, c.batch, c.q_len, B.hq, c.hd,
                                  (fajit_dtype)dt);
            m.a_batch_stride = m.b_batch_stride = m.o_batch_stride = B.desc.o_batch_stride;
            m.a_row_stride = m.b_row_stride = m.o_row_stride = B.desc.o_row_stride;
            m.a_head_stride = m.b_head_stride = m.o_head_stride = B.desc.o_head_stride;
            ck_assert_msg(fajit_attn_merge(ctx, &m, NULL) == FAJIT_OK, "merge: %s",
                          fajit_errmsg(ctx));
            CU(cu->cuCtxSynchronize());
            CU(cu->cuMemcpyDtoH(got, out, 2 * B.n_o));
            CU(cu->cuMemcpyDtoH(got_lse, out_lse, 4 * B.n_lse));
            double lse_err = 0;
            for (size_t i = 0; i < B.n_lse; i++) {
                const double d = fabs(got_lse[i] - want_lse[i]) /
                                 (fabs(want_lse[i]) > 1 ? fabs(want_lse[i]) : 1);
                lse_err = d > lse_err || d != d ? d : lse_err;
            }
            const double u = row_ulps(want, got, B.rows, B.hq, c.hd, dt);
            printf("merge_partials: %s hd %d%s: merged vs all keys: O max %.3g ulp of the row "
                   "max, LSE max rel diff %.3g\n", dt ? "bf16" : "f16", c.hd,
                   in_place ? " (in place)" : "", u, lse_err);
            ck_assert_msg(u <= 2, "merged O differs from the one-call O by %.3g ulp", u);
            ck_assert_msg(lse_err <= 1e-5, "merged LSE differs by %.3g (relative)", lse_err);
            if (!in_place) {
                fetch(&B);
                check_against_reference(&B, "merged");
            }
        }
        free(want), free(got), free(want_lse), free(got_lse);
        CU(cu->cuMemFree(oa));
        CU(cu->cuMemFree(ob));
        CU(cu->cuMemFree(la));
        CU(cu->cuMemFree(lb));
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

void gpu_decode_merge_cases(Suite *s)
{
    gpu_harness_add(s, "lse_merge_consistency", lse_merge_consistency, 600);
    gpu_harness_add(s, "combine_paths", combine_paths, 600);
    gpu_harness_add(s, "merge_partials", merge_partials, 600);
}
