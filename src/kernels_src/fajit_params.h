/* fajit_params.h - the one parameter block shared by host C and every kernel.
 *
 * Compiled twice: by the host C compiler (src/api, src/autotune) and by NVRTC as
 * part of every kernel translation unit. Nothing here may need a system header
 * under NVRTC. FJ_PARAMS_SIZE and the offsets checked in fj_params_layout_check()
 * (host) and the static_asserts below (device) keep both sides in step.
 *
 * Tensor layout (all strides in elements, last dimension contiguous):
 *   Q [batch][seqlen_q][heads_q ][head_dim]   element (b,i,h,c) at
 *       q + b*q_batch_stride + i*q_row_stride + h*q_head_stride + c
 *   K, V [batch][seqlen_k][heads_kv][head_dim], O like Q.
 *   Varlen (cu_seqlens_q != 0): sequences are packed along the row dimension;
 *       sequence b holds rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 and the
 *       batch strides are unused. seqlen_q/seqlen_k are then the maxima.
 *   LSE (optional, fp32, natural log): fixed length [batch][heads_q][seqlen_q];
 *       varlen [heads_q][total_q] with total_q = cu_seqlens_q[batch].
 *       -inf for a row that sees no key.
 * Mask: key j is visible to query i (both 0-based within their sequence) iff
 *       j >= i + (sk - sq) - window_left  and  j <= i + (sk - sq) + window_right,
 *   where a negative window side means "unbounded". Causal is (-1, 0): aligned to
 *   the bottom right when sq != sk, as in FlashAttention-2.
 */
#ifndef FAJIT_PARAMS_H
#define FAJIT_PARAMS_H

#ifdef __CUDACC_RTC__
typedef int fj_i32;
typedef unsigned int fj_u32;
typedef long long fj_i64;
typedef unsigned long long fj_u64;
#else
#include <stdint.h>
typedef int32_t fj_i32;
typedef uint32_t fj_u32;
typedef int64_t fj_i64;
typedef uint64_t fj_u64;
#endif

/* A function for the host and the device alike (fj_tile_order.h, fj_exp2.cuh,
 * fj_sm100_desc.cuh): one definition for NVRTC, nvcc and a plain C compiler. */
#ifdef __CUDACC__
#define FJ_HD static __host__ __device__ __forceinline__
#else
#define FJ_HD static inline
#endif

#define FJ_PARAMS_VERSION 1
#define FJ_PARAMS_SIZE 192

/* Macros, not enums: kernels test them in #if (an enum constant reads as 0 there). */
#define FJ_DT_F16 0
#define FJ_DT_BF16 1
#define FJ_MASK_NONE 0
#define FJ_MASK_CAUSAL 1
#define FJ_MASK_WINDOW 2

typedef struct fj_attn_params {
    /* device pointers, carried as integers so both compilers agree on size */
    fj_u64 q, k, v, o;              /*   0 */
    fj_u64 lse;                     /*  32: float*, 0 when not wanted */
    fj_u64 cu_seqlens_q;            /*  40: const int*, 0 unless varlen */
    fj_u64 cu_seqlens_k;            /*  48 */
    fj_i64 q_batch_stride, q_row_stride, q_head_stride;   /*  56 */
    fj_i64 k_batch_stride, k_row_stride, k_head_stride;   /*  80 */
    fj_i64 v_batch_stride, v_row_stride, v_head_stride;   /* 104 */
    fj_i64 o_batch_stride, o_row_stride, o_head_stride;   /* 128 */
    fj_i32 batch, heads_q, heads_kv, head_dim;            /* 152 */
    fj_i32 seqlen_q, seqlen_k;                            /* 168 */
    fj_i32 window_left, window_right;                     /* 176: -1 = unbounded */
    float scale;                    /* 184: softmax scale (natural base) */
    float scale_log2;               /* 188: scale * log2(e) */
} fj_attn_params;                   /* 192 */


/* The Hopper prefill kernel's paged K/V (attn_fwd_sm90.cu with FJ_FA3_PAGED 1: its last
 * argument). Key j of sequence b is row j % page_size of page
 * block_table[b * bt_stride + j / page_size]; sequence b has seqused_k[b] keys (0: seqlen_k
 * each). K and V come through tensor maps [num_pages][page_size][heads_kv][head_dim] whose
 * boxes hold box_rows rows (page_size % BN == 0: BN, else page_size, which the host takes only
 * where BN % page_size == 0 and page_size % 8 == 0); a box past the sequence end is loaded
 * from page num_pages (outside the map: zero-filled, no block-table read).
 * page_shift: log2(page_size) where that is a power of two, else -1.
 * min_q: a varlen sequence with fewer query rows is left alone (no tile of it runs, none of
 * its O or LSE rows is written): the mixed plan's decode launch serves those; 0 = none. */
