/* nvrtc.c - NVRTC loaded at run time (libnvrtc.so.13, else .12) and a compile call that
 * returns a CUBIN for one exact target plus the full log. Sources are given as named
 * in-memory headers, so no toolkit headers are needed at run time. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jit.h"

typedef struct _nvrtcProgram *nvrtcProgram;

struct fj_nvrtc {
    void *handle;
    int major, minor;
    const char *(*GetErrorString)(int);
    int (*Version)(int *, int *);
    int (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                         const char *const *, const char *const *);
    int (*DestroyProgram)(nvrtcProgram *);
    int (*CompileProgram)(nvrtcProgram, int, const char *const *);
    int (*GetCUBINSize)(nvrtcProgram, size_t *);
    int (*GetCUBIN)(nvrtcProgram, char *);
    int (*GetProgramLogSize)(nvrtcProgram, size_t *);
    int (*GetProgramLog)(nvrtcProgram, char *);
};

static struct fj_nvrtc g_nv;
static int g_ok;
static char g_why[1024];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int try_open(const char *path)
{
    size_t len = strlen(g_why);
    g_nv.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_nv.handle)
        snprintf(g_why + len, sizeof g_why - len, "%s%s", len ? ", " : "", path);
    return g_nv.handle != NULL;
}

static void load_once(void)
{
    char path[512];
    const char *env = getenv("FAJIT_NVRTC_PATH");
    const char *cuda_home = getenv("CUDA_HOME");
    int found = 0;
    g_why[0] = 0;
    if (env && strcmp(env, "none") == 0) {
        snprintf(g_why, sizeof g_why, "NVRTC disabled (FAJIT_NVRTC_PATH=none)");
        return;
    }
    if (env && *env) {
        /* An explicit path is an instruction, not a hint: when it fails, nothing else is
         * tried (a silent fallback would compile with another NVRTC than the one named). */
        if (!(found = try_open(env))) {
            const char *err = dlerror();
            snprintf(g_why, sizeof g_why, "FAJIT_NVRTC_PATH=%s could not be loaded: %s", env,
                     err ? err : "dlopen failed");
            return;
        }
    }
    for (int v = 13; !found && v >= 12; v--) {
        snprintf(path, sizeof path, "libnvrtc.so.%d", v);
        found = try_open(path);
        if (!found && cuda_home) {
            snprintf(path, sizeof path, "%s/lib64/libnvrtc.so.%d", cuda_home, v);
            found = try_open(path);
        }
        if (!found) {
            snprintf(path, sizeof path, "/usr/local/cuda/lib64/libnvrtc.so.%d", v);
            found = try_open(path);
        }
    }
    if (!found) {
        char tried[900];
        snprintf(tried, sizeof tried, "%.*s", (int)sizeof tried - 1, g_why);  /* bounded */
        snprintf(g_why, sizeof g_why, "NVRTC not found; tried: %s (set FAJIT_NVRTC_PATH)",
                 tried);
        return;
    }
    struct { void **slot; const char *name; } syms[] = {
        {(void **)&g_nv.GetErrorString, "nvrtcGetErrorString"},
        {(void **)&g_nv.Version, "nvrtcVersion"},
        {(void **)&g_nv.CreateProgram, "nvrtcCreateProgram"},
        {(void **)&g_nv.DestroyProgram, "nvrtcDestroyProgram"},
        {(void **)&g_nv.CompileProgram, "nvrtcCompileProgram"},
        {(void **)&g_nv.GetCUBINSize, "nvrtcGetCUBINSize"},
        {(void **)&g_nv.GetCUBIN, "nvrtcGetCUBIN"},
        {(void **)&g_nv.GetProgramLogSize, "nvrtcGetProgramLogSize"},
        {(void **)&g_nv.GetProgramLog, "nvrtcGetProgramLog"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(g_nv.handle, syms[i].name);
        if (!*syms[i].slot) {
            if (env && *env)
                snprintf(g_why, sizeof g_why, "FAJIT_NVRTC_PATH=%s is not NVRTC: it lacks %s",
                         env, syms[i].name);
            else
                snprintf(g_why, sizeof g_why, "NVRTC library lacks %s", syms[i].name);
            return;
        }
    }
    g_nv.Version(&g_nv.major, &g_nv.minor);
    g_ok = 1;
}

static _Atomic int g_hidden;

void fj_nvrtc_hide_for_testing(int hide) { g_hidden = hide; }

const fj_nvrtc *fj_nvrtc_get(char *why, size_t why_len)
{
    if (g_hidden) {
        if (why && why_len)
            snprintf(why, why_len, "NVRTC hidden (test)");
        return NULL;
    }
    pthread_once(&g_once, load_once);
    if (!g_ok && why && why_len)
        snprintf(why, why_len, "%s", g_why);
    return g_ok ? &g_nv : NULL;
}

void fj_nvrtc_version(const fj_nvrtc *n, int *major, int *minor)
{
    *major = n ? n->major : 0;
    *minor = n ? n->minor : 0;
}

