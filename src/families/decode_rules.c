/* decode_rules.c - the decode family's rules (decode.c is its table): the default tiles of
 * a problem by split class and packed rows, head packing's rule, the tuning candidates,
 * the defaults warm compiles for every class (shipped), and the split count of the keys
 * (the wave rule and the fill of a last wave). The figures behind each rule are the
 * H200's and the H100's, dev/decode/NOTES.md. */
#include <string.h>

#include "decode.h"
#include "params.h"   /* fj_tiles */
#include "target.h"   /* fj_smem_limit: the per-target shared memory */

/* The loader of the defaults where TMA fits and FAJIT_DECODE_LOADER is auto. */
#define DEC_TMA_DEFAULT 0

/* How the keys of a problem split (fj_dec_split_class), from the (sequence, KV head)
 * pairs: SPLIT_NONE where they fill the SMs (no split, but where a last wave would idle:
 * fill_splits); SPLIT_STREAM from STREAM_BYTES of K+V at the host-known maxima
 * (bandwidth-bound: they stream from DRAM); below it latency-bound (graph-replayed steps
 * run from the L2): SPLIT_LATENCY_FEW with at most a sixteenth of the SMs' count of pairs
 * (8 on 132: a batch of 1-2, where one group's splits fill most of the GPU), SPLIT_LATENCY
 * with more. The classes are where the H200's best tiles differ (plain_cfg). */
#define STREAM_BYTES (32ll << 20)
enum { SPLIT_NONE = FJ_DEC_SPLIT_NONE, SPLIT_STREAM = FJ_DEC_SPLIT_STREAM,
       SPLIT_LATENCY = FJ_DEC_SPLIT_LATENCY, SPLIT_LATENCY_FEW = FJ_DEC_SPLIT_LATENCY_FEW };
int fj_dec_split_class(const fajit_attn_desc *d, int sm_count)
{
    const long long pairs = pairs_of(d);
    const long long kv_bytes = pairs * d->seqlen_k * d->head_dim * 2 /* K, V */ * 2 /* 16 bit */;
    if (pairs >= sms_of(sm_count))
        return SPLIT_NONE;
    if (kv_bytes >= STREAM_BYTES)
        return SPLIT_STREAM;
    return pairs * 16 <= sms_of(sm_count) ? SPLIT_LATENCY_FEW : SPLIT_LATENCY;
}
static int split_class(const fajit_attn_desc *d, const fj_target *t)
{
    return fj_dec_split_class(d, t->sm_count);
}

