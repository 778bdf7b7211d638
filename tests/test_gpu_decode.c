/* test_gpu_decode.c - the `gpu` suite's tests of the decode family (src/families/decode.c):
 * paged K/V through a block table (NHD and HND pages), seqused_k, varlen queries (decode,
 * speculative decode, chunked prefill; prefill over pages, which the Hopper family serves
 * where its tiles fit the pages: prefill_sweep), split-KV and its LSE merge, the checked mode,
 * CUDA-graph replay with changing device-side inputs, the lengths and block table rewritten
 * by the kernel right before the call while the call, a dependent launch, may already run
 * (sm_90+). Exits 77 (skipped) when no CUDA driver can be loaded.
 *
 * This file holds the random sweeps, contiguous_matches_paged, checked_mode and main; the
 * other tests are in test_gpu_decode_graph.c, test_gpu_decode_merge.c and
 * test_gpu_decode_plans.c, all on the harness of gpu_decode.h (gpu_decode.c).
 *
 * Oracle: a float64 CPU reference computed here directly from the paged layout: for each
 * sequence its keys are gathered through the host copy of the block table, then
 * softmax(Q K^T * scale + mask) V and the LSE in double. Sequence b has q_len_b query rows
 * and len_b keys (seqused_k[b], else seqlen_k); query i sees key j iff
 *   j >= i + len_b - q_len_b - window_left  (WINDOW only)  and
 *   j <= i + len_b - q_len_b                (CAUSAL and WINDOW: window_right = 0).
 * Inputs are fresh random numbers in [-1, 1) per case (exact in the dtype); O and LSE are
 * poisoned with 0xFF bytes (NaN) before every launch, with a guard zone after each that
 * must stay poisoned. In half of the paged cases every K/V element that is not a key of
 * some sequence (the rows past len_b in a sequence's last page, spare pages, the gaps of
 * padded page strides, the pages the unused block-table entries point at) is NaN as
 * well: a kernel must not let them into the result (a freshly allocated vLLM cache holds
 * anything).
 *
 * Tolerances (sweep, graph replay, checked mode): every valid O element finite and
 *   |o - ref| <= tol * max(1, max |ref| over the row's head_dim elements),
 *   tol = 1/64 (bf16), 1/256 (f16),
 * well above the rounding of the inputs and outputs (bf16 rounds at 2^-9 relative, f16 at
 * 2^-12) and of P to the dtype before P@V. Because decode rows average thousands of keys,
 * |O| is often ~0.01, where that bound would pass an all-zero output; so the same tol is
 * also applied row-relative, |o - ref| <= tol * max(1/16, max |ref row|) (the rounding
 * terms are all proportional to the row's scale; FAJIT_TEST_DECODE_ROWREL=0 turns this
 * second bound off). A row that sees no key must be exactly O = 0 and LSE = -inf. LSE:
 * |lse - ref| <= 2e-3 * max(1, |ref|).
 *
 * Environment: FAJIT_TEST_SEED (default: time), FAJIT_TEST_CACHE_DIR (default: a fresh
 * temporary directory, removed at exit), FAJIT_TEST_DECODE_CASES (sweep cases, default
 * 200), FAJIT_TEST_DECODE_ONLY=k (run only sweep case k: each case has its own seed),
 * FAJIT_TEST_DECODE_POISON=0 (no NaN outside the keys), FAJIT_TEST_DECODE_ROWREL=0,
 * FAJIT_TEST_DECODE_VERBOSE=1 (a line per sweep case). One test alone:
 * CK_RUN_CASE=<name>, e.g. CK_RUN_CASE=graph_replay.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_decode.h"

/*------ 1. paged_sweep ------*/

