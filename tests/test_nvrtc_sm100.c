/* test_nvrtc_sm100.c - the Blackwell family (fa4, attn_fwd_sm100.cu) in the `nvrtc` suite:
 * every shipped and candidate variant compiles with NVRTC for sm_100a (and the defaults for
 * sm_103a), and the ptxas -v log of each says: no spills, no stack frame (local memory),
 * registers within the launch budget of its warp roles (65536 / threads), shared memory
 * within 227 KiB, TMEM within 512 columns, no warning at all (none of ptxas's C75xx
 * performance warnings, no front-end warning). The resource rules of the family's check()
 * and the tuner's candidate list are asserted too. No GPU: the kernel is compiled and
 * checked, never run here. FAJIT_DUMP_CUBINS=DIR also writes each cubin to DIR (for
 * dev/bw/sass_check.sh on a machine with nvdisasm). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../src/api/internal.h"
#include "../src/families/fa4.h"
#include "../src/kernels_src/fj_sm100_desc.cuh"
#include "embedded.h"

#define KIB 1024

static fajit_attn_desc desc_of(int dtype, int hd, int mask)
{
    fajit_attn_desc d;
    memset(&d, 0, sizeof d);
    d.op = FAJIT_OP_FWD;
    d.dtype = (fajit_dtype)dtype;
    d.head_dim = hd;
    d.mask = (fajit_mask)mask;
    return d;
}

/* One variant to compile and what to expect of it. */
typedef struct job {
    fj_variant v;
    fj_fa4_config c;
    int threads, dyn_smem, hd;
    const char *arch;
} job;

#define MAX_JOBS 256
static job g_jobs[MAX_JOBS];
static int g_n, g_next;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_fail[4096];
static double g_ms;

/* Appends the variants of `c[0..n)` for (dtype, hd, mask) on arch, deduplicated. */
static void add_jobs(const fj_fa4_config *c, int n, int dtype, int hd, int mask, const char *arch)
{
    fajit_attn_desc d = desc_of(dtype, hd, mask);
    for (int i = 0; i < n; i++) {
        fj_kcfg k;
        fj_kernels ks;
        fj_fa4_kcfg(&c[i], &k);
        k.fam->kernels(&k, &d, &ks);
        ck_assert_int_eq(ks.n, 1);
        int dup = 0;
        for (int j = 0; j < g_n && !dup; j++)
            dup = g_jobs[j].arch == arch && strcmp(g_jobs[j].v.preamble, ks.v[0].preamble) == 0;
        if (dup)
            continue;
        ck_assert_int_lt(g_n, MAX_JOBS);
        g_jobs[g_n++] = (job){ks.v[0], c[i], ks.threads[0], ks.dyn_smem[0], hd, arch};
    }
}

static void dump_cubin(const job *j, const fj_compile_out *out)
{
    const char *dir = getenv("FAJIT_DUMP_CUBINS");
    if (!dir || !*dir)
        return;
    mkdir(dir, 0755);
    char path[512];
    int at = snprintf(path, sizeof path, "%s/%s_", dir, j->arch);
    for (const char *p = j->v.name; *p && at < (int)sizeof path - 8; p++)
        path[at++] = *p == ' ' ? '_' : *p;
    snprintf(path + at, sizeof path - (size_t)at, ".cubin");
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(out->cubin, 1, out->cubin_size, f);
        fclose(f);
    }
}

/* Compiles one job and checks its log; a failure is appended to g_fail. */
static void run_job(const fj_nvrtc *nv, const fj_src *hdr, int nh, job *j)
{
    const fj_embedded *e = fj_embedded_find(j->v.source);
    fj_src main_src = {e->name, e->text, e->len};
    fj_compile_out out;
    char err[512], bad[1024] = "";
    int rc = fj_nvrtc_compile(nv, j->v.preamble, &main_src, hdr, nh, j->arch, NULL, &out, err,
                              sizeof err);
    const int budget = 65536 / j->threads / 8 * 8;
    const int tmem = fj_fa4_tmem_cols(&j->c, j->hd);
    if (rc != 0)
        snprintf(bad, sizeof bad, "does not compile: %s", err);
    else if (out.spill_bytes != 0 || out.stack_bytes > 0)
        snprintf(bad, sizeof bad, "%d B spills, %d B stack", out.spill_bytes, out.stack_bytes);
    else if (out.regs <= 0 || out.regs > budget)
        snprintf(bad, sizeof bad, "%d registers, budget %d for %d threads", out.regs, budget,
                 j->threads);
    else if (out.smem + j->dyn_smem > 227 * KIB)
        snprintf(bad, sizeof bad, "shared memory %d + %d B > 227 KiB", out.smem, j->dyn_smem);
    else if (tmem > 512 || fj_tmem_alloc_cols(tmem) == 0)
        snprintf(bad, sizeof bad, "TMEM %d columns > 512", tmem);
    else if (strstr(out.log, "(C75") || strstr(out.log, "warning"))
        snprintf(bad, sizeof bad, "a warning in the log");
    else if (out.cubin_size < 4 || memcmp(out.cubin, "\177ELF", 4) != 0)
        snprintf(bad, sizeof bad, "no ELF cubin");
    pthread_mutex_lock(&g_lock);
    if (bad[0]) {
        size_t at = strlen(g_fail);
        snprintf(g_fail + at, sizeof g_fail - at, "%s [%s]: %s\n%.600s\n", j->v.name, j->arch,
                 bad, out.log);
    } else {
        printf("nvrtc-sm100: %-44s [%s] %3d regs (budget %3d), %6d B smem, %3d TMEM cols, "
               "%4.0f ms\n", j->v.name, j->arch, out.regs, budget, j->dyn_smem, tmem, out.ms);
        g_ms += out.ms;
        dump_cubin(j, &out);
    }
    pthread_mutex_unlock(&g_lock);
    fj_compile_out_free(&out);
}

