/* nvrtc_cc.c - lab tool: compile one kernel source with NVRTC the way src/jit/nvrtc.c does
 * (preamble of defines + "#line 1", embedded headers passed in memory, -std=c++17
 * -default-device --ptxas-options=-v -DFJ_NVRTC=1 -arch=ARCH) and print the log.
 * usage: nvrtc_cc ARCH SRC.cu HEADER_DIR "PREAMBLE" [OUT.cubin]
 * Build: cc -O1 -o nvrtc_cc nvrtc_cc.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnvrtc */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(n + 1);
    if (s && fread(s, 1, n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s ARCH SRC.cu HEADER_DIR PREAMBLE [OUT.cubin]\n", argv[0]);
        return 2;
    }
    /* every header the kernel sources include (src/kernels_src), passed in memory */
    const char *hdr_names[] = {"fajit_params.h", "fj_common.cuh", "fj_sm80_prims.cuh",
                               "fj_sm90_prims.cuh", "fj_dec_load_async.cuh",
                               "fj_dec_load_tma.cuh", "fj_dec_merge.cuh",
                               "fj_dec_merge_cluster.cuh", "fj_dec_merge_fused.cuh"};
    enum { NH = sizeof hdr_names / sizeof hdr_names[0] };
    const char *hdr_text[NH];
    char path[4096];
    for (int i = 0; i < NH; i++) {
        snprintf(path, sizeof path, "%s/%s", argv[3], hdr_names[i]);
        if (!(hdr_text[i] = slurp(path))) {
            fprintf(stderr, "cannot read %s\n", path);
            return 2;
        }
    }
    char *src = slurp(argv[2]);
    if (!src) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 2;
    }
    const char *name = strrchr(argv[2], '/') ? strrchr(argv[2], '/') + 1 : argv[2];
    size_t n = strlen(argv[4]) + strlen(src) + strlen(name) + 64;
    char *text = malloc(n);
    snprintf(text, n, "%s#line 1 \"%s\"\n%s", argv[4], name, src);
    char arch[64];
    snprintf(arch, sizeof arch, "-arch=%s", argv[1]);
    const char *opts[] = {arch, "-std=c++17", "-default-device", "--ptxas-options=-v", "-DFJ_NVRTC=1"};
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, text, name, NH, hdr_text, hdr_names) != NVRTC_SUCCESS)
        return 3;
    nvrtcResult r = nvrtcCompileProgram(prog, 5, opts);
    size_t ls = 0;
    nvrtcGetProgramLogSize(prog, &ls);
    char *log = malloc(ls + 1);
    nvrtcGetProgramLog(prog, log);
    log[ls] = 0;
    fputs(log, stdout);
    if (r == NVRTC_SUCCESS && argc > 5) {
        size_t cs = 0;
        nvrtcGetCUBINSize(prog, &cs);
        char *cubin = malloc(cs);
        nvrtcGetCUBIN(prog, cubin);
        FILE *f = fopen(argv[5], "wb");
        if (f) {
            fwrite(cubin, 1, cs, f);
            fclose(f);
        }
    }
    printf("RESULT %s\n", nvrtcGetErrorString(r));
    return r == NVRTC_SUCCESS ? 0 : 1;
}