#define FJ_KV_PAGES_SIZE 40
typedef struct fj_kv_pages {
    fj_u64 block_table;             /*  0: const int* */
    fj_u64 seqused_k;               /*  8: const int* [batch], 0 = seqlen_k for every sequence */
    fj_i32 bt_stride, page_size;    /* 16 */
    fj_i32 page_shift, num_pages;   /* 24 */
    fj_i32 min_q, pad_;             /* 32: pad_ 0 (an 8-byte multiple) */
} fj_kv_pages;                      /* 40 */
/* The paged decode / chunked-prefill kernels' parameters (attn_decode.cu: the split step and
 * the combine step). Sequence b has q_len_b query rows (q_len each, or cu_seqlens_q[b+1] -
 * cu_seqlens_q[b]; rows packed then) and len_b keys (seqused_k[b], or seqlen_k). Key j of
 * sequence b is row j % page_size of page block_table[b * bt_stride + j / page_size]; without
 * a block table, page = b and page_size = seqlen_k (contiguous K/V, page stride = batch
 * stride). Query i sees key j when j - (i + len_b - q_len_b) lies in [-window_left,
 * window_right] (-1 = unbounded; causal: window_right = 0).
 * Split step: CTA (x = split * q_tiles + q_tile, y = kv head, z = b) covers keys
 * [split * split_keys, (split + 1) * split_keys) of its sequence for the packed rows
 * r = i * G + g (G = heads_q / heads_kv, head = kv_head * G + g) of its q tile. With splits 1
 * it writes O and LSE; otherwise fp32 partials part_o [splits][rows][heads_q][head_dim] and
 * part_lse [splits][rows][heads_q] (rows = batch * q_len, or total rows when varlen;
 * total_rows may be any upper bound of cu_seqlens_q[batch] when varlen (e.g. batch * q_len:
 * the host cannot read it); it is the row count of the partials and the combine's grid x,
 * and the combine skips rows >= cu_seqlens_q[batch]; an empty split writes LSE -inf), which
 * the combine step merges into O and LSE: the last CTA of each (q tile, kv head, b) to
 * finish does it when `counters` is set (one zeroed int per such group, counted up by its
 * splits and put back to 0 by the last), else the combine kernel.
 * Kernels compiled with FJ_DEC_QMAX 1 serve only sequences with at most q_len query rows
 * (varlen): the split step, every merge path and the combine kernel leave the rows of
 * longer sequences alone (the mixed plan's Hopper launch writes them).
 * Address fast paths (set by the host, optional: 0 / -1 take the general paths):
 * page_shift = log2(page_size) where that is a power of two (a shift for the page of a key);
 * off16 = 1 where the K and V offsets fit 32 bits in 16-byte units (the page and row
 * strides, also in those units, in k_page16 .. v_row16: one 32-bit multiply-add per row
 * instead of 64-bit ones; the host sets it only where every page id below num_pages and
 * row below page_size stays below 2^32 units). */
#define FJ_DECODE_PARAMS_SIZE 288
typedef struct fj_decode_params {
    fj_u64 q, k, v, o;              /*   0 */
    fj_u64 lse;                     /*  32: float*, 0 when not wanted (layout as fj_attn_params) */
    fj_u64 block_table;             /*  40: const int*, 0 = contiguous K/V */
    fj_u64 seqused_k;               /*  48: const int* [batch], 0 = seqlen_k for every sequence */
    fj_u64 cu_seqlens_q;            /*  56: const int* [batch + 1], 0 = q_len rows each */
    fj_u64 part_o, part_lse;        /*  64: float* scratch, 0 when splits == 1 */
    fj_u64 err;                     /*  80: int* [4], checked mode: the first bad page id or
                                               length as {code, batch, index, value}; 0 = off */
    fj_u64 counters;                /*  88: int* [batch][heads_kv][q_tiles], zero: the split
                                               CTAs' arrivals (fused combine); 0 = kernel */
    fj_i64 q_batch_stride, q_row_stride, q_head_stride;   /*  96 */
    fj_i64 o_batch_stride, o_row_stride, o_head_stride;   /* 120 */
    fj_i64 k_page_stride, k_row_stride, k_head_stride;    /* 144 */
    fj_i64 v_page_stride, v_row_stride, v_head_stride;    /* 168 */
    fj_i32 batch, heads_q, heads_kv, head_dim;            /* 192 */
    fj_i32 q_len, seqlen_k, page_size, bt_stride;         /* 208: q_len = the most rows */
    fj_i32 num_pages, splits, split_keys, q_tiles;        /* 224: num_pages bounds page ids */
    fj_i32 window_left, window_right;                     /* 240 */
    float scale, scale_log2;                              /* 248 */
    fj_i32 total_rows;                                    /* 256: rows of the partials
                                                             (>= every R + 1) */
    fj_i32 page_shift;                                    /* 260: -1 or log2(page_size) */
    fj_u32 k_page16, k_row16, v_page16, v_row16;          /* 264: strides / 8 (off16) */
    fj_i32 off16;                                         /* 280 */
    fj_i32 cluster;                                       /* 284: 1: the splits of a group
                                               are one thread-block cluster (sm_90+) */
} fj_decode_params;                                       /* 288 */

