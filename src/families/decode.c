/* decode.c - the paged decode / chunked-prefill family (src/kernels_src/attn_decode.cu,
 * FlashDecoding design): every target from sm_80. It serves every problem with a paged K/V
 * cache (block_table: decode, speculative decode, chunked prefill and mixed batches through
 * cu_seqlens_q), and contiguous problems with few query rows per KV head (seqlen_q <= 16 and
 * seqlen_q * heads_q/heads_kv <= 64: a decode step), where the prefill families would
 * waste their query tiles. The G query heads of a KV head are packed into the rows of one
 * tile, so every K/V row is read once per CTA; the keys of a sequence are split over up to
 * FAJIT_MAX_SPLITS CTAs when batch * heads_kv cannot fill the GPU, and the last CTA of each
 * group to finish merges the splits by their LSE (a counter per group from the context's
 * ring), or a combine kernel where the counters would not fit a slot. K/V tiles arrive by
 * cp.async (every target) or, on sm_90 and later where the page size allows, by TMA
 * (FJ_DEC_TMA). Tuning-row name: "dec:64x3m1n4s0" (keys per tile, stages, warps along rows
 * and keys, forced splits: 0 = chosen per call), "t" appended for TMA loads. This file is
 * the family's table (resources, names, kernels, workspace, launches); its rules (default
 * tiles, head packing, candidates, what warm compiles, the split count) are decode_rules.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "params.h"

#define COMBINE_THREADS 128   /* FJ_DEC_COMBINE_THREADS in attn_decode.cu */
#define DEC_CLUSTER_MAX 8     /* the most splits merged as one cluster (use_cluster()) */

/* The model features the decode kernels compile in. */
#define DEC_FEATURES (FJ_FEAT_KV_FP8 | FJ_FEAT_SOFTCAP | FJ_FEAT_SINKS | FJ_FEAT_ALIBI)

static int applies(const fajit_attn_desc *d, const fj_target *t)
{
    if (t->sm < 80 || d->head_dim % 8 || (fj_features(d) & ~DEC_FEATURES))
        return 0;
    if (d->block_table)
        return 1;
    return !d->cu_seqlens_q && d->seqlen_q <= 16 && packed_rows(d) <= 64;
}

static void cfg_name(const fj_kcfg *k, char *out, size_t n)
{
    const fj_dec_config *c = of(k);
    snprintf(out, n, "%dx%dm%dn%ds%d%s%s", c->bn, c->stages, c->wm, c->wn, c->splits,
             hp_tag(c) + (hp_of(c) > 1), c->tma ? "t" : "");
}

static int cfg_parse(const char *s, fj_kcfg *k)
{
    fj_dec_config c = {0};
    int end = -1;
    if (sscanf(s, "%dx%dm%dn%ds%d%n", &c.bn, &c.stages, &c.wm, &c.wn, &c.splits, &end) != 5 ||
        end < 0)
        return -1;
    if (s[end] == 'h') {   /* "h2", "h4": KV heads per CTA */
        int more = -1;
        if (sscanf(s + end, "h%d%n", &c.hp, &more) != 1 || more < 0 || c.hp < 2)
            return -1;
        end += more;
    }
    if (strcmp(s + end, "t") == 0)
        c.tma = 1;
    else if (s[end])
        return -1;
    to_kcfg(&c, k);
    return 0;
}

/* FJ_DEC_QMAX: the mixed family's decode launch leaves longer sequences to its Hopper one */
static const char *qmax_define(const fj_dec_config *c)
{
    return c->qmax ? "#define FJ_DEC_QMAX 1\n" : "";
}

