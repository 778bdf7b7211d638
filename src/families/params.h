/* params.h - what the attention families share on the host: the kernels' parameter block
 * (fj_attn_params, src/kernels_src/fajit_params.h) from a validated descriptor, and the
 * common launch of one CTA per (query tile, head, batch) with that block as its only
 * argument. */
#ifndef FJ_FAMILY_PARAMS_H
#define FJ_FAMILY_PARAMS_H

#include "family.h"
#include "../kernels_src/fajit_params.h"

/* ceil(n / tile) in 64 bits: a length near INT_MAX plus a tile would overflow int
 * (fj_desc_check bounds lengths at FAJIT_MAX_SEQLEN, so the result fits an int). */
static inline long long fj_tiles(long long n, int tile)
{
    return (n + tile - 1) / tile;
}

/* Host copy of the parameter block from a validated descriptor. */
void fj_params_from_desc(const fajit_attn_desc *d, fj_attn_params *p);
/* grid (ceil(seqlen_q / block_m), heads_q, batch), the parameter block as the first
 * argument and the feature block (fj_feat_push) after it; FAJIT_UNSUPPORTED with the
 * reason in why when the argument block is full. */
fajit_status fj_grid_args(const fajit_attn_desc *d, int block_m, fj_args *a, char *why,
                          size_t n);

/* The model features of d in a kernel: the preamble's defines ("#define FJ_KV_FP8 1\n",
 * "#define FJ_HEAD_DIM_V 128\n" where head_dim_v differs from head_dim; "" for none: the
 * kernel of a problem without features is unchanged), a tag for the variant's name
 * (" kv-e4m3 softcap dv128"), and the fj_feat_params block, pushed as the launch's
 * last argument where d has any (fj_feat_push: 0, or -1 when the block is full). */
void fj_feat_defines(const fajit_attn_desc *d, char *out, size_t n);
void fj_feat_tag(const fajit_attn_desc *d, char *out, size_t n);
void fj_feat_params_from_desc(const fajit_attn_desc *d, fj_feat_params *f);
int fj_feat_push(const fajit_attn_desc *d, fj_args *a);

#endif /* FJ_FAMILY_PARAMS_H */
