/* fake_cuda.h - the unit tests' fake CUDA driver (fake_cuda.c), shared by
 * test_unit_driver.c, test_unit_tune.c and test_unit_decode*.c: a driver table with one
 * device (sm_90, 132 SMs by default), and allocation and launch functions that record what
 * they were asked instead of touching a GPU. */
#ifndef FJ_TEST_FAKE_CUDA_H
#define FJ_TEST_FAKE_CUDA_H

#include "../src/api/internal.h"

/* The devices cuDeviceGetCount reports; g_fail_get: it fails with 999 (CUDA_ERROR_FAKE). */
extern int g_count, g_fail_get;
/* Its compute capability (major*10 + minor, default 90) and SM count (default 132); other
 * attributes read 132. */
extern int g_fake_cc, g_fake_sms;
/* cuInit, the device queries, the primary context and error names of that device. */
fj_cuda fake_device_table(void);

/* cuMemAlloc (always 0x7000000), cuMemsetD8, cuCtxSynchronize, cuMemFree, cuCtxSetCurrent,
 * cuStreamIsCapturing (F_CAPTURED is the stream under capture), recorded in g_sc. */
typedef struct fake_sc {
    CUdeviceptr alloc, freed, arg[8];
    size_t bytes;
    int memsets, syncs, launches;
} fake_sc;
extern fake_sc g_sc;
#define F_CAPTURED ((CUstream)0x5)
CUresult f_alloc(CUdeviceptr *p, size_t n);
CUresult f_memset(CUdeviceptr p, unsigned char v, size_t n);
CUresult f_sync(void);
CUresult f_free(CUdeviceptr p);
CUresult f_setcur(CUcontext c);
CUresult f_capturing(CUstream s, int *status);

/* cuLaunchKernel recording a launch's first three arguments (a mark, the scratch and the
 * counters) and block size; cuMemAllocAsync / cuMemFreeAsync, in g_dm. */
typedef struct fake_dm {
    long long mark[8];
    CUdeviceptr scratch[8], counters[8], allocated, freed;
    unsigned threads[8];
    int launches;
} fake_dm;
extern fake_dm g_dm;
CUresult dm_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned smem, CUstream s, void **a, void **e);
CUresult dm_alloc_async(CUdeviceptr *p, size_t n, CUstream s);
CUresult dm_free_async(CUdeviceptr p, CUstream s);

#endif
