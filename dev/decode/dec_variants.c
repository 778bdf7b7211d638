/* dec_variants.c - lab tool: the decode kernel's (src/kernels_src/attn_decode.cu) variants as
 * the library makes them, compiled from a source directory on disk, one CUBIN each. Used by
 * sass_same.sh to show that an edit of the kernel's sources changes no compiled code.
 *
 * The variants are the library's own (the decode family's table, through the registry), so
 * the preambles are exactly what a context compiles:
 *   - what `fajit-tune warm` compiles for the target (fj_warm_variants, attn_decode.cu only):
 *     every head_dim 8..256, both dtypes, the shipped tiles;
 *   - the decode family's defaults for a grid of problems (head_dim 32..256, fp16/bf16,
 *     contiguous and paged (page 16, 64), q_len 1, 4 and 16, 1/4/8 query heads per KV head,
 *     checked mode, FAJIT_DECODE_LOADER=auto|cpasync|tma, FAJIT_DECODE_HEAD_PACK=
 *     auto|off|2|4: both loaders, head packing 1/2/4, split and combine steps) and its
 *     tuning candidates for part of it (other tiles and warp layouts);
 *   - on sm_90 and later, the mixed family's kernels (the decode split and combine steps in
 *     their FJ_DEC_QMAX variant) over head_dim, dtype, mask, page size and head ratio.
 * Duplicates (same entry and preamble) are compiled once.
 *
 * usage: dec_variants list ARCH...                 one line per variant: arch, entry, name
 *        dec_variants build SRC_DIR OUT_DIR ARCH... compile each from SRC_DIR (the .cu and
 *                                                  every .h/.cuh there, as NVRTC headers)
 *        into OUT_DIR/<arch>-<NNNN>.cubin; OUT_DIR/index.tsv lists file, entry, name and the
 *        preamble (newlines as "|"). Jobs: $JOBS, else the CPU count.
 * Build (from the repository root, after `meson compile -C build`):
 *   cc -O1 -std=c11 -o build/dec_variants dev/decode/dec_variants.c -Iinclude \
 *      -Isrc/kernels_src -Isrc/cache -Ibuild build/libfajit_internal.a -lsqlite3 -lxxhash \
 *      -ldl -lpthread -lm
 * No GPU: NVRTC only (the library's loader finds it, FAJIT_NVRTC_PATH overrides). */
#define _GNU_SOURCE   /* popen, strdup */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/api/internal.h"
#include "../../src/families/decode.h"   /* fj_dec_opts: the loader and packing options */

enum { MAX_VARIANTS = 8192, MAX_HEADERS = FJ_NVRTC_MAX_HEADERS };

typedef struct item {
    const char *arch;
    fj_variant v;
} item;

static item g_items[MAX_VARIANTS];
static int g_n, g_quick;

/* QUICK=1: one variant per family of code paths, for fast iterations (the whole set is the
 * proof): the preamble without the tile's keys and depth, head_dim as its class (a multiple
 * of 64: swizzled rows and TMA boxes; of 16; of 8; above 128). */
static void quick_key(const fj_variant *v, char *out, size_t n)
{
    int hd = 0;
    const char *h = strstr(v->preamble, "FJ_HEAD_DIM ");
    if (h)
        hd = atoi(h + 12);
    size_t k = (size_t)snprintf(out, n, "%s|%d|%d|", v->function,
                                hd > 128 ? 3 : hd % 64 == 0 ? 2 : hd % 16 == 0 ? 1 : 0,
                                hd % 64 == 0 && hd > 128);
    for (const char *p = v->preamble; *p && k + 1 < n;) {
        const char *e = strchr(p, '\n');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (strncmp(p, "#define FJ_DEC_BN ", 18) && strncmp(p, "#define FJ_DEC_STAGES ", 22) &&
            strncmp(p, "#define FJ_HEAD_DIM ", 20))
            k += (size_t)snprintf(out + k, n - k, "%.*s;", (int)len, p);
        p += len + (e != NULL);
    }
}

static void add(const char *arch, const fj_variant *v)
{
    if (strcmp(v->source, "attn_decode.cu") != 0)
        return;
    char key[600], other[600];
    if (g_quick)
        quick_key(v, key, sizeof key);
    for (int i = 0; i < g_n; i++) {
        if (g_items[i].arch != arch)
            continue;
        if (g_quick) {
            quick_key(&g_items[i].v, other, sizeof other);
            if (strcmp(key, other) == 0)
                return;
        } else if (strcmp(g_items[i].v.function, v->function) == 0 &&
                   strcmp(g_items[i].v.preamble, v->preamble) == 0) {
            return;
        }
    }
    if (g_n == MAX_VARIANTS) {
        fprintf(stderr, "more than %d variants\n", MAX_VARIANTS);
        exit(2);
    }
    g_items[g_n].arch = arch;
    g_items[g_n++].v = *v;
}

static void add_cfgs(const char *arch, const fj_kcfg *c, int n, const fajit_attn_desc *d)
{
    for (int k = 0; k < n; k++) {
        fj_kernels ks;
        c[k].fam->kernels(&c[k], d, &ks);
        for (int j = 0; j < ks.n; j++)
            add(arch, &ks.v[j]);
    }
}

