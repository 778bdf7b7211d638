/* jit.h - the run-time layer: the CUDA driver loaded with dlopen into a function table,
 * NVRTC loaded the same way, CUBIN compilation, module load and launch (module.c), TMA
 * descriptors (tma.c).
 * Knows nothing of attention. No CUDA header is needed: the few driver types are
 * declared here with the driver's ABI.
 */
#ifndef FJ_JIT_H
#define FJ_JIT_H

#include <stddef.h>

typedef int CUresult;              /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

enum {
    FJ_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    FJ_CU_ATTR_SM_COUNT = 16,
    FJ_CU_ATTR_CC_MAJOR = 75,
    FJ_CU_ATTR_CC_MINOR = 76,
    FJ_CU_ATTR_MAX_SMEM_OPTIN = 97,
    FJ_CU_FUNC_ATTR_NUM_REGS = 4,
    FJ_CU_FUNC_ATTR_LOCAL_BYTES = 3,
    FJ_CU_FUNC_ATTR_MAX_DYN_SMEM = 8,
    FJ_CU_CAPTURE_MODE_RELAXED = 2,
    FJ_CU_ERROR_NOT_SUPPORTED = 801,   /* CUDA_ERROR_NOT_SUPPORTED */
};

/* cuLaunchKernelEx's CUlaunchAttribute and CUlaunchConfig (cuda.h, CUDA 12.0+). */
#define FJ_CU_LAUNCH_ATTR_PDL 6   /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
#define FJ_CU_LAUNCH_ATTR_CLUSTER 4   /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (v.dim) */
#define FJ_CU_LAUNCH_ATTR_CLUSTER_POLICY 5   /* ..._CLUSTER_SCHEDULING_POLICY_PREFERENCE (v.value) */
#define FJ_CU_CLUSTER_SPREAD 1   /* CU_CLUSTER_SCHEDULING_POLICY_SPREAD */
#define FJ_CU_FUNC_ATTR_NON_PORTABLE_CLUSTER 14   /* ..._NON_PORTABLE_CLUSTER_SIZE_ALLOWED */
typedef struct fj_cu_launch_attr {
    int id;
    char pad_[4];
    union {
        char pad[64];
        int value;
        unsigned dim[3];   /* cluster dimensions */
    } v;
} fj_cu_launch_attr;
typedef struct fj_cu_launch_config {
    unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, smem;
    CUstream stream;
    fj_cu_launch_attr *attrs;
    unsigned num_attrs;
} fj_cu_launch_config;

/* The driver entry points fajit uses. Tests may install a fake table. */
typedef struct fj_cuda {
    void *handle;
    int version;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncGetAttribute)(int *, int, CUfunction);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    /* used by tests and benchmarks; cuMemAlloc, cuMemsetD8, cuCtxSynchronize and cuMemFree
     * also by the library (the workspaces' counter ring, src/api/workspace.c) */
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
    /* optional (NULL when the driver lacks it): TMA descriptors for the sm_90a kernel;
     * enums as int, cuuint32_t as unsigned, cuuint64_t as unsigned long long */
    CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *, const unsigned long long *,
                                       const unsigned long long *, const unsigned *,
                                       const unsigned *, int, int, int, int);
    /* optional: the calling thread's stream-capture mode (CUstreamCaptureMode as int), swapped
     * around module loads so that a kernel's first use may happen inside graph capture */
    CUresult (*cuThreadExchangeStreamCaptureMode)(int *);
    /* optional: whether a stream is being captured (status 1: active) */
    CUresult (*cuStreamIsCapturing)(CUstream, int *);
    /* optional (CUDA 11.2+): stream-ordered scratch for a plan's launches */
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    /* optional (CUDA 12.0+): launches with attributes (programmatic dependent launch) */
    CUresult (*cuLaunchKernelEx)(const fj_cu_launch_config *, CUfunction, void **, void **);
    /* optional (CUDA 12.0+): how many clusters of a launch configuration fit the GPU at once */
    CUresult (*cuOccupancyMaxActiveClusters)(int *, CUfunction, const fj_cu_launch_config *);
} fj_cuda;

/* A tiled TMA descriptor (CUtensorMap): 128 opaque bytes, 64-byte aligned, passed to a
 * kernel by value. */
