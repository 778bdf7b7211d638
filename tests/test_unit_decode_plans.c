/* test_unit_decode_plans.c - plans around the decode family (no GPU; helpers in
 * test_unit_decode.h): head packing (FJ_DEC_HP), paged prefill on the Hopper family, the
 * mixed plan of a varlen batch of prefill and decode rows, and fajit_warm_spec at every
 * batch of a spec. Part of the unit suite's TCase "decode". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_unit_decode.h"
#include "../src/autotune/spec.h"

/* Head packing (FJ_DEC_HP): the tuning-row names, check()'s conditions, the default's rule, and
 * a launch of 2 KV heads per CTA through the fake H200: the kernel's view of the problem
 * (heads_kv / 2 heads, head strides x 2, the group's rows x 2) in the grid, the parameters,
 * the preamble and the shared memory of head_dim x 2; partials per real head. */
START_TEST(decode_head_packing)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 64, 32, 8, 1, 16384, 32, FAJIT_BF16);
    d.block_table = (const int32_t *)(uintptr_t)0x3000;
    d.block_table_stride = 1024, d.page_size = 16, d.num_pages = 1 << 17;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg c, plain;
    char name[64], why[256];
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h2", &c), 0);
    fj_kcfg_name(&c, name);
    ck_assert_str_eq(name, "dec:64x3m1n4s0h2");
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h4t", &plain), 0);
    fj_kcfg_name(&plain, name);
    ck_assert_str_eq(name, "dec:64x3m1n4s0h4t");
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h", &plain), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0h1", &plain), -1);
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0th2", &plain), -1);
    ck_assert_int_eq(c.fam->check(&c, &d, &h200, why, sizeof why), 0);
    const struct {
        const char *cfg;
        int heads_kv, hd;
        int64_t head_stride;
        const char *why;
    } bad[] = {
        {"dec:64x3m1n4s0h3", 8, 32, 32, "must be 1, 2 or 4"},
        {"dec:64x3m1n4s0h4t", 8, 64, 64, "need cp.async loads"},
        {"dec:32x3m1n2s0h2", 8, 160, 160, "head_dim * heads <= 256"},
        {"dec:64x3m1n4s0h4", 6, 32, 32, "heads_kv a multiple"},
        {"dec:64x3m1n4s0h2", 8, 32, 64, "head strides == head_dim"},
        {"dec:64x3m1n4s0h2", 8, 32, 0, "head strides == head_dim"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fajit_attn_desc e = d;
        e.heads_kv = bad[i].heads_kv, e.heads_q = 4 * bad[i].heads_kv, e.head_dim = bad[i].hd;
        e.k_head_stride = e.v_head_stride = bad[i].head_stride;
        fj_kcfg b;
        ck_assert_int_eq(fj_kcfg_parse(bad[i].cfg, &b), 0);
        why[0] = 0;
        ck_assert_int_ne(b.fam->check(&b, &e, &h200, why, sizeof why), 0);
        ck_assert_msg(strstr(why, bad[i].why), "%zu: %s", i, why);
    }
    /* kernels: the macro, the name, head_dim 64's tiles and shared memory */
    fj_kernels ks, k64;
    c.fam->kernels(&c, &d, &ks);
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_HEAD_DIM 32\n"));
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_DEC_HP 2\n"));
    ck_assert_ptr_nonnull(strstr(ks.v[0].name, "d32 h2 64x3 m1 n4"));
    fajit_attn_desc w = d;
    w.head_dim = 64;
    ck_assert_int_eq(fj_kcfg_parse("dec:64x3m1n4s0", &plain), 0);
    plain.fam->kernels(&plain, &w, &k64);
    ck_assert_int_eq(ks.dyn_smem[0], k64.dyn_smem[0]);
    ck_assert_ptr_null(strstr(k64.v[0].preamble, "FJ_DEC_HP"));   /* (cache keys as before) */
    ck_assert_str_eq(ks.v[1].preamble, "#define FJ_DTYPE 1\n#define FJ_HEAD_DIM 32\n");

    /* launches: 64 x 8 heads -> 256 CTAs of 2 heads, no split; 1 sequence of 32k -> splits */
    fj_cuda fake = dec_fake_device();
    fj_cuda_set_for_testing(&fake);
    fajit_ctx *ctx = fake_ctx();
    ck_assert_int_eq(dec_splits_of(ctx, "dec:64x3m1n4s0h2", &d), 1);
    const fj_decode_params *q = &g_dec.p[0];
    ck_assert_uint_eq(g_dec.grid[0][0], 1);
    ck_assert_uint_eq(g_dec.grid[0][1], 4);
    ck_assert_uint_eq(g_dec.grid[0][2], 64);
    ck_assert_int_eq(q->heads_kv, 4);
    ck_assert_int_eq(q->heads_q, 32);
    ck_assert_int_eq(q->head_dim, 32);
    ck_assert_int_eq(q->k_head_stride, 64);
    ck_assert_int_eq(q->v_head_stride, 64);
    ck_assert_int_eq(q->k_row_stride, 8 * 32);
    ck_assert_int_eq(q->q_tiles, 1);   /* 8 query heads x 1 row: one tile of 16 */
    fajit_attn_desc one = d;
    one.batch = 1, one.seqlen_k = 32768, one.block_table_stride = 2048;
    const int s2 = dec_splits_of(ctx, "dec:64x3m1n4s0h2", &one);
    ck_assert_uint_eq(g_dec.grid[0][1], 4);
    ck_assert_uint_eq(g_dec.grid[0][0], (unsigned)(s2 * g_dec.p[0].q_tiles));
    const int s1 = dec_splits_of(ctx, "dec:64x3m1n4s0", &one);
    ck_assert_msg(s2 >= s1, "4 CTAs of 2 heads split no less than 8 of one: %d < %d", s2, s1);
    /* q_len 4: 2 x 4 x 4 = 32 packed rows, two q tiles of 16 */
    one.seqlen_q = 4, one.mask = FAJIT_MASK_CAUSAL;
    dec_splits_of(ctx, "dec:64x3m1n4s0h2", &one);
    ck_assert_int_eq(g_dec.p[0].q_tiles, 2);
    /* the rule (decode_rules.c's pack_rule, sm_90): 8 KV heads side by side, 4 query heads each */
    static const struct {
        int batch, seqlen_k, hd, q_len, pack;   /* pack: FJ_DEC_PACK_*, 0 = auto */
        const char *want;                       /* "h2", "h4", or "" for none */
    } rule[] = {
        {64, 16384, 32, 1, 0, "h4"},   /* the batch fills the SMs: 4 rows x 4 */
        {64, 16384, 32, 4, 0, "h2"},   /* 16 rows: x 2 keeps 32 */
        {128, 2048, 48, 1, 0, "h4"},   /* head_dim 48 x 4 = 192 */
        {128, 2048, 48, 4, 0, "h2"},
        {64, 16384, 64, 1, 0, "h2"},   /* head_dim 64 x 2 = 128 (x 4 = 256 not) */
        {64, 16384, 64, 8, 0, ""},     /* 32 rows */
        {64, 16384, 128, 1, 0, ""},    /* head_dim 128: none */
        {64, 16384, 16, 1, 0, ""},     /* below 32: not measured, none */
        {64, 16384, 40, 1, 0, ""},     /* 40, 56: not run packed on a GPU, none */
        {64, 16384, 40, 1, FJ_DEC_PACK_4, "h4"},
        {16, 8192, 32, 1, 0, "h2"},    /* the keys stream: head_dim 32 x 2 up to 32 rows */
        {1, 131072, 32, 4, 0, "h2"},
        {16, 8192, 48, 1, 0, "h2"},    /* at 48 x 2 up to 16 packed rows */
        {1, 32768, 48, 1, 0, "h2"},
        {16, 8192, 48, 4, 0, ""},      /* (16 rows x 2 = 32: none) */
        {16, 8192, 64, 1, 0, ""},
        {1, 4096, 32, 1, 0, ""},       /* latency-bound: none */
        {4, 4096, 32, 1, 0, ""},
        {64, 16384, 32, 1, FJ_DEC_PACK_OFF, ""},
        {1, 4096, 32, 1, FJ_DEC_PACK_4, "h4"},   /* forced: wherever the layout allows */
        {1, 4096, 128, 1, FJ_DEC_PACK_2, "h2"},
        {1, 4096, 256, 1, FJ_DEC_PACK_2, ""},    /* 512 columns: none */
    };
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
        fajit_attn_desc e;
        fajit_attn_desc_init(&e, p, p, p, p, rule[i].batch, 32, 8, rule[i].q_len,
                             rule[i].seqlen_k, rule[i].hd, FAJIT_BF16);
        e.mask = rule[i].q_len > 1 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_NONE;
        e.block_table = d.block_table, e.page_size = 16, e.num_pages = 1 << 20;
        e.block_table_stride = e.seqlen_k / 16;
        fj_fopts fo, fo_tma;
        const fj_target t = dec_target(h200, &fo, FJ_DEC_LOADER_AUTO, rule[i].pack);
        ck_assert_int_eq(fj_kcfg_default(&e, &t, FAJIT_FAMILY_AUTO, &c), 0);
        fj_kcfg_name(&c, name);
        const char *h = strstr(name, "s0h");
        ck_assert_msg(*rule[i].want ? h && strncmp(h + 2, rule[i].want, 2) == 0 : !h,
                      "%zu: %s, want %s", i, name, *rule[i].want ? rule[i].want : "none");
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), *rule[i].want ? rule[i].want[1] - '0' : 1);
        ck_assert_int_eq(c.fam->check(&c, &e, &t, why, sizeof why), 0);
        /* not off sm_90, nor with the TMA loader forced, nor over other layouts */
        const fj_target others[] = {{80, 0, 108, 0, 0, &fo},
                                    {100, 1, 148, 0, 0, NULL},
                                    dec_target(h200, &fo_tma, FJ_DEC_LOADER_TMA, rule[i].pack)};
        for (size_t o = 0; o < 3 && !rule[i].pack; o++) {
            ck_assert_int_eq(fj_kcfg_default(&e, &others[o], FAJIT_FAMILY_AUTO, &c), 0);
            fj_kcfg_name(&c, name);
            ck_assert_msg(!strstr(name, "s0h"), "%zu, target %zu: %s", i, o, name);
        }
        e.heads_kv = 3, e.heads_q = 12;
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), 1);
        e.heads_kv = 8, e.heads_q = 32, e.k_head_stride = 2 * e.head_dim;
        ck_assert_int_eq(fj_dec_pack_default(&e, &t), 1);
    }
    /* the tuner's candidates hold the default with 1, 2 and 4 heads per CTA at head_dim
     * <= 64 on sm_90 */
    fj_kcfg cands[128];
    const int nc = c.fam->candidates(&d, &h200, cands, 128);
    int seen[3] = {0, 0, 0};
    for (int k = 0; k < nc; k++) {
        fj_kcfg_name(&cands[k], name);
        seen[strstr(name, "s0h4") ? 2 : strstr(name, "s0h2") ? 1 : 0]++;
        ck_assert_int_eq(c.fam->check(&cands[k], &d, &h200, why, sizeof why), 0);
    }
    ck_assert_msg(seen[0] && seen[1] && seen[2], "%d candidates: %d/%d/%d", nc, seen[0],
                  seen[1], seen[2]);
    /* warm's list (shipped()) holds the packed defaults, from a descriptor without heads or
     * strides as warm's own, in every split class (STRICT serves them) */
    fj_kcfg list[128];
    fajit_attn_desc bare;
    memset(&bare, 0, sizeof bare);
    bare.head_dim = 32, bare.dtype = FAJIT_BF16, bare.batch = bare.heads_q = bare.heads_kv = 1;
    bare.block_table = d.block_table, bare.page_size = 16;
    const int nl = c.fam->shipped(&bare, &h200, list, 128);
    static const int shapes[][3] = {{64, 16384, 8}, {1, 32768, 8}, {16, 8192, 8}, {128, 2048, 8},
                                    {16, 8192, 4}, {1, 131072, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        fajit_attn_desc e = d;
        e.batch = shapes[i][0], e.seqlen_k = shapes[i][1], e.heads_kv = shapes[i][2];
        e.heads_q = 4 * e.heads_kv, e.k_row_stride = e.v_row_stride = e.heads_kv * 32;
        e.block_table_stride = e.seqlen_k / 16;
        fj_kcfg want;
        ck_assert_int_eq(fj_kcfg_default(&e, &h200, FAJIT_FAMILY_AUTO, &want), 0);
        fj_kcfg_name(&want, name);
        ck_assert_msg(strstr(name, "s0h"), "%zu: %s", i, name);
        int found = 0;
        for (int k = 0; k < nl && !found; k++)
            found = fj_kcfg_same(&list[k], &want);
        ck_assert_msg(found, "%zu: %s not among the %d shipped", i, name, nl);
    }
    fajit_attn_desc odd = d;
    odd.heads_kv = 1, odd.heads_q = 8;
    ck_assert_int_eq(fj_kcfg_default(&odd, &h200, FAJIT_FAMILY_AUTO, &c), 0);
    fj_kcfg_name(&c, name);
    ck_assert_msg(!strstr(name, "s0h"), "one KV head packs nothing: %s", name);
    /* FAJIT_DECODE_HEAD_PACK: read at the context's creation, bad values refused */
    static const struct { const char *v; int want; } env[] = {
        {"auto", FJ_DEC_PACK_AUTO}, {"OFF", FJ_DEC_PACK_OFF}, {"2", FJ_DEC_PACK_2},
        {"4", FJ_DEC_PACK_4}, {"3", -1}, {"on", -1}};
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        fajit_ctx *x = NULL;
        setenv("FAJIT_DECODE_HEAD_PACK", env[i].v, 1);
        const fajit_status st = fajit_ctx_create(&x, &o);
        if (env[i].want >= 0) {
            ck_assert_int_eq(st, FAJIT_OK);
            ck_assert_int_eq(fj_dec_opts_of(&x->fopts)->pack, env[i].want);
            ck_assert_int_eq(fj_dec_opts_of(fj_target_of(x, NULL).fopts)->pack, env[i].want);
        } else {
            ck_assert_int_eq(st, FAJIT_INVALID_ARGUMENT);
            snprintf(why, sizeof why, "FAJIT_DECODE_HEAD_PACK must be auto, off, 2 or 4, got '%s'",
                     env[i].v);
            ck_assert_ptr_nonnull(strstr(fajit_errmsg(x), why));
        }
        fajit_ctx_destroy(x);
    }
    unsetenv("FAJIT_DECODE_HEAD_PACK");
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
}
END_TEST

