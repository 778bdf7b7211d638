/* test_unit_tune.c - the unit suite's TCase "autotune" (no GPU): the tuner's choice and
 * statistics with fake hooks, bucket and configuration names, and a family registered
 * through the registry alone (test_unit.c adds merge_validation to the same TCase). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "../src/autotune/spec.h"
#include "../src/autotune/tune.h"
#include "../src/families/fa2.h"
#include "../src/families/fa3.h"

/*------ the tuner's choice, with fake hooks ------*/

typedef struct fake_tuner {
    const double *ms;       /* true time of each candidate */
    int prune, wrong;       /* candidate pruned at compile, candidate that computes wrong */
    unsigned noise;         /* seed of the timing noise */
    int calls[8];
} fake_tuner;

static int f_prepare(void *u, int i, char *why, size_t n)
{
    fake_tuner *f = u;
    f->calls[i]++;
    if (i == f->prune) {
        snprintf(why, n, "spills 16 B, local memory 0 B");
        return -1;
    }
    return 0;
}

static int f_check(void *u, int i, char *why, size_t n)
{
    fake_tuner *f = u;
    if (i == f->wrong) {
        snprintf(why, n, "wrong result: max error 0.5 against the reference kernel");
        return -1;
    }
    return 0;
}

static int f_time(void *u, int i, double *s, int reps, char *why, size_t n)
{
    fake_tuner *f = u;
    (void)why, (void)n;
    for (int k = 0; k < reps; k++) {   /* +-1% noise, and one 3x outlier */
        f->noise = f->noise * 1103515245u + 12345u;
        s[k] = f->ms[i] * (0.99 + 0.02 * (f->noise >> 16 & 0x7fff) / 32767.0) * (k == 3 ? 3 : 1);
    }
    return 0;
}

static int run_fake(const double *ms, int n, int prune, int wrong, unsigned seed,
                    fj_tune_entry *e)
{
    fake_tuner f = {ms, prune, wrong, seed, {0}};
    fj_tune_hooks h = {f_prepare, f_check, f_time, NULL, &f};
    for (int i = 0; i < n; i++)
        snprintf(e[i].config, sizeof e[i].config, "cand%d", i);
    return fj_tune_run(e, n, &h, 21, 0.03);
}

START_TEST(tune_choice)
{
    fj_tune_entry e[5];
    /* clear winner */
    const double a[] = {1.0, 0.7, 0.9, 1.2};
    ck_assert_int_eq(run_fake(a, 4, -1, -1, 1, e), 1);
    /* deterministic under different noise */
    for (unsigned seed = 2; seed < 40; seed++)
        ck_assert_int_eq(run_fake(a, 4, -1, -1, seed, e), 1);
    /* inside the noise band the earlier (the default, index 0) wins, whatever the noise */
    const double b[] = {1.0, 0.985, 1.1};
    for (unsigned seed = 1; seed < 40; seed++)
        ck_assert_int_eq(run_fake(b, 3, -1, -1, seed, e), 0);
    /* pruned and wrong candidates never win, and say why */
    const double c[] = {1.0, 0.5, 0.6, 0.8};
    ck_assert_int_eq(run_fake(c, 4, 1, 2, 7, e), 3);
    ck_assert_int_eq(e[1].ok, 0);
    ck_assert_ptr_nonnull(strstr(e[1].why, "spills"));
    ck_assert_int_eq(e[2].ok, 0);
    ck_assert_ptr_nonnull(strstr(e[2].why, "wrong result"));
    /* the median ignores the outlier; the spread is stated */
    ck_assert_double_eq_tol(e[3].median_ms, 0.8, 0.01);
    ck_assert_double_le(e[3].spread, 0.05);
    /* the whole table is kept */
    char json[2048];
    fj_tune_table_json(e, 4, json, sizeof json);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "\"cand%d\"", i);
        ck_assert_ptr_nonnull(strstr(json, name));
    }
    ck_assert_ptr_nonnull(strstr(json, "spills 16 B"));
    /* everything pruned: no winner */
    const double d1[] = {1.0};
    ck_assert_int_eq(run_fake(d1, 1, 0, -1, 1, e), -1);
}
END_TEST