typedef struct fj_tmap {
    _Alignas(64) unsigned long long w[16];
} fj_tmap;

/* cuda.h enum values (CUtensorMapDataType, ...Swizzle, ...L2promotion), stable since 12.0 */
enum {
    FJ_TMA_F16 = 6,
    FJ_TMA_BF16 = 9,
    FJ_TMA_INTERLEAVE_NONE = 0,
    FJ_TMA_SWIZZLE_NONE = 0,
    FJ_TMA_SWIZZLE_128B = 3,
    FJ_TMA_L2_NONE = 0,
    FJ_TMA_L2_256B = 3,
    FJ_TMA_OOB_ZERO = 0,
};
#define FJ_TMA_MAX_RANK 5

/* A tensor of `rank` dimensions, innermost first, and the box one TMA copy moves. */
typedef struct fj_tma_tile {
    const char *name;          /* in messages: "Q" */
    unsigned long long addr;   /* device address, 16-byte aligned */
    int data_type;             /* FJ_TMA_F16, FJ_TMA_BF16 */
    unsigned elem_bytes;       /* 2 */
    unsigned rank;
    long long dim[FJ_TMA_MAX_RANK];         /* entries; < 1 is encoded as 1 (never loaded) */
    long long stride[FJ_TMA_MAX_RANK - 1];  /* elements between entries of dims 1..rank-1;
                                               must be positive multiples of 16 bytes unless
                                               the dimension has one entry */
    unsigned box[FJ_TMA_MAX_RANK];
    int swizzle, l2_promotion;              /* FJ_TMA_SWIZZLE_*, FJ_TMA_L2_* */
} fj_tma_tile;

/* Encodes `t` (zero fill out of bounds, no interleave, element strides 1). 0, or -1 with
 * a reason in `why` (may be NULL): no encoder in the driver, misalignment, a bad stride, or
 * the encoder's CUresult. */
int fj_tma_encode(const fj_cuda *cu, const fj_tma_tile *t, fj_tmap *out, char *why, size_t n);

/* A loaded CUBIN and one of its functions, with the driver's figures for it. */
typedef struct fj_module {
    CUmodule module;
    CUfunction fn;
    int regs, local_bytes;   /* -1 when the driver did not say */
} fj_module;
/* Loads `cubin` and finds `function` in it (module.c); on failure nothing stays loaded. */
CUresult fj_module_load(const fj_cuda *cu, const void *cubin, const char *function,
                        fj_module *out);
/* Raises fn's dynamic shared memory limit to `bytes` when above the 48 KiB default. */
CUresult fj_func_dyn_smem(const fj_cuda *cu, CUfunction fn, int bytes);
/* Launches fn on grid x threads x 1 x 1 with `args` (one pointer per parameter). pdl 1:
 * as a programmatic dependent launch (sm_90+; the kernel starts before the stream's previous
 * kernel ends once that one has triggered, and waits for it with griddepcontrol.wait before
 * touching memory) where the driver has cuLaunchKernelEx, else a plain launch. cluster > 1:
 * thread-block clusters of `cluster` x 1 x 1 CTAs (sm_90+, needs cuLaunchKernelEx: without
 * it FJ_CU_ERROR_NOT_SUPPORTED; fj_cluster_probe says which sizes the GPU takes), spread over
 * the SMs of their GPC (the scheduling policy: by default a GPC may stack a cluster's CTAs
 * on fewer SMs where several fit one, which halves a streaming kernel's SMs). */
CUresult fj_launch(const fj_cuda *cu, CUfunction fn, const unsigned grid[3], unsigned threads,
                   unsigned dyn_smem, CUstream stream, void **args, int pdl, unsigned cluster);
/* How many clusters of fn of each size n = 2..want (at most FJ_CLUSTER_MAX) the GPU runs at
 * once with this block size and shared memory, into active[n] (0: none; active[0] and
 * active[1] are 0; above 8, non-portable sizes are allowed on fn first, else 0). Clusters
 * live within one GPC, so the counts do not scale with the size: on the H200 at one CTA per
 * SM 15 clusters of 8 and 15 of 7 run at once. Returns the largest n with active[n] > 0, or
 * 0: the driver lacks cuLaunchKernelEx or cuOccupancyMaxActiveClusters, or not even 2
 * fit. Not stream work. */
