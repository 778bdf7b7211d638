/* fa2_config.h - tile configurations of the FlashAttention-2 forward kernel
 * (src/kernels_src/attn_fwd_sm80.cu): defaults per target, shared-memory size, validity
 * checks and the candidate list for the autotuner. Plain C11, no CUDA header.
 *
 * A configuration becomes the preamble macros FJ_BLOCK_M, FJ_BLOCK_N, FJ_WARPS and
 * FJ_STAGES. `sm` is the compute capability as major*10 + minor (80, 86, 89, 90, 100,
 * 120, ...); `mask` is FJ_MASK_NONE / FJ_MASK_CAUSAL / FJ_MASK_WINDOW.
 */
#ifndef FJ_FA2_CONFIG_H
#define FJ_FA2_CONFIG_H

#include <stddef.h>

#include "target.h"   /* fj_smem_limit */

typedef struct fj_fa2_config {
    int block_m;  /* query rows per CTA: 16 * warps * (1..4) */
    int block_n;  /* keys per K/V tile: multiple of 16, at most 256 */
    int warps;    /* 1, 2, 4 or 8 */
    int stages;   /* K/V buffers: 1 (FA2's schedule) or 2 */
} fj_fa2_config;


/* The default tile for a head_dim (multiple of 8, 8..256) on `sm`; FA2's choices adjusted
 * to each target's shared memory and to what measured best on the H200. Always passes
 * fj_fa2_check for a valid head_dim and sm >= 80. */
fj_fa2_config fj_fa2_default(int sm, int head_dim, int mask);

/* Dynamic shared memory of one CTA: (block_m + 2*stages*block_n) rows of
 * ((roundup16(head_dim)/8) | 1) 16-byte chunks (rows padded to an odd chunk count), or,
 * for swizzled rows (roundup16(head_dim) 128 with one stage, or above 128 a multiple of
 * 64, and of 128 on the split path), roundup16(head_dim)/8 chunks plus 4 bytes per thread; plus, where the
 * kernel takes its split path (roundup16(head_dim) > 128 and a multiple of 32, block_m ==
 * 16*warps, warps and block_n/16 even), warps*32 rows of (block_n/16 + 1) 16-byte chunks
 * for the tiles of P that warp pairs exchange. */
size_t fj_fa2_smem_bytes(const fj_fa2_config *c, int head_dim);

/* 0 when the kernel accepts `c` for head_dim on sm; otherwise -1 and a reason in `why`
 * (may be NULL), e.g. "smem 240 KiB > 227 KiB on sm_90". Checks the static_asserts of
 * the kernel, sm >= 80, the shared-memory limit and a register budget (accumulators of
 * 4*MT*(head_dim/8 + block_n/8) floats at most 192 per thread). */
int fj_fa2_check(const fj_fa2_config *c, int head_dim, int sm, char *why, size_t n);

/* Up to `max` configurations worth timing for (sm, head_dim, mask), the default first,
 * all passing fj_fa2_check. Returns how many were written. */
int fj_fa2_candidates(int sm, int head_dim, int mask, fj_fa2_config *out, int max);

#endif /* FJ_FA2_CONFIG_H */
