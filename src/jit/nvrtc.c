/* nvrtc.c - NVRTC loaded at run time and a compile call that returns a CUBIN for one
 * exact target plus the full log. Sources are given as named in-memory headers, so no
 * toolkit headers are needed at run time.
 *
 * Which NVRTC: the first of these that loads, once per process (README.md says why):
 *   1. FAJIT_NVRTC_PATH: that file and nothing else ("none": no NVRTC at all);
 *   2. an NVRTC already loaded in the process (libnvrtc.so.13, else .12; RTLD_NOLOAD);
 *   3. for libnvrtc.so.13, then .12: the dynamic loader's search by name
 *      (LD_LIBRARY_PATH, RUNPATH, ld.so.cache), then $CUDA_HOME/lib64, then
 *      /usr/local/cuda/lib64.
 * The file loaded (as the loader resolved it), its version and the rule that chose it are
 * kept for fj_nvrtc_describe. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* dlinfo, RTLD_DI_LINKMAP */
#endif
#include <dlfcn.h>
#include <link.h>
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
    char path[512];          /* the file, as the loader resolved it */
    const char *rule;        /* which rule of the search order chose it */
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

static int try_open(const char *path, int flags, const char *rule)
{
    size_t len = strlen(g_why);
    g_nv.handle = dlopen(path, flags);
    if (!g_nv.handle) {
        if (!(flags & RTLD_NOLOAD))
            snprintf(g_why + len, sizeof g_why - len, "%s%s", len ? ", " : "", path);
        return 0;
    }
    struct link_map *lm = NULL;
    const char *file = dlinfo(g_nv.handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name[0]
                       ? lm->l_name : path;
    snprintf(g_nv.path, sizeof g_nv.path, "%s", file);
    g_nv.rule = rule;
    return 1;
}

/* Rules 2 and 3 of the search order (top of the file). */
static int search(void)
{
    char path[512];
    const char *cuda_home = getenv("CUDA_HOME");
    for (int v = 13; v >= 12; v--) {
        snprintf(path, sizeof path, "libnvrtc.so.%d", v);
        if (try_open(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, "already loaded in the process"))
            return 1;
    }
    for (int v = 13; v >= 12; v--) {
        snprintf(path, sizeof path, "libnvrtc.so.%d", v);
        if (try_open(path, RTLD_NOW | RTLD_LOCAL, "the dynamic loader's search path"))
            return 1;
        if (cuda_home && *cuda_home) {
            snprintf(path, sizeof path, "%s/lib64/libnvrtc.so.%d", cuda_home, v);
            if (try_open(path, RTLD_NOW | RTLD_LOCAL, "$CUDA_HOME/lib64"))
                return 1;
        }
        snprintf(path, sizeof path, "/usr/local/cuda/lib64/libnvrtc.so.%d", v);
        if (try_open(path, RTLD_NOW | RTLD_LOCAL, "/usr/local/cuda/lib64"))
            return 1;
    }
    return 0;
}

static void load_once(void)
{
    const char *env = getenv("FAJIT_NVRTC_PATH");
    g_why[0] = 0;
    if (env && strcmp(env, "none") == 0) {
        snprintf(g_why, sizeof g_why, "NVRTC disabled (FAJIT_NVRTC_PATH=none)");
        return;
    }
    if (env && *env) {
        /* An explicit path is an instruction, not a hint: when it fails, nothing else is
         * tried (a silent fallback would compile with another NVRTC than the one named). */
        if (!try_open(env, RTLD_NOW | RTLD_LOCAL, "FAJIT_NVRTC_PATH")) {
            const char *err = dlerror();
            snprintf(g_why, sizeof g_why, "FAJIT_NVRTC_PATH=%s could not be loaded: %s", env,
                     err ? err : "dlopen failed");
            return;
        }
    } else if (!search()) {
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
                snprintf(g_why, sizeof g_why, "NVRTC library %s lacks %s", g_nv.path,
                         syms[i].name);
            return;
        }
    }
    g_nv.Version(&g_nv.major, &g_nv.minor);
    g_ok = 1;
}

static _Atomic int g_hidden;

void fj_nvrtc_hide_for_testing(int hide) { g_hidden = hide; }

/*------ a stand-in NVRTC for tests: any version, compiles return fixed bytes ------*/

static struct fj_nvrtc g_fake;
static _Atomic int g_faked;
static const void *g_fake_cubin;
static size_t g_fake_cubin_size;

static const char *fk_errstr(int r)
{
    return r ? "NVRTC_ERROR_COMPILATION (stand-in)" : "NVRTC_SUCCESS";
}
static int fk_create(nvrtcProgram *p, const char *src, const char *name, int n,
                     const char *const *h, const char *const *hn)
{
    (void)src, (void)name, (void)n, (void)h, (void)hn;
    *p = (nvrtcProgram)&g_fake;
    return 0;
}
static int fk_destroy(nvrtcProgram *p) { *p = NULL; return 0; }
static int fk_compile(nvrtcProgram p, int n, const char *const *o)
{
    (void)p, (void)n, (void)o;
    return g_fake_cubin ? 0 : 6;   /* NVRTC_ERROR_COMPILATION */
}
static int fk_cubin_size(nvrtcProgram p, size_t *n) { (void)p; *n = g_fake_cubin_size; return 0; }
static int fk_cubin(nvrtcProgram p, char *out)
{
    (void)p;
    memcpy(out, g_fake_cubin, g_fake_cubin_size);
    return 0;
}
static int fk_log_size(nvrtcProgram p, size_t *n) { (void)p; *n = 0; return 0; }
static int fk_log(nvrtcProgram p, char *out) { (void)p; out[0] = 0; return 0; }

void fj_nvrtc_fake_for_testing(int major, int minor, const void *cubin, size_t cubin_size)
{
    if (major <= 0) {
        g_faked = 0;
        return;
    }
    g_fake = (struct fj_nvrtc){
        .major = major, .minor = minor, .rule = "a stand-in for tests",
        .GetErrorString = fk_errstr, .CreateProgram = fk_create,
        .DestroyProgram = fk_destroy, .CompileProgram = fk_compile,
        .GetCUBINSize = fk_cubin_size, .GetCUBIN = fk_cubin,
        .GetProgramLogSize = fk_log_size, .GetProgramLog = fk_log,
    };
    snprintf(g_fake.path, sizeof g_fake.path, "fake-libnvrtc.so.%d", major);
    g_fake_cubin = cubin;
    g_fake_cubin_size = cubin_size;
    g_faked = 1;
}

const fj_nvrtc *fj_nvrtc_get(char *why, size_t why_len)
{
    if (g_hidden) {
        if (why && why_len)
            snprintf(why, why_len, "NVRTC hidden (test)");
        return NULL;
    }
    if (g_faked)
        return &g_fake;
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

void fj_nvrtc_describe(char *buf, size_t len)
{
    char why[1024];
    const fj_nvrtc *n = fj_nvrtc_get(why, sizeof why);
    if (n)
        snprintf(buf, len, "%d.%d from %s (%s)", n->major, n->minor, n->path, n->rule);
    else
        snprintf(buf, len, "not loaded: %s", why);
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
