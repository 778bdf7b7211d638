/* fa3.c - the Hopper family (src/kernels_src/attn_fwd_sm90.cu, FlashAttention-3 design):
 * compute capability 9.0 exactly, the sm_90a target, f16/bf16, head_dim a multiple of 16;
 * varlen only with total_q/total_k given (its TMA descriptors need them). Tile
 * configurations, defaults per length class, checks and candidates are
 * src/autotune/fa3_config.*; this file turns them into kernels and launches: the preamble,
 * the launch shape, three TMA descriptors per call, and a tile counter for the dynamic
 * (longest-first) schedule. Tuning-row name: "fa3:128x176o1p1s1".
 *
 * Paged K/V (a block table): prefill and chunked prefill with at least FJ_FA3_PAGED_MIN_Q
 * query rows (the longest sequence's), where the page size fits the tile (fj_fa3_page_fit:
 * pages that hold whole K/V blocks, or blocks of whole pages of a multiple of 8 rows), the
 * varlen packed row count total_q given, the context not checked (the decode family
 * tests every page id there), and the context not set to FAJIT_PAGED_PREFILL=decode
 * (fj_target.paged_hopper). It then outranks the decode family (rank_for), which keeps
 * decode rows, other page sizes and the checked mode. A varlen paged batch goes to the mixed
 * family (mixed.c) instead: this kernel with fj_kv_pages.min_q 17 for its long sequences,
 * the decode kernel for the rest (fj_fa3_launch_args).
 *
 * Model features (FA3_FEATURES): softcap, sinks and ALiBi, in every variant (contiguous, varlen,
 * paged); fj_fa3_launch_args pushes their fj_feat_params last, for the mixed family too. And
 * head_dim_v != head_dim (FJ_HEAD_DIM_V: a multiple of 16 at most head_dim, DeepSeek's 192 /
 * 128; V's tensor map of head_dim_v columns; the tiles of fj_fa3_default_v). */
#include <stdio.h>
#include <string.h>

#include "fa3.h"
#include "params.h"
#include "target.h"

_Static_assert(sizeof(fj_fa3_config) <= FJ_CFG_BYTES, "fj_fa3_config fits an fj_kcfg");

const fj_fa3_config *fj_fa3_of(const fj_kcfg *c)
{
    return c->fam == &fj_family_fa3 ? (const fj_fa3_config *)(const void *)c->b : NULL;
}

void fj_fa3_kcfg(const fj_fa3_config *f, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_fa3;
    memcpy(out->b, f, sizeof *f);
}

static int target_ok(const fj_target *t) { return t->sm == 90 && t->arch_a; }

int fj_fa3_page_fit(int block_n, int page_size)
{
    return page_size >= 1 &&
           (page_size % block_n == 0 || (block_n % page_size == 0 && page_size % 8 == 0));
}

/* Whether configuration c serves d's registers: with 2 consumer warpgroups, paged K/V or a
 * model feature, its accumulators fit the consumers' registers (232 paged, the producer taking
 * 32 there: 128x176 at head_dim 128 (196) spilled 200 bytes; 240 with features, which spill
 * where the kernel without them already did: 128x176 and 128x192 at head_dim 128 causal). */
#define FA3_PAGED_ACC_MAX 190
/* paged with ALiBi (its bias's registers): 128x80 at head_dim 256 (188) spilled 4 bytes */
#define FA3_PAGED_ALIBI_ACC_MAX 186
static int acc_max(const fajit_attn_desc *d)
{
    return d->block_table && d->alibi_slopes ? FA3_PAGED_ALIBI_ACC_MAX : FA3_PAGED_ACC_MAX;
}
/* (O's accumulators: head_dim_v / 2) */
static int acc_ok(const fj_fa3_config *c, const fajit_attn_desc *d)
{
    return c->block_m != 128 || fj_head_dim_v(d) / 2 + 3 * c->block_n / 4 <= acc_max(d);
}
/* Whether configuration c serves paged d: its K/V blocks fit the pages, its accumulators the
 * registers. */
static int paged_cfg_ok(const fj_fa3_config *c, const fajit_attn_desc *d)
{
    return fj_fa3_page_fit(c->block_n, d->page_size) && acc_ok(c, d);
}
/* Whether configuration c serves d (the checks beyond fj_fa3_check's): paged_cfg_ok with a
 * block table, acc_ok with model features. */
static int cfg_ok(const fj_fa3_config *c, const fajit_attn_desc *d)
{
    return d->block_table ? paged_cfg_ok(c, d) : !fj_features(d) || acc_ok(c, d);
}

/* The configuration for d: the length class's default; with a block table or model features,
 * where that does not serve d (cfg_ok), the same with the largest block_n of the candidates
 * that does (-1: none). */
