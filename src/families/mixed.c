/* mixed.c - the mixed family: one plan of two families' kernels for a varlen batch over a
 * paged K/V cache that holds chunked-prefill sequences and decode rows (a serving step):
 * the Hopper kernel (fa3.c, paged) for the sequences of more than MIX_DEC_ROWS query rows,
 * then the decode kernel (decode.c) for those of at most MIX_DEC_ROWS. The host never
 * knows which sequence is which (cu_seqlens_q and seqused_k are device arrays): each launch
 * sizes its grid for its own bound and skips the other's sequences on the device. The
 * Hopper launch gets fj_kv_pages.min_q = MIX_DEC_ROWS + 1 (its tiles of shorter sequences
 * exit); the decode launch is its FJ_DEC_QMAX variant with q_len = MIX_DEC_ROWS (its CTAs
 * of longer sequences leave before any work, every merge path leaves their rows alone).
 * Without the split, the Hopper kernel took the whole batch and each decode row became a
 * 128-row query tile per head streaming all its keys.
 *
 * Applies where the Hopper family serves the paged problem (sm_90a, the longest sequence
 * at least FJ_FA3_PAGED_MIN_Q rows, a page size that fits its tile, total_q given, not
 * checked) and outranks it only for varlen batches (rank_for); a fixed-length paged
 * prefill has no decode rows, stays with the Hopper family, and where this family is
 * forced onto one its decode launch has an empty grid. Workspace: the decode launch's
 * (partials over every row, counters); the Hopper launch's tile counter shares the
 * counters (the launches run in stream order, each leaves them zero, and the decode kernel
 * reads them only after its dependent-launch wait). Graph-safe as both kernels are.
 * Tuning-row name: "mix:<fa3 text>+<decode text>", "mix:128x128o1p1s2+64x3m1n4s0"; the
 * candidates are the default alone (each part is the default of its family for its rows).
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "fa3.h"

#define MIX_DEC_ROWS 16   /* the most query rows of a sequence the decode launch serves */

typedef struct fj_mix_config {
    fj_fa3_config fa3;
    fj_dec_config dec;   /* (qmax 1) */
} fj_mix_config;
_Static_assert(sizeof(fj_mix_config) <= FJ_CFG_BYTES, "fj_mix_config fits an fj_kcfg");

static const fj_mix_config *mix_of(const fj_kcfg *c)
{
    return (const fj_mix_config *)(const void *)c->b;
}

static void mix_kcfg(const fj_mix_config *m, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_mixed;
    memcpy(out->b, m, sizeof *m);
}

/* The parts: the Hopper one as its family's configuration, the decode one (its QMAX
 * variant) with the problem it is launched for: at most MIX_DEC_ROWS rows a sequence. */
static void fa3_part(const fj_kcfg *c, fj_kcfg *out) { fj_fa3_kcfg(&mix_of(c)->fa3, out); }
static void dec_part(const fj_kcfg *c, fj_kcfg *out)
{
    fj_dec_config dc = mix_of(c)->dec;
    dc.qmax = 1;
    to_kcfg(&dc, out);
}
static void dec_desc(const fajit_attn_desc *d, fajit_attn_desc *out)
{
    *out = *d;
    out->seqlen_q = MIX_DEC_ROWS;
}

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    fajit_attn_desc dd;
    dec_desc(d, &dd);
    return d->block_table && fj_family_fa3.applies(d, t) && fj_family_decode.applies(&dd, t);
}

/* Varlen paged batches: above the Hopper family's paged rank (40). Fixed length: below
 * every family that applies (warm and the tuner still list its kernels). */
static int rank_for(const fajit_attn_desc *d, const fj_target *t)
{
    (void)t;
    return d->cu_seqlens_q ? 45 : 2;
}

static void make(const fj_kcfg *f3, const fj_kcfg *fd, fj_kcfg *out)
{
    fj_mix_config m;
    memset(&m, 0, sizeof m);
    m.fa3 = *fj_fa3_of(f3);
    m.dec = *of(fd);
    m.dec.qmax = 1;
    mix_kcfg(&m, out);
}

static void default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    dec_desc(d, &dd);
    fj_family_fa3.default_cfg(d, t, &f3);
    fj_family_decode.default_cfg(&dd, t, &fd);
    make(&f3, &fd, out);
}

static int candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    if (max < 1)
        return 0;
    default_cfg(d, t, &out[0]);
    return 1;
}

/* Every shipped configuration of each part, paired in turn (the shorter list repeats its
 * last): warm compiles each part's kernels once. */
static int shipped(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    enum { MAX = 16 };
    fajit_attn_desc dd;
    fj_kcfg f3[MAX], fd[MAX];
    dec_desc(d, &dd);
    const int n3 = fj_family_fa3.shipped(d, t, f3, MAX);
    const int nd = fj_family_decode.shipped(&dd, t, fd, MAX);
    int n = 0;
    for (int i = 0; n3 > 0 && nd > 0 && i < (n3 > nd ? n3 : nd) && n < max; i++)
        make(&f3[i < n3 ? i : n3 - 1], &fd[i < nd ? i : nd - 1], &out[n++]);
    return n;
}

static int check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    dec_desc(d, &dd);
    fa3_part(c, &f3);
    dec_part(c, &fd);
    if (!d->block_table) {
        if (why && n)
            snprintf(why, n, "the mixed plan needs paged K/V (a block table)");
        return -1;
    }
    return fj_family_fa3.check(&f3, d, t, why, n) != 0 ||
                   fj_family_decode.check(&fd, &dd, t, why, n) != 0
               ? -1
               : 0;
}

