/* cpu_ref.h - float64 attention on the host over the parameter block's layout: the
 * ground truth of the gpu suite. Host arrays; 16-bit inputs as raw bits. */
#ifndef FJ_CPU_REF_H
#define FJ_CPU_REF_H
#include <stdint.h>
#include "fajit_params.h"

float fj_half_to_f32(uint16_t h, int dtype);
uint16_t fj_f32_to_half(float f, int dtype);

/* p's pointers are host pointers (q, k, v: uint16_t; cu_seqlens: int32_t). Writes
 * o[...] as double in O's layout (o_out, indexed with p's o strides) and, if lse_out,
 * natural-log LSE in the kernel's LSE layout. */
void fj_cpu_attention(const fj_attn_params *p, int dtype, double *o_out, double *lse_out);
#endif
