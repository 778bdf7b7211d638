/* test_gpu_decode_plans.c - the decode tests of plans, defaults and layouts (harness:
 * gpu_decode.h): paged and contiguous plans in one context and STRICT after a warm
 * (paged_plans_and_strict), the loaders over page sizes (loader_page_sizes), a plan per
 * split class (plans_per_class), the sm_90 defaults of each class against the oracle
 * (defaults_per_class), and vLLM's HND pages (hnd_layout). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_decode.h"
#include "../src/families/decode.h"

/*------ 8. paged_plans_and_strict ------*/

/* A contiguous prefill (the Hopper or portable family) and the same problem over a paged
 * cache (the decode family) in one context: each gets its own plan (the plan key has a
 * paged bit; without it the paged call ran the contiguous plan). Then a fresh cache warmed
 * from a paged spec serves its decode and chunked-prefill shapes under STRICT with no
 * compile. */
START_TEST(paged_plans_and_strict)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x9a9edull);
    dcase c = {.batch = 2, .hkv = 2, .group = 2, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .q_len = 100, .seqlen_k = 300, .want_lse = 1};
    dbufs C, P;
    setup(&C, &c, NULL);
    dcase pc = c;
    pc.paged = 1, pc.page_size = 16, pc.spare = 3;
    setup(&P, &pc, &C);
    char buf[1024];
    for (int i = 0; i < 2; i++) {
        dbufs *B = i ? &P : &C;
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B->desc, buf, sizeof buf), FAJIT_OK);
        printf("paged_plans_and_strict: %s: %s\n", i ? "paged" : "contiguous", buf);
        ck_assert_msg(launch(ctx, B, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
        fetch(B);
        check_against_reference(B, i ? "paged after contiguous" : "contiguous");
    }
    teardown(&C), teardown(&P);
    fajit_ctx_destroy(ctx);

    char dir[] = "/tmp/fajit-strict-XXXXXX", spec[300];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(spec, sizeof spec, "%s/serve.spec", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model serve]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\npage_size = 16\ndecode = 2k\nshapes = 4:2k, 100:300\nbatch = 2\n", f);
    fclose(f);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_device_info info;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &info), FAJIT_OK);
    int compiled = 0, cached = 0;
    ck_assert_msg(fajit_warm_spec(ctx, spec, info.arch, 0, &compiled, &cached) == FAJIT_OK,
                  "warm: %s", fajit_errmsg(ctx));
    printf("paged_plans_and_strict: warmed %s for %s: %d compiled\n", spec, info.arch, compiled);
    fajit_ctx_destroy(ctx);
    o.policy = FAJIT_POLICY_STRICT;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    static const int shapes[][2] = {{1, 2048}, {4, 2048}, {100, 300}};
    for (int i = 0; i < 3; i++) {
        dcase s = {.batch = 2, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_CAUSAL, .q_len = shapes[i][0], .seqlen_k = shapes[i][1],
                   .paged = 1, .page_size = 16, .use_seqused = 1, .spare = 2, .want_lse = 1};
        dbufs B;
        setup(&B, &s, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "STRICT %dx%d: %s", shapes[i][0],
                      shapes[i][1], fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "STRICT from a warmed paged spec");
        teardown(&B);
    }
    fajit_counters k;
    fajit_counters_get(ctx, &k);
    printf("paged_plans_and_strict: STRICT: %llu calls, %llu disk hits, %llu compiles, %llu "
           "misses\n", (unsigned long long)k.calls, (unsigned long long)k.hits_disk,
           (unsigned long long)k.compiles, (unsigned long long)k.misses);
    ck_assert_uint_eq(k.compiles, 0);
    ck_assert_uint_eq(k.misses, 0);
    fajit_ctx_destroy(ctx);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/*------ 9. loader_page_sizes ------*/

/* One context (TMA where it fits) serving the same problem over page sizes the TMA loader
 * takes (16, 64, 256) and those it does not (1, 12): every call must pick its own plan
 * (a TMA plan reused for page size 1 would wait for boxes it never issued), and all match
 * the float64 oracle, NaN in every slot that is not a key. */
START_TEST(loader_page_sizes)
{
    fajit_ctx *ctx = new_ctx_tma(0);
    static const int pages[] = {16, 1, 64, 12, 256, 16};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        reseed(g_seed ^ 0x70ad5ull ^ i);
        dcase c = {.batch = 3, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1500, .paged = 1,
                   .page_size = pages[i], .use_seqused = 1, .spare = 4, .poison = 1,
                   .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        char buf[1024], text[512];
        case_text(&B, text, sizeof text);
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf), FAJIT_OK);
        const int tma = strstr(buf, " tma") != NULL;
        ck_assert_msg(tma == (ctx->cc >= 90 && pages[i] % 16 == 0), "page size %d: %s",
                      pages[i], buf);
        fajit_status st = launch(ctx, &B, NULL);
        ck_assert_msg(st == FAJIT_OK, "page size %d: %s", pages[i], fajit_errmsg(ctx));
        fetch(&B);
        double *ro = malloc(sizeof(double) * (B.n_o + 1));
        double *rl = malloc(sizeof(double) * (B.n_lse + 1));
        reference(&B, ro, rl);
        verdict v;
        memset(&v, 0, sizeof v);
        compare(&B, ro, rl, &v);
        free(ro), free(rl);
        printf("loader_page_sizes: page size %d (%s): %s (err %.3g)\n", pages[i],
               tma ? "TMA" : "cp.async", v.ok ? "ok" : v.why, v.err);
        ck_assert_msg(v.ok, "page size %d: %s: %s", pages[i], text, v.why);
        teardown(&B);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 10. plans_per_class ------*/

