/* nvrtc_build.c - dev tool: compile src/kernels_src/attn_fwd_sm90.cu for one variant with
 * NVRTC the way the library does (a preamble of #defines, the two headers supplied by
 * name, -std=c++17 -default-device --ptxas-options=-v), write the CUBIN (and PTX), and
 * print one line:
 *   "<defines> regs=R spill_st=S spill_ld=L stack=F smem=M ms=T warn=C75xx,..."
 * Usage: nvrtc_build SRC_DIR ARCH OUT.cubin|- NAME=VALUE... [-log] [-ptx OUT.ptx]
 * Build: cc -O2 -o nvrtc_build nvrtc_build.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvrtc
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(n + 1);
    if (fread(b, 1, n, f) != (size_t)n) exit(2);
    b[n] = 0;
    fclose(f);
    return b;
}

static int num_before(const char *log, const char *what)
{
    const char *p = strstr(log, what);
    if (!p) return 0;
    while (p > log && p[-1] == ' ') p--;
    while (p > log && p[-1] >= '0' && p[-1] <= '9') p--;
    return atoi(p);
}

int main(int argc, char **argv)
{
    if (argc < 4) { fprintf(stderr, "usage: see source\n"); return 2; }
    const char *dir = argv[1], *arch = argv[2], *out = argv[3];
    int show_log = 0;
    const char *ptx_out = NULL;
    char *pre = calloc(1, 8192), *tag = calloc(1, 4096);
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "-log")) { show_log = 1; continue; }
        if (!strcmp(argv[i], "-ptx") && i + 1 < argc) { ptx_out = argv[++i]; continue; }
        char buf[256];
        snprintf(buf, sizeof buf, "%s", argv[i]);
        char *eq = strchr(buf, '=');
        if (!eq) { fprintf(stderr, "bad define %s\n", argv[i]); return 2; }
        *eq = ' ';
        strcat(pre, "#define ");
        strcat(pre, buf);
        strcat(pre, "\n");
        strcat(tag, argv[i]);
        strcat(tag, " ");
    }
    char *src = slurp(dir, "attn_fwd_sm90.cu");
    enum { NH = 7 };
    const char *hn[NH] = {"fj_common.cuh", "fajit_params.h", "fj_sm90_prims.cuh",
                          "fj_sm90_sched.cuh", "fj_sm90_consumer.cuh", "fj_tile_order.h",
                          "fj_exp2.cuh"};
    const char *ht[NH];
    for (int h = 0; h < NH; h++)
        ht[h] = slurp(dir, hn[h]);
    char *text = malloc(strlen(src) + strlen(pre) + 64);
    sprintf(text, "%s#line 1 \"attn_fwd_sm90.cu\"\n%s", pre, src);
    char archopt[64];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[] = {archopt, "-std=c++17", "-default-device", "--ptxas-options=-v", "-DFJ_NVRTC=1"};
    nvrtcProgram prog;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (nvrtcCreateProgram(&prog, text, "attn_fwd_sm90.cu", NH, ht, hn) != NVRTC_SUCCESS) return 3;
    nvrtcResult cr = nvrtcCompileProgram(prog, 5, opts);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    size_t ls;
    nvrtcGetProgramLogSize(prog, &ls);
    char *log = malloc(ls + 1);
    nvrtcGetProgramLog(prog, log);
    log[ls] = 0;
    if (cr != NVRTC_SUCCESS || show_log) fprintf(stderr, "%s\n", log);
    if (cr != NVRTC_SUCCESS) { printf("%sFAIL\n", tag); return 1; }
    char warn[256] = "";
    for (const char *w = log; (w = strstr(w, "C75")); w += 5) {
        char code[8];
        snprintf(code, sizeof code, "%.5s", w);
        if (!strstr(warn, code)) { if (*warn) strcat(warn, ","); strcat(warn, code); }
    }
    if (!*warn && strstr(log, "warning")) strcpy(warn, "other");
    const char *u = strstr(log, "Used ");
    printf("%sregs=%d spill_st=%d spill_ld=%d stack=%d smem=%d ms=%.0f warn=%s\n", tag, u ? atoi(u + 5) : -1,
           num_before(log, "bytes spill stores"), num_before(log, "bytes spill loads"),
           num_before(log, "bytes stack frame"), u ? num_before(u, "bytes smem") : -1,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, *warn ? warn : "none");
    if (strcmp(out, "-")) {
        size_t n;
        nvrtcGetCUBINSize(prog, &n);
        char *c = malloc(n);
        nvrtcGetCUBIN(prog, c);
        FILE *f = fopen(out, "wb");
        fwrite(c, 1, n, f);
        fclose(f);
    }
    if (ptx_out) {
        size_t n;
        nvrtcGetPTXSize(prog, &n);
        char *c = malloc(n);
        nvrtcGetPTX(prog, c);
        FILE *f = fopen(ptx_out, "wb");
        fwrite(c, 1, n - 1, f);
        fclose(f);
    }
    return 0;
}
