/* kplan.c - one configuration made ready and launched: its kernels loaded (memory, cache or
 * compile) with their shared memory and cluster sizes, its workspace (the caller's, or the
 * context's counter ring and stream-ordered scratch), the checked-mode report, and the
 * launches in order on one stream. Dispatch and the validation gate both use it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void fj_kplan_workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                        fj_workspace *ws)
{
    memset(ws, 0, sizeof *ws);
    if (c->fam->workspace)
        c->fam->workspace(c, d, t, ws);
}

size_t fj_ws_counter_span(const fj_workspace *ws)
{
    return (ws->counter_bytes + 255) / 256 * 256;
}

static fajit_status load_one(fajit_ctx *ctx, fj_kplan *kp, int i, unsigned flags)
{
    const fj_variant *v = &kp->ks.v[i];
    FJ_CHECK(fj_kernel_get(ctx, v, flags, &kp->k[i]));
    char err[64];
    CUresult r = fj_func_dyn_smem(ctx->cu, kp->k[i]->fn, kp->ks.dyn_smem[i]);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "raising the shared memory of %s to %d: %s", v->name,
                 kp->ks.dyn_smem[i], fj_cuda_errname(ctx->cu, r, err, sizeof err));
    /* The clusters the GPU runs of it. A cluster launch asks for at least half the SM's
     * shared memory, so that each CTA of a cluster has an SM to itself: where two or three
     * fit one SM, a GPC stacks a cluster's CTAs on fewer SMs, halving a streaming kernel's
     * SMs (decode q_len 8, 74 KB CTAs: 1.6-4 us slower on the H200 with clusters of 4-8,
     * also under the SPREAD scheduling policy; dev/decode/NOTES.md, 2026-12-04). */
    if (kp->ks.cluster[i] > 1 && ctx->cc >= 90) {   /* (fj_kplan_load zeroed the fields) */
        const int own = kp->ks.dyn_smem[i], half = ctx->smem_optin / 2 + 1024;
        const int cs = half > own && half < ctx->smem_optin ? half : own;
        if (cs == own || fj_func_dyn_smem(ctx->cu, kp->k[i]->fn, cs) == 0) {
            kp->cluster_smem[i] = cs;
            kp->cluster_max[i] = fj_cluster_probe(ctx->cu, kp->k[i]->fn,
                                                  (unsigned)kp->ks.threads[i], (unsigned)cs,
                                                  kp->ks.cluster[i], kp->cluster_active[i]);
        }
    }
    return FAJIT_OK;
}

/* Loading a module and raising a function's shared memory are not stream work, but while the
 * calling thread captures a stream (CUDA graphs) in global or thread-local mode the driver
 * refuses them and invalidates the capture. A kernel's first use may come inside an
 * application's capture: the thread is in relaxed mode for the loads only. */
fajit_status fj_kplan_load(fajit_ctx *ctx, fj_kplan *kp, const fajit_attn_desc *d,
                           unsigned flags)
{
    const fj_cuda *cu = ctx->cu;
    kp->cfg.fam->kernels(&kp->cfg, d, &kp->ks);
    memset(kp->k, 0, sizeof kp->k);
    memset(kp->cluster_max, 0, sizeof kp->cluster_max);
    memset(kp->cluster_active, 0, sizeof kp->cluster_active);
    memset(kp->cluster_smem, 0, sizeof kp->cluster_smem);
    int mode = FJ_CU_CAPTURE_MODE_RELAXED;
    int swapped = cu->cuThreadExchangeStreamCaptureMode &&
                  cu->cuThreadExchangeStreamCaptureMode(&mode) == 0;
    fajit_status st = FAJIT_OK;
    for (int i = 0; i < kp->ks.n && st == FAJIT_OK; i++)
        st = load_one(ctx, kp, i, flags);
    if (swapped)
        cu->cuThreadExchangeStreamCaptureMode(&mode);
    return st;
}

/* The workspace of one call: from the caller's desc->workspace (held to the plan's whole
 * workspace), else the context's counter ring and stream-ordered scratch, as much of them
 * as this launch uses (fj_family.launch_workspace: e.g. none for a cluster merge). */
static fajit_status take_workspace(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                                   const fj_workspace *whole, void *stream, fj_launch_env *env,
                                   CUdeviceptr *to_free)
{
    char err[64];
    fj_workspace used = *whole;
    const fj_workspace *ws = d->workspace ? whole : &used;
    if (!d->workspace && kp->cfg.fam->launch_workspace)
        kp->cfg.fam->launch_workspace(&kp->cfg, d, env, &used);
    if (!ws->counter_bytes && !ws->scratch_bytes)
        return FAJIT_OK;
    if (d->workspace) {
        size_t need = ws->scratch_bytes ? fj_ws_counter_span(ws) + ws->scratch_bytes
                                        : ws->counter_bytes;
        FJ_RETURN_IF(d->workspace_bytes < need, ctx, FAJIT_INVALID_ARGUMENT,
                     "workspace_bytes must be at least %zu for %s (fajit_attn_workspace_size), "
                     "got %zu", need, kp->ks.v[0].name, d->workspace_bytes);
        env->counters = ws->counter_bytes ? (CUdeviceptr)(uintptr_t)d->workspace : 0;
        env->scratch = ws->scratch_bytes
                           ? (CUdeviceptr)(uintptr_t)d->workspace + fj_ws_counter_span(ws) : 0;
        return FAJIT_OK;
    }
    const fj_cuda *cu = ctx->cu;
    FJ_RETURN_IF(ws->scratch_bytes && (!cu->cuMemAllocAsync || !cu->cuMemFreeAsync), ctx,
                 FAJIT_UNSUPPORTED, "%s needs %zu B of scratch and the driver lacks "
                 "cuMemAllocAsync: pass desc->workspace", kp->ks.v[0].name, ws->scratch_bytes);
    if (ws->counter_bytes)
        FJ_CHECK(fj_ws_counters(ctx, stream, ws->counter_bytes, &env->counters));
    if (ws->scratch_bytes) {
        CUresult r = cu->cuMemAllocAsync(&env->scratch, ws->scratch_bytes, (CUstream)stream);
        FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "cuMemAllocAsync(%zu): %s", ws->scratch_bytes,
                     fj_cuda_errname(cu, r, err, sizeof err));
        *to_free = env->scratch;
    }
    return FAJIT_OK;
}