static void kernels(const fj_kcfg *k, const fajit_attn_desc *d, fj_kernels *out)
{
    const fj_dec_config *c = of(k);
    const int dt = (int)d->dtype, hd = d->head_dim;
    char feat[128], tag[48];
    fj_feat_defines(d, feat, sizeof feat);
    fj_feat_tag(d, tag, sizeof tag);
    memset(out, 0, sizeof *out);
    fj_variant *v = &out->v[0];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_decode.cu";
    v->function = "fj_attn_decode";
    snprintf(v->preamble, sizeof v->preamble,
             "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_DEC_BN %d\n"
             "#define FJ_DEC_STAGES %d\n#define FJ_DEC_WM %d\n#define FJ_DEC_WN %d\n"
             "#define FJ_DEC_CHECKED %d\n%s%s%s%s",
             dt, hd, c->bn, c->stages, c->wm, c->wn, c->checked,
             c->tma ? "#define FJ_DEC_TMA 1\n" : "",
             hp_of(c) == 2   ? "#define FJ_DEC_HP 2\n"
             : hp_of(c) == 4 ? "#define FJ_DEC_HP 4\n"
                             : "",
             qmax_define(c), feat);
    snprintf(v->name, sizeof v->name, "dec %s d%d%s %dx%d m%d n%d%s%s%s%s", fj_dtype_name(dt),
             hd, hp_tag(c), c->bn, c->stages, c->wm, c->wn, c->tma ? " tma" : "",
             c->checked ? " checked" : "", c->qmax ? " qmax" : "", tag);
    out->threads[0] = 32 * c->wm * c->wn;
    out->dyn_smem[0] = (int)fj_dec_smem_bytes(c, hd);
    /* one combine kernel per dtype and head_dim serves every split configuration */
    v = &out->v[1];
    v->op = FAJIT_OP_FWD;
    v->source = "attn_decode.cu";
    v->function = "fj_attn_decode_combine";
    snprintf(v->preamble, sizeof v->preamble, "#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n%s",
             dt, hd, qmax_define(c));
    snprintf(v->name, sizeof v->name, "dec combine %s d%d%s", fj_dtype_name(dt), hd,
             c->qmax ? " qmax" : "");
    out->threads[1] = COMBINE_THREADS;
    out->pdl[0] = out->pdl[1] = 1;   /* a decode step is mostly launch latency */
    out->cluster[0] = fj_dec_cluster_fits(c, hd) ? DEC_CLUSTER_MAX : 0;
    out->n = 2;
}

/* Rows of the partials: the packed query rows of the whole batch (an upper bound when
 * varlen without total_q). */
static long long total_rows(const fajit_attn_desc *d)
{
    if (d->cu_seqlens_q && d->total_q > 0)
        return d->total_q;
    return (long long)d->batch * d->seqlen_q;
}

/* Counters of the fused combine (an int per (b, kv head, q tile)), or 0 for the combine
 * kernel: where they would not fit the context's slots (forced splits over a large batch),
 * or where the last CTA of a group cannot stage the group's partials in its shared memory
 * (splits x rows x (4*head_dim + 4) bytes, at most DEC_STAGE_MAX: one round trip). One SM
 * pulling more is slower than the combine kernel's launch: 66 KB (8 splits of 16 rows, 4
 * of 32) cost batch 2-4 25-30% (graph replay, H200: 2x2k q_len 4 12.7 us staged against 8.9
 * with the kernel, 2x4k 14.4 against 10.8, 4x2k q_len 8 21.3 against 15.3, 4x4k 32.5
 * against 26.6; merging them from L2 in the last CTA instead: 13.5 / 15.6 / 20.5 / 31.6;
 * dev/decode/NOTES.md, 2026-12-04), 132 KB at 1x4k q_len 4 12.2 us against 10.5 (2026-12-03); 33 KB (16
 * splits of 4 rows, q_len 1) stays fused. */
#define DEC_STAGE_MAX 49152   /* attn_decode.cu's */
static size_t fused_counters(const fj_dec_config *c, const fajit_attn_desc *d, int splits)
{
    const size_t n = (size_t)cta_pairs(c, d) * q_tiles(c, d) * sizeof(int);
    const size_t bytes = (size_t)splits * cta_rows(c, d) * ((size_t)d->head_dim * 4 + 4);
    const int staged = bytes <= fj_dec_smem_used(c, d->head_dim) && bytes <= DEC_STAGE_MAX;
    return splits > 1 && n <= FJ_WS_COUNTER_MAX && staged ? n : 0;
}

