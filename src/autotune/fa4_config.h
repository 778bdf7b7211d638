/* fa4_config.h - tile configurations of the Blackwell forward kernel
 * (src/kernels_src/attn_fwd_sm100.cu, FA4 design): defaults per head_dim, mask and target
 * (sm_100a / sm_103a), the shared-memory and Tensor Memory budgets, validity checks and the
 * candidate list for the autotuner. Plain C11, no CUDA header. The preamble, launch shape
 * and TMA descriptors of a configuration are the family's (src/families/fa4.c).
 *
 * Nothing here is measured: no Blackwell GPU was available when this was written. The
 * defaults follow the FA4 paper and code (Dao-AILab/flash-attention flash_attn/cute/
 * flash_fwd_sm100.py): two 128-row Q tiles per CTA, 128-key blocks, software exp2 for about
 * 1 in 10 to 1 in 16 elements on sm_100 and none on sm_103 (its MUFU ex2 is faster), a
 * rescale threshold of 8; the tuner on a B200 chooses among the candidates.
 */
#ifndef FJ_FA4_CONFIG_H
#define FJ_FA4_CONFIG_H

#include <stddef.h>

#include "fajit_params.h"   /* FJ_MASK_* */

typedef struct fj_fa4_config {
    int block_m;   /* query rows per CTA: 256 (two 128-row Q tiles, two softmax warpgroups
                      taking turns) or 128 (one tile: head_dim 256) */
    int block_n;   /* keys per K/V block: 64 or 128 */
    int stages;    /* K/V ring slots (each one K or one V tile): 2..8 */
    int emu;       /* software exp2 for 1 in `emu` elements of each row block (0: none) */
    int rescale;   /* conditional rescaling threshold, log2 units (0: always rescale), 0..16 */
    int sched;     /* persistent grid; 0: static round robin, 1: dynamic longest-first (a
                      tile counter in the workspace) */
} fj_fa4_config;

/* 1 for the compute capabilities the kernel is compiled for: 100 (sm_100a) and 103
 * (sm_103a). */
int fj_fa4_target_ok(int sm);

/* The default for (head_dim, mask) on sm (100 or 103): 256x128 for head_dim <= 128, 256x64
 * for 192 (TMEM: 2 * (64 + 192) = 512 columns), 128x128 for 256 (one Q tile: O takes 256 of
 * the 512 columns); 4 stages where they fit (2 for head_dim 256); emu 10 (head_dim <= 128)
 * or 16 on sm_100, 0 on sm_103; rescale 8; the dynamic order with a mask. */
fj_fa4_config fj_fa4_default(int head_dim, int mask, int sm);

/* Dynamic shared memory of one CTA: Q (block_m/128 tiles of ceil(hd/64) * 16 KiB), the K/V
 * ring (stages * ceil(hd/64) * block_n * 128), 512 bytes of barriers and words, the per-row
 * words (block_m * 12) and 1024 bytes of alignment slack (fa4::SMEM_BYTES in the kernel). */
size_t fj_fa4_smem_bytes(const fj_fa4_config *c, int head_dim);

/* Tensor Memory columns in use: (block_m/128) * (block_n + head_dim) (S and O per Q tile;
 * P aliases S); the kernel allocates the next power of two. */
int fj_fa4_tmem_cols(const fj_fa4_config *c, int head_dim);

/* 0 when the kernel accepts `c` for head_dim on sm; otherwise -1 and a reason in `why` (may
 * be NULL). Needs sm 100 or 103, head_dim 64, 96, 128, 192 or 256, the kernel's
 * static_asserts, at most 512 TMEM columns and 227 KiB of shared memory. */
int fj_fa4_check(const fj_fa4_config *c, int head_dim, int sm, char *why, size_t n);

/* Up to `max` configurations worth timing for (head_dim, mask) on sm, the default first, all
 * passing fj_fa4_check (at most 6: each is a kernel to compile). Returns how many. */
int fj_fa4_candidates(int head_dim, int mask, int sm, fj_fa4_config *out, int max);

#endif /* FJ_FA4_CONFIG_H */