/* A problem of the grid: B sequences of q_len rows (paged: page_size > 0; q_len 16 as a
 * varlen chunked prefill) over 8 KV heads. */
static fajit_attn_desc problem(int hd, int dt, int page, int q_len, int group)
{
    fajit_attn_desc d;
    void *ptr = (void *)(uintptr_t)0x100000;
    const int seqlen_k = 4096;
    fajit_attn_desc_init(&d, ptr, ptr, ptr, ptr, 4, 8 * group, 8, q_len, seqlen_k, hd,
                         (fajit_dtype)dt);
    if (page) {
        d.block_table = (const int32_t *)(uintptr_t)0x3000;
        d.page_size = page;
        d.block_table_stride = seqlen_k / page;
        d.num_pages = 4 * seqlen_k / page;
        if (q_len > 4) {
            d.cu_seqlens_q = (const int32_t *)(uintptr_t)0x5000;
            d.total_q = 4 * q_len;
        }
    }
    return d;
}

static void enumerate(const char *arch)
{
    static fj_variant vs[2000];
    const int sm = fj_arch_sm(arch), arch_a = fj_arch_is_a(arch);
    const int nw = fj_warm_variants(arch, vs, 2000);
    if (nw < 0) {
        fprintf(stderr, "fj_warm_variants(%s) failed\n", arch);
        exit(2);
    }
    for (int i = 0; i < nw; i++)
        add(arch, &vs[i]);

    static const int hds[] = {32, 48, 64, 96, 128, 256}, pages[] = {0, 16, 64};
    static const int qlens[] = {1, 4, 16}, groups[] = {1, 4, 8};
    static const int loaders[] = {FJ_DEC_LOADER_AUTO, FJ_DEC_LOADER_CPASYNC, FJ_DEC_LOADER_TMA};
    static const int packs[] = {FJ_DEC_PACK_AUTO, FJ_DEC_PACK_OFF, FJ_DEC_PACK_2, FJ_DEC_PACK_4};
    enum { MAX_CFGS = 64 };
    fj_kcfg c[MAX_CFGS];
#define N(a) (int)(sizeof(a) / sizeof(a)[0])
    for (int h = 0; h < N(hds); h++)
        for (int dt = 0; dt < 2; dt++)
            for (int pi = 0; pi < N(pages); pi++)
                for (int qi = 0; qi < N(qlens); qi++)
                    for (int g = 0; g < N(groups); g++)
                        for (int chk = 0; chk < 2; chk++)
                            for (int li = 0; li < N(loaders); li++)
                                for (int ki = 0; ki < N(packs); ki++) {
                                    const fajit_attn_desc d =
                                        problem(hds[h], dt, pages[pi], qlens[qi], groups[g]);
                                    fj_fopts fo;
                                    memset(&fo, 0, sizeof fo);
                                    fj_dec_opts *o = (fj_dec_opts *)(void *)
                                                         fo.b[FAJIT_FAMILY_DECODE];
                                    o->loader = loaders[li], o->pack = packs[ki];
                                    const fj_target t = {sm, arch_a, 132, chk, 0, &fo};
                                    if (!fj_family_decode.applies(&d, &t))
                                        continue;
                                    /* the tuning candidates (the default first) at fp16,
                                     * head_dim 64 and 128, q_len 1 and 4, unchecked; the
                                     * default elsewhere (candidates differ in tile sizes,
                                     * which the warm set and the defaults vary too) */
                                    const int cand = !chk && dt == 0 && qlens[qi] <= 4 &&
                                                     (hds[h] == 64 || hds[h] == 128);
                                    int n = 1;
                                    if (cand)
                                        n = fj_family_decode.candidates(&d, &t, c, MAX_CFGS);
                                    else
                                        fj_family_decode.default_cfg(&d, &t, c);
                                    add_cfgs(arch, c, n, &d);
                                }
    if (sm < 90)
        return;
    /* the mixed family: FJ_DEC_QMAX split and combine steps (as tests/test_nvrtc.c) */
    static const int mhds[] = {64, 128, 256}, mpages[] = {16, 64}, mgroups[] = {1, 4};
    const fj_target t = {sm, arch_a, 132, 0, 1, NULL};   /* FAJIT_PAGED_PREFILL=hopper */
    for (int h = 0; h < N(mhds); h++)
        for (int dt = 0; dt < 2; dt++)
            for (int m = 0; m < 3; m++)
                for (int pi = 0; pi < N(mpages); pi++)
                    for (int g = 0; g < N(mgroups); g++) {
                        fajit_attn_desc d = problem(mhds[h], dt, mpages[pi], 16, mgroups[g]);
                        d.heads_q = 8 * mgroups[g];
                        d.seqlen_q = 512, d.seqlen_k = 8192;
                        d.block_table_stride = 8192 / mpages[pi];
                        d.total_q = 1024;
                        d.mask = (fajit_mask)m;
                        fj_kcfg k;
                        if (fj_kcfg_default(&d, &t, FAJIT_FAMILY_AUTO, &k) != 0 ||
                            strcmp(k.fam->name, "mixed") != 0)
                            continue;
                        add_cfgs(arch, &k, 1, &d);
                    }
#undef N
}