/* The defaults (dev/decode/NOTES.md): warps along the keys while the packed rows fit 16
 * (the FlashDecoding layout: every warp streams its own part of each tile), along the rows
 * beyond; 16-32 keys per warp (16 at head_dim > 128, where O takes most registers); 64-key
 * tiles 3 deep (4 at head_dim <= 64); fewer stages where two CTAs would not fit an SM, and
 * narrower tiles where one would not. On sm_90 at head_dim 72..128 where the keys split,
 * the split class (split_class()) picks 128-key tiles at one CTA per SM (measured on the
 * H200, bf16, 8 KV heads, page size 16, pages shuffled; us per call, graph replay where
 * latency-bound):
 * - up to 16 rows bandwidth-bound 3 deep over 8 warps: the shuffled pages' latency needs
 *   the bytes in flight (q_len 1: 16x8k 130.6 -> 127.5, 1x32k 42.3 -> 40.5, 1x128k 133.2 ->
 *   130.9, 4x16k 71.0 -> 70.0, ps1 16x8k 135.3 -> 129.9; q_len 4: 16x8k 130.6 -> 128.3,
 *   1x32k 44.3 -> 42.9; 2026-12-04); 2 deep over 4 warps lost to 64-key tiles where no split
 *   (64x16k 980 against 960, 128x2k 264 against 248: a tile's 8 pages; 2026-12-02);
 * - up to 8 rows latency-bound 2 deep over 8 warps (q_len 1 x 4 heads at 1x1k/2k/4k
 *   7.0/8.0/9.6 against 7.1/7.9/10.1, 2026-12-03; 3 deep 5.7/6.9/8.5 against 5.6/6.7/8.3,
 *   2026-12-04), 9..16 over 4 (q_len 4: 6.4/7.7/8.9 against 64x3's 6.7/7.8/9.5, 2x2k 8.2
 *   against 9.0);
 * - 17..32 rows 2 deep over 2 x 4 warps (q_len 8 x 4 heads: 1x1k/2k/4k 7.5/9.0/10.5 against
 *   64x2m2n2's 7.9/9.1/11.3, 2x4k 13.1 against 15.1, 4x4k 25.4 against 26.6; 2026-12-04),
 *   but in SPLIT_LATENCY_FEW over 1 x 4, two q tiles of 16 rows per group, each merged
 *   apart (q_len 8 x 4 heads: 1x1k 7.4 -> 6.3, 1x2k 9.1 -> 7.9, 1x4k 10.6 level and
 *   17.4 -> 16.1 us per call; q_len 4 x 8 heads over 4 KV heads: 1x1k/2k/4k/8k 6.8/7.9/10.7/12.3
 *   -> 6.1/7.0/8.7/11.2; not at 16 pairs: 2x1k q_len 8 8.2 against 10.7; 2026-12-04).
 * At head_dim 49..64 (rows of 128 bytes) the same classes on sm_90 (q_len 1 x 4 heads, the
 * former 64x4m1n4 -> these; 2026-12-04): 256-key tiles 3 deep over 8 warps where the keys
 * stream (16x8k 73.7 -> 66.8, 1x128k 76.0 -> 70.5, 1x32k 28.0 -> 27.2); 128x2m1n8 up to 16
 * latency-bound rows (graph 1x1k/2k/4k 5.4/7.1/8.5 -> 4.8/5.5/7.1, q_len 4 6.0/7.1/8.3 ->
 * 5.1/5.9/7.4); 64x3m1n4 where the batch fills the SMs (4 CTAs per SM at 50 KB: 64x16k's
 * 512 CTAs in one wave, 580 -> 486; 128x2k 137.5 -> 129.5); 17..32 rows take 128x2m2n4 only
 * where the keys stream (q_len 8 16x8k 83.4 -> 75.2; latency-bound 1x1k-4k 1.5-2.3 us
 * slower in graph replay than 64x3m2n2); a batch that fills the SMs at most twice over takes
 * 128x3m1n8 instead of 64x3m1n4 (two CTAs per SM, each with twice the bytes in flight: 32 x
 * 16k 261 -> 245.5, 2026-12-04).
 * At head_dim <= 48 on sm_90 (rows of 64/96 bytes; 2026-12-04, q_len 1): 128x2m1n8 up to 16
 * rows where latency-bound (graph 1x1k/2k/4k at head_dim 32 5.3/7.1/8.4 -> 4.5/5.4/7.1, 48
 * 5.4/7.2/8.4 -> 4.8/5.9/7.5; q_len 4 the same way) and where the keys stream at head_dim
 * <= 32 (16x8k 73.2 -> 55.3, 1x128k 76.2 -> 57.0; at 48 mixed: 72.8 -> 68.9, 75.6 -> 76.5,
 * 1x32k 27.8 -> 31.1); 64x4m1n4 where the batch fills the SMs (64x16k at 32: 366 against
 * 504). Up to 32 rows as before (not measured there). */