/* Paged prefill on sm_90a goes to the Hopper family where its K/V blocks fit the pages and
 * enough query rows come; decode rows, other page sizes, varlen without total_q, the checked
 * mode and other targets stay with the decode family. */
START_TEST(fa3_paged_dispatch)
{
    static const fj_target h = {90, 1, 132, 0, 1, NULL}, hc = {90, 1, 132, 1, 1, NULL},
                           a = {80, 0, 108, 0, 0, NULL};
    void *ptr = (void *)(uintptr_t)0x100000;
    static const struct {
        int hd, mask, q, ps, varlen, total_q;
        const fj_target *t;
        int fa3;   /* 1: the Hopper family, 0: decode, 2: mixed (varlen: both) */
    } cases[] = {
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &h, 1},
        {128, FAJIT_MASK_NONE, 512, 256, 0, 0, &h, 1},
        {64, FAJIT_MASK_CAUSAL, 2048, 8, 0, 0, &h, 1},
        {256, FAJIT_MASK_NONE, 4096, 32, 0, 0, &h, 1},   /* 128x80 does not fit: 128x64 */
        {128, FAJIT_MASK_WINDOW, 1024, 64, 1, 1, &h, 2},
        {128, FAJIT_MASK_CAUSAL, 64, 16, 0, 0, &h, 1},
        {128, FAJIT_MASK_CAUSAL, 63, 16, 0, 0, &h, 0},  /* too few rows */
        {128, FAJIT_MASK_CAUSAL, 1, 16, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 1, 0, 0, &h, 0}, /* no tile fits pages of 1, 3, 12 */
        {128, FAJIT_MASK_CAUSAL, 4096, 3, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 12, 0, 0, &h, 0},
        {128, FAJIT_MASK_CAUSAL, 4096, 24, 0, 0, &h, 1}, /* 128x128 does not fit: 128x144 */
        {128, FAJIT_MASK_CAUSAL, 1024, 16, 1, 0, &h, 0}, /* varlen without total_q */
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &hc, 0}, /* checked: page ids tested */
        {128, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &a, 0},
        {72, FAJIT_MASK_CAUSAL, 4096, 16, 0, 0, &h, 0},  /* head_dim not a multiple of 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fajit_attn_desc d;
        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 2, 32, 8, cases[i].q, 8192, cases[i].hd,
                             FAJIT_BF16);
        d.mask = (fajit_mask)cases[i].mask;
        if (d.mask == FAJIT_MASK_WINDOW)
            d.window_left = 100, d.window_right = 0;
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = cases[i].ps;
        d.block_table_stride = (8192 + cases[i].ps - 1) / cases[i].ps;
        d.num_pages = 4096;
        d.k_row_stride = d.v_row_stride = 8 * cases[i].hd;
        if (cases[i].varlen) {
            d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
            d.total_q = cases[i].total_q ? 2 * cases[i].q : 0;
        }
        const fj_family *f = fj_family_choose(&d, cases[i].t, FAJIT_FAMILY_AUTO);
        ck_assert_msg(f == (cases[i].fa3 == 2   ? &fj_family_mixed
                            : cases[i].fa3 ? &fj_family_fa3
                                           : &fj_family_decode),
                      "case %zu: %s", i, f ? f->name : "none");
        fj_kcfg c;
        ck_assert_int_eq(fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_AUTO, &c), 0);
        if (cases[i].fa3 == 2) {   /* its Hopper part: the family's default, as forced */
            ck_assert_int_eq(fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_FA3, &c), 0);
            f = &fj_family_fa3;
        }
        if (!cases[i].fa3)
            continue;
        const fj_fa3_config *fc = fj_fa3_of(&c);
        ck_assert_msg(fj_fa3_page_fit(fc->block_n, cases[i].ps), "case %zu: block_n %d", i,
                      fc->block_n);
        char why[256];
        ck_assert_int_eq(f->check(&c, &d, cases[i].t, why, sizeof why), 0);
        fj_kernels ks;
        f->kernels(&c, &d, &ks);
        ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_FA3_PAGED 1\n"));
        ck_assert_ptr_nonnull(strstr(ks.v[0].name, " paged"));
        /* every candidate fits the pages, the default first */
        fj_kcfg cand[32];
        const int n = f->candidates(&d, cases[i].t, cand, 32);
        ck_assert_int_ge(n, 1);
        ck_assert_mem_eq(fj_fa3_of(&cand[0]), fc, sizeof *fc);
        for (int k = 0; k < n; k++)
            ck_assert(fj_fa3_page_fit(fj_fa3_of(&cand[k])->block_n, cases[i].ps));
        /* a tuned tile that does not fit the pages is refused with the rule */
        fj_fa3_config bad = *fc;
        bad.block_n = cases[i].ps == 8 ? 80 : 176;
        if (!fj_fa3_page_fit(bad.block_n, cases[i].ps)) {
            fj_kcfg b;
            fj_fa3_kcfg(&bad, &b);
            ck_assert_int_eq(f->check(&b, &d, cases[i].t, why, sizeof why), -1);
            ck_assert_ptr_nonnull(strstr(why, "page_size"));
        }
        /* the same problem over contiguous K/V: no paged variant */
        d.block_table = NULL;
        if (!d.cu_seqlens_q && fj_family_choose(&d, cases[i].t, FAJIT_FAMILY_AUTO) == &fj_family_fa3) {
            fj_kcfg_default(&d, cases[i].t, FAJIT_FAMILY_AUTO, &c);
            f->kernels(&c, &d, &ks);
            ck_assert_ptr_null(strstr(ks.v[0].preamble, "FJ_FA3_PAGED"));
        }
    }
    {   /* paged consumers have 232 registers: 128x176 at head_dim 128 is refused with the rule */
        fajit_attn_desc d;
        void *ptr = (void *)(uintptr_t)0x100000;
        fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 2, 32, 8, 4096, 4096, 128, FAJIT_BF16);
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = 16, d.block_table_stride = 256, d.num_pages = 1024;
        fj_fa3_config wide = {128, 176, 1, 1, 2};
        fj_kcfg w;
        char why[256];
        fj_fa3_kcfg(&wide, &w);
        ck_assert_int_eq(fj_family_fa3.check(&w, &d, &h, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "232 registers"));
        d.block_table = NULL;   /* contiguous: 240 registers, allowed */
        ck_assert_int_eq(fj_family_fa3.check(&w, &d, &h, why, sizeof why), 0);
    }
    ck_assert(fj_fa3_page_fit(128, 256) && fj_fa3_page_fit(128, 16) && fj_fa3_page_fit(176, 16) &&
              fj_fa3_page_fit(128, 128) && !fj_fa3_page_fit(176, 32) && !fj_fa3_page_fit(128, 4) &&
              !fj_fa3_page_fit(128, 48) && !fj_fa3_page_fit(128, 1) && fj_fa3_page_fit(80, 160));
}
END_TEST