START_TEST(tune_stats)
{
    double s[] = {5, 1, 4, 2, 3};
    double med, spread;
    fj_tune_stats(s, 5, &med, &spread);
    ck_assert_double_eq(med, 3);
    ck_assert_double_eq_tol(spread, (5.0 - 1.0) / 3.0, 1e-12);
    double t[] = {2, 4};
    fj_tune_stats(t, 2, &med, &spread);
    ck_assert_double_eq(med, 3);
}
END_TEST

/* The plan cache's bucket index changes exactly where the tuning row's bucket name does. */
START_TEST(bucket_index_matches_names)
{
    static const int lens[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 511, 512, 513, 1000, 1024, 1025, 2048, 2049, 4096,
                               4097, 8192, 8193, 16384, 16385, 50000, 1 << 20};
    int n = (int)(sizeof lens / sizeof lens[0]);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            for (int c = 0; c < n; c++)
                for (int e = 0; e < n; e++) {
                    char x[FJ_BUCKET_LEN], y[FJ_BUCKET_LEN];
                    ck_assert_int_eq(fj_shape_bucket(lens[a], lens[b], x, sizeof x), 0);
                    ck_assert_int_eq(fj_shape_bucket(lens[c], lens[e], y, sizeof y), 0);
                    int same_name = strcmp(x, y) == 0;
                    int same_index = fj_bucket_index(lens[a], lens[b]) ==
                                     fj_bucket_index(lens[c], lens[e]);
                    ck_assert_msg(same_name == same_index, "(%d,%d)=%s vs (%d,%d)=%s",
                                  lens[a], lens[b], x, lens[c], lens[e], y);
                }
}
END_TEST

START_TEST(config_names)
{
    fj_fa2_config c = {128, 64, 4, 2};
    fj_kcfg k, back;
    char name[32];
    fj_fa2_kcfg(&c, &k);
    fj_kcfg_name(&k, name);
    ck_assert_str_eq(name, "128x64w4s2");   /* FA2 rows carry no prefix */
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&k, &back));
    ck_assert_int_eq(fj_kcfg_parse("128x64w4", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("128x64w4s2x", &back), -1);
    fj_fa3_kcfg(&(fj_fa3_config){128, 176, 1, 1, 2}, &k);
    fj_kcfg_name(&k, name);
    ck_assert_str_eq(name, "fa3:128x176o1p1s2");
    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
    ck_assert(fj_kcfg_same(&k, &back));
    ck_assert_int_eq(fj_kcfg_parse("fa3:128x176o1p1", &back), -1);
    ck_assert_int_eq(fj_kcfg_parse("ref", &back), 0);
    ck_assert_str_eq(back.fam->name, "ref");
    ck_assert_int_eq(fj_kcfg_parse("nope:1", &back), -1);
    /* dense, stable family values and names */
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_AUTO), "auto");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_REF), "ref");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA2), "fa2");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA3), "fa3");
    ck_assert_ptr_null(fajit_family_name((fajit_family)77));
    for (int i = 0; i < fj_family_count(); i++)
        ck_assert_int_eq(fj_family_at(i)->id, i + 1);
}
END_TEST

/*------ a family registered through the registry alone ------*/

/* "dummy": head_dim 72 on sm_90a only, a main kernel and a combine kernel sharing scratch
 * and a counter; rank above every shipped family. */
