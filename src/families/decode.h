/* decode.h - the decode family's configuration and what its two host files share:
 * decode.c (the family's table: resources, names, kernels, workspace, launches) and
 * decode_rules.c (its rules: the default tiles per split class, head packing, the tuning
 * candidates, the variants warm compiles, the split count). Private to src/families and
 * the tests. */
#ifndef FJ_FAMILY_DECODE_H
#define FJ_FAMILY_DECODE_H

#include <stddef.h>
#include <string.h>

#include "family.h"

/* How the decode family's defaults load K/V tiles (FAJIT_DECODE_LOADER=auto|cpasync|tma):
 * auto = the family's rule; tma applies only where TMA fits (sm_90+: fj_dec_tma_misfit). */
enum { FJ_DEC_LOADER_AUTO = 0, FJ_DEC_LOADER_CPASYNC = 1, FJ_DEC_LOADER_TMA = 2 };
/* How many KV heads the decode family's defaults give one CTA (FAJIT_DECODE_HEAD_PACK=
 * auto|off|2|4): auto = the family's rule (decode_rules.c's pack_rule); 2 and 4 wherever the
 * layout allows (fj_dec_pack_limit) and head_dim x heads <= 256, else none. */
enum { FJ_DEC_PACK_AUTO = 0, FJ_DEC_PACK_OFF = 1, FJ_DEC_PACK_2 = 2, FJ_DEC_PACK_4 = 4 };

/* How the decode family splits the keys of d on a GPU of sm_count SMs (0: unknown, taken
 * as 132), from the (sequence, KV head) pairs and K+V at the host-known maxima: NONE where
 * the pairs fill the SMs; else STREAM from 32 MiB (bandwidth-bound), and below it
 * (latency-bound) LATENCY_FEW with at most a sixteenth of the SMs' count of pairs, LATENCY
 * with more. Its default tiles depend on it, so plans and decode tuning buckets are kept
 * per class. */
enum { FJ_DEC_SPLIT_NONE = 0, FJ_DEC_SPLIT_STREAM = 1, FJ_DEC_SPLIT_LATENCY = 2,
       FJ_DEC_SPLIT_LATENCY_FEW = 3, FJ_DEC_SPLIT_CLASSES = 4 };
int fj_dec_split_class(const fajit_attn_desc *d, int sm_count);
/* The most KV heads (1, 2 or 4) a decode CTA may take at once in d's layout: heads_kv a
 * multiple of them and the K/V heads side by side (head strides == head_dim). A plan made
 * for one layout must not serve another where this differs (its plan class holds it). */
int fj_dec_pack_limit(const fajit_attn_desc *d);
/* The KV heads (1, 2 or 4) per CTA of the decode default for d on t (head packing; at most
 * fj_dec_pack_limit(d)). Its plan class holds it beside the limit. */
int fj_dec_pack_default(const fajit_attn_desc *d, const fj_target *t);

/* The decode family's options (its bytes of fj_fopts; all zero: the defaults), read from the
 * environment at context creation (fj_dec_options). */
typedef struct fj_dec_opts {
    int loader;       /* FAJIT_DECODE_LOADER: FJ_DEC_LOADER_* */
    int pack;         /* FAJIT_DECODE_HEAD_PACK: FJ_DEC_PACK_* */
    int no_cluster;   /* FAJIT_DECODE_CLUSTER=0: no thread-block cluster launches */
} fj_dec_opts;
_Static_assert(sizeof(fj_dec_opts) <= FJ_FOPTS_BYTES, "fj_dec_opts fits its fj_fopts bytes");
_Static_assert(FAJIT_FAMILY_DECODE < FJ_FOPTS_IDS, "the decode family has fj_fopts bytes");

static inline const fj_dec_opts *fj_dec_opts_of(const fj_fopts *o)
{
    return (const fj_dec_opts *)fj_fopts_of(o, FAJIT_FAMILY_DECODE);
}
fajit_status fj_dec_options(void *opts, char *why, size_t n);

typedef struct fj_dec_config {
    int bn;        /* keys per K/V tile */
    int stages;    /* cp.async pipeline depth */
    int wm, wn;    /* warps along the packed rows and along the keys of a tile */
    int splits;    /* 0: chosen per call (fj_dec_splits); else forced (a tuning winner) */
    int checked;   /* FJ_DEC_CHECKED */
    int tma;       /* FJ_DEC_TMA: K/V tiles by TMA (sm_90+, where it fits) instead of cp.async */
    int hp;        /* FJ_DEC_HP: KV heads per CTA (head packing), 2 or 4; 0: none */
    int qmax;      /* FJ_DEC_QMAX: serve only sequences of at most q_len rows (the mixed
                      family's decode launch; not in tuning-row names) */
} fj_dec_config;
_Static_assert(sizeof(fj_dec_config) <= FJ_CFG_BYTES, "fj_dec_config fits an fj_kcfg");