static void plain_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    const int rows = packed_rows(d), wide = d->head_dim > 128;
    const int narrow = d->head_dim > 48 && d->head_dim <= 64;   /* rows of 128 bytes */
    const int small = d->head_dim <= 48;
    /* sm_90 up to head_dim 128: the split class picks the tiles (measured on the H200) */
    const int split = t->sm == 90 && !wide ? split_class(d, t) : SPLIT_NONE;
    int deep = 0;   /* more stages than two CTAs per SM allow: one CTA per SM by design */
    fj_dec_config c = {64, 3, 1, 4, 0, t->checked, 0, 0, 0};   /* (hp 0: none, as parsed) */
    if (rows <= 16) {
        if (wide) {
            c.wn = 2, c.bn = 32;
        } else if (narrow && t->sm == 90) {   /* SPLIT_NONE: 64x3m1n4, four CTAs per SM */
            if (split == SPLIT_STREAM)
                c.bn = 256, c.stages = 3, c.wn = 8, deep = 1;
            else if (split != SPLIT_NONE)
                c.bn = 128, c.stages = 2, c.wn = 8;
            else if (pairs_of(d) <= 2 * sms_of(t->sm_count))   /* two per SM: twice the bytes */
                c.bn = 128, c.stages = 3, c.wn = 8;
        } else if (small && t->sm == 90) {   /* SPLIT_NONE: 64x4m1n4 */
            c.stages = 4;
            if (split == SPLIT_LATENCY || split == SPLIT_LATENCY_FEW ||
                (split == SPLIT_STREAM && d->head_dim <= 32))
                c.bn = 128, c.stages = 2, c.wn = 8;
        } else if (d->head_dim <= 64) {
            c.stages = 4;
        } else if (split == SPLIT_STREAM) {
            c.bn = 128, c.stages = 3, c.wn = 8, deep = 1;
        } else if (split != SPLIT_NONE) {
            c.bn = 128, c.stages = 2, c.wn = rows <= 8 ? 8 : 4;
        }
    } else if (rows <= 32) {
        c.wm = 2, c.wn = 2, c.bn = wide ? 32 : 64;
        /* (at head_dim 49..64 only where the keys stream) */
        if (!small && (narrow ? split == SPLIT_STREAM : split != SPLIT_NONE))
            c.bn = 128, c.stages = 2, c.wn = 4, c.wm = split == SPLIT_LATENCY_FEW ? 1 : 2;
    } else if (wide) {   /* (4 x 1 warps with 16-key tiles spill at head_dim 200-208) */
        c.wm = 2, c.wn = 2, c.bn = 32;
    } else {
        c.wm = 4, c.wn = 1;
    }
    const size_t limit = fj_smem_limit(t->sm);
    while (!deep && fj_dec_smem_bytes(&c, d->head_dim) > limit / 2 && c.stages > 2)
        c.stages--;
    while (fj_dec_smem_bytes(&c, d->head_dim) > limit && c.stages > 2)
        c.stages--;
    while (fj_dec_smem_bytes(&c, d->head_dim) > limit && c.bn > 16 * c.wn)
        c.bn /= 2;
    /* the loader: FAJIT_DECODE_LOADER (fj_dec_opts.loader), else DEC_TMA_DEFAULT */
    const int loader = fj_dec_opts_of(t->fopts)->loader;
    const int want = loader == FJ_DEC_LOADER_TMA ||
                     (loader == FJ_DEC_LOADER_AUTO && DEC_TMA_DEFAULT);
    c.tma = 0;
    if (want && d->kv_dtype == FAJIT_KV_AS_Q) {   /* (FP8 K/V: cp.async, widened in smem) */
        c.tma = 1;
        if (fj_dec_tma_misfit(&c, d, t) || fj_dec_smem_bytes(&c, d->head_dim) > limit)
            c.tma = 0;
    }
    to_kcfg(&c, out);
}

/* The problem as a CTA with hp KV heads sees it: heads_kv / hp heads of hp * head_dim. */
static fajit_attn_desc pack_view(const fajit_attn_desc *d, int hp)
{
    fajit_attn_desc v = *d;
    if (hp > 1) {
        v.heads_kv = d->heads_kv / hp, v.head_dim = d->head_dim * hp;
        v.k_head_stride *= hp, v.v_head_stride *= hp;
    }
    return v;
}