static int dm_applies(const fajit_attn_desc *d, const fj_target *t)
{
    return d->head_dim == 72 && t->sm == 90 && t->arch_a;
}
static void dm_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out);
static int dm_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    dm_default(d, t, out);
    return 1;
}
static int dm_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *w,
                    size_t n)
{
    (void)c, (void)d, (void)w, (void)n;
    return t->sm == 90 ? 0 : -1;
}
static void dm_name(const fj_kcfg *c, char *out, size_t n) { snprintf(out, n, "s%d", c->b[0]); }
static int dm_parse(const char *s, fj_kcfg *c);
static void dm_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    memset(out, 0, sizeof *out);
    out->n = 2;
    for (int i = 0; i < 2; i++) {
        out->v[i].op = FAJIT_OP_FWD;
        out->v[i].source = "attn_ref.cu";
        out->v[i].function = i ? "dummy_combine" : "dummy_main";
        snprintf(out->v[i].preamble, sizeof out->v[i].preamble,
                 "#define DUMMY %d\n#define S %d\n#define FJ_DTYPE %d\n", i, c->b[0],
                 (int)d->dtype);
        snprintf(out->v[i].name, sizeof out->v[i].name, "dummy %s d%d s%d",
                 i ? "combine" : "main", d->head_dim, c->b[0]);
        out->threads[i] = 64 * (i + 1);
    }
}
static void dm_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                    size_t n)
{
    (void)c, (void)d, (void)t;
    snprintf(out, n, "grid (splits, heads_q, batch)");
}
static void dm_ws(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                  fj_workspace *out)
{
    (void)c, (void)t;
    out->counter_bytes = 4;
    out->scratch_bytes = (size_t)d->batch * 4096;
}
static fajit_status dm_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                            const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    (void)c, (void)why, (void)n;
    a->grid[0] = 1, a->grid[1] = (unsigned)d->heads_q, a->grid[2] = (unsigned)d->batch;
    long long mark = 100 + i;
    fj_args_push(a, &mark, sizeof mark, 8);
    fj_args_push(a, &env->scratch, sizeof env->scratch, 8);
    fj_args_push(a, &env->counters, sizeof env->counters, 8);
    return FAJIT_OK;
}
static const fj_family k_dummy = {
    .name = "dummy", .id = 9, .op = FAJIT_OP_FWD, .rank = 100, .cfg_prefix = "dummy:",
    .applies = dm_applies, .default_cfg = dm_default, .candidates = dm_one, .shipped = dm_one,
    .check = dm_check, .cfg_name = dm_name, .cfg_parse = dm_parse, .kernels = dm_kernels,
    .describe_grid = dm_grid, .workspace = dm_ws, .launch_args = dm_args,
};
static void dm_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    (void)d, (void)t;
    memset(out, 0, sizeof *out);
    out->fam = &k_dummy;
    out->b[0] = 3;
}
static int dm_parse(const char *s, fj_kcfg *c)
{
    int v;
    char tail;
    if (sscanf(s, "s%d%c", &v, &tail) != 1)
        return -1;
    c->fam = &k_dummy;
    c->b[0] = (unsigned char)v;
    return 0;
}



