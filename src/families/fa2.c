/* fa2.c - the portable family (src/kernels_src/attn_fwd_sm80.cu, FlashAttention-2 design):
 * every target from sm_80, the whole descriptor. Configurations, their checks and tuning
 * candidates are src/autotune/fa2_config.*; this file turns them into kernels and launches.
 * Tuning-row name: "128x64w4s1" (no prefix: these rows predate the others). Model features:
 * softcap, sinks, ALiBi, and head_dim_v <= head_dim. */
#include <stdio.h>
#include <string.h>

#include "fa2.h"
#include "params.h"

_Static_assert(sizeof(fj_fa2_config) <= FJ_CFG_BYTES, "fj_fa2_config fits an fj_kcfg");

const fj_fa2_config *fj_fa2_of(const fj_kcfg *c)
{
    return c->fam == &fj_family_fa2 ? (const fj_fa2_config *)(const void *)c->b : NULL;
}

void fj_fa2_kcfg(const fj_fa2_config *f, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_fa2;
    memcpy(out->b, f, sizeof *f);
}

/* The model features the portable kernel compiles in (head_dim_v: FJ_HEAD_DIM_V, at most
 * head_dim: V's tiles keep head_dim's shared rows). */
#define FA2_FEATURES (FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI | FJ_FEAT_HDIM_V)

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    return t->sm >= 80 && !d->block_table && !(fj_features(d) & ~FA2_FEATURES) &&
           fj_head_dim_v(d) <= d->head_dim;
}

static void default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_fa2_config c = fj_fa2_default(t->sm, d->head_dim, (int)d->mask);
    /* head_dim_v: one K/V stage where the default has two (head_dim 128 on sm_90, 128x64w4s2,
     * sits at 255 registers: with head_dim_v 64 or 72 it spilled 4 bytes; one stage, sm_80's
     * tile, compiles clean) */
    if ((fj_features(d) & FJ_FEAT_HDIM_V) && c.stages == 2) {
        fj_fa2_config one = c;
        one.stages = 1;
        if (fj_fa2_check(&one, d->head_dim, t->sm, NULL, 0) == 0)
            c = one;
    }
    fj_fa2_kcfg(&c, out);
}

static int candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    fj_fa2_config c[32];
    int k = fj_fa2_candidates(t->sm, d->head_dim, (int)d->mask, c, 32), n = 0;
    for (; n < k && n < max; n++)
        fj_fa2_kcfg(&c[n], &out[n]);
    return n;
}

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
    return fj_fa2_check(fj_fa2_of(c), d->head_dim, t->sm, why, n);
}

static void cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    const fj_fa2_config *f = fj_fa2_of(c);
    snprintf(out, n, "%dx%dw%ds%d", f->block_m, f->block_n, f->warps, f->stages);
}

static int cfg_parse(const char *s, fj_kcfg *c)
{
    fj_fa2_config f;
    char tail;
    if (sscanf(s, "%dx%dw%ds%d%c", &f.block_m, &f.block_n, &f.warps, &f.stages, &tail) != 4)
        return -1;
    fj_fa2_kcfg(&f, c);
    return 0;
}

static void kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    const fj_fa2_config *f = fj_fa2_of(c);
    const int dt = (int)d->dtype, hd = d->head_dim, mask = (int)d->mask;
    char feat[128], tag[48];
    fj_feat_defines(d, feat, sizeof feat);   /* "" without features: the same kernel */
    fj_feat_tag(d, tag, sizeof tag);
    memset(out, 0, sizeof *out);
    fj_variant *v = &out->v[0];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_fwd_sm80.cu";
    v->function = "fj_attn_fwd_sm80";
    snprintf(v->preamble, sizeof v->preamble,
             "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_MASK %d\n"
             "#define FJ_BLOCK_M %d\n#define FJ_BLOCK_N %d\n#define FJ_WARPS %d\n"
             "#define FJ_STAGES %d\n%s",
             dt, hd, mask, f->block_m, f->block_n, f->warps, f->stages, feat);
    snprintf(v->name, sizeof v->name, "fa2 %s d%d %s %dx%d w%d s%d%s", fj_dtype_name(dt), hd,
             fj_mask_name(mask), f->block_m, f->block_n, f->warps, f->stages, tag);
    out->threads[0] = f->warps * 32;
    out->dyn_smem[0] = (int)fj_fa2_smem_bytes(f, hd);
    out->n = 1;
}

static void describe_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    (void)d, (void)t;
    snprintf(out, n, "grid (ceil(seqlen_q/%d), heads_q, batch)", fj_fa2_of(c)->block_m);
}

static fajit_status launch_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    (void)i, (void)env;
    return fj_grid_args(d, fj_fa2_of(c)->block_m, a, why, n);
}

const fj_family fj_family_fa2 = {
    .name = "fa2",
    .id = FAJIT_FAMILY_FA2,
    .op = FAJIT_OP_FWD,
    .rank = 10,
    /* gpu-features on Hopper (sm_80 code compiled for sm_90) */
    .ran_features = FA2_FEATURES,
    .cfg_prefix = "",
    .applies = applies,
    .default_cfg = default_cfg,
    .candidates = candidates,
    .shipped = shipped,
    .check = check,
    .cfg_name = cfg_name,
    .cfg_parse = cfg_parse,
    .kernels = kernels,
    .describe_grid = describe_grid,
    .launch_args = launch_args,
};