/* Head packing's rule (FAJIT_DECODE_HEAD_PACK=auto; fj_dec_opts.pack forces 2 or 4, or none):
 * the DRAM reads of a CTA follow its heads' bytes per K/V row, so where a head's row is
 * short a CTA takes 2 or 4 KV heads as one row (measured on an H100 SXM, bf16, 8 KV heads,
 * 4 query heads per KV head, page size 16 shuffled, us per call, dev/decode/NOTES.md, 2026-12-05; the
 * same 512-byte rows as 8 x 32, 4 x 64 and 2 x 128 heads at 64 x 16k: 539, 377, 363):
 * - where the batch fills the SMs (SPLIT_NONE) at head_dim 32, 48, 64, as many heads as keep
 *   head_dim x heads <= 192 and the packed rows <= 32: head_dim 32 64x16k 538.7 -> 362.7 (x4)
 *   and 128x2k 139.1 -> 95.7, q_len 4 538.3 -> 371.9 (x2; x4 382.7); head_dim 48 753.5 ->
 *   563.4 (x4), q_len 4 763.3 -> 636.8 (x2; x4 676.0); head_dim 64 732.5 -> 713.1 and 189.0
 *   -> 183.7 (x2);
 * - where the keys stream (SPLIT_STREAM) at head_dim 32, 2 heads: 16x8k 63.2 -> 55.1,
 *   1x131k 69.9 -> 58.2, 1x32k 29.5 -> 24.4 (graph replay 23.3 -> 12.7), q_len 4 the same way;
 *   at head_dim 48, 2 heads up to 16 packed rows (H200, dev/decode/NOTES.md 2026-12-05, two
 *   turns: q_len 1 16x8k 72.7 -> 67.0, 4x16k 42.0 -> 38.5, 1x131k 75.2 -> 72.6, 1x32k 27.7 ->
 *   27.2, graph replay 26.6 -> 22.5; q_len 4, 32 packed rows, level or 2% slower; x4 16x8k
 *   62.2 but 1x32k 37.2 and q_len 4 +33%); not at head_dim 64 (x2 96.5 -> 98.3 on the H100);
 * - none where latency-bound (head_dim 32 x2 at 1x4k 12.0 -> 12.3, q_len 4 12.9 -> 13.8), at
 *   head_dim 128 (x2 16x8k 182.8 -> 188.6), nor at head_dims other than 32, 48 and 64 (not
 *   measured: 40 and 56 not run packed on a GPU, below 32 not timed), nor off sm_90. */
static int pack_allowed(const fajit_attn_desc *d, int hp)
{
    return fj_dec_pack_limit(d) % hp == 0 && d->head_dim * hp <= 256;
}
static int pack_rule(const fajit_attn_desc *d, const fj_target *t)
{
    const fj_dec_opts *o = fj_dec_opts_of(t->fopts);
    if (o->pack == FJ_DEC_PACK_OFF || o->loader == FJ_DEC_LOADER_TMA ||
        d->kv_dtype != FAJIT_KV_AS_Q)
        return 1;
    if (o->pack == FJ_DEC_PACK_2 || o->pack == FJ_DEC_PACK_4)
        return pack_allowed(d, o->pack) ? o->pack : 1;
    if (t->sm != 90 || d->head_dim % 16 || d->head_dim < 32 || d->head_dim > 64 ||
        fj_dec_pack_limit(d) < 2)
        return 1;
    const int split = split_class(d, t), rows = packed_rows(d);
    int hp = 1;
    if (split == SPLIT_NONE)
        for (int h = 2; h <= 4; h *= 2)
            if (pack_allowed(d, h) && d->head_dim * h <= 192 && rows * h <= 32)
                hp = h;
    /* where the keys stream: 2, up to 32 packed rows at head_dim 32 and 16 at 48 */
    const int stream_rows = d->head_dim <= 32 ? 32 : d->head_dim <= 48 ? 16 : 0;
    if (split == SPLIT_STREAM && rows * 2 <= stream_rows)
        hp = 2;
    return hp;
}
int fj_dec_pack_default(const fajit_attn_desc *d, const fj_target *t)
{
    return pack_rule(d, t);
}