static int default_of(const fajit_attn_desc *d, fj_fa3_config *out)
{
    *out = fj_fa3_default_v(d->head_dim, d->head_dim_v, (int)d->mask, d->seqlen_q);
    if (cfg_ok(out, d))
        return fj_fa3_check_v(out, d->head_dim, d->head_dim_v, 90, NULL, 0);
    fj_fa3_config c[32];
    const int k = fj_fa3_candidates_v(d->head_dim, d->head_dim_v, (int)d->mask, d->seqlen_q, c,
                                      32);
    int best = -1;
    for (int i = 0; i < k; i++)
        if (c[i].block_m == out->block_m && c[i].persistent == out->persistent &&
            cfg_ok(&c[i], d) && (best < 0 || c[i].block_n > c[best].block_n))
            best = i;
    for (int i = 0; i < k && best < 0; i++)   /* then any tile that fits */
        if (cfg_ok(&c[i], d))
            best = i;
    if (best < 0)
        return -1;
    *out = c[best];
    return 0;
}

static int paged_ok(const fajit_attn_desc *d, const fj_target *t)
{
    return t->paged_hopper && d->seqlen_q >= FJ_FA3_PAGED_MIN_Q && !t->checked &&
           (!d->cu_seqlens_q || d->total_q > 0);
}

/* The model features the Hopper kernel compiles in (FJ_SOFTCAP, FJ_SINKS, FJ_ALIBI: its
 * preamble, a tag in the variant's name, fj_feat_params as the launch's last argument;
 * FJ_HEAD_DIM_V: the preamble and the tag, where fj_fa3_check_v takes head_dim_v). */
#define FA3_FEATURES (FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI | FJ_FEAT_HDIM_V)

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    fj_fa3_config c;
    if (!target_ok(t) || (fj_features(d) & ~FA3_FEATURES) || default_of(d, &c) != 0)
        return 0;
    if (d->block_table)
        return paged_ok(d, t);
    return !d->cu_seqlens_q || (d->total_q > 0 && d->total_k > 0);
}

/* Paged prefill: above the decode family (rank 30). */
static int rank_for(const fajit_attn_desc *d, const fj_target *t)
{
    (void)t;
    return d->block_table ? 40 : 20;
}

static void default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    fj_fa3_config c;
    (void)t;
    default_of(d, &c);
    fj_fa3_kcfg(&c, out);
}

static int candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    fj_fa3_config c[32], def;
    (void)t;
    int k = fj_fa3_candidates_v(d->head_dim, d->head_dim_v, (int)d->mask, d->seqlen_q, c, 32),
        n = 0;
    const int sel = d->block_table != NULL || fj_features(d) != 0;   /* (cfg_ok selects) */
    const int has_def = sel && default_of(d, &def) == 0;
    if (has_def && n < max)
        fj_fa3_kcfg(&def, &out[n++]);   /* (the default first, as for contiguous K/V) */
    for (int i = 0; i < k && n < max; i++)
        if (!sel || (cfg_ok(&c[i], d) && !(has_def && memcmp(&c[i], &def, sizeof def) == 0)))
            fj_fa3_kcfg(&c[i], &out[n++]);
    return n;
}

/* The default depends on seqlen_q through its length class: one of each distinct one. */
static int shipped(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    int n = 0;
    (void)t;
    for (int cls = 0; cls < FJ_FA3_CLASSES && n < max; cls++) {
        fajit_attn_desc dc = *d;
        dc.seqlen_q = fj_fa3_class_seqlen(cls);
        fj_fa3_config c;
        int dup = default_of(&dc, &c) != 0;
        for (int i = 0; i < n && !dup; i++)
            dup = memcmp(fj_fa3_of(&out[i]), &c, sizeof c) == 0;
        if (!dup)
            fj_fa3_kcfg(&c, &out[n++]);
    }
    return n;
}

static int check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n)
{
    if (!target_ok(t)) {
        if (why && n)
            snprintf(why, n, "the Hopper kernel needs sm_90a");
        return -1;
    }
    if (d->block_table && !fj_fa3_page_fit(fj_fa3_of(c)->block_n, d->page_size)) {
        if (why && n)
            snprintf(why, n, "paged K/V needs page_size %% block_n == 0, or block_n %% page_size "
                     "== 0 with page_size a multiple of 8, got block_n %d, page_size %d",
                     fj_fa3_of(c)->block_n, d->page_size);
        return -1;
    }
    if (!cfg_ok(fj_fa3_of(c), d)) {
        if (why && n)
            snprintf(why, n, "%s with block_m 128 needs %s/2 + 3*block_n/4 <= %d "
                     "(its consumers get %d registers), got %d",
                     d->block_table ? "paged K/V" : "a model feature",
                     fj_features(d) & FJ_FEAT_HDIM_V ? "head_dim_v" : "head_dim", acc_max(d),
                     d->block_table ? 232 : 240,
                     fj_head_dim_v(d) / 2 + 3 * fj_fa3_of(c)->block_n / 4);
        return -1;
    }
    return fj_fa3_check_v(fj_fa3_of(c), d->head_dim, d->head_dim_v, t->sm, why, n);
}