double ref_cost(const dcase *c)
{
    const int wl = c->mask == FAJIT_MASK_WINDOW ? c->wl : -1;
    const int wr = c->mask == FAJIT_MASK_NONE ? -1 : 0;
    double s = 0;
    for (int b = 0; b < c->batch; b++) {
        const int ql = c->varlen ? c->qlens[b] : c->q_len, len = c->used[b];
        for (int i = 0; i < ql; i++) {
            int lo = wl < 0 ? 0 : i + len - ql - wl, hi = wr < 0 ? len - 1 : i + len - ql + wr;
            lo = lo < 0 ? 0 : lo, hi = hi > len - 1 ? len - 1 : hi;
            s += hi >= lo ? hi - lo + 1 : 0;
        }
    }
    return 2.0 * s * c->hkv * c->group * c->hd;
}

/* Draws the key counts of c into c->used (fixed from then on). */
void preset_lengths(dcase *c)
{
    dbufs tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.c = *c;
    tmp.c.preset_used = 0;
    randomize_used(&tmp);
    memcpy(c->used, tmp.used, sizeof c->used);
    c->preset_used = 1;
}

void draw_case(dcase *c)
{
    static const int groups[] = {1, 2, 3, 4, 5, 6, 8, 16};
    static int hds[8] = {64, 80, 96, 128, 192, 256}, nhd = 6;
    static int hds_read;
    if (!hds_read) {   /* FAJIT_TEST_DECODE_HDS="32,48,64": the head_dims drawn from */
        hds_read = 1;
        const char *e = getenv("FAJIT_TEST_DECODE_HDS");
        int n = 0, v, used = 0;
        while (e && n < 8 && sscanf(e, "%d%n", &v, &used) == 1 && v >= 8 && v <= 256 &&
               v % 8 == 0) {
            hds[n++] = v;
            e += used;
            e = *e == ',' ? e + 1 : NULL;
        }
        nhd = n ? n : nhd;
    }
    static const int pages[] = {1, 16, 64, 128, 256};
    static const int edges[] = {1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1025};
    memset(c, 0, sizeof *c);
    const int big = rnd() % 25 == 0;   /* many splits: one long sequence */
    c->batch = big ? 1 : urange(1, MAXB);
    c->hkv = urange(1, 4);
    c->group = pick(groups, 8);
    c->hd = pick(hds, nhd);
    c->dtype = (int)(rnd() % 2);
    c->q_len = urange(1, 16);
    c->seqlen_k = big ? urange(3001, 40000) : rnd() % 4 == 0 ? pick(edges, 16) : urange(1, 3000);
    c->paged = rnd() % 6 != 0;
    c->varlen = c->paged && rnd() % 4 == 0;
    if (!c->paged && c->q_len * c->group > 64)   /* contiguous: the decode family's range */
        c->q_len = 64 / c->group;
    if (c->varlen) {
        for (int b = 0; b < c->batch; b++)
            c->qlens[b] = urange(0, c->q_len);
        if (rnd() % 3 == 0)   /* one chunked-prefill sequence */
            c->qlens[rnd() % (unsigned)c->batch] = urange(17, 300);
    }
    const unsigned m = rnd() % 16;
    c->mask = m < 7 ? FAJIT_MASK_NONE : m < 14 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_WINDOW;
    c->wl = urange(0, c->seqlen_k + c->seqlen_k / 4);
    if (c->paged) {
        c->page_size = pick(pages, 5);
        c->use_seqused = rnd() % 8 != 0;
        c->force_empty = rnd() % 4 == 0;
        c->force_full = rnd() % 2 == 0;
        const unsigned l = rnd() % 4;   /* half separate, a quarter each of the others */
        c->layout = l == 3 ? KV_INTERLEAVED : l == 2 ? KV_STACKED : KV_SEPARATE;
        c->page_pad = c->layout == KV_SEPARATE && rnd() % 3 == 0;
        c->spare = urange(1, 8);
        c->poison = rnd() % 2 && env_int("FAJIT_TEST_DECODE_POISON", 1);
    }
    if (rnd() % 2) {
        int most = (c->seqlen_k + 63) / 64;
        most = most < FAJIT_MAX_SPLITS ? most : FAJIT_MAX_SPLITS;
        c->num_splits = urange(1, most);
    }
    c->want_lse = rnd() % 2;
    c->give_total_q = c->varlen && (c->want_lse || rnd() % 2);
}