/* The default with hp KV heads per CTA: plain_cfg()'s tiles for the problem as the CTA sees
 * it (pack_view()), loaded by cp.async; -1 where fj_dec_check() refuses it. */
static int packed_cfg(const fajit_attn_desc *d, const fj_target *t, int hp, fj_kcfg *out)
{
    if (hp < 2) {
        plain_cfg(d, t, out);
        return 0;
    }
    const fajit_attn_desc v = pack_view(d, hp);
    plain_cfg(&v, t, out);
    fj_dec_config c = *of(out);
    c.hp = hp, c.tma = 0;
    to_kcfg(&c, out);
    return fj_dec_check(out, d, t, NULL, 0);
}

void fj_dec_default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)
{
    if (packed_cfg(d, t, pack_rule(d, t), out) != 0)
        plain_cfg(d, t, out);
}

/* Whether out[n] differs from each of out[0..n). */
static int is_new(const fj_kcfg *out, int n)
{
    for (int k = 0; k < n; k++)
        if (fj_kcfg_same(&out[k], &out[n]))
            return 0;
    return 1;
}

/* The default first, then other row layouts (warps along rows x along keys: a q tile per
 * 16*wm packed rows, so fewer warps along the rows re-read K/V per extra q tile, mostly
 * from L2) with a few tile depths. */
int fj_dec_candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    static const int layouts[][2] = {{1, 4}, {2, 2}, {4, 1}, {2, 4}, {1, 8}};
    static const int tiles[][2] = {{64, 3}, {64, 2}, {32, 3}, {128, 2}, {64, 4}, {64, 5}};
    int n = 0;
    if (max < 1)
        return 0;
    fj_dec_default_cfg(d, t, &out[n++]);
    const fj_dec_config base = *of(&out[0]);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++)
        for (size_t i = 0; i < sizeof tiles / sizeof tiles[0] && n < max; i++) {
            fj_dec_config c = base;
            c.wm = layouts[l][0], c.wn = layouts[l][1];
            c.bn = tiles[i][0], c.stages = tiles[i][1];
            if (d->head_dim > 128 && c.bn / c.wn > 16)
                continue;   /* more than 16 keys per warp spills at head_dim 256 */
            for (int tma = 0; tma < 2 && n < max; tma++) {   /* each loader where it fits */
                c.tma = tma;
                to_kcfg(&c, &out[n]);
                if (is_new(out, n) && fj_dec_check(&out[n], d, t, NULL, 0) == 0)
                    n++;
            }
        }
    /* head packing the other ways (sm_90, head_dim <= 64: the rule packs at 32, 48 and 64):
     * the defaults with 1, 2 and 4 KV heads per CTA where the layout allows them */
    for (int hp = 1; hp <= 4 && n < max && t->sm == 90 && d->head_dim <= 64; hp *= 2) {
        if (packed_cfg(d, t, hp, &out[n]) != 0)
            continue;
        n += is_new(out, n);
    }
    return n;
}

/* The defaults for problems like d at any length and batch: every packed-row bracket of
 * q_len <= 16 (1 to 64 query heads per KV head), each in the split classes (split_class(): a
 * count of (sequence, KV head) pairs and a length in each; with head packing the tiles are
 * those of the packed view's class, reached from SPLIT_NONE at one and four pairs per SM) and
 * SPLIT_NONE at two pairs per SM (the default at head_dim 49..64), over 1, 2 and 4 KV heads
 * side by side (what head packing may take). */
