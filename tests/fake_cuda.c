/* fake_cuda.c - the unit tests' fake CUDA driver (fake_cuda.h): error paths and a
 * family's host half without a GPU. */
#include <stdio.h>

#include "fake_cuda.h"

int g_count, g_fail_get;
int g_fake_cc = 90, g_fake_sms = 132;
static CUresult f_init(unsigned flags) { (void)flags; return 0; }
static CUresult f_count(int *n) { *n = g_count; return g_fail_get ? 999 : 0; }
static CUresult f_get(CUdevice *d, int i) { *d = i; return 0; }
static CUresult f_attr(int *v, int a, CUdevice d)
{
    (void)d;
    *v = a == FJ_CU_ATTR_CC_MAJOR ? g_fake_cc / 10 : a == FJ_CU_ATTR_CC_MINOR ? g_fake_cc % 10
         : a == FJ_CU_ATTR_SM_COUNT ? g_fake_sms : 132;
    return 0;
}
static CUresult f_retain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x1; return 0; }
static CUresult f_release(CUdevice d) { (void)d; return 0; }
static CUresult f_name(char *s, int n, CUdevice d) { (void)d; snprintf(s, (size_t)n, "Fake GPU"); return 0; }
static CUresult f_errname(CUresult r, const char **s)
{
    *s = r == 999 ? "CUDA_ERROR_FAKE" : "CUDA_ERROR_UNKNOWN";
    return 0;
}

/* A driver table with one fake device (what a context needs): sm_90 with 132 SMs unless a
 * test sets g_fake_cc / g_fake_sms. */
fj_cuda fake_device_table(void)
{
    fj_cuda fake = {0};
    fake.cuDeviceGetCount = f_count;
    fake.cuDeviceGet = f_get;
    fake.cuDeviceGetAttribute = f_attr;
    fake.cuDevicePrimaryCtxRetain = f_retain;
    fake.cuDevicePrimaryCtxRelease = f_release;
    fake.cuDeviceGetName = f_name;
    fake.cuGetErrorName = f_errname;
    fake.cuInit = f_init;
    return fake;
}

/* The workspace counters' ring (test_unit_driver.c's sched_counters): allocated zeroed with the
 * context on a 9.0 device (at the first such launch when the driver table lacks the
 * allocation functions), one slot of the ring per launch, freed with the context. */
fake_sc g_sc;
CUresult f_alloc(CUdeviceptr *p, size_t n) { g_sc.bytes = n; *p = g_sc.alloc = 0x7000000; return 0; }
CUresult f_memset(CUdeviceptr p, unsigned char v, size_t n)
{
    g_sc.memsets += p == g_sc.alloc && v == 0 && n == g_sc.bytes;
    return 0;
}
CUresult f_sync(void) { g_sc.syncs++; return 0; }
CUresult f_free(CUdeviceptr p) { g_sc.freed = p; return 0; }
CUresult f_setcur(CUcontext c) { (void)c; return 0; }
CUresult f_capturing(CUstream s, int *status) { *status = s == F_CAPTURED; return 0; }

/* A family's launches (the first three arguments), and stream-ordered scratch. */
fake_dm g_dm;
CUresult dm_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)by, (void)bz, (void)smem, (void)s, (void)e;
    int i = g_dm.launches++ % 8;
    g_dm.mark[i] = *(long long *)a[0];
    g_dm.scratch[i] = *(CUdeviceptr *)a[1];
    g_dm.counters[i] = *(CUdeviceptr *)a[2];
    g_dm.threads[i] = bx;
    return 0;
}
CUresult dm_alloc_async(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)s;
    *p = g_dm.allocated = 0x9000000 + n;
    return 0;
}
CUresult dm_free_async(CUdeviceptr p, CUstream s)
{
    (void)s;
    g_dm.freed = p;
    return 0;
}