static void *worker(void *unused)
{
    (void)unused;
    char why[256];
    const fj_nvrtc *nv = fj_nvrtc_get(why, sizeof why);
    fj_src hdr[FJ_NVRTC_MAX_HEADERS];
    const int nh = fj_kernel_headers(hdr, FJ_NVRTC_MAX_HEADERS);
    if (nh < 0) {
        fprintf(stderr, "more than %d embedded headers\n", FJ_NVRTC_MAX_HEADERS);
        exit(1);
    }
    for (;;) {
        pthread_mutex_lock(&g_lock);
        int i = g_next < g_n ? g_next++ : -1;
        pthread_mutex_unlock(&g_lock);
        if (i < 0)
            return NULL;
        run_job(nv, hdr, nh, &g_jobs[i]);
    }
}

/* Every candidate and shipped variant on sm_100a (head_dim 64/96/128/192/256, every mask,
 * both dtypes) and the defaults on sm_103a, compiled on two threads. */
START_TEST(fa4_every_variant)
{
    static const int hdims[] = {64, 96, 128, 192, 256};
    char why[256];
    ck_assert_msg(fj_nvrtc_get(why, sizeof why) != NULL, "%s", why);
    g_n = g_next = 0;
    g_fail[0] = 0;
    for (int h = 0; h < 5; h++)
        for (int mask = 0; mask < 3; mask++) {
            for (int dt = 0; dt < 2; dt++) {
                fajit_attn_desc d = desc_of(dt, hdims[h], mask);
                const fj_target t = {100, 1, 0, 0, 0, NULL};
                ck_assert_msg(fj_family_fa4.applies(&d, &t), "fa4 hd%d mask %d", hdims[h], mask);
                fj_fa4_config c[8];
                int n = fj_fa4_candidates(hdims[h], mask, 100, c, 8);
                add_jobs(c, n, dt, hdims[h], mask, "sm_100a");
            }
            fj_fa4_config d103 = fj_fa4_default(hdims[h], mask, 103);
            add_jobs(&d103, 1, FAJIT_BF16, hdims[h], mask, "sm_103a");
        }
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker, NULL), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("nvrtc-sm100: %d variants (sm_100a candidates and shipped, sm_103a defaults), "
           "%.1f s compiling\n", g_n, g_ms / 1e3);
    if (g_fail[0])   /* (whole: the check library truncates long messages) */
        fprintf(stderr, "%s", g_fail);
    ck_assert_msg(g_fail[0] == 0, "%.3000s", g_fail);
}
END_TEST