/* One context, one length bucket, two batches: the decode family's tiles depend on the
 * batch through the split class (the sequences x KV heads fill the SMs or not), so each
 * batch gets a plan of its own holding its own default (plans keyed without the class
 * served the second batch the tiles of the first: on the H200 64x3m1n4 for 1 x 32 KV
 * heads instead of 128x2m1n8). */
START_TEST(plans_per_class)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0x5c1a55ull);
    const int batches[2] = {8, 1};   /* 8 x 32 KV heads fill 132 SMs; 1 x 32 do not */
    char names[2][64];
    for (int i = 0; i < 2; i++) {
        dcase c = {.batch = batches[i], .hkv = 32, .group = 1, .hd = 128, .dtype = FAJIT_BF16,
                   .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1024, .paged = 1,
                   .page_size = 16, .spare = 4, .want_lse = 1};
        dbufs B;
        setup(&B, &c, NULL);
        ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "%s", fajit_errmsg(ctx));
        fetch(&B);
        check_against_reference(&B, "plans_per_class");
        const int cls = fj_dec_split_class(&B.desc, ctx->sm_count);
        const fj_target t = fj_target_of(ctx, NULL);
        fj_kcfg want;
        ck_assert_int_eq(fj_kcfg_default(&B.desc, &t, FAJIT_FAMILY_AUTO, &want), 0);
        fj_kcfg_name(&want, names[i]);
        char got[64] = "";
        int plans = 0;
        for (int b = 0; b < FJ_PLAN_BUCKETS; b++)
            for (fj_plan *p = ctx->plans[b]; p; p = p->next) {
                plans++;
                if (p->key.split_class == cls)
                    fj_kcfg_name(&atomic_load(&p->launch)->cfg, got);
            }
        printf("plans_per_class: batch %d x 32 KV heads, split class %d: plan %s, default %s, "
               "%d plan(s)\n", batches[i], cls, got, names[i], plans);
        ck_assert_int_eq(plans, i + 1);
        ck_assert_str_eq(got, names[i]);
        teardown(&B);
    }
    if (ctx->cc == 90)   /* (the sm_90 defaults differ by class; elsewhere they may not) */
        ck_assert_str_ne(names[0], names[1]);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 11. defaults_per_class ------*/

/* Every default tile of the decode family on this GPU against the oracle: head_dim 32, 48,
 * 64 and 128, a shape in each split class (fj_dec_split_class: the batch fills the SMs; the keys
 * stream from DRAM; latency-bound with many or few (sequence, KV head) pairs), q_len 1, 4
 * and 8 over 4 query heads per KV head (4, 16 and 32 packed rows), and a full batch whose
 * last wave the split rule fills (q_len 1). On an sm_90 GPU that is each class's own tiles
 * (decode_rules.c's default_cfg: at head_dim 64 256-key tiles where the keys stream, 64-key tiles
 * four CTAs per SM where the batch fills the SMs; at head_dim 32 128-key tiles over 8 warps
 * where latency-bound or streaming; at 32 and 48 KV heads packed where the batch fills the
 * SMs or the keys stream), which the random sweep reaches rarely: its long sequences are one
 * in 25 cases. */
START_TEST(defaults_per_class)
{
    fajit_ctx *ctx = new_ctx(0);
    static const struct {
        const char *what;
        int batch, hkv, seqlen_k, q_lens;
    } shapes[] = {
        {"no split", 8, 32, 600, 3},        /* 256 pairs */
        {"stream", 2, 4, 33000, 3},         /* >= 32 MiB of K+V at head_dim 32 */
        {"latency", 4, 8, 1500, 3},         /* 32 pairs */
        {"latency, few", 1, 4, 3000, 3},    /* 4 pairs */
        /* 320 pairs: at head_dim 128 a second wave of 56 CTAs, so 2 splits (fill_splits) */
        {"full batch, last wave filled", 8, 40, 2048, 1},
    };
    static const int hds[] = {32, 48, 64, 128}, q_lens[] = {1, 4, 8};
    int n = 0;
    for (size_t h = 0; h < sizeof hds / sizeof hds[0]; h++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int q = 0; q < shapes[i].q_lens; q++) {
                reseed(g_seed ^ 0xdefc1a55ull ^ (h << 8 | i << 4 | q));
                dcase c = {.batch = shapes[i].batch, .hkv = shapes[i].hkv, .group = 4,
                           .hd = hds[h], .dtype = (int)(n++ % 2), .q_len = q_lens[q],
                           .mask = q_lens[q] > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                           .seqlen_k = shapes[i].seqlen_k, .paged = 1, .page_size = 16,
                           .use_seqused = 1, .force_full = 1, .spare = 4, .poison = 1,
                           .want_lse = 1};
                dbufs B;
                setup(&B, &c, NULL);
                char buf[1024], what[96];
                ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf),
                                 FAJIT_OK);
                const int cls = fj_dec_split_class(&B.desc, ctx->sm_count);
                snprintf(what, sizeof what, "defaults_per_class: %s, head_dim %d, q_len %d",
                         shapes[i].what, hds[h], q_lens[q]);
                ck_assert_msg(strstr(buf, "(default)"), "%s: %s", what, buf);
                ck_assert_msg(launch(ctx, &B, NULL) == FAJIT_OK, "%s: %s", what,
                              fajit_errmsg(ctx));
                fetch(&B);
                const verdict v = check_against_reference(&B, what);
                printf("%s (split class %d): ok (err %.3g): %.*s\n", what, cls, v.err,
                       (int)strcspn(buf, ":"), buf);
                teardown(&B);
            }
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 12. hnd_layout ------*/

