/* test_gpu_tune.c - the `gpu` suite's tests of tuning and the policies (program test_gpu,
 * harness gpu_fwd.c): fajit_bench_spec's results, a tuned winner used by a new process
 * under STRICT without compiling, a STRICT miss, and FALLBACK serving the default while
 * the tuned kernel compiles in the background. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_fwd.h"

static fajit_ctx *policy_ctx(const char *dir, fajit_policy policy)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = dir;
    o.policy = policy;
    fajit_ctx *ctx = NULL;
    ck_assert_msg(fajit_ctx_create(&ctx, &o) == FAJIT_OK, "%s", fajit_errmsg(ctx));
    return ctx;
}

/* fajit_bench_spec: one result per shape of the spec, in spec order, with ordered
 * statistics of positive samples and the dispatch line of the kernel timed. */
typedef struct bench_seen {
    int n, sq[4], sk[4], page[4], kv[4], bad;
} bench_seen;

static void on_bench(void *user, const fajit_bench_result *r)
{
    bench_seen *s = user;
    int ok = r->reps == 7 && r->min_ms > 0 && r->min_ms <= r->p10_ms &&
             r->p10_ms <= r->median_ms && r->median_ms <= r->p90_ms && r->p90_ms <= r->max_ms &&
             r->kernel[0] && strcmp(r->problem, s->n < 2 ? "b" : s->n < 3 ? "p" : "f") == 0 &&
             r->desc->heads_q == 8 && !r->desc->block_table == !r->desc->page_size;
    for (int k = 0; k < r->reps; k++)
        ok = ok && r->samples_ms[k] >= r->min_ms && r->samples_ms[k] <= r->max_ms;
    s->bad += !ok;
    if (s->n < 4)
        s->sq[s->n] = r->desc->seqlen_q, s->sk[s->n] = r->desc->seqlen_k,
        s->page[s->n] = r->desc->page_size, s->kv[s->n] = r->desc->kv_dtype;
    s->n++;
}