int fj_dec_shipped(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    const int sms = sms_of(t->sm_count), third = sms / 3 > 1 ? sms / 3 : 1;
    const struct { int pairs, seqlen_k; } classes[] = {
        {1, 1},                  /* SPLIT_LATENCY_FEW */
        {third, 1},              /* SPLIT_LATENCY (a third of the SMs' count of pairs) */
        {1, 1 << 24},            /* SPLIT_STREAM */
        {1 << 12, 1},            /* SPLIT_NONE */
        {2 * sms, 1},            /* SPLIT_NONE at most two CTAs per SM (head_dim 49..64) */
        {sms, 1},                /* SPLIT_NONE, packed: SPLIT_LATENCY's pairs */
        {sms, 1 << 24},          /* SPLIT_NONE, packed: SPLIT_STREAM's */
        {4 * sms, 1},            /* SPLIT_NONE, packed by 4: two CTAs per SM */
    };
    const int nc = (int)(sizeof classes / sizeof classes[0]), ng = 7;   /* groups 1..64 */
    int n = 0;
    fajit_attn_desc e = *d;
    e.k_head_stride = e.v_head_stride = e.head_dim;
    for (int i = 0; i < 3 * ng * nc && n < max; i++) {
        const int hk = 1 << i / (ng * nc), j = i % (ng * nc), pairs = classes[j % nc].pairs;
        e.heads_kv = hk, e.heads_q = hk << j / nc, e.seqlen_q = 1;
        e.batch = pairs / hk > 1 ? pairs / hk : 1, e.seqlen_k = classes[j % nc].seqlen_k;
        fj_dec_default_cfg(&e, t, &out[n]);
        n += is_new(out, n);
    }
    return n;
}

/* The waves that `ctas` CTAs split k ways fill over `slots` at once, over the waves they
 * launch: 1 where the last is full. */
static double wave_eff(long long ctas, int k, int slots)
{
    const double waves = (double)(ctas * k) / slots;
    return waves / (double)(long long)(waves + 0.999999);
}

/* FlashAttention's wave-efficiency rule for `slots` concurrent CTAs: none when the CTAs
 * already fill 80% of them, else the fewest splits within 95% of the best wave efficiency
 * (FlashAttention takes 85%; an idle SM costs more here than the combine), over the split
 * counts that launch: each the fewest splits of its whole tiles per split (a count between
 * two of them rounds down to the smaller one when launched). The efficiency is the work
 * over the slots x the time of its waves of ceil(tiles_k / k) tiles each. (Until session
 * 27 the best was taken over every count, also ones that never launch: a best of 1.0 no
 * launchable count reached left e.g. 3 sequences x 1 KV head x 8k keys on 3 CTAs.) */
static int wave_splits(long long ctas, int slots, int tiles_k)
{
    const int max_s = tiles_k < FAJIT_MAX_SPLITS ? tiles_k : FAJIT_MAX_SPLITS;
    double eff[FAJIT_MAX_SPLITS + 1], best = 0;
    if (ctas >= 0.8 * slots || max_s <= 1)
        return 1;
    for (int k = 1; k <= max_s; k++) {
        const long long per = (tiles_k + k - 1) / k;
        eff[k] = 0;   /* not launched: k - 1 splits take as many tiles each */
        if (k > 1 && per == (tiles_k + k - 2) / (k - 1))
            continue;
        const long long waves = (ctas * k + slots - 1) / slots;
        eff[k] = (double)(ctas * tiles_k) / ((double)slots * waves * per);
        best = eff[k] > best ? eff[k] : best;
    }
    for (int k = 1; k <= max_s; k++)
        if (eff[k] > 0 && eff[k] >= 0.95 * best)
            return k;
    return 1;
}