/* The mixed family: a varlen batch over paged K/V on sm_90a that the Hopper family serves
 * is one plan of its kernel (sequences of more than 16 rows, fj_kv_pages.min_q 17) and the
 * decode kernels' QMAX variants (q_len 16); fixed-length paged prefill stays with the
 * Hopper family, short batches, other targets and the checked mode with the decode one. */
static CUresult mix_tmap(void *m, int t, unsigned r, void *a, const unsigned long long *d,
                         const unsigned long long *st, const unsigned *b, const unsigned *el,
                         int i, int w, int l, int o)
{
    (void)t, (void)r, (void)a, (void)d, (void)st, (void)b, (void)el, (void)i, (void)w, (void)l;
    (void)o;
    memset(m, 0, 128);
    return 0;
}
static void mix_desc(fajit_attn_desc *d, int seqlen_q, int varlen)
{
    void *ptr = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(d, ptr, ptr, ptr, ptr, 4, 32, 8, seqlen_q, 4096, 128, FAJIT_BF16);
    d->mask = FAJIT_MASK_CAUSAL;
    d->block_table = (const int32_t *)(uintptr_t)0x3000;
    d->page_size = 16, d->block_table_stride = 256, d->num_pages = 4096;
    d->seqused_k = (const int32_t *)(uintptr_t)0x4000;
    d->k_row_stride = d->v_row_stride = 8 * 128;
    if (varlen) {
        d->cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
        d->total_q = 400;
        d->q_batch_stride = d->o_batch_stride = 0;
    }
}
START_TEST(mixed_plan)
{
    static const fj_target h = {90, 1, 132, 0, 1, NULL}, hc = {90, 1, 132, 1, 1, NULL},
                           a = {80, 0, 108, 0, 0, NULL};
    fajit_attn_desc d, dd;
    /* routing */
    mix_desc(&d, 300, 1);
    ck_assert_ptr_eq(fj_family_choose(&d, &h, FAJIT_FAMILY_AUTO), &fj_family_mixed);
    ck_assert_ptr_eq(fj_family_choose(&d, &hc, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert_ptr_eq(fj_family_choose(&d, &a, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert_ptr_eq(fj_family_choose(&d, &h, FAJIT_FAMILY_FA3), &fj_family_fa3);
    mix_desc(&dd, 300, 0);   /* fixed length: no decode rows */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_fa3);
    mix_desc(&dd, 63, 1);    /* every sequence at most 63 rows: the decode family */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    mix_desc(&dd, 300, 1);
    dd.total_q = 0;          /* (the Hopper kernel's maps need total_q) */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    mix_desc(&dd, 300, 1);
    dd.page_size = 12, dd.block_table_stride = 342;   /* no Hopper tile fits the pages */
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_AUTO), &fj_family_decode);
    ck_assert(!fj_family_mixed.applies(&dd, &h));

    /* the configuration: the Hopper default and the decode default for 16 rows */
    fj_kcfg c, f3, fd, back;
    ck_assert_int_eq(fj_kcfg_default(&d, &h, FAJIT_FAMILY_AUTO, &c), 0);
    ck_assert_ptr_eq(c.fam, &fj_family_mixed);
    fj_family_fa3.default_cfg(&d, &h, &f3);
    mix_desc(&dd, 16, 1);
    fj_family_decode.default_cfg(&dd, &h, &fd);
    char name[32], n3[32], nd[32], want[64];
    fj_kcfg_name(&c, name);
    fj_kcfg_name(&f3, n3);
    fj_kcfg_name(&fd, nd);
    snprintf(want, sizeof want, "mix:%s+%s", n3 + 4, nd + 4);
    ck_assert_str_eq(name, want);
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&back, &c));
    static const char *const bad[] = {"mix:128x128o1p1s2", "mix:+64x3m1n4s0",
                                      "mix:128x128o1p1s2+", "mix:128x128o1p1s2+64x3m1n4s0x",
                                      "mix:128x128o1p1+64x3m1n4s0", "mix:12345678901234567890"
                                      "12345678901+64x3m1n4s0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(fj_kcfg_parse(bad[i], &back) == -1, "%s", bad[i]);
    char why[256] = "";
    ck_assert_msg(fj_family_mixed.check(&c, &d, &h, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fj_family_mixed.check(&c, &d, &a, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "sm_90a"));
    ck_assert_int_eq(fj_kcfg_parse("mix:128x176o1p1s2+64x3m1n4s0", &back), 0);
    mix_desc(&dd, 300, 1);
    dd.page_size = 32, dd.block_table_stride = 128;   /* (176 keys: 5.5 pages) */
    ck_assert_int_eq(fj_family_mixed.check(&back, &dd, &h, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "page_size"));
    mix_desc(&dd, 16, 1);   /* (the decode launch's problem again) */
    fj_kcfg cand[4];
    ck_assert_int_eq(fj_family_mixed.candidates(&d, &h, cand, 4), 1);
    ck_assert(fj_kcfg_same(&cand[0], &c));

    /* the kernels: the paged Hopper kernel, then the decode split and combine (QMAX) */
    fj_kernels ks, k3, kd;
    fj_family_mixed.kernels(&c, &d, &ks);
    fj_family_fa3.kernels(&f3, &d, &k3);
    fj_family_decode.kernels(&fd, &dd, &kd);
    ck_assert_int_eq(ks.n, 3);
    ck_assert_str_eq(ks.v[0].preamble, k3.v[0].preamble);
    ck_assert_ptr_nonnull(strstr(ks.v[0].preamble, "#define FJ_FA3_PAGED 1\n"));
    ck_assert_int_eq(ks.pdl[0], 0);
    for (int i = 1; i < 3; i++) {
        ck_assert_str_eq(ks.v[i].function, kd.v[i - 1].function);
        ck_assert_ptr_null(strstr(kd.v[i - 1].preamble, "FJ_DEC_QMAX"));
        ck_assert_ptr_nonnull(strstr(ks.v[i].preamble, "#define FJ_DEC_QMAX 1\n"));
        ck_assert_ptr_nonnull(strstr(ks.v[i].name, " qmax"));
        ck_assert_int_eq(ks.pdl[i], 1);
        ck_assert_int_eq(ks.threads[i], kd.threads[i - 1]);
        ck_assert_int_eq(ks.dyn_smem[i], kd.dyn_smem[i - 1]);
        ck_assert_int_eq(ks.cluster[i], kd.cluster[i - 1]);
    }
    char grid[512];
    fj_family_mixed.describe_grid(&c, &d, &h, grid, sizeof grid);
    ck_assert_msg(strncmp(grid, "fa3 persistent grid", 19) == 0 &&
                      strstr(grid, "more than 16 query rows, then dec grid (") &&
                      strstr(grid, "at most 16"), "%s", grid);

    /* the workspace: the decode launch's for 16 rows; counters shared with the Hopper one */
    fj_workspace wm = {0, 0, 0}, w3 = {0, 0, 0}, wd = {0, 0, 0};
    fj_family_mixed.workspace(&c, &d, &h, &wm);
    fj_family_fa3.workspace(&f3, &d, &h, &w3);
    fj_kcfg fdq;
    ck_assert_int_eq(fj_kcfg_parse(nd, &fdq), 0);
    fj_family_decode.workspace(&fdq, &dd, &h, &wd);
    ck_assert_uint_eq(wm.scratch_bytes, wd.scratch_bytes);
    ck_assert_uint_eq(wm.counter_bytes, wd.counter_bytes > w3.counter_bytes ? wd.counter_bytes
                                                                              : w3.counter_bytes);
    ck_assert_uint_eq(wm.report_bytes, 0);

    /* the launches */
    fj_cuda fake = dec_fake_device();
    fake.cuTensorMapEncodeTiled = mix_tmap;
    fj_launch_env env = {&fake, 132, 0x7000, 0x8000, 0, 90, {0}, {{0}}, NULL};
    fj_args ar;
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&c, 0, &d, &env, &ar, why, sizeof why), FAJIT_OK);
    ck_assert_int_eq(ar.n, 6);
    fj_kv_pages pg;
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 17);
    ck_assert_int_eq(pg.page_size, 16);
    memset(&ar, 0, sizeof ar);   /* plain Hopper: none skipped */
    ck_assert_int_eq(fj_family_fa3.launch_args(&f3, 0, &d, &env, &ar, why, sizeof why), FAJIT_OK);
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 0);
    for (int i = 1; i < 3; i++) {
        memset(&ar, 0, sizeof ar);
        ck_assert_int_eq(fj_family_mixed.launch_args(&c, i, &d, &env, &ar, why, sizeof why),
                         FAJIT_OK);
        fj_decode_params p;
        memcpy(&p, ar.ptr[0], sizeof p);
        ck_assert_int_eq(p.q_len, 16);
        ck_assert_int_eq(p.total_rows, 400);
        ck_assert_uint_eq(p.cu_seqlens_q, 0x5000);
        if (i == 1) {
            ck_assert_uint_eq(ar.grid[2], 4);
            ck_assert_uint_eq(ar.grid[1], 8u / (unsigned)(fj_dec_pack_default(&dd, &h)));
        }
    }
    /* forced onto a fixed-length prefill: the Hopper launch alone, nothing skipped */
    mix_desc(&dd, 300, 0);
    ck_assert_ptr_eq(fj_family_choose(&dd, &h, FAJIT_FAMILY_MIXED), &fj_family_mixed);
    fj_family_mixed.default_cfg(&dd, &h, &back);
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&back, 0, &dd, &env, &ar, why, sizeof why),
                     FAJIT_OK);
    memcpy(&pg, ar.ptr[5], sizeof pg);
    ck_assert_int_eq(pg.min_q, 0);
    memset(&ar, 0, sizeof ar);
    ck_assert_int_eq(fj_family_mixed.launch_args(&back, 1, &dd, &env, &ar, why, sizeof why),
                     FAJIT_OK);
    ck_assert_uint_eq(ar.grid[0], 0);
    fj_family_mixed.workspace(&back, &dd, &h, &wm);
    ck_assert_uint_eq(wm.scratch_bytes, 0);

    /* warm: the shipped configurations list the QMAX variants beside the plain ones */
    fj_kcfg sh[16];
    const int ns = fj_family_mixed.shipped(&d, &h, sh, 16);
    ck_assert_int_ge(ns, 1);
    fj_variant vs[256];
    int nv = 0, qmax = 0;
    ck_assert_int_eq(fj_family_variants(&d, &h, 0, vs, &nv, 256), 0);
    for (int i = 0; i < nv; i++)
        qmax += strstr(vs[i].preamble, "FJ_DEC_QMAX") != NULL;
    ck_assert_int_ge(qmax, 2);
}
END_TEST

