/* fa4.c - the Blackwell family (src/kernels_src/attn_fwd_sm100.cu, FlashAttention-4 design):
 * compute capability 10.0 (sm_100a) and 10.3 (sm_103a), f16/bf16, head_dim 64, 96, 128, 192,
 * 256; varlen only with total_q/total_k given (its TMA descriptors need them). Tile
 * configurations, defaults per target, budgets, checks and candidates are
 * src/autotune/fa4_config.*; this file turns them into kernels and launches: the preamble, the
 * launch shape (a persistent grid), three TMA descriptors per call (the Q/K/V
 * encoder of src/families/target.c, with a 128-row Q box), and a tile counter for the dynamic
 * order. Tuning-row name: "fa4:256x128s4e10r8d1".
 *
 * Compiled and checked, never run: no Blackwell GPU was available when it was written
 * (status_note, shown by `fajit-tune plan` and `info`). Under the default validation policy
 * (FAJIT_VALIDATE=warm) such a family is validated on first use on a GPU class without a
 * verdict before it serves (src/api/dispatch.c, pick_family). */
#include <stdio.h>
#include <string.h>

#include "fa4.h"
#include "params.h"
#include "target.h"

_Static_assert(sizeof(fj_fa4_config) <= FJ_CFG_BYTES, "fj_fa4_config fits an fj_kcfg");

const fj_fa4_config *fj_fa4_of(const fj_kcfg *c)
{
    return c->fam == &fj_family_fa4 ? (const fj_fa4_config *)(const void *)c->b : NULL;
}

void fj_fa4_kcfg(const fj_fa4_config *f, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_fa4;
    memcpy(out->b, f, sizeof *f);
}

int fj_fa4_threads(const fj_fa4_config *c) { return 128 * (c->block_m / 128 + 2); }

static int target_ok(const fj_target *t) { return fj_fa4_target_ok(t->sm) && t->arch_a; }

/* The model features the Blackwell kernel compiles in. */
#define FA4_FEATURES 0u

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    if (!target_ok(t) || (fj_features(d) & ~FA4_FEATURES))
        return 0;
    fj_fa4_config c = fj_fa4_default(d->head_dim, (int)d->mask, t->sm);
    int varlen_ok = !d->cu_seqlens_q || (d->total_q > 0 && d->total_k > 0);
    return varlen_ok && !d->block_table && fj_fa4_check(&c, d->head_dim, t->sm, NULL, 0) == 0;
}

static void default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_fa4_config c = fj_fa4_default(d->head_dim, (int)d->mask, t->sm);
    fj_fa4_kcfg(&c, out);
}

static int candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    fj_fa4_config c[8];
    int k = fj_fa4_candidates(d->head_dim, (int)d->mask, t->sm, c, 8), n = 0;
    for (; n < k && n < max; n++)
        fj_fa4_kcfg(&c[n], &out[n]);
    return n;
}

/* One default per (head_dim, mask, target): no length classes (nothing measured yet). */
static int shipped(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    default_cfg(d, t, out);
    return 1;
}

static int check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n)
{
    if (!target_ok(t)) {
        if (why && n)
            snprintf(why, n, "the Blackwell kernel needs sm_100a or sm_103a");
        return -1;
    }
    return fj_fa4_check(fj_fa4_of(c), d->head_dim, t->sm, why, n);
}

static void cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    const fj_fa4_config *f = fj_fa4_of(c);
    snprintf(out, n, "%dx%ds%de%dr%dd%d", f->block_m, f->block_n, f->stages, f->emu, f->rescale,
             f->sched);
}

static int cfg_parse(const char *s, fj_kcfg *c)
{
    fj_fa4_config f;
    char tail;
    if (sscanf(s, "%dx%ds%de%dr%dd%d%c", &f.block_m, &f.block_n, &f.stages, &f.emu, &f.rescale,
               &f.sched, &tail) != 6)
        return -1;
    fj_fa4_kcfg(&f, c);
    return 0;
}

int fj_fa4_preamble(const fj_fa4_config *c, int dtype, int head_dim, int mask, char *buf,
                    size_t n)
{
    int r = snprintf(buf, n,
                     "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_MASK %d\n"
                     "#define FJ_BLOCK_M %d\n#define FJ_BLOCK_N %d\n#define FJ_FA4_STAGES %d\n"
                     "#define FJ_FA4_EMU %d\n#define FJ_FA4_RESCALE %d\n#define FJ_FA4_SCHED %d\n",
                     dtype, head_dim, mask, c->block_m, c->block_n, c->stages, c->emu, c->rescale,
                     c->sched);
    return r < 0 || (size_t)r >= n ? -1 : r;
}