/* The cluster merge (sm_90+): the splits of each group launch as one thread-block cluster
 * and merge through distributed shared memory (fj_dec_merge_cluster.cuh), where
 * there are 2..DEC_CLUSTER_MAX splits, the GPU runs clusters that large of this kernel
 * (env->cluster_max, probed at load) and the partials fit. No L2 round trip for the
 * partials, no arrival count, the merge spread over the group's SMs, so it replaces both
 * the last-CTA merge and the combine kernel. Else 0: those as before. */
static int use_cluster(const fj_dec_config *c, const fajit_attn_desc *d, int splits,
                       const fj_launch_env *env)
{
    if (fj_dec_opts_of(env->fopts)->no_cluster || splits < 2 || splits > DEC_CLUSTER_MAX ||
        splits > env->cluster_max[0] ||
        !fj_dec_cluster_fits(c, d->head_dim))
        return 0;
    /* no more waves than the same CTAs without clusters: clusters live within one GPC,
     * which may leave SMs idle */
    const long long clusters = cta_pairs(c, d) * q_tiles(c, d);
    const long long slots =
        (long long)fj_dec_per_sm(c, d->head_dim, env->sm) * sms_of(env->sm_count);
    /* (per size: GPCs fit clusters of 7 no better than clusters of 8) */
    const long long active =
        env->cluster_active[0][splits] > 0 ? env->cluster_active[0][splits] : 1;
    return (clusters + active - 1) / active <= (clusters * splits + slots - 1) / slots;
}

/* Whether the family's own split count may drop to DEC_CLUSTER_MAX for the cluster merge
 * (launch_splits()): it chose more over at most 2*DEC_CLUSTER_MAX key tiles, for at most 16
 * packed rows (q_len 8 x 4 heads at 1x1k: 8.6-8.7 us against 8.0 with 16 splits and the
 * combine kernel, dev/decode/NOTES.md, 2026-12-04). */
static int fewer_for_cluster(const fj_dec_config *c, const fajit_attn_desc *d, int s)
{
    return s > DEC_CLUSTER_MAX && !d->num_splits && !c->splits && cta_rows_all(c, d) <= 16 &&
           fj_tiles(d->seqlen_k, c->bn) <= 2 * DEC_CLUSTER_MAX;
}

/* The splits of a launch: fj_dec_splits(), except where the wave rule chose more splits than a
 * cluster holds over at most 2*DEC_CLUSTER_MAX key tiles: there DEC_CLUSTER_MAX splits
 * (each walking at most 2 tiles) merged in clusters beat them where the GPU runs those
 * clusters in one wave (graph replay on the H200, q_len 1 1x2k: 6.7 against 7.1-7.2 us,
 * q_len 4 1x1k: 6.6-6.7 against 7.1-7.2; but 1x4k, 4 tiles a split: 9.2 against 8.2,
 * in us; dev/decode/NOTES.md). A caller's num_splits and a tuned count stay (a bound,
 * num_splits_max, only caps the count: fewer stays within it). Fewer
 * splits than fj_dec_splits() need no more workspace. */
static int launch_splits(const fj_dec_config *c, const fajit_attn_desc *d, const fj_launch_env *env)
{
    const int s = fj_dec_splits(c, d, env->sm_count, env->sm);
    if (fewer_for_cluster(c, d, s)) {
        const int tiles_k = (int)fj_tiles(d->seqlen_k, c->bn);
        const int per = (tiles_k + DEC_CLUSTER_MAX - 1) / DEC_CLUSTER_MAX;
        const int fewer = (tiles_k + per - 1) / per;   /* (whole tiles per split) */
        if (use_cluster(c, d, fewer, env))
            return fewer;
    }
    return s;
}

/* A launch whose splits merge in clusters uses neither counters nor partials (the kernel's
 * cluster path keeps them in shared memory): the context gives it none, so no scratch is
 * allocated per call and no counter slot taken (a CUDA graph's slots are counted). */