/* The plan through the API: describe names both launches (the text the GPU test counts). */
START_TEST(mixed_describe)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "", o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx = NULL;
    fajit_attn_desc d;
    char line[2048];
    /* FAJIT_PAGED_PREFILL=decode keeps paged prefill with the decode family; a bad value is
     * refused at context creation; unset or hopper, the Hopper kernel takes it (below) */
    setenv("FAJIT_PAGED_PREFILL", "decode", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    unsetenv("FAJIT_PAGED_PREFILL");
    mix_desc(&d, 300, 1);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strncmp(line, "dec ", 4) == 0 && !strstr(line, "fa3"), "%s", line);
    fajit_ctx_destroy(ctx);
    setenv("FAJIT_PAGED_PREFILL", "tensor", 1);
    ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(
        strstr(fajit_errmsg(ctx), "FAJIT_PAGED_PREFILL must be decode or hopper, got 'tensor'"));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_PAGED_PREFILL");
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    mix_desc(&d, 300, 1);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa3 bf16 d128 causal") && strstr(line, " paged (default): fa3 ") &&
                      strstr(line, "; then dec bf16 d128") && strstr(line, " qmax (default)") &&
                      strstr(line, "; then dec combine bf16 d128 qmax"), "%s", line);
    mix_desc(&d, 300, 0);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_ptr_null(strstr(line, "qmax"));
    fajit_ctx_destroy(ctx);
}
END_TEST