typedef struct sweep_tally {
    int passed, failed, tma;   /* tma: cases whose kernel loaded K/V by TMA */
    int packed;                /* cases whose CTAs took 2 or 4 KV heads (FJ_DEC_HP) */
    double err[2], rowrel[2], lse;   /* by dtype (0 f16, 1 bf16), over passing cases */
    int first_failed;
    char first[1024];
} sweep_tally;

/* One launch of B against the float64 oracle: the verdict in *v (why: the failing status). */
void launch_and_check(fajit_ctx *ctx, dbufs *B, verdict *v)
{
    memset(v, 0, sizeof *v);
    fajit_status st = launch(ctx, B, NULL);
    if (st != FAJIT_OK) {
        snprintf(v->why, sizeof v->why, "fajit_attn_fwd: %s: %s", fajit_status_name(st),
                 fajit_errmsg(ctx));
        return;
    }
    fetch(B);
    double *ro = malloc(sizeof(double) * (B->n_o + 1));
    double *rl = malloc(sizeof(double) * (B->n_lse + 1));
    reference(B, ro, rl);
    compare(B, ro, rl, v);
    free(ro), free(rl);
}

/* A case from `draw` whose reference stays within REF_BUDGET (drawn again, at most 1000
 * times), its key counts fixed. */
void draw_within_budget(dcase *c, void (*draw)(dcase *))
{
    for (int tries = 0;; tries++) {
        draw(c);
        preset_lengths(c);
        if (ref_cost(c) <= REF_BUDGET || tries == 1000)
            break;
    }
}

/* Case k: its own seed, so that FAJIT_TEST_DECODE_ONLY=k replays it alone. */
static void sweep_case(fajit_ctx *ctx, int k, int describe, int verbose, sweep_tally *t)
{
    dcase c;
    dbufs B;
    reseed(((uint64_t)g_seed << 20) ^ (uint64_t)k ^ 0x5eedull);
    draw_within_budget(&c, draw_case);
    setup(&B, &c, NULL);
    char text[512], buf[1024];
    case_text(&B, text, sizeof text);
    fajit_status dst = fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf);
    if (describe)
        printf("decode sweep: case %d: %s\n  -> %s\n", k, text,
               dst == FAJIT_OK ? buf : fajit_errmsg(ctx));
    const int by_tma = dst == FAJIT_OK && strstr(buf, " tma") != NULL;
    const int by_hp = dst == FAJIT_OK && (strstr(buf, " h2 ") || strstr(buf, " h4 "));
    verdict v;
    launch_and_check(ctx, &B, &v);
    if (v.ok) {
        t->passed++;
        t->tma += by_tma;
        t->packed += by_hp;
        t->err[c.dtype] = v.err > t->err[c.dtype] ? v.err : t->err[c.dtype];
        t->rowrel[c.dtype] = v.rowrel > t->rowrel[c.dtype] ? v.rowrel : t->rowrel[c.dtype];
        t->lse = v.lse_err > t->lse ? v.lse_err : t->lse;
    } else {
        if (t->failed++ == 0) {
            t->first_failed = k;
            snprintf(t->first, sizeof t->first, "case %d (FAJIT_TEST_SEED=%u "
                     "FAJIT_TEST_DECODE_ONLY=%d%s): %s: %s", k, g_seed, k, by_tma ? ", TMA" : "",
                     text, v.why);
        }
        if (t->failed <= 10)
            printf("decode sweep: FAILED case %d%s%s: %s: %s\n", k, by_tma ? " (TMA)" : "",
                   by_hp ? " (KV heads packed)" : "", text, v.why);
    }
    if (verbose && v.ok)
        printf("decode sweep: case %d ok (err %.3g, row-relative %.3g): %s\n", k, v.err, v.rowrel,
               text);
    teardown(&B);
}