/* vLLM's HND cache, pages of [heads_kv][page_size][head_dim] (k_head_stride = page_size *
 * head_dim, k_row_stride = head_dim), holding the keys of an NHD cache: through cp.async and
 * (TMA context, sm_90+, where the page size allows) TMA loads, one split and forced splits,
 * q_len 1 and 4, NaN in every slot that is not a key; each result against the float64
 * oracle. K/V heads are not side by side, so no tile packs heads (its rows would be read
 * at head_dim strides). The ulps from the NHD result are printed (other tiles may serve it:
 * head packing). */
START_TEST(hnd_layout)
{
    static const int pages[] = {16, 64, 5};
    for (int tma_ctx = 0; tma_ctx < 2; tma_ctx++) {
        fajit_ctx *ctx = tma_ctx ? new_ctx_tma(0) : new_ctx(0);
        for (size_t i = 0; i < 2 * sizeof pages / sizeof pages[0]; i++) {
            reseed(g_seed ^ 0x4e4dull ^ (uint64_t)i << 8 ^ (uint64_t)tma_ctx);
            const int q_len = i % 2 ? 4 : 1;
            dcase c = {.batch = 3, .hkv = 4, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
                       .mask = q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE,
                       .q_len = q_len, .seqlen_k = 1500, .paged = 1,
                       .page_size = pages[i / 2], .use_seqused = 1, .spare = 4, .poison = 1,
                       .want_lse = 1};
            dbufs N, H;
            setup(&N, &c, NULL);
            dcase hc = c;
            hc.hnd = 1;
            setup(&H, &hc, &N);   /* the same Q and keys, heads apart in each page */
            ck_assert(H.desc.k_head_stride == (int64_t)c.page_size * c.hd &&
                      H.desc.k_row_stride == c.hd &&
                      H.desc.k_page_stride == (int64_t)c.hkv * c.page_size * c.hd);
            char buf[1024];
            ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &H.desc, buf, sizeof buf),
                             FAJIT_OK);
            ck_assert_msg(!strstr(buf, " h2 ") && !strstr(buf, " h4 "), "HND packed: %s", buf);
            static const int splits[] = {0, 3};
            for (int s = 0; s < 2; s++) {
                N.desc.num_splits = N.c.num_splits = splits[s];
                H.desc.num_splits = H.c.num_splits = splits[s];
                ck_assert_msg(launch(ctx, &N, NULL) == FAJIT_OK, "NHD: %s", fajit_errmsg(ctx));
                fetch(&N);
                check_against_reference(&N, "NHD");
                ck_assert_msg(launch(ctx, &H, NULL) == FAJIT_OK, "HND: %s", fajit_errmsg(ctx));
                fetch(&H);
                check_against_reference(&H, "HND");
                int worst = 0;
                for (size_t e = 0; e < H.n_o; e++) {
                    const int u = ulp_dist(N.h_o[e], H.h_o[e]);
                    worst = u > worst ? u : worst;
                }
                printf("hnd_layout: page size %d, q_len %d, splits %d, %s: ok (max %d ulp from "
                       "NHD)\n", c.page_size, q_len, splits[s],
                       strstr(buf, " tma") ? "TMA" : "cp.async", worst);
            }
            teardown(&N), teardown(&H);
        }
        fajit_ctx_destroy(ctx);
    }
}
END_TEST

void gpu_decode_plans_cases(Suite *s)
{
    gpu_harness_add(s, "paged_plans_and_strict", paged_plans_and_strict, 600);
    gpu_harness_add(s, "loader_page_sizes", loader_page_sizes, 600);
    gpu_harness_add(s, "plans_per_class", plans_per_class, 600);
    gpu_harness_add(s, "defaults_per_class", defaults_per_class, 900);
    gpu_harness_add(s, "hnd_layout", hnd_layout, 600);
}