/* A batch of more CTAs than `slots` (the CTAs resident at once) whose last wave would
 * leave more than a tenth of them idle (e.g. 40 sequences x 8 KV heads = 320 CTAs over 264
 * slots: a second wave of 56): the fewest splits, each of at least 16 key tiles
 * (bandwidth-bound), that fill 95% of the waves, else the best of them where it gains a
 * tenth; 1 otherwise (one wave: every CTA streams at once, none is a tail).
 * The splits are kept only where the gain expected beats what they cost by 1% of the time:
 * the gain is the wave model's (eff_k / eff_1 - 1) times FILL_GAIN / (waves x CTAs per SM),
 * which is what the H200 kept of it (head_dim 128, 2 per SM, q_len 1: 1.21 waves 0.60 ->
 * 0.24, 3.03 waves 0.26 -> 0.08, 6.06 waves 0.10 -> -0.01; head_dim 64, 4 per SM: 1.52 waves
 * 0.27 -> 0.05, 3.03 waves 0.26 -> 0.01; dev/decode/NOTES.md, 2026-12-04); the cost is the
 * partials' traffic, fp32 O and LSE of a CTA's `rows` rows written and read again per
 * split, over the K+V bytes of the keys its whole tiles hold (`keys`: tiles_k x the tile's
 * keys): 2 x rows x k / keys (q_len 8 x 4 heads, 3 splits of 4k keys: 4.7%; 200 x 4k went
 * 790 -> 852 us with them, q_len 4 760 -> 801). In whole tiles, so that the rule's answer
 * depends on seqlen_k only through tiles_k (fj_dec_splits() keys its memo on it). */
#define FILL_GAIN 1.2
static int fill_splits(long long ctas, int slots, int per_sm, int tiles_k, int rows,
                       long long keys)
{
    const double eff1 = wave_eff(ctas, 1, slots);
    int best_k = 1;
    double best = eff1;
    if (ctas <= slots || eff1 >= 0.9)
        return 1;
    for (int k = 2; k <= FAJIT_MAX_SPLITS && tiles_k / k >= 16; k++) {
        const double e = wave_eff(ctas, k, slots);
        if (e >= 0.95) {
            best = e, best_k = k;
            break;
        }
        if (e > best)
            best = e, best_k = k;
    }
    if (best_k == 1 || (best < 0.95 && best < eff1 + 0.1))
        return 1;
    const double waves = (double)ctas / slots;
    const double gain = (best / eff1 - 1) * FILL_GAIN / (waves * per_sm);
    const double cost = 2.0 * rows * best_k / (double)(keys > 0 ? keys : 1);
    return gain - cost >= 0.01 ? best_k : 1;
}

/* CTAs of configuration c that fit one SM by shared memory (per SM about the per-block
 * limit + 1 KiB, and 1 KiB reserved per CTA; the defaults' registers allow as many); 2 for
 * an unknown target (sm 0). */
static int fit_sm(const fj_dec_config *c, int head_dim, int sm)
{
    if (sm <= 0)
        return 2;
    const size_t sm_bytes = fj_smem_limit(sm) + 1024;
    const size_t cta = fj_dec_smem_bytes(c, head_dim) + 1024;
    return cta <= sm_bytes ? (int)(sm_bytes / cta) : 1;
}
/* The same, at most 2 (the split rule's count). Deep pipelines (64x4 and 64x5 at head_dim
 * 128 on the H200) fit one. */
int fj_dec_per_sm(const fj_dec_config *c, int head_dim, int sm)
{
    const int n = fit_sm(c, head_dim, sm);
    return n < 2 ? n : 2;
}

/* Splits of the keys: the caller's num_splits, a tuned forced count, else the wave rule
 * over one CTA per SM while that leaves each split at most 16 key tiles (latency-bound
 * shapes: a second CTA per SM only competes for the SM's loads, measured 1x2k-4k keys 16
 * splits 8.5/10.5 us against 32 splits 10.1/11.4 us on the H200), over two per SM beyond
 * (bandwidth-bound: 1x128k 32 splits 142 us against 16 splits 155 us; 16x8k 2 splits 140
 * against 1 split 152; bench/results/2026-12-01-h200-decode-b.md), or one per SM
 * again for a configuration of which only one fits (per_sm); where that leaves a full
 * batch one split but a second wave mostly idle, fill_splits (H200, head_dim 128, q_len 1,
 * ps16: 40 x 8k 383 -> 309 us, 48 x 8k 393 -> 366, 72 x 8k 611 -> 547, 100 x 8k 814 ->
 * 757, 40 x 2k 102.5 -> 92.8; dev/decode/NOTES.md, 2026-12-04). Each split whole key tiles. Depends
 * only on host-known maxima (batch, heads, seqlen_q, seqlen_k), so a CUDA graph captured
 * once stays valid while seqused_k and the block table change. The caller's num_splits_max
 * caps whatever count this chose (forced ones are within it: fj_desc_check). */