/* The budgets of check(): TMEM, shared memory, shapes, target; candidates pass it. */
START_TEST(fa4_check_and_candidates)
{
    char why[256];
    fj_fa4_config c = {256, 128, 4, 10, 8, 1};
    ck_assert_int_eq(fj_fa4_check(&c, 128, 100, why, sizeof why), 0);
    ck_assert_int_eq(fj_fa4_tmem_cols(&c, 128), 512);
    ck_assert_int_eq(fj_fa4_check(&c, 128, 90, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "compute capability 10.0 or 10.3, got sm_90"));
    ck_assert_int_eq(fj_fa4_check(&c, 256, 100, why, sizeof why), -1);   /* 2*(128+256) */
    ck_assert_ptr_nonnull(strstr(why, "Tensor Memory: 768 columns > 512"));
    c.block_n = 128;
    ck_assert_int_eq(fj_fa4_check(&c, 192, 100, why, sizeof why), -1);   /* 2*(128+192) */
    ck_assert_ptr_nonnull(strstr(why, "640 columns"));
    c.stages = 8;
    ck_assert_int_eq(fj_fa4_check(&c, 128, 100, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "> 227 KiB"));
    c.stages = 4;
    ck_assert_int_eq(fj_fa4_check(&c, 80, 100, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "head_dim must be 64, 96, 128, 192 or 256, got 80"));
    c.block_n = 96;
    ck_assert_int_eq(fj_fa4_check(&c, 128, 100, why, sizeof why), -1);
    /* the defaults: sm_103 has no software exp2, head_dim 256 one Q tile */
    ck_assert_int_eq(fj_fa4_default(128, 0, 100).emu, 10);
    ck_assert_int_eq(fj_fa4_default(128, 0, 103).emu, 0);
    ck_assert_int_eq(fj_fa4_default(256, 1, 100).block_m, 128);
    ck_assert_int_eq(fj_fa4_default(192, 1, 100).block_n, 64);
    ck_assert_int_eq(fj_fa4_default(128, 1, 100).sched, 1);
    static const int hdims[] = {64, 96, 128, 192, 256};
    for (int h = 0; h < 5; h++)
        for (int mask = 0; mask < 3; mask++)
            for (int sm = 100; sm <= 103; sm += 3) {
                fj_fa4_config cs[8];
                int n = fj_fa4_candidates(hdims[h], mask, sm, cs, 8);
                fj_fa4_config d = fj_fa4_default(hdims[h], mask, sm);
                ck_assert_int_ge(n, 2);
                ck_assert_int_le(n, 6);
                ck_assert_mem_eq(&cs[0], &d, sizeof d);
                for (int i = 0; i < n; i++) {
                    ck_assert_msg(fj_fa4_check(&cs[i], hdims[h], sm, why, sizeof why) == 0,
                                  "%s", why);
                    /* the tuning-row name parses back to the same configuration */
                    fj_kcfg k, back;
                    char name[32];
                    fj_fa4_kcfg(&cs[i], &k);
                    fj_kcfg_name(&k, name);
                    ck_assert_int_eq(strncmp(name, "fa4:", 4), 0);
                    ck_assert_int_eq(fj_kcfg_parse(name, &back), 0);
                    ck_assert(fj_kcfg_same(&k, &back));
                }
            }
}
END_TEST

/* Dispatch: AUTO takes fa4 on sm_100a and sm_103a (not on sm_90a, sm_120); the tuner times
 * its candidates (its default first), then the portable family's. */
START_TEST(fa4_dispatch_and_tuner)
{
    fajit_attn_desc d = desc_of(FAJIT_BF16, 128, FAJIT_MASK_CAUSAL);
    d.seqlen_q = d.seqlen_k = 4096;
    const fj_target b200 = {100, 1, 148, 0, 0, NULL}, b300 = {103, 1, 148, 0, 0, NULL}, h200 = {90, 1, 132, 0, 0, NULL},
                    rtx = {120, 1, 84, 0, 0, NULL};
    ck_assert_ptr_eq(fj_family_choose(&d, &b200, FAJIT_FAMILY_AUTO), &fj_family_fa4);
    ck_assert_ptr_eq(fj_family_choose(&d, &b300, FAJIT_FAMILY_AUTO), &fj_family_fa4);
    ck_assert_ptr_ne(fj_family_choose(&d, &h200, FAJIT_FAMILY_AUTO), &fj_family_fa4);
    ck_assert_ptr_ne(fj_family_choose(&d, &rtx, FAJIT_FAMILY_AUTO), &fj_family_fa4);
    ck_assert_ptr_nonnull(fj_family_fa4.status_note);
    fj_kcfg c[48];
    int n = fj_kcfg_candidates(&d, &b200, c, 48), n4 = 0, others = 0;
    ck_assert_ptr_eq(c[0].fam, &fj_family_fa4);
    for (int i = 0; i < n; i++) {
        if (c[i].fam == &fj_family_fa4) {
            ck_assert_int_eq(others, 0);   /* fa4's candidates first */
            n4++;
        } else {
            others++;
        }
    }
    ck_assert_int_ge(n4, 4);
    ck_assert_int_gt(others, 0);
    /* the workspace of the dynamic order: one counter */
    fj_workspace ws = {0, 0, 0};
    fj_family_fa4.workspace(&c[0], &d, &b200, &ws);
    ck_assert_uint_eq(ws.counter_bytes, sizeof(int));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nvrtc-sm100");
    TCase *tc = tcase_create("fa4");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, fa4_check_and_candidates);
    tcase_add_test(tc, fa4_dispatch_and_tuner);
    tcase_add_test(tc, fa4_every_variant);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
