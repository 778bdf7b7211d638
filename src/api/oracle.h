/* oracle.h - a kernel against the reference kernel on random inputs (src/api/oracle.c):
 * shared by the tuner (tune.c) and the validation gate (validate.c). */
#ifndef FJ_ORACLE_H
#define FJ_ORACLE_H

#include "internal.h"
#include "../autotune/spec.h"

/* The reference output of a problem and the buffers a check reads a result into. */
typedef struct fj_oracle {
    float *ref;            /* reference output, valid elements in order */
    float *out;            /* checked output, same order */
    uint16_t *raw;         /* O as copied back */
    size_t n_valid, raw_elems;
    int32_t *cu_q;         /* host copy of cu_seqlens_q (varlen) */
} fj_oracle;

/* Host buffers for problems shaped like d (it reads d's cu_seqlens_q back). */
fajit_status fj_oracle_init(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d);
void fj_oracle_free(fj_oracle *o);
/* Waits for the device, copies O back and gathers its valid elements into dst. */
fajit_status fj_oracle_read(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d, float *dst);
/* Runs the reference kernel on d into o->ref. A paged d (the reference reads no block
 * table) runs as contiguous K/V: k_twin and v_twin, its keys in sequence order
 * (fj_inputs.k_twin); 0 for an unpaged d. */
fajit_status fj_oracle_reference(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d,
                                 CUdeviceptr k_twin, CUdeviceptr v_twin);
/* Poisons O, launches kp on d, compares with o->ref: 0, or -1 with the reason ("wrong
 * result: max error ..." or "launch failed: ..."). */
int fj_oracle_check(fajit_ctx *ctx, fj_oracle *o, const fj_kplan *kp, const fajit_attn_desc *d,
                    char *why, size_t n);

/* Random inputs of a spec problem and shape on the device: `sets` sets of Q, K, V (same
 * shapes, different values), one O, cu_seqlens for varlen (lens_q/lens_k given: batch
 * lengths each, packed rows; not with paging), and for a paged problem a block table that
 * scatters the pages of every sequence over the cache in random order (as a server's
 * cache holds them after a while: page gathers cost what they cost in serving) and, where
 * flags has FJ_INPUTS_TWIN, the keys and values of set 0 once more in sequence order
 * (k_twin, v_twin: what the reference kernel reads). FP8 K/V (p->kv_dtype): random normal
 * FP8 bytes, one descale per tensor (FJ_INPUTS_K_DESCALE, _V_), and with FJ_INPUTS_TWIN the
 * twin (also of a contiguous problem) in Q's dtype holding their descaled values, exactly.
 * d[k] describes set k. */
#define FJ_INPUTS_TWIN 1u
#define FJ_INPUTS_K_DESCALE 0.5f
#define FJ_INPUTS_V_DESCALE 0.25f
#define FJ_INPUT_SETS 2
#define FJ_INPUT_MAX_BATCH 16
typedef struct fj_inputs {
    CUdeviceptr q[FJ_INPUT_SETS], k[FJ_INPUT_SETS], v[FJ_INPUT_SETS], o;
    CUdeviceptr bt;        /* paged: block table [batch][pages per sequence], shuffled */
    CUdeviceptr k_twin, v_twin;   /* paged or FP8, with twin: set 0's K/V contiguous
                                     [b][key] in Q's dtype */
    CUdeviceptr cu;        /* varlen: cu_seqlens_q [batch+1], then cu_seqlens_k */
    CUdeviceptr feat;      /* the problem's sinks [heads_q], ALiBi slopes [heads_q], then the
                              FP8 k and v descales, fp32 (spec keys sinks, alibi = yes;
                              softcap = yes takes cap 30) */
    int total_q, total_k, sets;
    fajit_attn_desc d[FJ_INPUT_SETS];
} fj_inputs;
fajit_status fj_inputs_make(fajit_ctx *ctx, const fj_problem *p, const fj_shape *sh, int sets,
                            const int *lens_q, const int *lens_k, unsigned flags,
                            fj_inputs *in);
void fj_inputs_free(const fj_cuda *cu, fj_inputs *in);

#endif /* FJ_ORACLE_H */
