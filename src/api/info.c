/* info.c - the device side of a context: target names, binding to a device, device and
 * system information, and the counters. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/*------ targets and the device ------*/

int fj_arch_sm(const char *arch)
{
    int sm = 0, n = 0;
    if (!arch || sscanf(arch, "sm_%d%n", &sm, &n) != 1 || sm < 50 || sm > 200)
        return -1;
    if (arch[n] && !(arch[n] == 'a' && !arch[n + 1]) && !(arch[n] == 'f' && !arch[n + 1]))
        return -1;
    return sm;
}

/* The exact target for a compute capability: the "a" variants carry the
 * generation-specific instructions (wgmma on 9.0, tcgen05 on 10.x). */
void fj_arch_of(int major, int minor, char *out, size_t n)
{
    int a = major >= 9;
    snprintf(out, n, "sm_%d%d%s", major, minor, a ? "a" : "");
}

fajit_status fj_bind_device(fajit_ctx *ctx)
{
    char why[256], err[64];
    int count = 0, major = 0, minor = 0;
    ctx->cu = fj_cuda_get(why, sizeof why);
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DRIVER, "%s", why);
    const fj_cuda *cu = ctx->cu;
    CUresult r = cu->cuDeviceGetCount(&count);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuDeviceGetCount: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    FJ_RETURN_IF(ctx->opts.device < 0 || ctx->opts.device >= count, ctx, FAJIT_NO_DEVICE,
                 "device must be in [0, %d), got %d", count, ctx->opts.device);
    if ((r = cu->cuDeviceGet(&ctx->dev, ctx->opts.device)) ||
        (r = cu->cuDeviceGetAttribute(&major, FJ_CU_ATTR_CC_MAJOR, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&minor, FJ_CU_ATTR_CC_MINOR, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&ctx->sm_count, FJ_CU_ATTR_SM_COUNT, ctx->dev)) ||
        (r = cu->cuDeviceGetAttribute(&ctx->smem_optin, FJ_CU_ATTR_MAX_SMEM_OPTIN, ctx->dev)) ||
        (r = cu->cuDeviceGetName(ctx->gpu_name, sizeof ctx->gpu_name, ctx->dev)) ||
        (r = cu->cuDevicePrimaryCtxRetain(&ctx->cuctx, ctx->dev)))
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "querying device %d: %s", ctx->opts.device,
                       fj_cuda_errname(cu, r, err, sizeof err));
    ctx->cc = major * 10 + minor;
    fj_arch_of(major, minor, ctx->arch, sizeof ctx->arch);
    return FAJIT_OK;
}

/*------ counters and information ------*/

void fajit_counters_get(fajit_ctx *ctx, fajit_counters *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!fj_ctx_live(ctx))
        return;
    fj_cache_counters cc;
    fj_cache_counters_get(ctx->cache, &cc);
    out->calls = ctx->calls;
    out->hits_memory = ctx->hits_memory;
    out->hits_disk = ctx->hits_disk;
    out->misses = ctx->misses;
    out->compiles = ctx->compiles;
    out->compile_seconds = ctx->compile_us / 1e6;
    out->corrupt_entries = cc.corrupt;
    out->lease_waits = cc.lease_waits;   /* the cache counts each wait once */
    out->serving_compiles = ctx->serving_compiles;
    out->background_compiles = ctx->background_compiles;
    out->fallback_launches = ctx->fallback_launches;
}

uint64_t fajit_hits_other_nvrtc(fajit_ctx *ctx)
{
    return fj_ctx_live(ctx) ? ctx->hits_other_nvrtc : 0;
}

const char *fajit_nvrtc_describe(void)
{
    static _Thread_local char line[1280];
    fj_nvrtc_describe(line, sizeof line);
    return line;
}

fajit_status fajit_sysinfo_get(fajit_ctx *ctx, fajit_sysinfo *out)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx || !out, ctx, FAJIT_INVALID_ARGUMENT, "ctx and out must not be NULL");
    memset(out, 0, sizeof *out);
    const fj_cuda *cu = fj_cuda_get(NULL, 0);
    if (cu) {
        out->driver_loaded = 1;
        out->driver_version = cu->version;
        cu->cuDeviceGetCount(&out->device_count);
    }
    const fj_nvrtc *nv = fj_nvrtc_get(NULL, 0);
    out->nvrtc_loaded = nv != NULL;
    fj_nvrtc_version(nv, &out->nvrtc_major, &out->nvrtc_minor);
    out->cache_path = fj_cache_path(ctx->cache);
    out->cache_readonly = fj_cache_readonly(ctx->cache);
    return FAJIT_OK;
}

fajit_status fajit_device_info_get(fajit_ctx *ctx, int ordinal, fajit_device_info *out)
{
    FJ_CTX_CHECK_NULL_OK(ctx);
    char why[256], err[64];
    FJ_RETURN_IF(!out, ctx, FAJIT_INVALID_ARGUMENT, "out must not be NULL");
    memset(out, 0, sizeof *out);
    const fj_cuda *cu = fj_cuda_get(why, sizeof why);
    FJ_RETURN_IF(!cu, ctx, FAJIT_NO_DRIVER, "%s", why);
    int count = 0;
    CUdevice dev;
    cu->cuDeviceGetCount(&count);
    FJ_RETURN_IF(ordinal < 0 || ordinal >= count, ctx, FAJIT_NO_DEVICE,
                 "device must be in [0, %d), got %d", count, ordinal);
    CUresult r;
    if ((r = cu->cuDeviceGet(&dev, ordinal)) ||
        (r = cu->cuDeviceGetName(out->name, sizeof out->name, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->cc_major, FJ_CU_ATTR_CC_MAJOR, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->cc_minor, FJ_CU_ATTR_CC_MINOR, dev)) ||
        (r = cu->cuDeviceGetAttribute(&out->sm_count, FJ_CU_ATTR_SM_COUNT, dev)) ||
        (r = cu->cuDeviceTotalMem(&out->total_mem, dev)))
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "querying device %d: %s", ordinal,
                       fj_cuda_errname(cu, r, err, sizeof err));
    fj_arch_of(out->cc_major, out->cc_minor, out->arch, sizeof out->arch);
    return FAJIT_OK;
}
