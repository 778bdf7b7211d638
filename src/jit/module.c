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
                   unsigned dyn_smem, CUstream stream, void **args, int pdl)
{
    if (pdl && cu->cuLaunchKernelEx) {
        fj_cu_launch_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.id = FJ_CU_LAUNCH_ATTR_PDL;
        attr.v.value = 1;
        const fj_cu_launch_config c = {grid[0], grid[1], grid[2], threads, 1, 1, dyn_smem,
                                       stream, &attr, 1};
        return cu->cuLaunchKernelEx(&c, fn, args, NULL);
    }
    return cu->cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, dyn_smem, stream,
                              args, NULL);
}