static void launch_workspace(const fj_kcfg *k, const fajit_attn_desc *d, const fj_launch_env *env,
                             fj_workspace *ws)
{
    const fj_dec_config *c = of(k);
    const int s = launch_splits(c, d, env);
    if (s > 1 && use_cluster(c, d, s, env))
        ws->counter_bytes = 0, ws->scratch_bytes = 0;
}

static size_t lse_offset(const fajit_attn_desc *d, int splits)
{
    size_t o = (size_t)splits * (size_t)total_rows(d) * d->heads_q * d->head_dim * 4;
    return (o + 255) / 256 * 256;
}

static void workspace(const fj_kcfg *k, const fajit_attn_desc *d, const fj_target *t,
                      fj_workspace *out)
{
    const fj_dec_config *c = of(k);
    int s = fj_dec_splits(c, d, t->sm_count, t->sm);
    if (s > 1)
        out->scratch_bytes = lse_offset(d, s) + (size_t)s * (size_t)total_rows(d) * d->heads_q * 4;
    out->counter_bytes = fused_counters(c, d, s);
    out->report_bytes = c->checked ? 4 * sizeof(int) : 0;
}

static fajit_status report(const fj_kcfg *k, const fajit_attn_desc *d, const void *rep,
                           char *why, size_t n)
{
    int e[4];
    (void)k;
    memcpy(e, rep, sizeof e);
    if (e[0] == 1) {
        snprintf(why, n, "block_table[%d][%d] = %d is not a page id in [0, %d)", e[1], e[2],
                 e[3], d->num_pages);
        return FAJIT_INVALID_ARGUMENT;
    }
    if (e[0] == 2) {
        snprintf(why, n, "seqused_k[%d] = %d is not in [0, %d]%s", e[1], e[3], e[2],
                 d->block_table ? " (block_table_stride * page_size)" : " (seqlen_k)");
        return FAJIT_INVALID_ARGUMENT;
    }
    if (e[0] != 0) {
        snprintf(why, n, "the decode kernel reported code %d", e[0]);
        return FAJIT_INVALID_ARGUMENT;
    }
    return FAJIT_OK;
}

static void describe_grid(const fj_kcfg *k, const fajit_attn_desc *d, const fj_target *t,
                          char *out, size_t n)
{
    const fj_dec_config *c = of(k);
    const int s = fj_dec_splits(c, d, t->sm_count, t->sm);
    /* (whether the GPU runs the clusters is known only once the kernel is loaded) */
    const int fit = t->sm >= 90 && fj_dec_cluster_fits(c, d->head_dim);
    const int cl = s >= 2 && s <= DEC_CLUSTER_MAX && fit;
    const char *merge = s < 2 ? "no combine"
                        : fused_counters(c, d, s) ? "the last CTA of each group combines"
                                                  : "the combine kernel";
    char pre[64] = "";
    if (cl)
        snprintf(pre, sizeof pre, "a cluster per group merges (where the GPU runs it; else ");
    else if (fit && fewer_for_cluster(c, d, s))
        snprintf(pre, sizeof pre, "%d splits merged by clusters (where they run; else ",
                 DEC_CLUSTER_MAX);
    char bound[32] = "";
    if (d->num_splits_max && !d->num_splits)
        snprintf(bound, sizeof bound, ", at most %d", d->num_splits_max);
    snprintf(out, n, "grid (%d x %d, %d, %d): %d split%s of %d keys (%s%s) x %d q tile%s, then "
             "%s%s%s",
             s, q_tiles(c, d), d->heads_kv / hp_of(c), d->batch, s, s > 1 ? "s" : "",
             (int)((fj_tiles(d->seqlen_k, c->bn) + s - 1) / s * c->bn),
             d->num_splits ? "forced" : c->splits ? "tuned" : t->sm_count ? "chosen for this GPU"
                                                                           : "chosen for 132 SMs",
             bound, q_tiles(c, d), q_tiles(c, d) > 1 ? "s" : "",
             pre, merge, pre[0] ? ")" : "");
}

