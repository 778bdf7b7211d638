/* ref.c - the reference family (src/kernels_src/attn_ref.cu): the naive kernel, the oracle of
 * every fast kernel. It serves every problem on every target and is the lowest-ranked
 * family: dispatch takes it only where nothing else applies (before sm_80) or when asked
 * (fajit_attn_fwd_reference). One configuration: none; one kernel per dtype. */
#include <stdio.h>
#include <string.h>

#include "family.h"
#include "params.h"

#define REF_THREADS 256   /* FJ_REF_THREADS in attn_ref.cu */

/* The model features the reference kernel compiles in (head_dim_v: FJ_HEAD_DIM_V). */
#define REF_FEATURES (FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI | FJ_FEAT_HDIM_V)

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    (void)t;
    return !d->block_table && !(fj_features(d) & ~REF_FEATURES);   /* all but paged K/V */
}

static void default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    (void)d, (void)t;
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_ref;
}

static int one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    default_cfg(d, t, out);
    return 1;
}

static int check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n)
{
    (void)c, (void)d, (void)t, (void)why, (void)n;
    return 0;
}

static void cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    (void)c;
    if (n)
        out[0] = 0;   /* the row name is the prefix alone: "ref" */
}

static int cfg_parse(const char *s, fj_kcfg *c)
{
    (void)c;
    return *s ? -1 : 0;
}

static void kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    (void)c;
    char feat[128], tag[48];
    fj_feat_defines(d, feat, sizeof feat);
    fj_feat_tag(d, tag, sizeof tag);
    memset(out, 0, sizeof *out);
    fj_variant *v = &out->v[0];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_ref.cu";
    v->function = "fj_attn_ref";
    snprintf(v->preamble, sizeof v->preamble, "#define FJ_DTYPE %d\n%s", (int)d->dtype, feat);
    snprintf(v->name, sizeof v->name, "ref %s%s", fj_dtype_name((int)d->dtype), tag);
    out->threads[0] = REF_THREADS;
    out->n = 1;
}

static void describe_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    (void)d, (void)t;
    (void)c;
    snprintf(out, n, "grid (ceil(seqlen_q/1), heads_q, batch)");
}

static fajit_status launch_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    (void)c, (void)i, (void)env;
    return fj_grid_args(d, 1, a, why, n);
}

const fj_family fj_family_ref = {
    .name = "ref",
    .id = FAJIT_FAMILY_REF,
    .op = FAJIT_OP_FWD,
    .rank = FJ_RANK_ORACLE,
    .ran_features = REF_FEATURES,   /* gpu-features */
    .cfg_prefix = "ref",
    .applies = applies,
    .default_cfg = default_cfg,
    .candidates = one,
    .shipped = one,
    .check = check,
    .cfg_name = cfg_name,
    .cfg_parse = cfg_parse,
    .kernels = kernels,
    .describe_grid = describe_grid,
    .launch_args = launch_args,
};