#define FJ_CLUSTER_MAX 16
int fj_cluster_probe(const fj_cuda *cu, CUfunction fn, unsigned threads, unsigned dyn_smem,
                     int want, int active[FJ_CLUSTER_MAX + 1]);

/* Loads libcuda.so.1 (once per process) and calls cuInit. Returns NULL when there is no
 * driver; `why` (may be NULL) then says what failed. Thread-safe. */
const fj_cuda *fj_cuda_get(char *why, size_t why_len);
/* Installs a fake driver table for tests (NULL restores the real loader). */
void fj_cuda_set_for_testing(const fj_cuda *fake);
/* "CUDA_ERROR_INVALID_VALUE (1)" into buf. */
const char *fj_cuda_errname(const fj_cuda *cu, CUresult r, char *buf, size_t n);

/* NVRTC, loaded at run time: FAJIT_NVRTC_PATH, else one already in the process, else
 * libnvrtc.so.13 (then .12) by the loader's search, $CUDA_HOME/lib64, /usr/local/cuda/lib64
 * (nvrtc.c lists the order, README.md says why). */
typedef struct fj_nvrtc fj_nvrtc;
/* Returns the loaded NVRTC or NULL; `why` lists the paths tried. Thread-safe, once. */
const fj_nvrtc *fj_nvrtc_get(char *why, size_t why_len);
/* Tests: makes fj_nvrtc_get answer as if no NVRTC were installed (0 restores). */
void fj_nvrtc_hide_for_testing(int hide);
/* Tests: makes fj_nvrtc_get return a stand-in NVRTC of version major.minor whose compiles
 * succeed with a copy of `cubin` (cubin_size bytes; kept, not copied: it must outlive the
 * stand-in) and an empty log, or fail when cubin is NULL. major <= 0 removes it. Takes
 * precedence over the real one, below fj_nvrtc_hide_for_testing. */
void fj_nvrtc_fake_for_testing(int major, int minor, const void *cubin, size_t cubin_size);
void fj_nvrtc_version(const fj_nvrtc *n, int *major, int *minor);
/* One line on the NVRTC fj_nvrtc_get returns: "13.0 from /usr/local/cuda/lib64/libnvrtc.so.13
 * (/usr/local/cuda/lib64)": version, the file as the loader resolved it, the rule of the
 * search order that chose it; or "not loaded: <why>". Loads NVRTC if needed. */
void fj_nvrtc_describe(char *buf, size_t len);

/* One named header given to NVRTC (the embedded sources). */
typedef struct fj_src {
    const char *name;
    const char *text;
    size_t len;
} fj_src;

typedef struct fj_compile_out {
    void *cubin;     /* malloc'd; NULL on failure */
    size_t cubin_size;
    char *log;       /* malloc'd, never NULL after fj_nvrtc_compile returns */
    double ms;       /* wall time */
    int regs, smem, spill_bytes, stack_bytes; /* parsed from the ptxas -v log; -1 unknown */
} fj_compile_out;

/* The most headers one compile is given (NVRTC takes them as arrays). */
#define FJ_NVRTC_MAX_HEADERS 32

/* Compiles `main` (preamble prepended) for `arch` ("sm_90a") into a CUBIN with
 * `opts` (NULL-terminated) plus fajit's fixed options. Returns 0, or -1 with the NVRTC
 * error in `err` and the log in out->log. */
int fj_nvrtc_compile(const fj_nvrtc *n, const char *preamble, const fj_src *main,
                     const fj_src *headers, int n_headers, const char *arch,
                     const char *const *opts, fj_compile_out *out, char *err, size_t err_len);
void fj_compile_out_free(fj_compile_out *o);
/* The fixed NVRTC options for `arch`, space-separated, for the cache key. */
void fj_nvrtc_options_text(const char *arch, char *buf, size_t n);

/* Parses "Used N registers", "N bytes spill stores", "N bytes smem", "N bytes stack
 * frame" from a ptxas -v log. */
void fj_parse_ptxas_log(const char *log, int *regs, int *smem, int *spill, int *stack);

#endif /* FJ_JIT_H */