START_TEST(bench_spec)
{
    char dir[64], spec[96];
    tmp_dir(dir, sizeof dir, "bench");
    snprintf(spec, sizeof spec, "%s/b.spec", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model b]\ndtype = bf16\nhead_dim = 64\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\nprefill = 256\ndecode = 1k\n"
          "[model p]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\npage_size = 16\ndecode = 1000\n"
          "[model f]\ndtype = bf16\nhead_dim = 128\nheads_q = 8\nheads_kv = 2\n"
          "mask = causal\npage_size = 16\nkv_dtype = e4m3\ndecode = 1000\n", f);
    fclose(f);
    fajit_ctx *ctx = new_ctx(dir);
    bench_seen s = {0};
    ck_assert_msg(fajit_bench_spec(ctx, spec, 7, on_bench, &s) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    ck_assert_int_eq(s.n, 4);   /* the FP8 cache's decode too */
    ck_assert_int_eq(s.bad, 0);
    ck_assert(s.sq[0] == 256 && s.sk[0] == 256 && s.sq[1] == 1 && s.sk[1] == 1024);
    ck_assert(s.page[0] == 0 && s.page[1] == 0 && s.page[2] == 16 && s.sk[2] == 1000);
    ck_assert(s.kv[2] == FAJIT_KV_AS_Q && s.kv[3] == FAJIT_KV_E4M3 && s.page[3] == 16);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/* fajit_tune_spec over an FP8 (e4m3) paged cache: every candidate checked against the
 * reference kernel on the dequantized twin, a winner stored under the FP8 signature, which
 * a second tune finds without measuring. */
static void on_tune(void *user, const fajit_tune_result *r)
{
    fajit_tune_result *last = user;
    *last = *r;
    printf("tune fp8: %s %s: %d candidates, %d pruned, default %s %.4f ms, winner %s %.4f ms\n",
           r->signature, r->bucket, r->candidates, r->pruned, r->default_config,
           r->default_ms, r->winner, r->winner_ms);
}

START_TEST(tune_fp8_spec)
{
    char dir[64], spec[96];
    tmp_dir(dir, sizeof dir, "tune-fp8");
    snprintf(spec, sizeof spec, "%s/f.spec", dir);
    FILE *f = fopen(spec, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[model f]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\n"
          "mask = causal\npage_size = 16\nkv_dtype = e4m3\ndecode = 2k\nbatch = 4\n", f);
    fclose(f);
    fajit_ctx *ctx = new_ctx(dir);
    fajit_tune_opts o;
    fajit_tune_opts_init(&o);
    o.reps = 5;
    fajit_tune_result r;
    memset(&r, 0, sizeof r);
    ck_assert_msg(fajit_tune_spec(ctx, spec, &o, on_tune, &r) == FAJIT_OK, "%s",
                  fajit_errmsg(ctx));
    ck_assert_msg(strstr(r.signature, ".kv-e4m3"), "%s", r.signature);
    ck_assert(r.candidates >= 2 && r.pruned < r.candidates && r.winner[0] && r.winner_ms > 0);
    ck_assert_int_eq(r.from_cache, 0);
    fajit_tune_result again;
    ck_assert_int_eq(fajit_tune_spec(ctx, spec, &o, on_tune, &again), FAJIT_OK);
    ck_assert_int_eq(again.from_cache, 1);
    ck_assert_str_eq(again.winner, r.winner);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/* Tune, then a new process uses the winner under STRICT without measuring or compiling. */
START_TEST(tune_then_new_process)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "tune");
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_BLOCKING);
    fajit_tune_opts o;
    fajit_tune_opts_init(&o);
    o.reps = 10;
    fajit_tune_result r;
    double t0 = now_s();
    fajit_status st = fajit_tune(ctx, &B.desc, &o, &r);
    ck_assert_msg(st == FAJIT_OK, "tune: %s", fajit_errmsg(ctx));
    printf("tune: %s %s: %d candidates, %d pruned, default %s %.4f ms, winner %s %.4f ms "
           "(%.1f s)\n", r.signature, r.bucket, r.candidates, r.pruned, r.default_config,
           r.default_ms, r.winner, r.winner_ms, now_s() - t0);
    ck_assert_int_ge(r.candidates, 2);
    ck_assert_int_eq(r.from_cache, 0);
    /* asked again: the stored row is kept, nothing measured */
    fajit_tune_result again;
    ck_assert_int_eq(fajit_tune(ctx, &B.desc, &o, &again), FAJIT_OK);
    ck_assert_int_eq(again.from_cache, 1);
    ck_assert_str_eq(again.winner, r.winner);
    teardown(&B);
    fajit_ctx_destroy(ctx);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --use-tuned %s %s", (int)getpid(), dir, r.winner);
    ck_assert_msg(system(cmd) == 0, "the new process did not use the winner");
    rm_dir(dir);
}
END_TEST

static const char *g_child_dir, *g_child_winner;

START_TEST(use_tuned_test)
{
    const char *dir = g_child_dir, *winner = g_child_winner;
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_STRICT);
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    char line[512];
    fajit_dispatch_describe(ctx, NULL, &B.desc, line, sizeof line);
    printf("new process: %s\n", line);
    fj_kcfg w;
    char name[32];
    ck_assert_int_eq(fj_kcfg_parse(winner, &w), 0);
    fj_kernels ks;
    w.fam->kernels(&w, &B.desc, &ks);
    const fj_variant v = ks.v[0];
    ck_assert_msg(strncmp(line, v.name, strlen(v.name)) == 0, "dispatch is not the winner %s",
                  winner);
    fj_kcfg_name(&w, name);
    teardown(&B);
    check_against_reference(ctx, &c);   /* STRICT: a miss would fail here */
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    printf("new process: winner %s used, %llu compiles, %llu disk hits\n", name,
           (unsigned long long)cnt.compiles, (unsigned long long)cnt.hits_disk);
    ck_assert_uint_eq(cnt.compiles, 0);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The child side of tune_then_new_process (test_gpu --use-tuned DIR CONFIG), in its own
 * runner (assertions need one). */
int gpu_use_tuned(const char *dir, const char *winner)
{
    g_child_dir = dir, g_child_winner = winner;
    Suite *s = suite_create("gpu-child");
    gpu_harness_add(s, "use-tuned", use_tuned_test, 300);
    return gpu_harness_run(s);
}

