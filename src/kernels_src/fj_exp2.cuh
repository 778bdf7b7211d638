/* fj_exp2.cuh - 2^x on the FMA pipe: the software exponential of the Blackwell (FA4-design)
 * forward, which computes part of each score row with it so the FMA units and the MUFU
 * (ex2.approx) run in parallel. Compiled by NVRTC and by the host C compiler with the same
 * float values in the same order (clamp, floor, subtract, three correctly rounded FMAs, an
 * integer add), so tests/test_sm100_host.c measures on the host exactly what the kernel
 * computes (bit for bit, except that a flush-to-zero device reads a subnormal x as 0).
 * On the device: 10 instructions (max, min, an add and two subtracts, 3 FMAs, a shift and
 * an integer add), all on the FMA and integer pipes.
 *
 * Method (Cody-Waite style): clamp x to [-127, 127]; j = floor(x) (on the device by a
 * rounded-down add of 1.5 * 2^23, no conversion instruction); f = x - j in [0, 1);
 * p(f) = 1 + f (c1 + f (c2 + f c3)) ~ 2^f by Horner with fmaf; the result is the float
 * whose bits are bits(p) + (j << 23), i.e. p * 2^j built in the exponent field.
 *
 * Coefficients: the degree-3 minimax approximation of 2^f on [0, 1] in relative error,
 * with c0 = 1 fixed (so p(0) = 1 exactly: integer x gives exact powers of two, x = 0 gives
 * exactly 1 and x <= -127 gives exactly +0). Computed by a Remez exchange on
 * (2^f - 1) / f with weight f / 2^f; equioscillation error 8.559e-5, then rounded to float.
 *
 * Accuracy (tests/test_sm100_host.c, exp2_poly_*: every float of [-1, 0] and of several
 * binades plus a 2^24-point sweep of [-127, 0], against exp2() in double):
 *   max relative error 8.57e-5 (2^-13.51) for x in [-126, 127]; the test asserts
 *   FJ_EXP2_POLY_REL_ERR = 8.7e-5. Half an ulp, relative, is 2^-8..2^-9 for bf16 and
 *   2^-11..2^-12 for fp16 (bottom..top of a binade): the bound is 22x below bf16's smallest
 *   (2^-9 = 1.95e-3), 5.6x below fp16's largest (2^-11 = 4.88e-4) and 2.8x below its
 *   smallest (2^-12 = 2.44e-4), so rounding P to bf16 or fp16 dominates.
 *   For x in (-127, -126) the result is a subnormal bit pattern below 2^-126 (absolute
 *   error < 2^-126, relative error unbounded; a flush-to-zero device reads it as 0).
 *   x <= -127 and x = -inf give +0; x >= 127 and +inf give about 2^127 (not inf); NaN gives 0
 *   (fmaxf drops it). Softmax only feeds x <= 8 (conditional rescaling), so none of these
 *   limits is reached except the underflow to 0, which is the right answer there.
 */
#ifndef FJ_EXP2_CUH
#define FJ_EXP2_CUH

#include "fajit_params.h"


/* Minimax coefficients of 2^f ~ 1 + c1 f + c2 f^2 + c3 f^3 on [0, 1] (floats, hex exact). */
#define FJ_EXP2_C1 0x1.63e658p-1f /* 0.695116758 */
#define FJ_EXP2_C2 0x1.d2378ap-3f /* 0.227644995 */
#define FJ_EXP2_C3 0x1.3baaa6p-4f /* 0.0770670399 */
#define FJ_EXP2_POLY_REL_ERR 8.7e-5 /* the bound the host test asserts, x in [-126, 127] */
#define FJ_EXP2_MAGIC 0x1.8p23f     /* 1.5 * 2^23: the device floor (fj_exp2_poly) */

/* The float operations: CUDA's built-in device functions on the device; on the host the
 * GCC/Clang builtins of the same C99 functions (correctly rounded fmaf, exact floorf), so
 * this file needs no system header (kernel sources include none: tests/test_nvrtc.c checks
 * the text); a host program links libm, which the builtins may call. Bit casts: the device intrinsics, or __builtin_memcpy, the portable C bit
 * cast, which compilers turn into a register move. */
#ifdef __CUDA_ARCH__
#define FJ_EXP2_FMA fmaf
#define FJ_EXP2_FLOOR floorf
#define FJ_EXP2_MIN fminf
#define FJ_EXP2_MAX fmaxf
#else
#define FJ_EXP2_FMA __builtin_fmaf
#define FJ_EXP2_FLOOR __builtin_floorf
#define FJ_EXP2_MIN __builtin_fminf
#define FJ_EXP2_MAX __builtin_fmaxf
#endif

FJ_HD fj_u32 fj_exp2_f2u(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    fj_u32 u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
#endif
}

FJ_HD float fj_exp2_u2f(fj_u32 u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* The exponent increment floor(x) << 23 from t = RD(x + FJ_EXP2_MAGIC) (device floor, see
 * fj_exp2_poly); shared so the host test checks the very expression the device runs. */
FJ_HD fj_u32 fj_exp2_magic_exp(float t)
{
    return fj_exp2_f2u(t) << 23;
}

/* 2^x for x in [-127, 127] (clamped outside), relative error below FJ_EXP2_POLY_REL_ERR
 * on [-126, 127]. */
FJ_HD float fj_exp2_poly(float x)
{
    x = FJ_EXP2_MIN(FJ_EXP2_MAX(x, -127.0f), 127.0f);
#ifdef __CUDA_ARCH__
    /* floor(x) without FRND or F2I: conversions run at a fraction of the FMA rate (the
     * CUDA guide's throughput table gives them 16 per SM per clock, the MUFU's rate),
     * which would defeat the point of leaving the MUFU. For |x| <= 127, x + 1.5 * 2^23 lies in
     * [2^23, 2^24), where floats are the integers, so rounding it down is exactly
     * 1.5 * 2^23 + floor(x), whose bits are 0x4b400000 + floor(x). Shifted left by 23 the
     * 0x4b400000 part leaves the word: the exponent increment floor(x) << 23 remains.
     * tests/test_sm100_host.c (exp2_device_floor) checks both identities on the host. */
    float t = __fadd_rd(x, FJ_EXP2_MAGIC);
    float j = t - FJ_EXP2_MAGIC;
    fj_u32 jexp = fj_exp2_magic_exp(t);
#else
    float j = FJ_EXP2_FLOOR(x);
    /* Unsigned: j < 0 wraps to the right bit pattern (a signed left shift is undefined). */
    fj_u32 jexp = (fj_u32)(fj_i32)j << 23;
#endif
    float f = x - j;   /* exact for |x| >= 0.5; rounded by at most 2^-25 below that */
    float p = FJ_EXP2_FMA(FJ_EXP2_FMA(FJ_EXP2_FMA(FJ_EXP2_C3, f, FJ_EXP2_C2), f, FJ_EXP2_C1),
                          f, 1.0f);
    /* p is in [1, 2); adding j to the exponent field is p * 2^j. */
    return fj_exp2_u2f(fj_exp2_f2u(p) + jexp);
}

#endif /* FJ_EXP2_CUH */