/* The kernel's 32-bit offset path (p->off16): K and V rows at 16-byte multiples (strides
 * of 8 elements, non-negative) whose farthest row, page num_pages - 1 row page_size - 1,
 * lies below 2^32 units of 16 bytes from the tensor's head (64 GiB): one 32-bit
 * multiply-add per copied row instead of two 64-bit products and sums (the split step was
 * issue-bound on them: ncu, 16x8k page size 16, 27% of its instructions were IMAD). */
static void narrow_offsets(fj_decode_params *p, int elem_bytes)
{
    const int64_t st[4] = {p->k_page_stride, p->k_row_stride, p->v_page_stride, p->v_row_stride};
    const int64_t u = 16 / elem_bytes;   /* elements per 16-byte unit */
    p->off16 = 0;
    for (int i = 0; i < 4; i++)
        if (st[i] < 0 || st[i] % u || st[i] / u > UINT32_MAX)
            return;
    const uint64_t pages = p->num_pages > 0 ? (uint64_t)p->num_pages - 1 : 0;
    const uint64_t rows = p->page_size > 0 ? (uint64_t)p->page_size - 1 : 0;
    for (int x = 0; x < 2; x++)
        if (pages * (uint64_t)(st[2 * x] / u) + rows * (uint64_t)(st[2 * x + 1] / u) > UINT32_MAX)
            return;
    p->k_page16 = (uint32_t)(st[0] / u), p->k_row16 = (uint32_t)(st[1] / u);
    p->v_page16 = (uint32_t)(st[2] / u), p->v_row16 = (uint32_t)(st[3] / u);
    p->off16 = 1;
}

static void fill_params(const fj_dec_config *c, const fajit_attn_desc *d, const fj_launch_env *env,
                        int splits, int cluster, fj_decode_params *p)
{
    memset(p, 0, sizeof *p);
    p->q = (uintptr_t)d->q, p->k = (uintptr_t)d->k, p->v = (uintptr_t)d->v;
    p->o = (uintptr_t)d->o, p->lse = (uintptr_t)d->lse;
    p->block_table = (uintptr_t)d->block_table;
    p->seqused_k = (uintptr_t)d->seqused_k;
    p->cu_seqlens_q = (uintptr_t)d->cu_seqlens_q;
    p->err = env->report;
    p->q_batch_stride = d->q_batch_stride, p->q_row_stride = d->q_row_stride;
    p->q_head_stride = d->q_head_stride;
    p->o_batch_stride = d->o_batch_stride, p->o_row_stride = d->o_row_stride;
    p->o_head_stride = d->o_head_stride;
    p->k_row_stride = d->k_row_stride, p->k_head_stride = d->k_head_stride;
    p->v_row_stride = d->v_row_stride, p->v_head_stride = d->v_head_stride;
    if (d->block_table) {
        /* page_size <= FAJIT_MAX_PAGE_SIZE and (page_size - 1) x row stride within 2^47
         * (fj_desc_check): the products cannot overflow. */
        p->k_page_stride = d->k_page_stride ? d->k_page_stride
                                            : (int64_t)d->page_size * d->k_row_stride;
        p->v_page_stride = d->v_page_stride ? d->v_page_stride
                                            : (int64_t)d->page_size * d->v_row_stride;
        p->page_size = d->page_size, p->num_pages = d->num_pages;
        p->bt_stride = (int)d->block_table_stride;
    } else {   /* contiguous: sequence b is page b */
        p->k_page_stride = d->k_batch_stride, p->v_page_stride = d->v_batch_stride;
        p->page_size = d->seqlen_k, p->num_pages = d->batch;
    }
    p->page_shift = -1;   /* (read only with a block table) */
    for (int s = 0; d->block_table && s < 31; s++)
        if (1 << s == p->page_size)
            p->page_shift = s;
    narrow_offsets(p, d->kv_dtype != FAJIT_KV_AS_Q ? 1 : 2);   /* (FP8: byte strides) */
    p->batch = d->batch, p->heads_q = d->heads_q, p->heads_kv = d->heads_kv / hp_of(c);
    p->k_head_stride *= hp_of(c), p->v_head_stride *= hp_of(c);   /* (a CTA's first head) */
    p->head_dim = d->head_dim, p->q_len = d->seqlen_q, p->seqlen_k = d->seqlen_k;
    p->splits = splits;
    p->cluster = cluster;
    const int tiles_k = (int)fj_tiles(d->seqlen_k, c->bn);
    p->split_keys = (tiles_k + splits - 1) / splits * c->bn;
    p->q_tiles = q_tiles(c, d);
    p->total_rows = (int)total_rows(d);
    fj_attn_params ap;   /* the window convention of every attention kernel */
    fj_params_from_desc(d, &ap);
    p->window_left = ap.window_left, p->window_right = ap.window_right;
    p->scale = ap.scale, p->scale_log2 = ap.scale_log2;
    if (splits > 1 && !cluster) {   /* (a cluster merge keeps its partials in shared memory) */
        p->counters = env->counters;   /* set: the fused combine */
        p->part_o = env->scratch;
        p->part_lse = env->scratch + lse_offset(d, splits);
    }
}