static void cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    const fj_fa3_config *f = fj_fa3_of(c);
    snprintf(out, n, "%dx%do%dp%ds%d", f->block_m, f->block_n, f->overlap, f->pingpong,
             f->persistent);
}

static int cfg_parse(const char *s, fj_kcfg *c)
{
    fj_fa3_config f;
    char tail;
    if (sscanf(s, "%dx%do%dp%ds%d%c", &f.block_m, &f.block_n, &f.overlap, &f.pingpong,
               &f.persistent, &tail) != 5)
        return -1;
    fj_fa3_kcfg(&f, c);
    return 0;
}

int fj_fa3_preamble(const fj_fa3_config *c, int dtype, int head_dim, int mask, int paged,
                    char *buf, size_t n)
{
    int r = snprintf(buf, n,
                     "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_MASK %d\n"
                     "#define FJ_BLOCK_M %d\n#define FJ_BLOCK_N %d\n#define FJ_FA3_OVERLAP %d\n"
                     "#define FJ_FA3_PINGPONG %d\n#define FJ_FA3_PERSISTENT %d\n"
                     "#define FJ_FA3_SCHED %d\n%s",
                     dtype, head_dim, mask, c->block_m, c->block_n, c->overlap, c->pingpong,
                     c->persistent != 0, c->persistent == 2,
                     paged ? "#define FJ_FA3_PAGED 1\n" : "");
    return r < 0 || (size_t)r >= n ? -1 : r;
}

static void kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    const fj_fa3_config *f = fj_fa3_of(c);
    const int dt = (int)d->dtype, hd = d->head_dim, mask = (int)d->mask;
    memset(out, 0, sizeof *out);
    fj_variant *v = &out->v[0];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_fwd_sm90.cu";
    v->function = "fj_attn_fwd_sm90";
    const int paged = d->block_table != NULL;
    char feat[128], tag[64];
    fj_feat_defines(d, feat, sizeof feat);   /* ("" without features: the kernel unchanged) */
    fj_feat_tag(d, tag, sizeof tag);
    const int r = fj_fa3_preamble(f, dt, hd, mask, paged, v->preamble, sizeof v->preamble);
    if (r >= 0)
        snprintf(v->preamble + r, sizeof v->preamble - (size_t)r, "%s", feat);
    snprintf(v->name, sizeof v->name, "fa3 %s d%d %s %dx%d o%d p%d s%d%s%s", fj_dtype_name(dt),
             hd, fj_mask_name(mask), f->block_m, f->block_n, f->overlap, f->pingpong,
             f->persistent, paged ? " paged" : "", tag);
    out->threads[0] = 128 * (f->block_m / 64 + 1);
    out->dyn_smem[0] = (int)fj_fa3_smem_bytes_v(f, hd, d->head_dim_v);
    out->n = 1;
}

static void describe_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    (void)d, (void)t;
    const fj_fa3_config *f = fj_fa3_of(c);
    if (f->persistent)
        snprintf(out, n, "persistent grid (one CTA per SM%s)",
                 f->persistent == 2 ? ", dynamic tile order" : "");
    else
        snprintf(out, n, "grid (ceil(seqlen_q/%d), heads_q, batch)", f->block_m);
}

static void workspace(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t,
                      fj_workspace *out)
{
    (void)d, (void)t;
    out->counter_bytes = fj_fa3_of(c)->persistent == 2 ? sizeof(int) : 0;
}

void fj_fa3_launch_shape(const fj_fa3_config *c, const fj_attn_params *p, int num_sms,
                         unsigned grid[3], unsigned *threads)
{
    const long long mb = fj_tiles(p->seqlen_q, c->block_m);
    grid[0] = (unsigned)mb;
    grid[1] = (unsigned)p->heads_q;
    grid[2] = (unsigned)p->batch;
    if (c->persistent) {
        const long long tiles = mb * p->heads_q * p->batch;
        grid[0] = (unsigned)(tiles < num_sms ? tiles : num_sms);
        grid[1] = grid[2] = 1;
    }
    *threads = 128u * (unsigned)(c->block_m / 64 + 1);
}