START_TEST(paged_sweep)
{
    /* odd cases through a context that loads by TMA where it fits (the default's loader
     * may be either: both are checked), every fourth through one without clusters (the
     * default merges 2..16 splits in a cluster on sm_90+: the other merges stay checked) */
    fajit_ctx *ctx = new_ctx(0), *tctx = new_ctx_tma(0), *nctx = new_ctx_nocluster(0);
    const int n = env_int("FAJIT_TEST_DECODE_CASES", 200);
    const int only = env_int("FAJIT_TEST_DECODE_ONLY", -1);
    const int verbose = env_int("FAJIT_TEST_DECODE_VERBOSE", 0);
    sweep_tally t;
    memset(&t, 0, sizeof t);
    int ran = 0;
    for (int k = 0; k < n || (only >= n && k <= only); k++) {
        if (only >= 0 && k != only)
            continue;
        sweep_case(k % 2 ? tctx : k % 4 == 2 ? nctx : ctx, k, ran < 4 || only >= 0, verbose, &t);
        ran++;
    }
    printf("decode sweep: %d/%d cases passed (%d through TMA loads, %d with KV heads packed), "
           "max rel err bf16 %.3g, f16 %.3g (row-relative bf16 %.3g, f16 %.3g; tol bf16 %.4g, "
           "f16 %.4g), max LSE err %.3g\n",
           t.passed, ran, t.tma, t.packed, t.err[1], t.err[0], t.rowrel[1], t.rowrel[0],
           tol_of(FAJIT_BF16),
           tol_of(FAJIT_F16), t.lse);
    fajit_ctx_destroy(ctx);
    fajit_ctx_destroy(tctx);
    fajit_ctx_destroy(nctx);
    ck_assert_msg(t.failed == 0, "%d of %d decode cases failed; first: %s", t.failed, ran, t.first);
}
END_TEST

/*------ 1b. prefill_sweep ------*/

/* Prefill and chunked prefill over paged K/V: 64..300 query rows (some varlen batches mixed
 * with short sequences of 0..20 rows: decode rows, and 17..20 across the mixed plan's bound,
 * where such a batch on sm_90 is one plan of the Hopper and the decode kernels), keys from fewer than the queries to 1,000 more, page sizes
 * 1..256 (those that fit the Hopper kernel's tiles go to it on sm_90, the others to the decode
 * family), GQA ratios including 3, 5 and 6, head_dim 64..256, shared prefixes, the sweep's
 * layouts, lengths, masks and NaN outside the keys. */
static void draw_prefill_case(dcase *c)
{
    static const int groups[] = {1, 2, 3, 4, 5, 6, 8};
    static const int hds[] = {64, 80, 96, 128, 192, 256};
    static const int pages[] = {1, 3, 8, 16, 16, 32, 64, 128, 256};
    memset(c, 0, sizeof *c);
    c->batch = urange(1, 4);
    c->hkv = urange(1, 2);
    c->group = pick(groups, 7);
    c->hd = pick(hds, 6);
    c->dtype = (int)(rnd() % 2);
    c->paged = 1;
    c->varlen = rnd() % 2;
    c->q_len = urange(64, 300);
    int qmax = c->q_len;
    if (c->varlen) {
        qmax = 0;
        for (int b = 0; b < c->batch; b++) {
            c->qlens[b] = rnd() % 3 == 0 ? urange(0, 20) : urange(64, 300);
            qmax = c->qlens[b] > qmax ? c->qlens[b] : qmax;
        }
        c->give_total_q = rnd() % 8 != 0;   /* without it: the decode family */
    }
    c->seqlen_k = rnd() % 8 == 0 ? urange(1, qmax) : urange(qmax, qmax + 1000);
    const unsigned m = rnd() % 16;
    c->mask = m < 6 ? FAJIT_MASK_NONE : m < 13 ? FAJIT_MASK_CAUSAL : FAJIT_MASK_WINDOW;
    c->wl = urange(0, c->seqlen_k);
    c->page_size = pick(pages, 9);
    c->use_seqused = rnd() % 4 != 0;
    c->force_empty = rnd() % 4 == 0;
    c->force_full = rnd() % 2 == 0;
    const unsigned l = rnd() % 4;
    c->layout = l == 3 ? KV_INTERLEAVED : l == 2 ? KV_STACKED : KV_SEPARATE;
    c->page_pad = c->layout == KV_SEPARATE && rnd() % 3 == 0;
    c->spare = urange(1, 8);
    c->poison = rnd() % 2 && env_int("FAJIT_TEST_DECODE_POISON", 1);
    c->share = c->batch > 1 && rnd() % 3 == 0;
    c->want_lse = rnd() % 2;
}