static void cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    fj_kcfg f3, fd;
    char a[32], b[32];
    fa3_part(c, &f3);
    dec_part(c, &fd);
    fj_family_fa3.cfg_name(&f3, a, sizeof a);
    fj_family_decode.cfg_name(&fd, b, sizeof b);
    snprintf(out, n, "%s+%s", a, b);
}

static int cfg_parse(const char *s, fj_kcfg *c)
{
    char a[32];
    const char *plus = strchr(s, '+');
    fj_kcfg f3, fd;
    if (!plus || (size_t)(plus - s) >= sizeof a)
        return -1;
    memcpy(a, s, (size_t)(plus - s));
    a[plus - s] = 0;
    memset(&f3, 0, sizeof f3);
    memset(&fd, 0, sizeof fd);
    f3.fam = &fj_family_fa3, fd.fam = &fj_family_decode;
    if (fj_family_fa3.cfg_parse(a, &f3) != 0 || fj_family_decode.cfg_parse(plus + 1, &fd) != 0)
        return -1;
    make(&f3, &fd, c);
    return 0;
}

/* [the Hopper kernel, the decode split step, the decode combine step] */
static void kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    fj_kernels k3, kd;
    dec_desc(d, &dd);
    fa3_part(c, &f3);
    dec_part(c, &fd);
    fj_family_fa3.kernels(&f3, d, &k3);
    fj_family_decode.kernels(&fd, &dd, &kd);
    *out = k3;
    for (int i = 0; i < kd.n && out->n < FJ_MAX_LAUNCHES; i++, out->n++) {
        out->v[out->n] = kd.v[i];
        out->threads[out->n] = kd.threads[i];
        out->dyn_smem[out->n] = kd.dyn_smem[i];
        out->pdl[out->n] = kd.pdl[i];
        out->cluster[out->n] = kd.cluster[i];
    }
}

static void describe_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    char a[128], b[384];
    dec_desc(d, &dd);
    fa3_part(c, &f3);
    dec_part(c, &fd);
    fj_family_fa3.describe_grid(&f3, d, t, a, sizeof a);
    fj_family_decode.describe_grid(&fd, &dd, t, b, sizeof b);
    if (d->cu_seqlens_q)
        snprintf(out, n, "fa3 %s over the sequences of more than %d query rows, then dec %s "
                 "over those of at most %d", a, MIX_DEC_ROWS, b, MIX_DEC_ROWS);
    else
        snprintf(out, n, "fa3 %s (fixed length: the decode launch is empty)", a);
}

/* The counters: the larger of the parts' (shared: see the header); the rest: decode's. */
static void workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                      fj_workspace *out)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    fj_workspace w3 = {0, 0, 0};
    dec_desc(d, &dd);
    fa3_part(c, &f3);
    dec_part(c, &fd);
    fj_family_fa3.workspace(&f3, d, t, &w3);
    memset(out, 0, sizeof *out);
    if (d->cu_seqlens_q)
        fj_family_decode.workspace(&fd, &dd, t, out);
    if (w3.counter_bytes > out->counter_bytes)
        out->counter_bytes = w3.counter_bytes;
}

/* The decode launches' view of env: their probe answers at index 0 and 1. */
static void dec_env(const fj_launch_env *env, fj_launch_env *out)
{
    *out = *env;
    for (int i = 0; i + 1 < FJ_MAX_LAUNCHES; i++) {
        out->cluster_max[i] = env->cluster_max[i + 1];
        memcpy(out->cluster_active[i], env->cluster_active[i + 1], sizeof out->cluster_active[i]);
    }
}

static void launch_workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_launch_env *env,
                             fj_workspace *ws)
{
    fajit_attn_desc dd;
    fj_kcfg f3, fd;
    fj_workspace w3 = {0, 0, 0};
    fj_launch_env e;
    if (!d->cu_seqlens_q)
        return;
    dec_desc(d, &dd);
    fa3_part(c, &f3);
    dec_part(c, &fd);
    dec_env(env, &e);
    fj_family_decode.launch_workspace(&fd, &dd, &e, ws);
    fj_family_fa3.workspace(&f3, d, NULL, &w3);
    if (w3.counter_bytes > ws->counter_bytes)
        ws->counter_bytes = w3.counter_bytes;
}

static fajit_status launch_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    fajit_attn_desc dd;
    fj_kcfg fd;
    fj_launch_env e;
    if (i == 0)
        return fj_fa3_launch_args(&mix_of(c)->fa3, d, env, d->cu_seqlens_q ? MIX_DEC_ROWS + 1 : 0,
                                  a, why, n);
    if (!d->cu_seqlens_q) {   /* (no decode rows: nothing to launch) */
        a->grid[0] = a->grid[1] = a->grid[2] = 0;
        return FAJIT_OK;
    }
    dec_desc(d, &dd);
    dec_part(c, &fd);
    dec_env(env, &e);
    return fj_family_decode.launch_args(&fd, i - 1, &dd, &e, a, why, n);
}

static int needs_counters(const fj_target *t) { return t->sm == 90; }

const fj_family fj_family_mixed = {
    .name = "mixed",
    .id = FAJIT_FAMILY_MIXED,
    .op = FAJIT_OP_FWD,
    .rank = 45,
    /* the features both of its families ran with (gpu-features' paged cases) */
    .ran_features = FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI,
    .rank_for = rank_for,
    .cfg_prefix = "mix:",
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
    .launch_workspace = launch_workspace,
    .launch_args = launch_args,
    .needs_counters = needs_counters,
};