static inline const fj_dec_config *of(const fj_kcfg *c)
{
    return (const fj_dec_config *)(const void *)c->b;
}

static inline void to_kcfg(const fj_dec_config *f, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    out->fam = &fj_family_decode;
    memcpy(out->b, f, sizeof *f);
}

/* (descriptors made by warm and plan for a head_dim alone have no heads: a group of 1) */
static inline int group(const fajit_attn_desc *d)
{
    return d->heads_kv > 0 && d->heads_q >= d->heads_kv ? d->heads_q / d->heads_kv : 1;
}
/* The most packed rows (query rows times heads per KV head) of one sequence. */
static inline int packed_rows(const fajit_attn_desc *d)
{
    return (d->seqlen_q > 0 ? d->seqlen_q : 1) * group(d);
}

/* Head packing (FJ_DEC_HP): a CTA takes hp KV heads, their K/V rows side by side as one row
 * of hp * head_dim columns, all their query heads' rows packed; the kernel's view of the
 * problem has heads_kv / hp heads of hp * head_dim (pack_view()). The functions below that
 * take (c, head_dim) or (c, d) size the CTA in that view; the partials stay per real head. */
static inline int hp_of(const fj_dec_config *c) { return c->hp > 1 ? c->hp : 1; }
/* " h2", " h4" or "" (names; skip the space in tuning-row names) */
static inline const char *hp_tag(const fj_dec_config *c)
{
    return hp_of(c) == 2 ? " h2" : hp_of(c) == 4 ? " h4" : "";
}
static inline int cta_rows_all(const fj_dec_config *c, const fajit_attn_desc *d)
{
    return packed_rows(d) * hp_of(c);   /* packed rows of one (sequence, CTA's heads) */
}
static inline long long cta_pairs(const fj_dec_config *c, const fajit_attn_desc *d)
{
    return (long long)d->batch * (d->heads_kv / hp_of(c));
}
/* SMs of a target, 132 (an H100/H200) where unknown (warm, plan for an arch) */
static inline int sms_of(int sm_count) { return sm_count > 0 ? sm_count : 132; }
/* The (sequence, KV head) pairs (a descriptor without a batch or heads counts 1 of each). */
static inline long long pairs_of(const fajit_attn_desc *d)
{
    return (long long)(d->batch > 0 ? d->batch : 1) * (d->heads_kv > 0 ? d->heads_kv : 1);
}

static inline int q_tiles(const fj_dec_config *c, const fajit_attn_desc *d)
{
    const int mt = 16 * c->wm;
    return (cta_rows_all(c, d) + mt - 1) / mt;
}
/* The packed rows of one CTA's q tile (at most 16 * wm). */
static inline int cta_rows(const fj_dec_config *c, const fajit_attn_desc *d)
{
    const int mt = 16 * c->wm;
    return cta_rows_all(c, d) < mt ? cta_rows_all(c, d) : mt;
}

/* decode.c: shared memory of a CTA of c (the tiles and epilogue; with TMA's barriers and
 * alignment), where TMA cannot load c's tiles (NULL: it can), the resource check */
size_t fj_dec_smem_used(const fj_dec_config *c, int head_dim);
size_t fj_dec_smem_bytes(const fj_dec_config *c, int head_dim);
int fj_dec_cluster_fits(const fj_dec_config *c, int head_dim);
const char *fj_dec_tma_misfit(const fj_dec_config *c, const fajit_attn_desc *d, const fj_target *t);
int fj_dec_check(const fj_kcfg *k, const fajit_attn_desc *d, const fj_target *t, char *why,
                 size_t n);

/* decode_rules.c: the family table's default_cfg, candidates and shipped; CTAs of c per SM
 * as the split rule counts them (1 or 2); the splits of a problem's keys */
void fj_dec_default_cfg(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out);
int fj_dec_candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max);
int fj_dec_shipped(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max);
int fj_dec_per_sm(const fj_dec_config *c, int head_dim, int sm);
int fj_dec_splits(const fj_dec_config *c, const fajit_attn_desc *d, int sm_count, int sm);

#endif /* FJ_FAMILY_DECODE_H */
