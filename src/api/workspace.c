/* workspace.c - the context's side of the families' workspaces: the ring of zeroed counter
 * slots (fj_workspace.counter_bytes; e.g. a dynamic schedule's tile counter). Scratch
 * (fj_workspace.scratch_bytes) is stream-ordered memory taken per call (dispatch.c). */
#include <string.h>

#include "internal.h"

/* The ring, allocated and zeroed once per context (under `lock`): at creation where a
 * family on the device's target may need it (fj_ws_counters_early), else at the first
 * launch that asks. */
static fajit_status ring_alloc(fajit_ctx *ctx)
{
    char err[64];
    const size_t bytes = (FJ_COUNTER_SLOTS + FJ_COUNTER_GRAPH_SLOTS) * FJ_COUNTER_SLOT_BYTES;
    CUresult r = 0;
    pthread_mutex_lock(&ctx->lock);
    if (!atomic_load(&ctx->counters)) {
        CUdeviceptr p = 0;
        if (!ctx->cu->cuMemAlloc || !ctx->cu->cuMemsetD8 || !ctx->cu->cuCtxSynchronize)
            r = -1;
        else if ((r = ctx->cu->cuMemAlloc(&p, bytes)) == 0 &&
                 /* (a memset on the legacy stream: synchronized before any launch, which
                  * might be on a non-blocking stream) */
                 ((r = ctx->cu->cuMemsetD8(p, 0, bytes)) != 0 ||
                  (r = ctx->cu->cuCtxSynchronize()) != 0)) {
            ctx->cu->cuMemFree(p);
            p = 0;
        }
        atomic_store(&ctx->counters, p);
    }
    pthread_mutex_unlock(&ctx->lock);
    FJ_RETURN_IF(r == -1, ctx, FAJIT_UNSUPPORTED,
                 "the driver table lacks cuMemAlloc/cuMemsetD8/cuCtxSynchronize (needed for "
                 "the workspace counters of a dynamically scheduled kernel)");
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "allocating the workspace counters: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    return FAJIT_OK;
}

/* The allocation ends in a context synchronize, which must not happen at a launch (that
 * launch may be inside CUDA-graph stream capture, or on a server's latency-critical path).
 * A driver table without the allocation functions leaves it to the first launch that asks,
 * which then reports them missing. */
fajit_status fj_ws_counters_early(fajit_ctx *ctx)
{
    const fj_cuda *cu = ctx->cu;
    const fj_target t = fj_target_of(ctx, NULL);
    int needed = 0;
    for (int i = 0; i < fj_family_count() && !needed; i++)
        needed = fj_family_at(i)->needs_counters && fj_family_at(i)->needs_counters(&t);
    if (!needed || !cu->cuMemAlloc || !cu->cuMemsetD8 || !cu->cuCtxSynchronize)
        return FAJIT_OK;
    char err[64];
    CUresult r = cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    return ring_alloc(ctx);
}

fajit_status fj_ws_counters(fajit_ctx *ctx, void *stream, size_t bytes, CUdeviceptr *out)
{
    FJ_RETURN_IF(bytes > FJ_COUNTER_SLOT_BYTES, ctx, FAJIT_UNSUPPORTED,
                 "a launch asks for %zu B of counters; a slot holds %d", bytes,
                 FJ_COUNTER_SLOT_BYTES);
    if (!atomic_load(&ctx->counters))   /* the first such launch; later ones take no lock */
        FJ_CHECK(ring_alloc(ctx));
    int capturing = 0;
    if (ctx->cu->cuStreamIsCapturing &&
        ctx->cu->cuStreamIsCapturing((CUstream)stream, &capturing) != 0)
        capturing = 0;   /* (the launch itself reports what is wrong with the stream) */
    unsigned slot;
    if (capturing == 1) {
        unsigned n = atomic_fetch_add(&ctx->counter_graph_next, 1u);
        if (n == FJ_COUNTER_GRAPH_SLOTS)
            fj_log(ctx, FAJIT_LOG_WARN, "more than %d launches with workspace counters "
                   "captured into CUDA graphs: their counters are reused from now on; a graph "
                   "captured before must not run while one captured now does",
                   FJ_COUNTER_GRAPH_SLOTS);
        slot = FJ_COUNTER_SLOTS + n % FJ_COUNTER_GRAPH_SLOTS;
    } else {
        slot = atomic_fetch_add(&ctx->counter_next, 1u) % FJ_COUNTER_SLOTS;
    }
    *out = atomic_load(&ctx->counters) + (CUdeviceptr)FJ_COUNTER_SLOT_BYTES * slot;
    return FAJIT_OK;
}

void fj_ws_free(fajit_ctx *ctx)
{
    CUdeviceptr p = atomic_load(&ctx->counters);
    if (p && ctx->cu->cuCtxSetCurrent(ctx->cuctx) == 0)
        ctx->cu->cuMemFree(p);
    atomic_store(&ctx->counters, 0);
}
