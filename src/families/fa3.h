/* fa3.h - the Hopper family's configuration inside an fj_kcfg, its launch shape and its
 * TMA descriptors (for tests and tools). */
#ifndef FJ_FAMILY_FA3_H
#define FJ_FAMILY_FA3_H

#include "family.h"
#include "../autotune/fa3_config.h"
#include "../kernels_src/fajit_params.h"

const fj_fa3_config *fj_fa3_of(const fj_kcfg *c);   /* NULL when c is not of this family */
void fj_fa3_kcfg(const fj_fa3_config *f, fj_kcfg *out);

/* The NVRTC preamble: FJ_DTYPE, FJ_HEAD_DIM, FJ_MASK, FJ_BLOCK_M, FJ_BLOCK_N,
 * FJ_FA3_OVERLAP, FJ_FA3_PINGPONG, FJ_FA3_PERSISTENT (persistent != 0), FJ_FA3_SCHED
 * (persistent == 2), and FJ_FA3_PAGED 1 where `paged`. Returns the length written, or -1
 * when `n` is too small. */
int fj_fa3_preamble(const fj_fa3_config *c, int dtype, int head_dim, int mask, int paged,
                    char *buf, size_t n);

/* Paged K/V: the fewest query rows (the longest sequence's) the family takes a paged problem
 * for; below, the decode family's packed tiles serve. */
#define FJ_FA3_PAGED_MIN_Q 64
/* Whether a K/V block of block_n keys is whole pages or within one page of page_size keys
 * in a way the kernel's boxes can load (pages hold whole blocks, or blocks hold whole pages
 * of a multiple of 8 rows, the 128-byte swizzle atom). */
int fj_fa3_page_fit(int block_n, int page_size);

/* grid = (ceil(seqlen_q / block_m), heads_q, batch), or for a persistent config
 * (min(num_sms, that product), 1, 1); threads = 128 * (block_m/64 + 1). For varlen,
 * seqlen_q is the longest sequence (as in fj_attn_params). */
void fj_fa3_launch_shape(const fj_fa3_config *c, const fj_attn_params *p, int num_sms,
                         unsigned grid[3], unsigned *threads);


/* Paged K/V (d->block_table): out[0] as above, out[1..2] over the pages {head_dim,
 * page_size, heads_kv, num_pages} (page stride 0: page_size rows) with boxes of block_n or
 * page_size rows (fj_fa3_page_fit), and the kernel's fj_kv_pages. 0, or -1 with a reason. */
int fj_fa3_encode_paged_tmaps(const fj_cuda *cu, const fajit_attn_desc *d,
                              const fj_attn_params *p, const fj_fa3_config *c, fj_tmap out[3],
                              fj_kv_pages *pg, char *why, size_t n);

/* The grid and arguments of the kernel of f for d (the family's one launch): paged K/V
 * with the kernel's fj_kv_pages.min_q = min_q (varlen sequences of fewer query rows are
 * skipped: the mixed family's plan; 0 = none). FAJIT_OK, or a status with a reason. */
fajit_status fj_fa3_launch_args(const fj_fa3_config *f, const fajit_attn_desc *d,
                                const fj_launch_env *env, int min_q, fj_args *a, char *why,
                                size_t n);

#endif /* FJ_FAMILY_FA3_H */