START_TEST(registry_dummy_family)
{
    fj_family_register_for_testing(&k_dummy);
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.cache_dir = "";
    o.device = FAJIT_DEVICE_NONE;
    fajit_ctx *ctx;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 8, 128, 4096, 72, FAJIT_BF16);   /* prefill */
    char line[1024];

    /* plan: dispatch picks it where it applies, and shows both launches */
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "dummy main d72 s3 (default)") &&
                  strstr(line, "; then dummy combine d72 s3") &&
                  strstr(line, "entry dummy_combine"), "%s", line);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa2 bf16 d72") && !strstr(line, "dummy"), "%s", line);
    d.head_dim = 64;
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(!strstr(line, "dummy"), "%s", line);
    d.head_dim = 72;
    /* a forced family that applies wins over the dummy's rank */
    fajit_ctx_destroy(ctx);
    o.family = FAJIT_FAMILY_FA2;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, line, sizeof line), FAJIT_OK);
    ck_assert_msg(strstr(line, "fa2 bf16 d72"), "%s", line);
    fajit_ctx_destroy(ctx);

    /* warm: both kernels of the family, for sm_90a only */
    static fj_variant vs[1200];
    int n = fj_warm_variants("sm_90a", vs, 1200), mains = 0, combines = 0;
    for (int i = 0; i < n; i++) {
        mains += strncmp(vs[i].name, "dummy main d72", 14) == 0;
        combines += strncmp(vs[i].name, "dummy combine d72", 17) == 0;
    }
    ck_assert_int_eq(mains, 2);      /* f16 and bf16 */
    ck_assert_int_eq(combines, 2);
    n = fj_warm_variants("sm_80", vs, 1200);
    for (int i = 0; i < n; i++)
        ck_assert_msg(strncmp(vs[i].name, "dummy", 5) != 0, "%s on sm_80", vs[i].name);
    fj_kcfg k;
    ck_assert_int_eq(fj_kcfg_parse("dummy:s5", &k), 0);
    ck_assert_ptr_eq(k.fam, &k_dummy);

    /* launch: a plan of two kernels on one stream, with context scratch (stream-ordered,
     * given back after the launches) and a counter slot, or the caller's workspace */
    fj_cuda fake = fake_device_table();
    fake.cuLaunchKernel = dm_launch;
    fake.cuMemAlloc = f_alloc;
    fake.cuMemsetD8 = f_memset;
    fake.cuCtxSynchronize = f_sync;
    fake.cuMemFree = f_free;
    fake.cuCtxSetCurrent = f_setcur;
    fj_cuda_set_for_testing(&fake);
    g_count = 1, g_fail_get = 0;
    memset(&g_sc, 0, sizeof g_sc);
    memset(&g_dm, 0, sizeof g_dm);
    o.device = 0;
    o.family = FAJIT_FAMILY_AUTO;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    fj_kernel kk[2];
    memset(kk, 0, sizeof kk);
    fj_kplan kp;
    memset(&kp, 0, sizeof kp);
    dm_default(&d, NULL, &kp.cfg);
    k_dummy.kernels(&kp.cfg, &d, &kp.ks);
    kp.k[0] = &kk[0], kp.k[1] = &kk[1];
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_UNSUPPORTED);  /* no async alloc */
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "cuMemAllocAsync"));
    ck_assert_int_eq(g_dm.launches, 0);
    fake.cuMemAllocAsync = dm_alloc_async;
    fake.cuMemFreeAsync = dm_free_async;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_int_eq(g_dm.launches, 2);
    ck_assert(g_dm.mark[0] == 100 && g_dm.mark[1] == 101);   /* main, then combine */
    ck_assert_uint_eq(g_dm.threads[0], 64);
    ck_assert_uint_eq(g_dm.threads[1], 128);
    ck_assert_uint_eq(g_dm.allocated, 0x9000000 + 2 * 4096);
    ck_assert_uint_eq(g_dm.scratch[0], g_dm.allocated);
    ck_assert_uint_eq(g_dm.scratch[1], g_dm.allocated);
    ck_assert_uint_eq(g_dm.freed, g_dm.allocated);
    ck_assert_uint_eq(g_dm.counters[0], g_sc.alloc);   /* the ring's first slot */
    ck_assert_uint_eq(g_dm.counters[1], g_sc.alloc);
    /* the caller's workspace: counters first, scratch 256 bytes in */
    size_t need;
    ck_assert_int_eq(fajit_attn_workspace_size(ctx, &d, &need), FAJIT_OK);
    ck_assert_uint_eq(need, 256 + 2 * 4096);
    d.workspace = (void *)(uintptr_t)0x4000000;
    d.workspace_bytes = need - 1;
    g_dm.launches = 0;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "workspace_bytes must be at least 8448"));
    ck_assert_int_eq(g_dm.launches, 0);
    d.workspace_bytes = need;
    ck_assert_int_eq(fj_kplan_launch(ctx, &kp, &d, NULL), FAJIT_OK);
    ck_assert_uint_eq(g_dm.counters[0], 0x4000000);
    ck_assert_uint_eq(g_dm.scratch[1], 0x4000000 + 256);
    fajit_ctx_destroy(ctx);
    fj_cuda_set_for_testing(NULL);
    fj_family_register_for_testing(NULL);
}
END_TEST

TCase *fj_tcase_autotune(void)
{
    TCase *tt = tcase_create("autotune");
    tcase_set_timeout(tt, 120);   /* bucket_index_matches_names ran past 4 s under TSan in CI */
    tcase_add_test(tt, tune_choice);
    tcase_add_test(tt, tune_stats);
    tcase_add_test(tt, bucket_index_matches_names);
    tcase_add_test(tt, config_names);
    tcase_add_test(tt, registry_dummy_family);
    return tt;
}