START_TEST(prefill_sweep)
{
    fajit_ctx *ctx = new_ctx_paged_hopper();
    fajit_device_info di;
    ck_assert_int_eq(fajit_device_info_get(ctx, 0, &di), FAJIT_OK);
    const int n = env_int("FAJIT_TEST_PREFILL_CASES", 60);
    const int only = env_int("FAJIT_TEST_DECODE_ONLY", -1);
    int failed = 0, fa3 = 0, ran = 0, mixed = 0, mixed_short = 0;
    double worst[2] = {0, 0};
    char first[1024] = "";
    for (int k = 0; k < n; k++) {
        if (only >= 0 && k != only)
            continue;
        dcase c;
        dbufs B;
        reseed(((uint64_t)g_seed << 20) ^ (uint64_t)k ^ 0x9ef11ull);
        draw_within_budget(&c, draw_prefill_case);
        setup(&B, &c, NULL);
        char text[512], buf[1024];
        case_text(&B, text, sizeof text);
        ck_assert_msg(fajit_dispatch_describe(ctx, NULL, &B.desc, buf, sizeof buf) == FAJIT_OK,
                      "describe: %s", fajit_errmsg(ctx));
        const int by_fa3 = strstr(buf, "fa3 ") != NULL;
        /* the mixed plan: the decode launch's QMAX variant after the Hopper one */
        const int by_mix = by_fa3 && strstr(buf, " qmax") != NULL;
        int short_rows = 0;   /* sequences of at most 16 rows in the batch */
        for (int b = 0; c.varlen && b < c.batch; b++)
            short_rows += c.qlens[b] <= 16;
        const char *who = by_mix ? "mixed" : by_fa3 ? "fa3" : "decode";
        if (ran < 4 || only >= 0)
            printf("prefill sweep: case %d: %s\n  -> %s\n", k, text, buf);
        verdict v;
        launch_and_check(ctx, &B, &v);
        ran++;
        fa3 += by_fa3 && v.ok;
        mixed += by_mix && v.ok;
        mixed_short += by_mix && short_rows > 0 && v.ok;
        if (v.ok) {
            worst[c.dtype] = v.err > worst[c.dtype] ? v.err : worst[c.dtype];
        } else {
            if (failed++ == 0)
                snprintf(first, sizeof first, "case %d (FAJIT_TEST_SEED=%u FAJIT_TEST_DECODE_ONLY=%d, "
                         "%s): %s: %s", k, g_seed, k, who, text, v.why);
            if (failed <= 10)
                printf("prefill sweep: FAILED case %d (%s): %s: %s\n", k, who, text, v.why);
        }
        teardown(&B);
    }
    printf("prefill sweep: %d/%d cases passed, %d of them on the Hopper kernel (%d as the mixed "
           "plan, %d of those with sequences of at most 16 rows), max rel err bf16 %.3g, f16 "
           "%.3g\n", ran - failed, ran, fa3, mixed, mixed_short, worst[1], worst[0]);
    fajit_ctx_destroy(ctx);
    ck_assert_msg(failed == 0, "%d of %d prefill cases failed; first: %s", failed, ran, first);
    /* on sm_90 most page sizes drawn fit the Hopper kernel: it must have served */
    if (di.cc_major == 9 && di.cc_minor == 0 && only < 0)
    {
        ck_assert_msg(fa3 >= ran / 3, "only %d of %d paged prefill cases ran on the Hopper kernel",
                      fa3, ran);
        /* about a quarter of the draws are varlen batches the mixed plan serves */
        ck_assert_msg(mixed_short >= ran / 20, "only %d of %d paged prefill cases ran as the "
                      "mixed plan with decode rows", mixed_short, ran);
    }
}
END_TEST