/* The TMA kernel's K and V maps: [pages][page_size][heads_kv][head_dim] with the page, row
 * and head strides (contiguous K/V: sequences as pages of seqlen_k rows), boxes of 64
 * columns and min(BN, page_size) rows (fj_dec_load_tma.cuh's dec_tma_rows), 128-byte swizzle. */
static fajit_status encode_kv_maps(const fj_dec_config *c, const fajit_attn_desc *d,
                                   const fj_launch_env *env, const fj_decode_params *p,
                                   fj_tmap maps[2], char *why, size_t n)
{
    if (!env->cu || !env->cu->cuTensorMapEncodeTiled) {
        snprintf(why, n, "the driver lacks cuTensorMapEncodeTiled (needed by the TMA decode "
                 "kernel)");
        return FAJIT_UNSUPPORTED;
    }
    const int dt = d->dtype == FAJIT_BF16 ? FJ_TMA_BF16 : FJ_TMA_F16;
    const unsigned rows = d->block_table && p->page_size % c->bn ? (unsigned)p->page_size
                                                                 : (unsigned)c->bn;
    for (int x = 0; x < 2; x++) {
        fj_tma_tile t = {
            .name = x ? "V" : "K",
            .addr = x ? p->v : p->k, .data_type = dt, .elem_bytes = 2, .rank = 4,
            .dim = {d->head_dim, p->page_size, d->heads_kv, p->num_pages},
            .stride = {x ? p->v_row_stride : p->k_row_stride,
                       x ? p->v_head_stride : p->k_head_stride,
                       x ? p->v_page_stride : p->k_page_stride},
            .box = {64, rows, 1, 1},
            .swizzle = FJ_TMA_SWIZZLE_128B, .l2_promotion = FJ_TMA_L2_256B,
        };
        if (fj_tma_encode(env->cu, &t, &maps[x], why, n) != 0)
            return FAJIT_INVALID_ARGUMENT;
    }
    return FAJIT_OK;
}