static void kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    const fj_fa4_config *f = fj_fa4_of(c);
    const int dt = (int)d->dtype, hd = d->head_dim, mask = (int)d->mask;
    memset(out, 0, sizeof *out);
    fj_variant *v = &out->v[0];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_fwd_sm100.cu";
    v->function = "fj_attn_fwd_sm100";
    fj_fa4_preamble(f, dt, hd, mask, v->preamble, sizeof v->preamble);
    snprintf(v->name, sizeof v->name, "fa4 %s d%d %s %dx%d s%d e%d r%d d%d", fj_dtype_name(dt),
             hd, fj_mask_name(mask), f->block_m, f->block_n, f->stages, f->emu, f->rescale,
             f->sched);
    out->threads[0] = fj_fa4_threads(f);
    out->dyn_smem[0] = (int)fj_fa4_smem_bytes(f, hd);
    out->n = 1;
}

static void describe_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    (void)d, (void)t;
    const fj_fa4_config *f = fj_fa4_of(c);
    snprintf(out, n, "persistent grid (one CTA per SM, %d-row tiles, %s)", f->block_m,
             f->sched ? "dynamic longest-first order" : "static order");
}

static void workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                      fj_workspace *out)
{
    (void)d, (void)t;
    out->counter_bytes = fj_fa4_of(c)->sched ? sizeof(int) : 0;
}

static fajit_status launch_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    const fj_fa4_config *f = fj_fa4_of(c);
    fj_attn_params p;
    fj_tmap maps[3];
    (void)i;
    if (!env->cu->cuTensorMapEncodeTiled) {
        snprintf(why, n, "the driver lacks cuTensorMapEncodeTiled (needed by the sm_100a kernel)");
        return FAJIT_UNSUPPORTED;
    }
    fj_params_from_desc(d, &p);
    /* The Q/K/V maps (target.c), box {64, 128 (one Q tile), block_n, 1, 1}: encoded per call
     * (they hold addresses and shapes). */
    if (fj_qkv_encode_tmaps(env->cu, &p, (int)d->dtype, 128, f->block_n, d->total_q, d->total_k, 0,
                            maps, why, n) != 0)
        return FAJIT_INVALID_ARGUMENT;
    const long long tiles = fj_tiles(p.seqlen_q, f->block_m) * p.heads_q * p.batch;
    a->grid[0] = (unsigned)(tiles < env->sm_count ? tiles : env->sm_count);
    a->grid[1] = a->grid[2] = 1;
    CUdeviceptr ctr = env->counters;   /* the dynamic order's tile counter, else unused */
    if (fj_args_push(a, &p, sizeof p, 8) || fj_args_push(a, &maps[0], sizeof maps[0], 64) ||
        fj_args_push(a, &maps[1], sizeof maps[1], 64) ||
        fj_args_push(a, &maps[2], sizeof maps[2], 64) || fj_args_push(a, &ctr, sizeof ctr, 8)) {
        snprintf(why, n, "the kernel's arguments exceed %d bytes", FJ_ARGS_BYTES);
        return FAJIT_UNSUPPORTED;
    }
    return FAJIT_OK;
}

static int needs_counters(const fj_target *t) { return fj_fa4_target_ok(t->sm); }

const fj_family fj_family_fa4 = {
    .name = "fa4",
    .id = FAJIT_FAMILY_FA4,
    .op = FAJIT_OP_FWD,
    .rank = 25,   /* above fa2 (AUTO takes it on sm_100a / sm_103a), below decode */
    .cfg_prefix = "fa4:",
    .applies = applies,
    .default_cfg = default_cfg,
    .candidates = candidates,
    .shipped = shipped,
    .check = check,
    .cfg_name = cfg_name,
    .cfg_parse = cfg_parse,
    .kernels = kernels,
    .describe_grid = describe_grid,
    .workspace = workspace,
    .launch_args = launch_args,
    .needs_counters = needs_counters,
    .status_note = "compiled and checked (NVRTC, ptxas resources) but not run on hardware: "
                   "no Blackwell GPU was available; validated on first use on each GPU class",
};