/*------ 2. contiguous_matches_paged ------*/

START_TEST(contiguous_matches_paged)
{
    fajit_ctx *ctx = new_ctx(0);
    reseed(g_seed ^ 0xc0ffeeull);
    dcase c = {.batch = 4, .hkv = 8, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_NONE, .q_len = 1, .seqlen_k = 1000, .want_lse = 1};
    dbufs C, P;
    setup(&C, &c, NULL);
    dcase pc = c;
    pc.paged = 1, pc.page_size = 16, pc.spare = 7;
    setup(&P, &pc, &C);   /* the same Q and keys, in shuffled pages of 16 */
    for (int i = 0; i < 2; i++) {
        char buf[1024];
        fajit_status st = fajit_dispatch_describe(ctx, NULL, i ? &P.desc : &C.desc, buf, sizeof buf);
        printf("contiguous_matches_paged: %s: %s\n", i ? "paged" : "contiguous",
               st == FAJIT_OK ? buf : fajit_errmsg(ctx));
    }
    uint16_t *want = malloc(2 * C.n_o);
    static const int splits[] = {1, 4};
    for (int s = 0; s < 2; s++) {
        C.desc.num_splits = C.c.num_splits = splits[s];
        P.desc.num_splits = P.c.num_splits = splits[s];
        char buf[1024];
        ck_assert_int_eq(fajit_dispatch_describe(ctx, NULL, &C.desc, buf, sizeof buf), FAJIT_OK);
        ck_assert_msg(strstr(buf, "dec ") != NULL, "contiguous decode step not served by the "
                      "decode family: %s", buf);
        ck_assert_msg(launch(ctx, &C, NULL) == FAJIT_OK, "contiguous: %s", fajit_errmsg(ctx));
        fetch(&C);
        check_against_reference(&C, "contiguous");
        memcpy(want, C.h_o, 2 * C.n_o);
        ck_assert_msg(launch(ctx, &P, NULL) == FAJIT_OK, "paged: %s", fajit_errmsg(ctx));
        fetch(&P);
        check_against_reference(&P, "paged");
        int worst = 0;
        size_t differ = 0;
        for (size_t i = 0; i < C.n_o; i++) {
            int u = ulp_dist(want[i], P.h_o[i]);
            differ += u != 0;
            worst = u > worst ? u : worst;
        }
        printf("contiguous_matches_paged: splits %d: %s (%zu of %zu elements differ, max %d "
               "ulp)\n", splits[s], differ ? "within ulps" : "bit-identical", differ, C.n_o, worst);
        ck_assert_msg(worst <= 1, "splits %d: paged O differs from contiguous by %d ulp (%zu "
                      "elements differ)", splits[s], worst, differ);
    }
    free(want);
    teardown(&C), teardown(&P);
    fajit_ctx_destroy(ctx);
}
END_TEST

/*------ 3. checked_mode ------*/

