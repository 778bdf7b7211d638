/* fa3_config.h - tile configurations of the Hopper forward kernel
 * (src/kernels_src/attn_fwd_sm90.cu, FA3 design): defaults per head_dim, mask and length
 * class, shared-memory size, validity checks and the candidate list for the autotuner.
 * Plain C11, no CUDA header. The preamble, launch shape and TMA descriptors of a
 * configuration are the family's (src/families/fa3.c).
 */
#ifndef FJ_FA3_CONFIG_H
#define FJ_FA3_CONFIG_H

#include <stddef.h>

#include "fajit_params.h"   /* FJ_MASK_* */

typedef struct fj_fa3_config {
    int block_m;   /* query rows per CTA: 128 (2 consumer warpgroups) or 192 (3) */
    int block_n;   /* keys per K/V tile: multiple of 16 in 16..256 */
    int overlap;   /* 1: S_{j+1} and P_j V_j in flight under the softmax (FJ_FA3_OVERLAP) */
    int pingpong;  /* 1: the 2 consumer warpgroups alternate their GEMMs (block_m 128 only) */
    int persistent; /* 1: one CTA per SM walks the work tiles in a static order
                     * (FJ_FA3_PERSISTENT); 2: the same grid taking the tiles from an atomic
                     * counter, longest first (FJ_FA3_SCHED 1: needs the counter argument) */
} fj_fa3_config;

/* The default for (head_dim, mask, seqlen_q), measured on the H200: 192x128 (hd <= 64),
 * 128x128 (hd <= 128), 128x112 (hd <= 192), 128x80; overlap on, ping-pong when block_m is
 * 128, persistent without a mask for hd <= 128 and hd > 192, and with the dynamic tile order
 * (persistent 2) for causal hd 97..128, hd 64 and hd 256 (the latter two in the long and mid
 * classes only). For prefill of 2..FJ_FA3_SHORT_SEQ query rows, hd <= 64 causal takes
 * 128x128 (dynamic order), hd > 192 causal 128x64 (grid) and unmasked 128x64 persistent.
 * Passes fj_fa3_check for every head_dim that fj_fa3_check accepts.
 *
 * The default depends on seqlen_q only through its length class: FJ_FA3_CLASS_LONG (0 =
 * unknown, 1 = decode, FJ_FA3_MID_SEQ+1 .. FJ_FA3_LONG_SEQ), FJ_FA3_CLASS_SHORT (prefill
 * of 2..FJ_FA3_SHORT_SEQ), FJ_FA3_CLASS_MID (FJ_FA3_SHORT_SEQ+1 .. FJ_FA3_MID_SEQ: the long
 * class's defaults, a bucket of its own for tuning winners) and FJ_FA3_CLASS_VLONG (above
 * FJ_FA3_LONG_SEQ). Warming compiles the default of every class; fj_fa3_class_seqlen gives a
 * seqlen_q that stands for one. */
#define FJ_FA3_SHORT_SEQ 1024
#define FJ_FA3_MID_SEQ 2048
#define FJ_FA3_LONG_SEQ 8192
enum { FJ_FA3_CLASS_LONG, FJ_FA3_CLASS_SHORT, FJ_FA3_CLASS_VLONG, FJ_FA3_CLASS_MID, FJ_FA3_CLASSES };
int fj_fa3_length_class(int seqlen_q);
int fj_fa3_class_seqlen(int length_class);
fj_fa3_config fj_fa3_default(int head_dim, int mask, int seqlen_q);
/* V's head dim head_dim_v where it differs (0: head_dim; the kernel's FJ_HEAD_DIM_V, a
 * multiple of 16 at most head_dim): fj_fa3_default's tile, except 128x128 (FA3's) for
 * head_dim 129..192 with head_dim_v <= 128 (DeepSeek's 192 / 128) and no window. With
 * head_dim_v 0 or head_dim, fj_fa3_default itself; so for each _v function below. */
fj_fa3_config fj_fa3_default_v(int head_dim, int head_dim_v, int mask, int seqlen_q);

/* Dynamic shared memory of one CTA: ceil(hd/64) * 128 * (q * block_m + 4*block_n) + 1344,
 * for a persistent config q = 3 where that fits in 227 KiB, else 2, else 1 (the kernel's O
 * slot takes the second Q-sized buffer; the third served the removed knob FJ_FA3_QBUF2,
 * dev/fa3/patches, and is kept so that every launch stays as it was measured). */
size_t fj_fa3_smem_bytes(const fj_fa3_config *c, int head_dim);
/* The same with V's stages of head_dim_v columns: ceil(hd/64) * 128 * (q * block_m + 2*block_n)
 * + ceil(dv/64) * 128 * 2*block_n + 1344. */
size_t fj_fa3_smem_bytes_v(const fj_fa3_config *c, int head_dim, int head_dim_v);

/* 0 when the kernel accepts `c` for head_dim on sm; otherwise -1 and a reason in `why`
 * (may be NULL), e.g. "head_dim must be a multiple of 16 in 16..256, got 100". Needs
 * sm == 90 (sm_90a code runs on compute capability 9.0 only), the static_asserts of the
 * kernel, 227 KiB of shared memory, and an accumulator budget per consumer thread:
 * head_dim/2 + 3*block_n/4 at most 210 (2 consumer warpgroups) or 130 (3). */
int fj_fa3_check(const fj_fa3_config *c, int head_dim, int sm, char *why, size_t n);
/* The same for V's head dim head_dim_v: a multiple of 16 in 16..head_dim, the shared memory
 * of fj_fa3_smem_bytes_v, O's accumulators head_dim_v/2 (head_dim_v/2 + 3*block_n/4). */
int fj_fa3_check_v(const fj_fa3_config *c, int head_dim, int head_dim_v, int sm, char *why,
                   size_t n);

/* Up to `max` configurations worth timing for (head_dim, mask), the default for seqlen_q
 * first, all passing fj_fa3_check. Returns how many were written. */
int fj_fa3_candidates(int head_dim, int mask, int seqlen_q, fj_fa3_config *out, int max);
/* The same for head_dim_v (fj_fa3_default_v first, all passing fj_fa3_check_v; none for a
 * head_dim_v the kernel does not take). */
int fj_fa3_candidates_v(int head_dim, int head_dim_v, int mask, int seqlen_q, fj_fa3_config *out,
                        int max);

#endif /* FJ_FA3_CONFIG_H */