/* ---- build ------------------------------------------------------------------------------ */

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return s;
}

static struct {
    const fj_nvrtc *nv;
    const char *out;
    fj_src main_src, hdr[MAX_HEADERS];
    int nh, next, failed;
    pthread_mutex_t mu;
} g_b = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&g_b.mu);
        const int i = g_b.next++;
        pthread_mutex_unlock(&g_b.mu);
        if (i >= g_n)
            return NULL;
        const item *it = &g_items[i];
        fj_compile_out co;
        char err[512], path[4096];
        if (fj_nvrtc_compile(g_b.nv, it->v.preamble, &g_b.main_src, g_b.hdr, g_b.nh, it->arch,
                             NULL, &co, err, sizeof err) != 0) {
            fprintf(stderr, "%s [%s]: %s\n%s\n", it->v.name, it->arch, err, co.log);
            pthread_mutex_lock(&g_b.mu);
            g_b.failed++;
            pthread_mutex_unlock(&g_b.mu);
            fj_compile_out_free(&co);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s-%04d.cubin", g_b.out, it->arch, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(co.cubin, 1, co.cubin_size, f) != co.cubin_size) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(2);
        }
        fclose(f);
        fj_compile_out_free(&co);
    }
}

static int build(const char *src_dir, const char *out)
{
    char why[2048];
    g_b.nv = fj_nvrtc_get(why, sizeof why);
    if (!g_b.nv) {
        fprintf(stderr, "no NVRTC: %s\n", why);
        return 2;
    }
    g_b.out = out;
    g_b.main_src.name = "attn_decode.cu";
    g_b.main_src.text = slurp(src_dir, "attn_decode.cu", &g_b.main_src.len);
    if (!g_b.main_src.text) {
        fprintf(stderr, "cannot read %s/attn_decode.cu\n", src_dir);
        return 2;
    }
    /* every header of the directory, as the library passes every embedded one */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "cd '%s' && ls *.h *.cuh 2>/dev/null", src_dir);
    FILE *ls = popen(cmd, "r");
    char name[256];
    while (ls && fgets(name, sizeof name, ls)) {
        name[strcspn(name, "\n")] = 0;
        if (g_b.nh == MAX_HEADERS) {
            fprintf(stderr, "more than %d headers\n", MAX_HEADERS);
            return 2;
        }
        fj_src *h = &g_b.hdr[g_b.nh++];
        h->name = strdup(name);
        h->text = slurp(src_dir, name, &h->len);
    }
    if (ls)
        pclose(ls);
    char path[4096];
    snprintf(path, sizeof path, "%s/index.tsv", out);
    FILE *ix = fopen(path, "w");
    if (!ix) {
        fprintf(stderr, "cannot write %s\n", path);
        return 2;
    }
    for (int i = 0; i < g_n; i++) {
        fprintf(ix, "%s-%04d.cubin\t%s\t%s\t", g_items[i].arch, i, g_items[i].v.function,
                g_items[i].v.name);
        for (const char *p = g_items[i].v.preamble; *p; p++)
            fputc(*p == '\n' ? '|' : *p, ix);
        fputc('\n', ix);
    }
    fclose(ix);
    const char *j = getenv("JOBS");
    int jobs = j ? atoi(j) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs < 1)
        jobs = 1;
    if (jobs > 64)
        jobs = 64;
    pthread_t tid[64];
    for (int i = 0; i < jobs; i++)
        pthread_create(&tid[i], NULL, worker, NULL);
    for (int i = 0; i < jobs; i++)
        pthread_join(tid[i], NULL);
    fprintf(stderr, "dec_variants: %d variants from %s, %d failed\n", g_n, src_dir, g_b.failed);
    return g_b.failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    const int is_list = argc >= 3 && strcmp(argv[1], "list") == 0;
    const int is_build = argc >= 5 && strcmp(argv[1], "build") == 0;
    if (!is_list && !is_build) {
        fprintf(stderr, "usage: %s list ARCH... | build SRC_DIR OUT_DIR ARCH...\n", argv[0]);
        return 2;
    }
    g_quick = getenv("QUICK") && atoi(getenv("QUICK")) > 0;
    for (int a = is_list ? 2 : 4; a < argc; a++)
        enumerate(argv[a]);
    /* EVERY=k: every k-th variant only (a compile check while editing, not a proof) */
    const int every = getenv("EVERY") ? atoi(getenv("EVERY")) : 1;
    if (every > 1) {
        int m = 0;
        for (int i = 0; i < g_n; i += every)
            g_items[m++] = g_items[i];
        g_n = m;
    }
    if (is_list) {
        for (int i = 0; i < g_n; i++)
            printf("%s\t%s\t%s\n", g_items[i].arch, g_items[i].v.function, g_items[i].v.name);
        fprintf(stderr, "dec_variants: %d variants\n", g_n);
        return 0;
    }
    return build(argv[2], argv[3]);
}