START_TEST(checked_mode)
{
    const char *env = getenv("FAJIT_CHECKED");
    if (env && strcmp(env, "1") != 0) {
        printf("checked_mode: skipped: FAJIT_CHECKED=%s overrides opts.checked\n", env);
        return;
    }
    fajit_ctx *ctx = new_ctx(1);
    reseed(g_seed ^ 0xc4ec4edull);
    dcase c = {.batch = 2, .hkv = 2, .group = 4, .hd = 128, .dtype = FAJIT_BF16,
               .mask = FAJIT_MASK_CAUSAL, .q_len = 2, .seqlen_k = 200, .paged = 1,
               .page_size = 16, .use_seqused = 1, .full_table = 1, .spare = 5, .want_lse = 1,
               .preset_used = 1, .used = {200, 199}};   /* every page of both in use */
    dbufs B;
    setup(&B, &c, NULL);

    /* a good problem */
    fajit_status st = launch(ctx, &B, NULL);
    ck_assert_msg(st == FAJIT_OK, "good problem, checked: %s: %s", fajit_status_name(st),
                  fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "checked mode, good problem");

    /* bad page ids: past the pool, and negative */
    const struct { int b, i, value; } bad[] = {{1, 2, B.num_pages + 5}, {0, 0, -1}};
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; n++) {
        int32_t *e = &B.bt[bad[n].b * B.bt_stride + bad[n].i], keep = *e;
        *e = bad[n].value;
        upload_dynamic(&B);
        st = launch(ctx, &B, NULL);
        char want[64];
        snprintf(want, sizeof want, "block_table[%d][%d] = %d", bad[n].b, bad[n].i, bad[n].value);
        printf("checked_mode: planted %s: %s: %s\n", want, fajit_status_name(st), fajit_errmsg(ctx));
        ck_assert_msg(st == FAJIT_INVALID_ARGUMENT, "planted %s: got %s (%s)", want,
                      fajit_status_name(st), fajit_errmsg(ctx));
        ck_assert_msg(strstr(fajit_errmsg(ctx), want) != NULL, "planted %s, message: %s", want,
                      fajit_errmsg(ctx));
        *e = keep;
    }

    /* a used length beyond what the block table addresses */
    const int over = (int)(B.bt_stride * c.page_size) + 3, keep = B.used[0];
    B.used[0] = over;
    upload_dynamic(&B);
    st = launch(ctx, &B, NULL);
    char want[64];
    snprintf(want, sizeof want, "seqused_k[0] = %d", over);
    printf("checked_mode: planted %s: %s: %s\n", want, fajit_status_name(st), fajit_errmsg(ctx));
    ck_assert_msg(st == FAJIT_INVALID_ARGUMENT, "planted %s: got %s (%s)", want,
                  fajit_status_name(st), fajit_errmsg(ctx));
    ck_assert_msg(strstr(fajit_errmsg(ctx), "seqused_k") != NULL, "planted %s, message: %s",
                  want, fajit_errmsg(ctx));
    B.used[0] = keep;

    /* and the context is fine afterwards: the good problem again */
    upload_dynamic(&B);
    st = launch(ctx, &B, NULL);
    ck_assert_msg(st == FAJIT_OK, "good problem after the bad ones: %s: %s", fajit_status_name(st),
                  fajit_errmsg(ctx));
    fetch(&B);
    check_against_reference(&B, "checked mode, good problem again");
    printf("checked_mode: good problem OK before and after 3 planted bad indices\n");
    teardown(&B);
    fajit_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    g_rowrel = env_int("FAJIT_TEST_DECODE_ROWREL", 1);
    char more[64];
    snprintf(more, sizeof more, ", %d sweep cases", env_int("FAJIT_TEST_DECODE_CASES", 200));
    int rc = gpu_harness_start("gpu-decode", more);
    if (rc)
        return rc;
    Suite *s = suite_create("gpu-decode");   /* one case alone: CK_RUN_CASE=<name> */
    gpu_harness_add(s, "paged_sweep", paged_sweep, 3600);
    gpu_harness_add(s, "prefill_sweep", prefill_sweep, 1800);
    gpu_harness_add(s, "contiguous_matches_paged", contiguous_matches_paged, 600);
    gpu_harness_add(s, "checked_mode", checked_mode, 600);
    gpu_decode_graph_cases(s);
    gpu_decode_merge_cases(s);
    gpu_decode_plans_cases(s);
    return gpu_harness_run(s);
}
