/* driver.c - the CUDA driver as a table of function pointers filled from
 * dlopen("libcuda.so.1"), so that fajit (and every test binary) starts on a machine
 * without a driver. Never link -lcuda. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "jit.h"

static fj_cuda g_cuda;
static const fj_cuda *g_fake;
static char g_why[256];
static int g_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Looks up `name`, then `name` with each suffix (the driver's versioned symbols). */
static void *sym(void *h, const char *name, const char *suffix)
{
    char buf[128];
    void *p = NULL;
    if (suffix) {
        snprintf(buf, sizeof buf, "%s%s", name, suffix);
        p = dlsym(h, buf);
    }
    return p ? p : dlsym(h, name);
}

#define LOAD(field, suffix)                                              \
    do {                                                                 \
        *(void **)&c->field = sym(c->handle, #field, suffix);            \
        if (!c->field) {                                                 \
            snprintf(g_why, sizeof g_why, "libcuda.so.1 lacks %s", #field); \
            return;                                                      \
        }                                                                \
    } while (0)

static void load_once(void)
{
    fj_cuda *c = &g_cuda;
    c->handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->handle) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "dlopen(libcuda.so.1) failed: %s", e ? e : "?");
        return;
    }
    LOAD(cuInit, NULL);
    LOAD(cuDriverGetVersion, NULL);
    LOAD(cuDeviceGetCount, NULL);
    LOAD(cuDeviceGet, NULL);
    LOAD(cuDeviceGetName, NULL);
    LOAD(cuDeviceGetAttribute, NULL);
    LOAD(cuDeviceTotalMem, "_v2");
    LOAD(cuDevicePrimaryCtxRetain, NULL);
    LOAD(cuDevicePrimaryCtxRelease, "_v2");
    LOAD(cuCtxSetCurrent, NULL);
    LOAD(cuModuleLoadData, NULL);
    LOAD(cuModuleUnload, NULL);
    LOAD(cuModuleGetFunction, NULL);
    LOAD(cuFuncGetAttribute, NULL);
    LOAD(cuFuncSetAttribute, NULL);
    LOAD(cuLaunchKernel, NULL);
    LOAD(cuEventCreate, NULL);
    LOAD(cuEventDestroy, "_v2");
    LOAD(cuEventRecord, NULL);
    LOAD(cuEventSynchronize, NULL);
    LOAD(cuEventElapsedTime, "_v2");
    LOAD(cuGetErrorName, NULL);
    LOAD(cuCtxSynchronize, NULL);
    LOAD(cuMemAlloc, "_v2");
    LOAD(cuMemFree, "_v2");
    LOAD(cuMemcpyHtoD, "_v2");
    LOAD(cuMemcpyDtoH, "_v2");
    LOAD(cuMemsetD8, "_v2");
    *(void **)&c->cuTensorMapEncodeTiled = dlsym(c->handle, "cuTensorMapEncodeTiled");
    *(void **)&c->cuThreadExchangeStreamCaptureMode =
        dlsym(c->handle, "cuThreadExchangeStreamCaptureMode");
    *(void **)&c->cuStreamIsCapturing = dlsym(c->handle, "cuStreamIsCapturing");
    *(void **)&c->cuMemAllocAsync = dlsym(c->handle, "cuMemAllocAsync");
    *(void **)&c->cuMemFreeAsync = dlsym(c->handle, "cuMemFreeAsync");
    *(void **)&c->cuLaunchKernelEx = dlsym(c->handle, "cuLaunchKernelEx");
    *(void **)&c->cuOccupancyMaxActiveClusters = dlsym(c->handle, "cuOccupancyMaxActiveClusters");
    CUresult r = c->cuInit(0);
    if (r != 0) {
        const char *name = "?";
        c->cuGetErrorName(r, &name);
        snprintf(g_why, sizeof g_why, "cuInit failed: %s (%d)", name ? name : "?", r);
        return;
    }
    c->cuDriverGetVersion(&c->version);
    g_ok = 1;
}

const fj_cuda *fj_cuda_get(char *why, size_t why_len)
{
    if (g_fake)
        return g_fake;
    pthread_once(&g_once, load_once);
    if (!g_ok && why && why_len)
        snprintf(why, why_len, "%s", g_why);
    return g_ok ? &g_cuda : NULL;
}

void fj_cuda_set_for_testing(const fj_cuda *fake) { g_fake = fake; }

const char *fj_cuda_errname(const fj_cuda *cu, CUresult r, char *buf, size_t n)
{
    const char *name = NULL;
    if (!cu || cu->cuGetErrorName(r, &name) != 0 || !name)
        name = "CUDA_ERROR_UNKNOWN";
    snprintf(buf, n, "%s (%d)", name, r);
    return buf;
}
