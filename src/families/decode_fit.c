/* decode_fit.c - the decode family's resource model: the shared memory of a configuration,
 * where TMA loads fit, whether the cluster merge's partials fit, the most KV heads a CTA
 * may take in a layout, and the check of a configuration. Its table (decode.c) and its
 * rules (decode_rules.c) both use it; it uses neither. */
#include <stdio.h>

#include "decode.h"
#include "target.h"   /* fj_smem_limit: the per-target shared memory */

int fj_dec_pack_limit(const fajit_attn_desc *d)
{
    if (d->k_head_stride != d->head_dim || d->v_head_stride != d->head_dim || d->heads_kv < 1)
        return 1;
    return d->heads_kv % 4 == 0 ? 4 : d->heads_kv % 2 == 0 ? 2 : 1;
}

/* Shared memory the split step's tiles and epilogue use (attn_decode.cu's SMEM_USE), and
 * its dynamic shared memory: TMA adds 64 bytes of barriers and 1024 of alignment slack. */
static size_t red_bytes(const fj_dec_config *c, int head_dim)   /* (the epilogue's RED_BYTES) */
{
    const size_t dp = (size_t)(head_dim * hp_of(c) + 15) / 16 * 16;
    return (size_t)c->wm * c->wn * 16 * (dp + 8) * 4 + (size_t)c->wm * c->wn * 16 * 8;
}
size_t fj_dec_smem_used(const fj_dec_config *c, int head_dim)
{
    const size_t dp = (size_t)(head_dim * hp_of(c) + 15) / 16 * 16;
    const size_t ldb = dp % 64 == 0 ? 2 * dp : 2 * dp + 16;
    const size_t main = 16u * c->wm * ldb + 2u * c->stages * c->bn * ldb;
    const size_t red = red_bytes(c, head_dim);
    return main > red ? main : red;
}
/* Whether the cluster merge's partials (attn_decode.cu's CL_FITS: O [16*wm][head_dim] and
 * LSE in fp32 after the epilogue's reduction area) fit the split step's shared memory
 * (head_dim: a real head's; the tiles are sized for hp of them). */
int fj_dec_cluster_fits(const fj_dec_config *c, int head_dim)
{
    const size_t mt = 16u * c->wm;
    return (red_bytes(c, head_dim) + 15) / 16 * 16 + mt * head_dim * 4 + mt * 4 <=
           fj_dec_smem_used(c, head_dim);
}
size_t fj_dec_smem_bytes(const fj_dec_config *c, int head_dim)
{
    return fj_dec_smem_used(c, head_dim) + (c->tma ? 64 + 1024 : 0);
}

/* Where TMA can load the K/V tiles: sm_90 and later, head_dim a multiple of 64 (128-byte
 * swizzled boxes of 64 columns), and a page size that is a multiple of the tile or divides
 * it into whole 8-row swizzle atoms (no block table: one box of a tile's rows). NULL, or
 * what is missing. */
const char *fj_dec_tma_misfit(const fj_dec_config *c, const fajit_attn_desc *d,
                              const fj_target *t)
{
    if (t->sm < 90)
        return "TMA loads need sm_90 or later";
    if (d->head_dim % 64)
        return "TMA loads need head_dim a multiple of 64";
    if (d->block_table && d->page_size > 0 && d->page_size % c->bn &&
        (c->bn % d->page_size || d->page_size % 8))
        return "TMA loads need page_size a multiple of the tile's keys, or a multiple of 8 "
               "that divides them";
    return NULL;
}

int fj_dec_check(const fj_kcfg *k, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n)
{
    const fj_dec_config *c = of(k);
    const char *bad = NULL;
    if (c->wm < 1 || c->wm > 4 || c->wn < 1 || c->wn > 8 || c->wm * c->wn > 8)
        bad = "warps along rows must be 1..4 and along keys 1..8, at most 8 in all";
    else if (c->bn < 16 || c->bn > 256 || c->bn % (16 * c->wn))
        bad = "keys per tile must be a multiple of 16 per key warp, 16..256";
    else if (c->stages < 2 || c->stages > 6)
        bad = "stages must be 2..6";
    else if (c->splits < 0 || c->splits > FAJIT_MAX_SPLITS)
        bad = "forced splits out of range";
    else if (c->hp < 0 || c->hp == 3 || c->hp > 4)
        bad = "KV heads per CTA must be 1, 2 or 4";
    else if (hp_of(c) > 1 && (c->tma || d->head_dim * c->hp > 256))
        bad = "KV heads per CTA need cp.async loads and head_dim * heads <= 256";
    else if (hp_of(c) > 1 && fj_dec_pack_limit(d) % c->hp)
        bad = "KV heads per CTA need heads_kv a multiple of them and K/V heads side by side "
              "(head strides == head_dim)";
    else if (d->kv_dtype != FAJIT_KV_AS_Q && (c->tma || hp_of(c) > 1))
        bad = "FP8 K/V need cp.async loads and one KV head per CTA";
    else if (fj_dec_smem_bytes(c, d->head_dim) > fj_smem_limit(t->sm))
        bad = "the tile does not fit the target's shared memory";
    else if (c->tma)
        bad = fj_dec_tma_misfit(c, d, t);
    if (bad && why && n)
        snprintf(why, n, "%s (dec %dx%d m%d n%d%s%s)", bad, c->bn, c->stages, c->wm, c->wn,
                 c->tma ? " tma" : "", hp_tag(c));
    return bad ? -1 : 0;
}