/* Fixed options; the target goes in as -arch=sm_XX (real CUBIN, no PTX). */
static const char *const k_fixed_opts[] = {
    "-std=c++17", "-default-device", "--ptxas-options=-v",
    "-DFJ_NVRTC=1",
};
#define N_FIXED (int)(sizeof k_fixed_opts / sizeof k_fixed_opts[0])

void fj_nvrtc_options_text(const char *arch, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "-arch=%s", arch);
    for (int i = 0; i < N_FIXED && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, " %s", k_fixed_opts[i]);
}

static int find_int_before(const char *s, const char *what, int *out)
{
    /* "... 128 bytes stack frame" - read the integer that precedes `what`. */
    const char *p = strstr(s, what);
    if (!p)
        return 0;
    while (p > s && p[-1] == ' ')
        p--;
    const char *e = p;
    while (p > s && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == e)
        return 0;
    *out = atoi(p);
    return 1;
}

void fj_parse_ptxas_log(const char *log, int *regs, int *smem, int *spill, int *stack)
{
    const char *u = log ? strstr(log, "Used ") : NULL;
    *regs = *smem = *spill = *stack = -1;
    if (!log)
        return;
    if (u)
        *regs = atoi(u + 5);
    find_int_before(log, "bytes spill stores", spill);
    find_int_before(log, "bytes stack frame", stack);
    if (u) {
        const char *sm = strstr(u, "bytes smem");
        if (sm)
            find_int_before(u, "bytes smem", smem);
        else
            *smem = 0;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int fj_nvrtc_compile(const fj_nvrtc *n, const char *preamble, const fj_src *main,
                     const fj_src *headers, int n_headers, const char *arch,
                     const char *const *opts, fj_compile_out *out, char *err, size_t err_len)
{
    const char *hdr_text[FJ_NVRTC_MAX_HEADERS], *hdr_name[FJ_NVRTC_MAX_HEADERS], *all_opts[48];
    char arch_opt[64];
    nvrtcProgram prog = NULL;
    char *text = NULL;
    int rc = -1, n_opts = 0;
    double t0 = now_ms();

    memset(out, 0, sizeof *out);
    out->regs = out->smem = out->spill_bytes = out->stack_bytes = -1;
    if (n_headers > FJ_NVRTC_MAX_HEADERS) {
        snprintf(err, err_len, "too many headers (%d > %d)", n_headers, FJ_NVRTC_MAX_HEADERS);
        goto done;
    }
    size_t plen = strlen(preamble);
    text = malloc(plen + main->len + 64);
    if (!text) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    /* #line keeps compile errors pointing at lines of the real .cu file. */
    int hl = sprintf(text, "%s#line 1 \"%s\"\n", preamble, main->name);
    memcpy(text + hl, main->text, main->len);
    text[hl + main->len] = 0;
    for (int i = 0; i < n_headers; i++) {
        hdr_text[i] = headers[i].text;
        hdr_name[i] = headers[i].name;
    }
    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
    all_opts[n_opts++] = arch_opt;
    for (int i = 0; i < N_FIXED; i++)
        all_opts[n_opts++] = k_fixed_opts[i];
    for (int i = 0; opts && opts[i] && n_opts < 47; i++)
        all_opts[n_opts++] = opts[i];

    int r = n->CreateProgram(&prog, text, main->name, n_headers, hdr_text, hdr_name);
    if (r != 0) {
        snprintf(err, err_len, "nvrtcCreateProgram: %s", n->GetErrorString(r));
        goto done;
    }
    int cr = n->CompileProgram(prog, n_opts, all_opts);
    size_t log_size = 0;
    n->GetProgramLogSize(prog, &log_size);
    out->log = malloc(log_size + 1);
    if (out->log) {
        out->log[0] = 0;
        if (log_size)
            n->GetProgramLog(prog, out->log);
        out->log[log_size] = 0;
    }
    if (cr != 0) {
        snprintf(err, err_len, "nvrtcCompileProgram for %s: %s", arch, n->GetErrorString(cr));
        goto done;
    }
    if (n->GetCUBINSize(prog, &out->cubin_size) != 0 || !out->cubin_size) {
        snprintf(err, err_len, "nvrtcGetCUBINSize for %s returned nothing", arch);
        goto done;
    }
    out->cubin = malloc(out->cubin_size);
    if (!out->cubin || n->GetCUBIN(prog, out->cubin) != 0) {
        snprintf(err, err_len, "nvrtcGetCUBIN for %s failed", arch);
        goto done;
    }
    fj_parse_ptxas_log(out->log, &out->regs, &out->smem, &out->spill_bytes,
                       &out->stack_bytes);
    rc = 0;
done:
    if (prog)
        n->DestroyProgram(&prog);
    free(text);
    if (!out->log)
        out->log = calloc(1, 1);
    if (rc != 0) {
        free(out->cubin);
        out->cubin = NULL;
        out->cubin_size = 0;
    }
    out->ms = now_ms() - t0;
    return rc;
}

void fj_compile_out_free(fj_compile_out *o)
{
    if (!o)
        return;
    free(o->cubin);
    free(o->log);
    o->cubin = NULL;
    o->log = NULL;
}