/* Checked mode: zeroed report memory before the launches (synchronous: this mode is for
 * finding bad device-side indices, not for speed). */
static fajit_status take_report(fajit_ctx *ctx, const fj_workspace *ws, fj_launch_env *env)
{
    const fj_cuda *cu = ctx->cu;
    char err[64];
    if (!ws->report_bytes)
        return FAJIT_OK;
    FJ_RETURN_IF(!cu->cuMemAlloc || !cu->cuMemsetD8 || !cu->cuMemcpyDtoH || !cu->cuMemFree ||
                     !cu->cuCtxSynchronize, ctx, FAJIT_UNSUPPORTED,
                 "the checked mode needs cuMemAlloc, cuMemsetD8, cuMemcpyDtoH and "
                 "cuCtxSynchronize in the driver table");
    CUresult r = cu->cuMemAlloc(&env->report, ws->report_bytes);
    if (!r && (r = cu->cuMemsetD8(env->report, 0, ws->report_bytes)) != 0)
        cu->cuMemFree(env->report), env->report = 0;
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "allocating the checked mode's report: %s",
                 fj_cuda_errname(cu, r, err, sizeof err));
    return FAJIT_OK;
}

/* Checked mode: waits for the launches, reads the report back and asks the family. */
static fajit_status read_report(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                                const fj_workspace *ws, CUdeviceptr report)
{
    const fj_cuda *cu = ctx->cu;
    unsigned char buf[256];
    char err[256];
    CUresult r = cu->cuCtxSynchronize();
    if (!r)
        r = cu->cuMemcpyDtoH(buf, report, ws->report_bytes < sizeof buf ? ws->report_bytes
                                                                         : sizeof buf);
    cu->cuMemFree(report);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "checked mode: waiting for %s: %s",
                 kp->ks.v[0].name, fj_cuda_errname(cu, r, err, sizeof err));
    err[0] = 0;
    fajit_status st = kp->cfg.fam->report(&kp->cfg, d, buf, err, sizeof err);
    return st == FAJIT_OK ? st : fj_fail(ctx, st, "checked mode: %s", err);
}

fajit_status fj_kplan_launch(fajit_ctx *ctx, const fj_kplan *kp, const fajit_attn_desc *d,
                             void *stream)
{
    char err[256];
    if (d->seqlen_q == 0)   /* varlen batch whose sequences are all empty */
        return FAJIT_OK;
    const fj_family *f = kp->cfg.fam;
    const fj_target t = fj_target_of(ctx, NULL);
    fj_workspace ws;
    fj_kplan_workspace(&kp->cfg, d, &t, &ws);
    fj_launch_env env = {ctx->cu, ctx->sm_count, 0, 0, 0, ctx->cc, {0}, {{0}}, &ctx->fopts};
    for (int i = 0; i < kp->ks.n && t.sm >= 90; i++) {
        env.cluster_max[i] = kp->cluster_max[i];
        memcpy(env.cluster_active[i], kp->cluster_active[i], sizeof env.cluster_active[i]);
    }
    CUdeviceptr scratch = 0;   /* stream-ordered scratch to give back after the launches */
    FJ_CHECK(take_workspace(ctx, kp, d, &ws, stream, &env, &scratch));
    fajit_status st = take_report(ctx, &ws, &env);
    for (int i = 0; i < kp->ks.n && st == FAJIT_OK; i++) {
        fj_args a;
        a.used = 0, a.n = 0, a.cluster = 0;
        err[0] = 0;
        st = f->launch_args(&kp->cfg, i, d, &env, &a, err, sizeof err);
        if (st != FAJIT_OK) {
            st = fj_fail(ctx, st, "%s: %s", kp->ks.v[i].name, err);
            break;
        }
        if (!a.grid[0] || !a.grid[1] || !a.grid[2])
            continue;
        const int smem = a.cluster > 1 && kp->cluster_smem[i] > kp->ks.dyn_smem[i]
                             ? kp->cluster_smem[i] : kp->ks.dyn_smem[i];
        CUresult r = fj_launch(ctx->cu, kp->k[i]->fn, a.grid, (unsigned)kp->ks.threads[i],
                               (unsigned)smem, (CUstream)stream, a.ptr,
                               kp->ks.pdl[i] && t.sm >= 90, a.cluster);
        if (r)
            st = fj_fail(ctx, FAJIT_CUDA_ERROR, "cuLaunchKernel(%s): %s", kp->ks.v[i].name,
                         fj_cuda_errname(ctx->cu, r, err, sizeof err));
    }
    if (scratch)
        ctx->cu->cuMemFreeAsync(scratch, (CUstream)stream);
    if (env.report)
        st = st == FAJIT_OK ? read_report(ctx, kp, d, &ws, env.report)
                            : (ctx->cu->cuMemFree(env.report), st);
    return st;
}
