/* fa4.h - the Blackwell family's configuration inside an fj_kcfg and its preamble (for tests
 * and tools). */
#ifndef FJ_FAMILY_FA4_H
#define FJ_FAMILY_FA4_H

#include "family.h"
#include "../autotune/fa4_config.h"

const fj_fa4_config *fj_fa4_of(const fj_kcfg *c);   /* NULL when c is not of this family */
void fj_fa4_kcfg(const fj_fa4_config *f, fj_kcfg *out);

/* The NVRTC preamble: FJ_DTYPE, FJ_HEAD_DIM, FJ_MASK, FJ_BLOCK_M, FJ_BLOCK_N, FJ_FA4_STAGES,
 * FJ_FA4_EMU, FJ_FA4_RESCALE, FJ_FA4_SCHED. The length written, or -1 when `n` is too small. */
int fj_fa4_preamble(const fj_fa4_config *c, int dtype, int head_dim, int mask, char *buf,
                    size_t n);

/* Threads per CTA: 128 * (block_m/128 + 2) (softmax warpgroups, correction, load/MMA). */
int fj_fa4_threads(const fj_fa4_config *c);

#endif /* FJ_FAMILY_FA4_H */
