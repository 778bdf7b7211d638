/* module.c - loading a CUBIN and launching its functions through the driver table. */
#include "jit.h"

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
                   unsigned dyn_smem, CUstream stream, void **args)
{
    return cu->cuLaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, dyn_smem, stream,
                              args, NULL);
}