static fajit_status launch_args(const fj_kcfg *k, int i, const fajit_attn_desc *d,
                                const fj_launch_env *env, fj_args *a, char *why, size_t n)
{
    const fj_dec_config *c = of(k);
    const int splits = launch_splits(c, d, env);
    const int cluster = use_cluster(c, d, splits, env);
    fj_decode_params p;
    fill_params(c, d, env, splits, cluster, &p);
    fj_tmap maps[2];
    const fj_target here = {env->sm, 0, env->sm_count, c->checked, 0, NULL};
    if (hp_of(c) > 1 && fj_dec_pack_limit(d) % c->hp) {
        /* (fj_dec_check() refuses such a plan, and plans are kept per pack limit) */
        snprintf(why, n, "the decode kernel for %d KV heads per CTA cannot serve heads_kv %d "
                 "with head strides %lld/%lld (head_dim %d)", c->hp, d->heads_kv,
                 (long long)d->k_head_stride, (long long)d->v_head_stride, d->head_dim);
        return FAJIT_INVALID_ARGUMENT;
    }
    if (c->tma && fj_dec_tma_misfit(c, d, &here)) {
        /* (fj_dec_check() refuses such a plan; a launch must never hang on missing boxes) */
        snprintf(why, n, "the TMA decode kernel cannot load head_dim %d with page_size %d",
                 d->head_dim, d->page_size);
        return FAJIT_INVALID_ARGUMENT;
    }
    const fajit_status es = i == 0 && c->tma ? encode_kv_maps(c, d, env, &p, maps, why, n)
                                             : FAJIT_OK;
    if (es != FAJIT_OK)
        return es;
    if (i == 0) {
        a->grid[0] = (unsigned)(splits * p.q_tiles);
        a->grid[1] = (unsigned)(d->heads_kv / hp_of(c));
        a->grid[2] = (unsigned)d->batch;
        a->cluster = cluster ? (unsigned)splits : 0;   /* (x: the group's splits in a row) */
    } else {   /* the combine kernel, after a split without the fused combine */
        const long long items = (long long)d->heads_q * (d->head_dim / 4);
        a->grid[0] = splits > 1 && !p.counters && !cluster ? (unsigned)p.total_rows : 0;
        a->grid[1] = (unsigned)((items + COMBINE_THREADS - 1) / COMBINE_THREADS);
        a->grid[2] = 1;
    }
    if (fj_args_push(a, &p, sizeof p, 8) != 0 ||
        (i == 0 && c->tma && (fj_args_push(a, &maps[0], sizeof maps[0], 64) != 0 ||
                              fj_args_push(a, &maps[1], sizeof maps[1], 64) != 0)) ||
        (i == 0 && fj_feat_push(d, a) != 0)) {
        snprintf(why, n, "the decode parameters exceed the argument block");
        return FAJIT_UNSUPPORTED;
    }
    return FAJIT_OK;
}

/* The plan class: the split class (fj_dec_split_class) where the family serves d or d's
 * tuning bucket carries it (seqlen_q <= 16), and the head packing the layout allows and the
 * default takes (fj_dec_pack_limit + 8 x fj_dec_pack_default) where it serves d. */
static void plan_class(const fajit_attn_desc *d, const fj_target *t, fj_plan_class *out)
{
    const int on = applies(d, t), sq = d->seqlen_q > 0 ? d->seqlen_q : 1;
    if (!on && sq > 16)
        return;
    out->split_class = fj_dec_split_class(d, t->sm_count);
    out->other = on ? fj_dec_pack_limit(d) + 8 * fj_dec_pack_default(d, t) : 0;
}

/* The tuning bucket's suffix for seqlen_q <= 16: the split class (",bw", ",lat", ",latf"). */
static const char *bucket_suffix(const fajit_attn_desc *d, int sm_count)
{
    static const char *const suffix[FJ_DEC_SPLIT_CLASSES] = {"", ",bw", ",lat", ",latf"};
    const int sq = d->seqlen_q > 0 ? d->seqlen_q : 1;
    return sq <= 16 ? suffix[fj_dec_split_class(d, sm_count)] : "";
}

/* The fused combine's counters: the context allocates its ring at creation. */
static int needs_counters(const fj_target *t) { return t->sm >= 80; }

const fj_family fj_family_decode = {
    .name = "decode",
    .id = FAJIT_FAMILY_DECODE,
    .op = FAJIT_OP_FWD,
    .rank = 30,
    .ran_features = DEC_FEATURES,   /* gpu-decode-features, gpu-features (paged) */
    .cfg_prefix = "dec:",
    .applies = applies,
    .default_cfg = fj_dec_default_cfg,
    .candidates = fj_dec_candidates,
    .shipped = fj_dec_shipped,
    .check = fj_dec_check,
    .cfg_name = cfg_name,
    .cfg_parse = cfg_parse,
    .kernels = kernels,
    .describe_grid = describe_grid,
    .workspace = workspace,
    .launch_workspace = launch_workspace,
    .report = report,
    .launch_args = launch_args,
    .needs_counters = needs_counters,
    .options = fj_dec_options,
    .plan_class = plan_class,
    .bucket_suffix = bucket_suffix,
};