/* The model features' run-time values (fajit_attn_desc's softcap to descale fields). A
 * kernel compiled with a feature (the family's preamble sets FJ_SOFTCAP, FJ_SINKS, FJ_ALIBI
 * or FJ_KV_FP8: fj_common.cuh) takes this block as its last parameter; a kernel compiled
 * without any takes none, so its code is what it was before features existed.
 * FP8 K/V (FJ_KV_FP8 1: e4m3, 2: e5m2): K/V strides count bytes; key j's logit uses
 * k_descale[b * descale_batch_stride + kv_head * descale_head_stride] * K, its value
 * v_descale[...] * V. */
#define FJ_FEAT_PARAMS_SIZE 64
typedef struct fj_feat_params {
    fj_u64 sinks;                                         /*  0: const float* [heads_q] */
    fj_u64 alibi;                                         /*  8: const float* slopes */
    fj_u64 k_descale, v_descale;                          /* 16: const float* */
    fj_i64 alibi_batch_stride;                            /* 32: 0 = one row */
    fj_i64 descale_batch_stride, descale_head_stride;     /* 40 */
    float softcap, softcap_inv;                           /* 56: the cap and 1 / cap */
} fj_feat_params;                                         /* 64 */

/* fajit_attn_merge's kernel (attn_merge.cu): two partial results of the same queries over
 * disjoint key sets, O_x [batch][seqlen][heads][head_dim] (each with its strides, elements)
 * and LSE_x (natural log, at b*lse_batch_stride + h*lse_head_stride + i*lse_row_stride),
 * merged into O and LSE (lse 0: not written). o may be o_a or o_b, lse may be lse_a or
 * lse_b (in place). */
#define FJ_MERGE_PARAMS_SIZE 160
typedef struct fj_merge_params {
    fj_u64 o_a, o_b, o;                                   /*   0 */
    fj_u64 lse_a, lse_b, lse;                             /*  24 */
    fj_i64 a_batch_stride, a_row_stride, a_head_stride;   /*  48 */
    fj_i64 b_batch_stride, b_row_stride, b_head_stride;   /*  72 */
    fj_i64 o_batch_stride, o_row_stride, o_head_stride;   /*  96 */
    fj_i64 lse_batch_stride, lse_row_stride, lse_head_stride; /* 120 */
    fj_i32 batch, seqlen, heads, head_dim;                /* 144 */
} fj_merge_params;                                        /* 160 */

/* Layout check. NVRTC has no offsetof, so the device side checks the widths and the total:
 * the 8-byte fields come first and the 4-byte ones after, so with these widths there is no
 * padding and the total fixes every offset. The host checks the offsets themselves
 * (tests/test_unit.c, params_layout). */
#ifdef __CUDACC_RTC__
static_assert(sizeof(fj_u64) == 8 && sizeof(fj_i64) == 8 && sizeof(fj_i32) == 4 &&
                  sizeof(fj_u32) == 4 && sizeof(float) == 4, "fajit_params.h: field widths");
static_assert(sizeof(fj_attn_params) == FJ_PARAMS_SIZE, "fajit_params.h: size");
static_assert(sizeof(fj_decode_params) == FJ_DECODE_PARAMS_SIZE, "fajit_params.h: decode size");
static_assert(sizeof(fj_merge_params) == FJ_MERGE_PARAMS_SIZE, "fajit_params.h: merge size");
static_assert(sizeof(fj_kv_pages) == FJ_KV_PAGES_SIZE, "fajit_params.h: kv pages size");
static_assert(sizeof(fj_feat_params) == FJ_FEAT_PARAMS_SIZE, "fajit_params.h: feature size");
#else
_Static_assert(sizeof(fj_attn_params) == FJ_PARAMS_SIZE, "fajit_params.h: size");
_Static_assert(sizeof(fj_decode_params) == FJ_DECODE_PARAMS_SIZE, "fajit_params.h: decode size");
_Static_assert(sizeof(fj_merge_params) == FJ_MERGE_PARAMS_SIZE, "fajit_params.h: merge size");
_Static_assert(sizeof(fj_kv_pages) == FJ_KV_PAGES_SIZE, "fajit_params.h: kv pages size");
_Static_assert(sizeof(fj_feat_params) == FJ_FEAT_PARAMS_SIZE, "fajit_params.h: feature size");
#endif

#endif /* FAJIT_PARAMS_H */