/* fajit_warm_spec compiles, for every shape of a spec at every batch the spec lists, the
 * kernels dispatch picks for it on the target: each key that fajit_cache_explain looks up
 * for a shape is among the keys of warm's list. The llama-3.2-1b-paged preset lists batch 1
 * and 64: at 64 the decode family packs two KV heads into 64-key tiles, a kernel no
 * batch-1 shape asks for. With an NVRTC, the public explain then says "hit" for every kernel
 * of a batch-64 shape once warm's keys are in a cache (entries of empty CUBINs: nothing is
 * compiled). No GPU. */
static int key_in(const fj_key *keys, int n, const fj_key *k)
{
    for (int i = 0; i < n; i++)
        if (memcmp(&keys[i], k, sizeof *k) == 0)
            return 1;
    return 0;
}
START_TEST(warm_spec_every_batch)
{
    static const char *const specs[] = {"llama-3.2-1b-paged", "llama-3-8b-paged"};
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE, o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    const int nvrtc = fj_kernel_nvrtc_version(), version = nvrtc > 0 ? nvrtc : 13000;
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        fj_variant *vs = NULL;
        int n = 0;
        ck_assert_msg(fj_spec_warm_variants(ctx, specs[si], "sm_90a", &vs, &n) == FAJIT_OK,
                      "%s", fajit_errmsg(ctx));
        fj_key *keys = malloc((size_t)n * sizeof *keys);
        ck_assert_ptr_nonnull(keys);
        for (int i = 0; i < n; i++) {
            ck_assert_int_eq(fj_kernel_key(ctx, &vs[i], "sm_90a", version, &keys[i]), FAJIT_OK);
            if (nvrtc > 0) {   /* a cache that holds what warm compiles */
                fj_entry e;
                memset(&e, 0, sizeof e);
                e.key = keys[i];
                snprintf(e.arch, sizeof e.arch, "sm_90a");
                e.nvrtc_version = nvrtc, e.name = (char *)vs[i].name;
                ck_assert_int_eq(fj_cache_put(ctx->cache, &e), 0);
            }
        }
        fj_spec sp;
        ck_assert_int_eq(fj_spec_load(ctx, specs[si], &sp), FAJIT_OK);
        int batches[2] = {0, 0};
        for (size_t pi = 0; pi < sp.n_problems; pi++) {
            const fj_problem *p = &sp.problems[pi];
            ck_assert_int_gt(p->page_size, 0);
            for (size_t k = 0; k < p->n_shapes; k++) {
                const fj_shape *sh = &p->shapes[k];
                void *ptr = (void *)(uintptr_t)0x100000;
                fajit_attn_desc d;   /* as `fajit-tune cache explain` makes it */
                fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, sh->batch, p->heads_q, p->heads_kv,
                                     sh->seqlen_q, sh->seqlen_k, p->head_dim, p->dtype);
                d.mask = p->mask;
                d.block_table = (const int32_t *)(uintptr_t)0x200000;
                d.page_size = p->page_size;
                d.block_table_stride = (sh->seqlen_k + p->page_size - 1) / p->page_size;
                d.num_pages = (int)(d.block_table_stride * sh->batch);
                fj_kernels ks;
                ck_assert_msg(fj_dispatch_kernels(ctx, "sm_90a", &d, &ks) == FAJIT_OK, "%s",
                              fajit_errmsg(ctx));
                for (int j = 0; j < ks.n; j++) {
                    fj_key want;
                    ck_assert_int_eq(fj_kernel_key(ctx, &ks.v[j], "sm_90a", version, &want),
                                     FAJIT_OK);
                    ck_assert_msg(key_in(keys, n, &want), "%s: %s (sq %d sk %d batch %d) is "
                                  "not among the %d kernels warm compiles", specs[si],
                                  ks.v[j].name, sh->seqlen_q, sh->seqlen_k, sh->batch, n);
                }
                batches[sh->batch == 64]++;
                char text[4096];
                if (nvrtc > 0 && sh->batch == 64) {
                    ck_assert_int_eq(fajit_cache_explain(ctx, "sm_90a", &d, text, sizeof text),
                                     FAJIT_OK);
                    ck_assert_msg(!strstr(text, "miss"), "%s batch 64: %s", specs[si], text);
                    ck_assert_ptr_nonnull(strstr(text, "hit: the key is in the cache"));
                }
            }
        }
        ck_assert_msg(batches[0] && batches[1], "%s: %d shapes at batch 1, %d at 64", specs[si],
                      batches[0], batches[1]);
        fj_spec_free(&sp);
        free(keys);
        free(vs);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

void fj_decode_tests_plans(TCase *tc)
{
    tcase_add_test(tc, decode_head_packing);
    tcase_add_test(tc, fa3_paged_dispatch);
    tcase_add_test(tc, mixed_plan);
    tcase_add_test(tc, mixed_describe);
    tcase_add_test(tc, warm_spec_every_batch);
}