static int dec_splits_rule(const fj_dec_config *c, const fajit_attn_desc *d, int sm_count, int sm)
{
    const int tiles_k = (int)fj_tiles(d->seqlen_k, c->bn);
    int s = d->num_splits ? d->num_splits : c->splits;
    if (!s) {
        const long long ctas = cta_pairs(c, d) * q_tiles(c, d);
        const int sms = sms_of(sm_count);
        s = wave_splits(ctas, sms, tiles_k);
        if ((tiles_k + s - 1) / s > 16)
            s = wave_splits(ctas, fj_dec_per_sm(c, d->head_dim, sm) * sms, tiles_k);
        if (s == 1) {
            const int fit = fit_sm(c, d->head_dim, sm);
            s = fill_splits(ctas, fit * sms, fit, tiles_k, cta_rows(c, d),
                            (long long)tiles_k * c->bn);
        }
    }
    if (d->num_splits_max && s > d->num_splits_max)   /* the caller's bound */
        s = d->num_splits_max;
    if (s > tiles_k)
        s = tiles_k > 0 ? tiles_k : 1;
    /* Whole tiles per split: the splits that remain non-empty after the rounding. */
    const int per = (tiles_k + s - 1) / s;
    return per > 0 ? (tiles_k + per - 1) / per : 1;
}

/* dec_splits_rule() with the calling thread's last answer kept: one call asks it four times
 * or more (workspace, launch_workspace, every launch's arguments) and its wave rule walks up
 * to FAJIT_MAX_SPLITS split counts twice, which was most of a warm call's host time (4 x
 * 16k keys: 3.0 us per call on a fake driver, test_nvrtc's decode_warm_call). The key is
 * every input it reads; seqlen_k only as its key tiles, the rule's one use of it, so a
 * server without CUDA graphs, whose longest sequence grows a key a step, finds the answer
 * kept for all but one step in a tile's keys (4 x 12k growing: 1.04 -> 0.32-0.34 us a call;
 * test_nvrtc's hostcost). */
typedef struct dec_splits_key {
    fj_dec_config c;
    int batch, heads_q, heads_kv, seqlen_q, tiles_k, head_dim, num_splits, num_splits_max;
    int sm_count, sm;
} dec_splits_key;
static _Thread_local struct { dec_splits_key key; int splits; } t_last_splits;

int fj_dec_splits(const fj_dec_config *c, const fajit_attn_desc *d, int sm_count, int sm)
{
    dec_splits_key k;
    memset(&k, 0, sizeof k);   /* (no padding, but compared whole) */
    k.c = *c;
    k.batch = d->batch, k.heads_q = d->heads_q, k.heads_kv = d->heads_kv;
    k.seqlen_q = d->seqlen_q, k.tiles_k = (int)fj_tiles(d->seqlen_k, c->bn);
    k.head_dim = d->head_dim;
    k.num_splits = d->num_splits, k.num_splits_max = d->num_splits_max;
    k.sm_count = sm_count, k.sm = sm;
    if (t_last_splits.splits && memcmp(&k, &t_last_splits.key, sizeof k) == 0)
        return t_last_splits.splits;
    const int s = dec_splits_rule(c, d, sm_count, sm);
    t_last_splits.key = k, t_last_splits.splits = s;
    return s;
}

