/* module.c - loading a CUBIN and launching its functions through the driver table. */
#include <stddef.h>
#include <string.h>

#include "jit.h"

/* The mirrors of cuda.h's CUlaunchAttribute and CUlaunchConfig (LP64). */
_Static_assert(sizeof(fj_cu_launch_attr) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(offsetof(fj_cu_launch_config, stream) == 32 &&
                   offsetof(fj_cu_launch_config, attrs) == 40 &&
                   offsetof(fj_cu_launch_config, num_attrs) == 48,
               "CUlaunchConfig layout");

CUresult fj_module_load(const fj_cuda *cu, const void *cubin, const char *function,
                        fj_module *out)
{
    out->module = NULL, out->fn = NULL, out->regs = out->local_bytes = -1;
    CUresult r = cu->cuModuleLoadData(&out->module, cubin);
    if (r == 0)
        r = cu->cuModuleGetFunction(&out->fn, out->module, function);
    if (r != 0) {
        if (out->module)
            cu->cuModuleUnload(out->module);
        out->module = NULL, out->fn = NULL;
        return r;
    }
    cu->cuFuncGetAttribute(&out->regs, FJ_CU_FUNC_ATTR_NUM_REGS, out->fn);
    cu->cuFuncGetAttribute(&out->local_bytes, FJ_CU_FUNC_ATTR_LOCAL_BYTES, out->fn);
    return 0;
}

CUresult fj_func_dyn_smem(const fj_cuda *cu, CUfunction fn, int bytes)
{
    return bytes <= 48 * 1024 ? 0 : cu->cuFuncSetAttribute(fn, FJ_CU_FUNC_ATTR_MAX_DYN_SMEM, bytes);
}

CUresult fj_launch(const fj_cuda *cu, CUfunction fn, const unsigned grid[3], unsigned threads,
                   unsigned dyn_smem, CUstream stream, void **args, int pdl, unsigned cluster)
{
    if ((pdl || cluster > 1) && cu->cuLaunchKernelEx) {
        fj_cu_launch_attr attr[3];
        unsigned n = 0;
        memset(attr, 0, sizeof attr);
        if (pdl) {
            attr[n].id = FJ_CU_LAUNCH_ATTR_PDL;
            attr[n++].v.value = 1;
        }
        if (cluster > 1) {
            attr[n].id = FJ_CU_LAUNCH_ATTR_CLUSTER;
            attr[n].v.dim[0] = cluster, attr[n].v.dim[1] = attr[n].v.dim[2] = 1;
            n++;
            attr[n].id = FJ_CU_LAUNCH_ATTR_CLUSTER_POLICY;
            attr[n++].v.value = FJ_CU_CLUSTER_SPREAD;
        }
        const fj_cu_launch_config c = {grid[0], grid[1], grid[2], threads, 1, 1, dyn_smem,
                                       stream, attr, n};
        return cu->cuLaunchKernelEx(&c, fn, args, NULL);
    }
    if (cluster > 1)
        return FJ_CU_ERROR_NOT_SUPPORTED;
    return cu->cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, dyn_smem, stream,
                              args, NULL);
}

int fj_cluster_probe(const fj_cuda *cu, CUfunction fn, unsigned threads, unsigned dyn_smem,
                     int want, int active[FJ_CLUSTER_MAX + 1])
{
    int most = 0;
    memset(active, 0, sizeof(int) * (FJ_CLUSTER_MAX + 1));
    if (!cu->cuLaunchKernelEx || !cu->cuOccupancyMaxActiveClusters)
        return 0;
    if (want > FJ_CLUSTER_MAX)
        want = FJ_CLUSTER_MAX;
    if (want > 8 && (!cu->cuFuncSetAttribute ||
                     cu->cuFuncSetAttribute(fn, FJ_CU_FUNC_ATTR_NON_PORTABLE_CLUSTER, 1) != 0))
        want = 8;
    for (int n = 2; n <= want; n++) {
        fj_cu_launch_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.id = FJ_CU_LAUNCH_ATTR_CLUSTER;
        attr.v.dim[0] = (unsigned)n, attr.v.dim[1] = attr.v.dim[2] = 1;
        const fj_cu_launch_config c = {(unsigned)n, 1, 1, threads, 1, 1, dyn_smem, NULL, &attr, 1};
        int clusters = 0;
        if (cu->cuOccupancyMaxActiveClusters(&clusters, fn, &c) == 0 && clusters > 0) {
            active[n] = clusters;
            most = n;
        }
    }
    return most;
}
