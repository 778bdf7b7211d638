/* fa3_config.h - the Hopper forward kernel (src/kernels_src/attn_fwd_sm90.cu, FA3 design):
 * tile configurations, the preamble, shared memory and launch shape, and the three TMA
 * descriptors the kernel takes as parameters. Plain C11, no CUDA header.
 *
 * Launch, all of it from here:
 *   fj_fa3_check(&c, hd, sm, why, n)                      -> 0 or a reason
 *   fj_fa3_preamble(&c, dtype, hd, mask, buf, n)           -> "#define FJ_..." for NVRTC
 *       compile with arch "sm_90a"; entry point "fj_attn_fwd_sm90"
 *   cuFuncSetAttribute(f, MAX_DYNAMIC_SHARED_SIZE_BYTES, fj_fa3_smem_bytes(&c, hd))
 *   fj_fa3_encode_tmaps(encode, &p, dtype, &c, total_q, total_k, maps, why, n)
 *   fj_fa3_launch_shape(&c, &p, num_sms, grid, &threads)
 *   void *args[5] = {&p, &maps[0], &maps[1], &maps[2], &ctr};
 *   cuLaunchKernel(f, grid[0], grid[1], grid[2], threads, 1, 1, smem, stream, args, NULL)
 * where ctr (CUdeviceptr) is, for persistent == 2, a device int that is 0 at the launch (the
 * kernel leaves it 0 again; no other launch may use it while this one runs), else any value.
 * where `encode` is the driver's cuTensorMapEncodeTiled (CUDA 12.0+, in libcuda.so.1,
 * no version suffix; seen working on driver 580). The maps hold the tensor addresses,
 * strides and lengths: encode them again whenever one of those changes. Launch nothing
 * when seqlen_q is 0 (the grid would be empty).
 */
#ifndef FJ_FA3_CONFIG_H
#define FJ_FA3_CONFIG_H

#include <stddef.h>

#include "fajit_params.h"

typedef struct fj_fa3_config {
    int block_m;   /* query rows per CTA: 128 (2 consumer warpgroups) or 192 (3) */
    int block_n;   /* keys per K/V tile: multiple of 16 in 16..256 */
    int overlap;   /* 1: S_{j+1} and P_j V_j in flight under the softmax (FJ_FA3_OVERLAP) */
    int pingpong;  /* 1: the 2 consumer warpgroups alternate their GEMMs (block_m 128 only) */
    int persistent; /* 1: one CTA per SM walks the work tiles in a static order
                     * (FJ_FA3_PERSISTENT); 2: the same grid taking the tiles from an atomic
                     * counter, longest first (FJ_FA3_SCHED 1: needs the counter argument) */
} fj_fa3_config;

/* One CUtensorMap: 128 opaque bytes, 64-byte aligned, passed to the kernel by value. */
typedef struct fj_fa3_tmap {
    _Alignas(64) unsigned long long w[16];
} fj_fa3_tmap;

/* cuTensorMapEncodeTiled, with the driver's ABI (enums are int, cuuint32_t is unsigned,
 * cuuint64_t is unsigned long long). Returns a CUresult. */
typedef int (*fj_fa3_encode_fn)(void *tensor_map, int data_type, unsigned rank, void *global_address,
                                const unsigned long long *global_dim,
                                const unsigned long long *global_strides, const unsigned *box_dim,
                                const unsigned *element_strides, int interleave, int swizzle,
                                int l2_promotion, int oob_fill);

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

/* Dynamic shared memory of one CTA: ceil(hd/64) * 128 * (q * block_m + 4*block_n) + 1344,
 * q = 3, else 2 (room for three or two Q buffers: the kernel's O slot takes the second, its dev
 * knob FJ_FA3_QBUF2 a second Q buffer beside the slot) for a persistent config where that fits in
 * 227 KiB, else 1. */
size_t fj_fa3_smem_bytes(const fj_fa3_config *c, int head_dim);

/* 0 when the kernel accepts `c` for head_dim on sm; otherwise -1 and a reason in `why`
 * (may be NULL), e.g. "head_dim must be a multiple of 16 in 16..256, got 100". Needs
 * sm == 90 (sm_90a code runs on compute capability 9.0 only), the static_asserts of the
 * kernel, 227 KiB of shared memory, and an accumulator budget per consumer thread:
 * head_dim/2 + 3*block_n/4 at most 210 (2 consumer warpgroups) or 130 (3). */
int fj_fa3_check(const fj_fa3_config *c, int head_dim, int sm, char *why, size_t n);

/* Up to `max` configurations worth timing for (head_dim, mask), the default for seqlen_q
 * first, all passing fj_fa3_check. Returns how many were written. */
int fj_fa3_candidates(int head_dim, int mask, int seqlen_q, fj_fa3_config *out, int max);

/* The NVRTC preamble: FJ_DTYPE, FJ_HEAD_DIM, FJ_MASK, FJ_BLOCK_M, FJ_BLOCK_N,
 * FJ_FA3_OVERLAP, FJ_FA3_PINGPONG, FJ_FA3_PERSISTENT (persistent != 0), FJ_FA3_SCHED
 * (persistent == 2). Returns the length written (excluding
 * the NUL), or -1 when `n` is too small. */
int fj_fa3_preamble(const fj_fa3_config *c, int dtype, int head_dim, int mask, char *buf, size_t n);

/* grid = (ceil(seqlen_q / block_m), heads_q, batch), or for a persistent config
 * (min(num_sms, that product), 1, 1); threads = 128 * (block_m/64 + 1). For varlen,
 * seqlen_q is the longest sequence (as in fj_attn_params). num_sms: the device's
 * multiprocessor count (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 on an H100/H200 SXM). */
void fj_fa3_launch_shape(const fj_fa3_config *c, const fj_attn_params *p, int num_sms,
                         unsigned grid[3], unsigned *threads);

/* Encodes the Q, K, V tensor maps of `p` into out[0..2]: 4-D {head_dim, rows, heads,
 * batch}, 16-bit elements, box {64, block_m (Q) or block_n (K, V), 1, 1}, 128-byte
 * swizzle, zero fill. Fixed length: rows = seqlen_q / seqlen_k. Varlen (p->cu_seqlens_q
 * != 0): rows = total_q / total_k (the packed row counts, which the device-side
 * cu_seqlens arrays hold but the host must pass), batch 1; otherwise total_q, total_k are
 * ignored. Returns 0, or -1 with a reason in `why`: a pointer not 16-byte aligned, a stride
 * that is negative or not a multiple of 8 elements, or the CUresult of the encoder. */
int fj_fa3_encode_tmaps(fj_fa3_encode_fn encode, const fj_attn_params *p, int dtype,
                        const fj_fa3_config *c, long long total_q, long long total_k,
                        fj_fa3_tmap out[3], char *why, size_t n);

#endif /* FJ_FA3_CONFIG_H */