int fj_fa3_encode_paged_tmaps(const fj_cuda *cu, const fajit_attn_desc *d,
                              const fj_attn_params *p, const fj_fa3_config *c, fj_tmap out[3],
                              fj_kv_pages *pg, char *why, size_t n)
{
    const int dt = d->dtype == FAJIT_BF16 ? FJ_TMA_BF16 : FJ_TMA_F16;
    const long long rq = d->cu_seqlens_q ? d->total_q : d->seqlen_q;
    const long long nb = d->cu_seqlens_q ? 1 : d->batch;
    const unsigned rows = d->page_size % c->block_n ? (unsigned)d->page_size : (unsigned)c->block_n;
    if (fj_tmap_encode_4d(cu, &out[0], dt, p->q, d->head_dim, rq, d->heads_q, nb, p->q_row_stride,
                   p->q_head_stride, p->q_batch_stride, (unsigned)c->block_m, "Q", why, n))
        return -1;
    for (int x = 0; x < 2; x++) {
        const int64_t rs = x ? d->v_row_stride : d->k_row_stride;
        const int64_t ps = x ? d->v_page_stride : d->k_page_stride;
        if (fj_tmap_encode_4d(cu, &out[1 + x], dt, x ? p->v : p->k,
                              x ? fj_head_dim_v(d) : d->head_dim, d->page_size,
                       d->heads_kv, d->num_pages, rs, x ? d->v_head_stride : d->k_head_stride,
                       ps ? ps : (int64_t)d->page_size * rs, rows, x ? "V" : "K", why, n))
            return -1;
    }
    memset(pg, 0, sizeof *pg);
    pg->block_table = (fj_u64)(uintptr_t)d->block_table;
    pg->seqused_k = (fj_u64)(uintptr_t)d->seqused_k;
    pg->bt_stride = (fj_i32)d->block_table_stride;
    pg->page_size = d->page_size;
    pg->num_pages = d->num_pages;
    pg->page_shift = -1;
    for (int s = 0; s < 31; s++)
        if (d->page_size == 1 << s)
            pg->page_shift = s;
    return 0;
}

fajit_status fj_fa3_launch_args(const fj_fa3_config *f, const fajit_attn_desc *d,
                                const fj_launch_env *env, int min_q, fj_args *a, char *why,
                                size_t n)
{
    fj_attn_params p;
    fj_tmap maps[3];
    fj_kv_pages pg;
    unsigned threads;
    if (!env->cu->cuTensorMapEncodeTiled) {
        snprintf(why, n, "the driver lacks cuTensorMapEncodeTiled (needed by the sm_90a kernel)");
        return FAJIT_UNSUPPORTED;
    }
    fj_params_from_desc(d, &p);
    if (d->softcap > 0.f) {
        /* FJ_SOFTCAP, as FA3's host does: the kernel takes tanh(scale * p.scale) of the raw
         * scores, and its exponent scale (log2 units) is the cap's */
        p.scale = d->softmax_scale / d->softcap;
        p.scale_log2 = d->softcap * 1.4426950408889634f;
    }
    /* The TMA descriptors hold addresses and shapes: encoded for every call. */
    if (d->block_table) {
        if (fj_fa3_encode_paged_tmaps(env->cu, d, &p, f, maps, &pg, why, n) != 0)
            return FAJIT_INVALID_ARGUMENT;
        pg.min_q = min_q;
    } else if (fj_qkv_encode_tmaps(env->cu, &p, (int)d->dtype, f->block_m, f->block_n, d->total_q,
                                   d->total_k, fj_head_dim_v(d), maps, why, n) != 0)
        return FAJIT_INVALID_ARGUMENT;
    fj_fa3_launch_shape(f, &p, env->sm_count, a->grid, &threads);
    CUdeviceptr ctr = env->counters;   /* the dynamic schedule's tile counter, else unused */
    if (fj_args_push(a, &p, sizeof p, 8) || fj_args_push(a, &maps[0], sizeof maps[0], 64) ||
        fj_args_push(a, &maps[1], sizeof maps[1], 64) ||
        fj_args_push(a, &maps[2], sizeof maps[2], 64) || fj_args_push(a, &ctr, sizeof ctr, 8) ||
        (d->block_table && fj_args_push(a, &pg, sizeof pg, 8)) || fj_feat_push(d, a) != 0) {
        snprintf(why, n, "the kernel's arguments exceed %d bytes", FJ_ARGS_BYTES);
        return FAJIT_UNSUPPORTED;
    }
    return FAJIT_OK;
}

static fajit_status launch_args(const fj_kcfg *c, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    (void)i;
    return fj_fa3_launch_args(fj_fa3_of(c), d, env, 0, a, why, n);
}

static int needs_counters(const fj_target *t) { return t->sm == 90; }

const fj_family fj_family_fa3 = {
    .name = "fa3",
    .id = FAJIT_FAMILY_FA3,
    .op = FAJIT_OP_FWD,
    .rank = 20,
    .ran_features = FA3_FEATURES,   /* gpu-features, flash-attention's hopper tests */
    .rank_for = rank_for,
    .cfg_prefix = "fa3:",
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
};
