/* nvrtc_build.c - dev tool: compile attn_fwd_sm80.cu for one variant with NVRTC, the way
 * the library does (preamble of #defines, headers supplied by name, -std=c++17
 * -default-device --ptxas-options=-v -DFJ_NVRTC=1 -arch=sm_XX), write the CUBIN, and print
 * one line: "arch dtype hd mask bm bn warps stages regs spill_st spill_ld stack smem ms".
 * Usage: nvrtc_build SRC_DIR ARCH DTYPE HD MASK BM BN WARPS STAGES [OUT.cubin] [-log]
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

#define CK(x) do { nvrtcResult r_ = (x); if (r_ != NVRTC_SUCCESS) { fprintf(stderr, "%s: %s\n", #x, nvrtcGetErrorString(r_)); fail = 1; } } while (0)

int main(int argc, char **argv)
{
    if (argc < 10) { fprintf(stderr, "usage: see source\n"); return 2; }
    const char *dir = argv[1], *arch = argv[2];
    int show_log = argc > 11 && !strcmp(argv[11], "-log");
    char *src = slurp(dir, "attn_fwd_sm80.cu");
    const char *hn[2] = {"fj_common.cuh", "fajit_params.h"};
    const char *ht[2] = {slurp(dir, "fj_common.cuh"), slurp(dir, "fajit_params.h")};
    char *text = malloc(strlen(src) + 1024);
    sprintf(text,
            "#define FJ_DTYPE %s\n#define FJ_HEAD_DIM %s\n#define FJ_MASK %s\n#define FJ_BLOCK_M %s\n"
            "#define FJ_BLOCK_N %s\n#define FJ_WARPS %s\n#define FJ_STAGES %s\n#line 1 \"attn_fwd_sm80.cu\"\n%s",
            argv[3], argv[4], argv[5], argv[6], argv[7], argv[8], argv[9], src);
    char archopt[64];
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    const char *opts[] = {archopt, "-std=c++17", "-default-device", "--ptxas-options=-v", "-DFJ_NVRTC=1", NULL};
    int nopt = 5;
    if (getenv("FA2_EXTRA") && *getenv("FA2_EXTRA")) opts[nopt++] = getenv("FA2_EXTRA"); /* one extra option, e.g. -DFA2_QK_UNROLL=2 */
    nvrtcProgram prog;
    int fail = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CK(nvrtcCreateProgram(&prog, text, "attn_fwd_sm80.cu", 2, ht, hn));
    nvrtcResult cr = nvrtcCompileProgram(prog, nopt, opts);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    size_t ls;
    nvrtcGetProgramLogSize(prog, &ls);
    char *log = malloc(ls + 1);
    nvrtcGetProgramLog(prog, log);
    log[ls] = 0;
    if (cr != NVRTC_SUCCESS || show_log) fprintf(stderr, "%s\n", log);
    if (cr != NVRTC_SUCCESS) { printf("%s %s %s %s %s %s %s %s FAIL\n", arch, argv[3], argv[4], argv[5], argv[6], argv[7], argv[8], argv[9]); return 1; }
    const char *u = strstr(log, "Used ");
    int regs = u ? atoi(u + 5) : -1;
    int smem = u ? num_before(u, "bytes smem") : -1;
    printf("%s %s %s %s %s %s %s %s regs=%d spill_st=%d spill_ld=%d stack=%d smem=%d ms=%.0f%s\n", arch, argv[3],
           argv[4], argv[5], argv[6], argv[7], argv[8], argv[9], regs, num_before(log, "bytes spill stores"),
           num_before(log, "bytes spill loads"), num_before(log, "bytes stack frame"), smem,
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
           strstr(log, "warning") ? " WARN" : "");
    if (argc > 10 && strcmp(argv[10], "-")) {
        size_t n;
        CK(nvrtcGetCUBINSize(prog, &n));
        char *c = malloc(n);
        CK(nvrtcGetCUBIN(prog, c));
        FILE *f = fopen(argv[10], "wb");
        fwrite(c, 1, n, f);
        fclose(f);
    }
    return fail;
}