START_TEST(strict_miss)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "strict");
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_STRICT);
    tc c;
    tune_case(&c);
    bufs B;
    setup(&c, &B);
    ck_assert_int_eq(fajit_attn_fwd(ctx, &B.desc, NULL), FAJIT_CACHE_MISS);
    fajit_counters cnt;
    fajit_counters_get(ctx, &cnt);
    ck_assert_uint_eq(cnt.compiles, 0);
    ck_assert_uint_eq(cnt.calls, 0);
    teardown(&B);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

/* FALLBACK with a tuned row whose kernel is not compiled: the first call returns without
 * compiling (the default runs), the exact kernel arrives in the background; both right. */
START_TEST(fallback_never_blocks)
{
    char dir[64];
    tmp_dir(dir, sizeof dir, "fallback");
    tc c;
    tune_case(&c);
    fajit_ctx *ctx = policy_ctx(dir, FAJIT_POLICY_BLOCKING);
    check_against_reference(ctx, &c);   /* compiles the default and the reference */
    fajit_ctx_destroy(ctx);

    bufs B;
    setup(&c, &B);
    fj_kcfg dc, cand[48], other;
    const fj_target h200 = {90, 1, 132, 0, 0, NULL};
    fj_kcfg_default(&B.desc, &h200, FAJIT_FAMILY_AUTO, &dc);
    int n = fj_kcfg_candidates(&B.desc, &h200, cand, 48);
    ck_assert_int_ge(n, 2);
    other = cand[1];   /* candidate 0 is the default */
    fj_cache *cache;
    fj_cache_open(&cache, dir, NULL, NULL);
    fj_tune_row row;
    memset(&row, 0, sizeof row);
    CUdevice dev;
    cu->cuDeviceGet(&dev, 0);
    cu->cuDeviceGetName(row.gpu_name, sizeof row.gpu_name, dev);
    snprintf(row.arch, sizeof row.arch, "sm_90a");
    cu->cuDeviceGetAttribute(&row.sm_count, FJ_CU_ATTR_SM_COUNT, dev);
    fj_desc_signature(&B.desc, row.signature, sizeof row.signature);
    fj_desc_bucket(&B.desc, row.sm_count, row.bucket, sizeof row.bucket);
    fj_kcfg_name(&other, row.config);
    ck_assert_int_eq(fj_cache_tune_put(cache, &row), 0);
    fj_cache_close(cache);
    teardown(&B);

    ctx = policy_ctx(dir, FAJIT_POLICY_FALLBACK);
    double t0 = now_s();
    check_against_reference(ctx, &c);
    double first = now_s() - t0;
    fajit_counters cnt;
    for (int i = 0; i < 600; i++) {
        fajit_counters_get(ctx, &cnt);
        if (cnt.background_compiles)
            break;
        usleep(50 * 1000);
    }
    double ready = now_s() - t0;
    usleep(10000);
    check_against_reference(ctx, &c);
    fajit_counters_get(ctx, &cnt);
    printf("fallback: first call (and its check) %.1f ms with the default kernel, tuned %s "
           "ready after %.1f ms; %llu serving compiles, %llu background, %llu fallback "
           "launches\n", first * 1e3, row.config, ready * 1e3,
           (unsigned long long)cnt.serving_compiles, (unsigned long long)cnt.background_compiles,
           (unsigned long long)cnt.fallback_launches);
    ck_assert_uint_eq(cnt.serving_compiles, 0);
    ck_assert_uint_eq(cnt.background_compiles, 1);
    ck_assert_uint_ge(cnt.fallback_launches, 1);
    fajit_ctx_destroy(ctx);
    rm_dir(dir);
}
END_TEST

void gpu_tune_tests(TCase *tc)
{
    tcase_add_test(tc, bench_spec);
    tcase_add_test(tc, tune_fp8_spec);
    tcase_add_test(tc, strict_miss);
    tcase_add_test(tc, tune_then_new_process);
    tcase_add_test(tc, fallback_never_blocks);
}
