/* test_sm100_host.c - the host-checkable arithmetic of the Blackwell (sm_100a) FA4-design
 * forward, in the `unit` suite (no GPU, no NVRTC):
 *   - fj_sm100_desc.cuh: the tcgen05 instruction descriptor and shared-memory descriptor,
 *     field by field against the PTX ISA tables (written out again here, independently of
 *     the header), plus known-good constants derived by hand from CUTLASS's bitfields;
 *     Tensor Memory addresses and alloc sizes;
 *   - fj_exp2.cuh: fj_exp2_poly against exp2() in double over the whole softmax range;
 *   - conditional rescaling: cpu_ref.c's float32 emulation of the FA4 online softmax
 *     against the float64 oracle, within the gpu suite's budget for a 16-bit kernel.
 */
#include <check.h>
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fj_sm100_desc.cuh"
#include "fj_exp2.cuh"
#include "cpu_ref.h"

/*------ instruction descriptor ------*/

/* One field of PTX ISA Table 42 (kind::f16 column): bits [lo, lo + width). */
static unsigned field32(uint32_t d, int lo, int width)
{
    return (unsigned)((d >> lo) & ((1u << width) - 1u));
}

/* Checks every field of an idesc built by fj_tc_idesc_f16. */
static void check_idesc(int bf16, int m, int n, int a_mn, int b_mn)
{
    uint32_t d = fj_tc_idesc_f16(bf16, m, n, a_mn, b_mn);
    unsigned ab = bf16 ? 1 : 0;
    const struct { const char *name; int lo, width; unsigned want; } f[] = {
        {"sparsity selector", 0, 2, 0},
        {"sparsity", 2, 1, 0},
        {"saturate", 3, 1, 0},
        {"dtype (D = F32)", 4, 2, 1},
        {"reserved 6", 6, 1, 0},
        {"atype", 7, 3, ab},
        {"btype", 10, 3, ab},
        {"negate A", 13, 1, 0},
        {"negate B", 14, 1, 0},
        {"transpose A", 15, 1, (unsigned)a_mn},
        {"transpose B", 16, 1, (unsigned)b_mn},
        {"N >> 3", 17, 6, (unsigned)n / 8},
        {"reserved 23", 23, 1, 0},
        {"M >> 4", 24, 5, (unsigned)m / 16},
        {"reserved 29", 29, 1, 0},
        {"max shift", 30, 2, 0},
    };
    int covered = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        ck_assert_msg(field32(d, f[i].lo, f[i].width) == f[i].want,
                      "idesc bf16=%d M=%d N=%d majors %d/%d: %s is %u, want %u (0x%08x)", bf16,
                      m, n, a_mn, b_mn, f[i].name, field32(d, f[i].lo, f[i].width), f[i].want,
                      (unsigned)d);
        covered += f[i].width;
    }
    ck_assert_int_eq(covered, 32);   /* the table above covers every bit once */
}

START_TEST(idesc_fields)
{
    int count = 0;
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (int mn = 0; mn < 4; mn++) {
            int a_mn = mn & 1, b_mn = mn >> 1;
            /* M = 128: every N the kernel may use (16..256 step 16 includes 64, 96, 128,
             * 192, 256); M = 64: N step 8. */
            for (int n = 16; n <= 256; n += 16, count++)
                check_idesc(bf16, 128, n, a_mn, b_mn);
            for (int n = 8; n <= 256; n += 8, count++)
                check_idesc(bf16, 64, n, a_mn, b_mn);
        }
    ck_assert_int_eq(count, 2 * 4 * (16 + 32));
    /* The shape predicate agrees with the ISA's shape table. */
    ck_assert(FJ_TC_SHAPE_OK(128, 16) && FJ_TC_SHAPE_OK(128, 256) && FJ_TC_SHAPE_OK(64, 8));
    ck_assert(FJ_TC_SHAPE_OK(128, 96) && FJ_TC_SHAPE_OK(128, 192) && FJ_TC_SHAPE_OK(64, 200));
    ck_assert(!FJ_TC_SHAPE_OK(128, 8) && !FJ_TC_SHAPE_OK(128, 264) && !FJ_TC_SHAPE_OK(128, 24));
    ck_assert(!FJ_TC_SHAPE_OK(64, 4) && !FJ_TC_SHAPE_OK(256, 128) && !FJ_TC_SHAPE_OK(32, 64));
}
END_TEST

/* Constants worked out by hand from CUTLASS's UMMA::InstrDescriptor bitfields (c_format_
 * at bit 4, a_format_ 7, b_format_ 10, a_major_ 15, b_major_ 16, n_dim_ 17, m_dim_ 24):
 *   bf16 128x256, K/K:  0x10 | 1<<7 | 1<<10 | 32<<17 | 8<<24            = 0x08400490
 *   f16 128x128, K/K:   0x10 | 16<<17 | 8<<24                           = 0x08200010
 *   bf16 128x128, K/MN: 0x10 | 0x480 | 1<<16 | 16<<17 | 8<<24          = 0x08210490
 *   bf16 128x192, K/K:  0x490 | 24<<17 | 8<<24                          = 0x08300490
 *   f16 64x64, MN/MN:   0x10 | 1<<15 | 1<<16 | 8<<17 | 4<<24           = 0x04118010
 *   f16 128x16, K/K:    0x10 | 2<<17 | 8<<24                            = 0x08040010 */
START_TEST(idesc_known)
{
    ck_assert_uint_eq(fj_tc_idesc_f16(1, 128, 256, 0, 0), 0x08400490u);
    ck_assert_uint_eq(fj_tc_idesc_f16(0, 128, 128, 0, 0), 0x08200010u);
    ck_assert_uint_eq(fj_tc_idesc_f16(1, 128, 128, 0, 1), 0x08210490u);
    ck_assert_uint_eq(fj_tc_idesc_f16(1, 128, 192, 0, 0), 0x08300490u);
    ck_assert_uint_eq(fj_tc_idesc_f16(0, 64, 64, 1, 1), 0x04118010u);
    ck_assert_uint_eq(fj_tc_idesc_f16(0, 128, 16, 0, 0), 0x08040010u);
    /* Any non-zero flag reads as 1. */
    ck_assert_uint_eq(fj_tc_idesc_f16(7, 128, 128, 2, -1), fj_tc_idesc_f16(1, 128, 128, 1, 1));
}
END_TEST

/*------ shared-memory descriptor ------*/

static unsigned field64(uint64_t d, int lo, int width)
{
    return (unsigned)((d >> lo) & ((1ull << width) - 1ull));
}

/* The ISA's matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4, written out again. */
static unsigned encode(uint32_t x)
{
    return (x % 262144u) / 16u;
}

static void check_smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, int swz)
{
    uint64_t d = fj_tc_smem_desc(addr, lbo, sbo, swz);
    const struct { const char *name; int lo, width; unsigned want; } f[] = {
        {"start address", 0, 14, encode(addr)},
        {"unused 14-15", 14, 2, 0},
        {"LBO", 16, 14, encode(lbo)},
        {"unused 30-31", 30, 2, 0},
        {"SBO", 32, 14, encode(sbo)},
        {"fixed 0b001", 46, 3, 1},
        {"base offset", 49, 3, 0},
        {"LBO mode", 52, 1, 0},
        {"fixed 0", 53, 8, 0},
        {"swizzle", 61, 3, (unsigned)swz},
    };
    int covered = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        ck_assert_msg(field64(d, f[i].lo, f[i].width) == f[i].want,
                      "smem desc addr 0x%x lbo %u sbo %u swizzle %d: %s is %u, want %u "
                      "(0x%016llx)", addr, lbo, sbo, swz, f[i].name,
                      field64(d, f[i].lo, f[i].width), f[i].want, (unsigned long long)d);
        covered += f[i].width;
    }
    ck_assert_int_eq(covered, 64);
}

START_TEST(smem_desc_fields)
{
    const int swz[] = {FJ_TC_SWZ_NONE, FJ_TC_SWZ_128B_BASE32B, FJ_TC_SWZ_128B, FJ_TC_SWZ_64B,
                       FJ_TC_SWZ_32B};
    const int codes[] = {0, 1, 2, 4, 6};   /* PTX ISA: none, 128B/32B atom, 128B, 64B, 32B */
    const uint32_t addrs[] = {0, 16, 0x400, 0x1230, 0x8000, 0x2fc00, 0x3fff0};
    const uint32_t offs[] = {16, 128, 1024, 2048, 8192, 0x3fff0};
    for (int s = 0; s < 5; s++) {
        ck_assert_int_eq(swz[s], codes[s]);
        for (size_t a = 0; a < sizeof addrs / sizeof addrs[0]; a++)
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
                check_smem_desc(addrs[a], offs[o], offs[(o + 2) % 6], swz[s]);
    }
    /* Truncation as encode(): bits 0-3 and bits 18 and up are dropped. */
    check_smem_desc(0x123f, 0x18, 0x41008, FJ_TC_SWZ_128B);
    ck_assert_uint_eq(field64(fj_tc_smem_desc(0x1238, 0, 0, 0), 0, 14), 0x123);
    ck_assert_uint_eq(field64(fj_tc_smem_desc(0x3ffff, 0, 0, 0), 0, 14), 0x3fff);
    ck_assert_uint_eq(field64(fj_tc_smem_desc(0x40010, 0, 0, 0), 0, 14), 1);
    /* Known constants: version bit alone, and a 128B-swizzled K-major tile at 1 KiB
     * (start 0x40, LBO 1 (16 B, unused under swizzle), SBO 64 (1024 B: 8 rows of 128 B)). */
    ck_assert_uint_eq(fj_tc_smem_desc(0, 0, 0, FJ_TC_SWZ_NONE), 0x0000400000000000ull);
    ck_assert_uint_eq(fj_tc_smem_desc(0x400, 16, 1024, FJ_TC_SWZ_128B), 0x4000404000010040ull);
    ck_assert_uint_eq(fj_tc_smem_desc(0, 0, 0, FJ_TC_SWZ_32B), 0xc000400000000000ull);
}
END_TEST

START_TEST(tmem_helpers)
{
    ck_assert_uint_eq(fj_tmem_addr(0, 0, 0), 0);
    ck_assert_uint_eq(fj_tmem_addr(0, 32, 0), 0x00200000u);   /* lane in bits 31-16 */
    ck_assert_uint_eq(fj_tmem_addr(0, 127, 511), 0x007f01ffu);
    ck_assert_uint_eq(fj_tmem_addr(0x00000100u, 64, 128), 0x00400180u);
    const int ask[] = {-1, 0, 1, 31, 32, 33, 64, 65, 100, 128, 129, 192, 256, 257, 384, 511, 512, 513, 1024};
    const int want[] = {32, 32, 32, 32, 32, 64, 64, 128, 128, 128, 256, 256, 256, 512, 512, 512, 512, 0, 0};
    for (size_t i = 0; i < sizeof ask / sizeof ask[0]; i++)
        ck_assert_msg(fj_tmem_alloc_cols(ask[i]) == want[i], "alloc_cols(%d) = %d, want %d",
                      ask[i], fj_tmem_alloc_cols(ask[i]), want[i]);
}
END_TEST

/*------ software exp2 ------*/

typedef struct rel_err {
    double max;
    float at;
    long n;
} rel_err;

static void measure(rel_err *e, float x)
{
    double want = exp2((double)x), got = fj_exp2_poly(x);
    double r = fabs(got - want) / want;
    e->n++;
    if (!(r <= e->max)) {   /* NaN counts as the worst */
        e->max = isnan(r) ? INFINITY : r;
        e->at = x;
    }
}

/* Every float of [lo, hi) (lo < hi <= 0 or 0 <= lo < hi), by bit pattern. */
static void sweep_all(rel_err *e, float lo, float hi)
{
    uint32_t a, b;
    memcpy(&a, &lo, 4);
    memcpy(&b, &hi, 4);
    if (lo < 0) {   /* negative floats: larger bits are more negative */
        for (uint32_t u = b + (hi == 0 ? 0 : 1); u <= a; u++) {
            float x;
            memcpy(&x, &u, 4);
            measure(e, x);
        }
    } else {
        for (uint32_t u = a; u < b; u++) {
            float x;
            memcpy(&x, &u, 4);
            measure(e, x);
        }
    }
}

START_TEST(exp2_poly_accuracy)
{
    rel_err e = {0, 0, 0};
    /* Dense sweep of the softmax range [-126, 8] (8: exponentials against a stale maximum
     * with conditional rescaling), 2^24 + 1 points 67 * 2^-23 apart: 67 is odd, so the
     * fractional parts run through every multiple of 2^-23 in [0, 1). */
    const long n = 1L << 24;
    for (long i = 0; i <= n; i++)
        measure(&e, (float)(-126.0 + 134.0 * (double)i / (double)n));
    /* Every float of several binades: the reduction is exact there for |x| >= 0.5, rounded
     * below; [-2^-20, -2^-21) reaches f = 1 - tiny. */
    sweep_all(&e, -1.0f, -0.5f);
    sweep_all(&e, -0.5f, -0.25f);
    sweep_all(&e, -2.0f, -1.0f);
    sweep_all(&e, -0x1p-20f, -0x1p-21f);
    sweep_all(&e, -126.0f, -64.0f);
    sweep_all(&e, 4.0f, 8.0f);
    /* Sparse above 8, up to the clamp. */
    for (long i = 0; i <= 1000000; i++)
        measure(&e, (float)(8.0 + 119.0 * (double)i / 1e6));
    printf("exp2_poly: %ld points, max relative error %.4g (2^%.2f) at x = %a; bound %.3g; "
           "half ulp: bf16 2^-9 = %.3g, fp16 2^-11 = %.3g\n",
           e.n, e.max, log2(e.max), (double)e.at, FJ_EXP2_POLY_REL_ERR, 0x1p-9, 0x1p-11);
    ck_assert_msg(e.max <= FJ_EXP2_POLY_REL_ERR, "fj_exp2_poly: relative error %g at x = %a",
                  e.max, (double)e.at);
    /* The bound keeps P's rounding to 16 bits the dominant error: below half the
     * smallest relative ulp of fp16 (2^-12, the top of a binade; bf16's is 2^-9). */
    ck_assert(FJ_EXP2_POLY_REL_ERR < 0x1p-12 / 2);
}
END_TEST

/* The device computes floor(x) as RD(x + 1.5 * 2^23) - 1.5 * 2^23 and the exponent
 * increment as bits(RD(x + 1.5 * 2^23)) << 23 (no conversion instructions); the host as
 * floorf and (int)j << 23. Checks that the two agree, with the rounded-down add done here
 * in FE_DOWNWARD mode (volatile keeps it at run time, between the two mode switches). */
static void check_device_floor(float x)
{
    volatile float vx = x, vm = FJ_EXP2_MAGIC, t;
    fesetround(FE_DOWNWARD);
    t = vx + vm;
    fesetround(FE_TONEAREST);
    float tt = t, j = tt - FJ_EXP2_MAGIC;
    float want = floorf(x);
    ck_assert_msg(j == want && fj_exp2_magic_exp(tt) == ((uint32_t)(int32_t)want << 23),
                  "device floor of %a: %a (exponent increment %08x), want %a", (double)x,
                  (double)j, fj_exp2_magic_exp(tt), (double)want);
}

START_TEST(exp2_device_floor)
{
    /* Around every integer the clamp lets through, and densely over [-127, 127]. */
    for (int n = -127; n <= 127; n++) {
        float v = (float)n;
        check_device_floor(v);
        check_device_floor(nextafterf(v, 200.f));
        check_device_floor(nextafterf(v, -200.f));
        check_device_floor(v + 0.5f);
    }
    for (long i = 0; i <= 1L << 22; i++)
        check_device_floor((float)(-127.0 + 254.0 * (double)i / (double)(1L << 22)));
    /* Every float of [-1, -0.5) and [0.5, 1), and powers of two down to the subnormals
     * (the host's view: a flush-to-zero device reads subnormal x as 0). */
    for (float x = -1.0f; x < -0.5f; x = nextafterf(x, 0.f))
        check_device_floor(x);
    for (float x = 0.5f; x < 1.0f; x = nextafterf(x, 2.f))
        check_device_floor(x);
    for (int k = 1; k <= 149; k++) {
        check_device_floor(ldexpf(1.0f, -k));
        check_device_floor(-ldexpf(1.0f, -k));
    }
}
END_TEST

START_TEST(exp2_poly_special)
{
    ck_assert(fj_exp2_poly(0.0f) == 1.0f);
    ck_assert(fj_exp2_poly(-0.0f) == 1.0f);
    /* Integers: p(0) = 1 exactly, so exact powers of two, down to the smallest normal. */
    for (int k = -126; k <= 127; k++)
        ck_assert_msg(fj_exp2_poly((float)k) == ldexpf(1.0f, k), "2^%d", k);
    /* Underflow to exactly +0 (bits 0) at and below the clamp, and for -inf. */
    const float zeros[] = {-127.0f, -127.5f, -128.0f, -200.0f, -1e30f, -INFINITY, -FLT_MAX};
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++) {
        float r = fj_exp2_poly(zeros[i]);
        uint32_t u;
        memcpy(&u, &r, 4);
        ck_assert_msg(u == 0, "exp2_poly(%g) = %a, want +0", (double)zeros[i], (double)r);
    }
    /* (-127, -126): below the smallest normal, never negative or NaN. */
    for (float x = -126.999f; x < -126.0f; x += 0.01f) {
        float r = fj_exp2_poly(x);
        ck_assert(r >= 0 && r < 0x1p-126f);
    }
    /* Above: clamped at 127, finite. */
    ck_assert(fj_exp2_poly(127.0f) == 0x1p127f);
    ck_assert(fj_exp2_poly(INFINITY) == 0x1p127f);
    ck_assert(isfinite(fj_exp2_poly(126.999f)));
    /* NaN: fmaxf drops it, so 0 (documented in fj_exp2.cuh). */
    ck_assert(fj_exp2_poly(NAN) == 0.0f);
    /* Values the FA4 softmax sees after a skipped rescale: up to 2^8. */
    ck_assert(fabs(fj_exp2_poly(8.0f) - 256.0) == 0);
    ck_assert(fabs(fj_exp2_poly(7.5f) / exp2(7.5) - 1) <= FJ_EXP2_POLY_REL_ERR);
}
END_TEST

/*------ conditional rescaling ------*/

static uint64_t g_rng;
static double uniform(void)   /* [0, 1), splitmix64 */
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* One head, contiguous [seqlen][head_dim] Q, K, V of the gpu suite's distributions
 * (q, k in [-2, 2), v in [-1, 1)). grow > 0: a growing maximum along the walk (blocks of
 * 128 keys from the last): column 0 of every query is 1 and column 0 of block b's keys
 * holds a cumulative offset that rises by a random 0..grow log2 units per block towards
 * the first block, so the maximum grows by more or less than the threshold from block to
 * block. */
typedef struct problem {
    int sq, sk, d, dtype;
    uint16_t *q, *k, *v;
    fj_attn_params p;
} problem;

static void make_problem(problem *pr, int sq, int sk, int d, int dtype, double grow, int causal)
{
    pr->sq = sq, pr->sk = sk, pr->d = d, pr->dtype = dtype;
    pr->q = malloc(sizeof(uint16_t) * (size_t)sq * (size_t)d);
    pr->k = malloc(sizeof(uint16_t) * (size_t)sk * (size_t)d);
    pr->v = malloc(sizeof(uint16_t) * (size_t)sk * (size_t)d);
    for (long i = 0; i < (long)sq * d; i++)
        pr->q[i] = fj_f32_to_half((float)(4 * uniform() - 2), dtype);
    for (long i = 0; i < (long)sk * d; i++) {
        pr->k[i] = fj_f32_to_half((float)(4 * uniform() - 2), dtype);
        pr->v[i] = fj_f32_to_half((float)(2 * uniform() - 1), dtype);
    }
    float scale = 1.0f / sqrtf((float)d);
    if (grow > 0) {
        int nb = (sk + 127) / 128;
        double off = 0;   /* log2 units */
        for (int b = nb - 1; b >= 0; b--) {
            for (int j = b * 128; j < sk && j < (b + 1) * 128; j++)
                pr->k[(long)j * d] = fj_f32_to_half((float)(off / (scale * M_LOG2E)), dtype);
            off += grow * uniform();
        }
        for (int i = 0; i < sq; i++)
            pr->q[(long)i * d] = fj_f32_to_half(1.0f, dtype);
    }
    memset(&pr->p, 0, sizeof pr->p);
    pr->p.q = (uintptr_t)pr->q, pr->p.k = (uintptr_t)pr->k, pr->p.v = (uintptr_t)pr->v;
    pr->p.q_row_stride = pr->p.k_row_stride = pr->p.v_row_stride = pr->p.o_row_stride = d;
    pr->p.q_batch_stride = (int64_t)sq * d, pr->p.o_batch_stride = (int64_t)sq * d;
    pr->p.k_batch_stride = pr->p.v_batch_stride = (int64_t)sk * d;
    pr->p.batch = pr->p.heads_q = pr->p.heads_kv = 1;
    pr->p.head_dim = d, pr->p.seqlen_q = sq, pr->p.seqlen_k = sk;
    pr->p.window_left = -1, pr->p.window_right = causal ? 0 : -1;
    pr->p.scale = scale;
    pr->p.scale_log2 = (float)(scale * M_LOG2E);
}

static void free_problem(problem *pr)
{
    free(pr->q), free(pr->k), free(pr->v);
}

/* test_gpu.c's same-precision reference for one contiguous head: fp32 scores, P relative to
 * the true row maximum rounded to the dtype before P@V, output rounded. */
static void same_precision(const problem *pr, double *out)
{
    const int d = pr->d, dt = pr->dtype;
    double *s = malloc(sizeof(double) * (size_t)pr->sk), *acc = malloc(sizeof(double) * (size_t)d);
    for (int i = 0; i < pr->sq; i++) {
        double m = -INFINITY;
        int last = pr->p.window_right == 0 ? i + pr->sk - pr->sq : pr->sk - 1;
        for (int j = 0; j < pr->sk; j++) {
            s[j] = -INFINITY;
            if (j > last)
                continue;
            float dot = 0;
            for (int c = 0; c < d; c++)
                dot += fj_half_to_f32(pr->q[(long)i * d + c], dt) *
                       fj_half_to_f32(pr->k[(long)j * d + c], dt);
            s[j] = (double)dot * pr->p.scale;
            m = s[j] > m ? s[j] : m;
        }
        double l = 0;
        memset(acc, 0, sizeof(double) * (size_t)d);
        for (int j = 0; m > -INFINITY && j < pr->sk; j++) {
            if (s[j] == -INFINITY)
                continue;
            float pj = (float)exp(s[j] - m);
            l += pj;
            double p16 = fj_half_to_f32(fj_f32_to_half(pj, dt), dt);
            for (int c = 0; c < d; c++)
                acc[c] += p16 * fj_half_to_f32(pr->v[(long)j * d + c], dt);
        }
        for (int c = 0; c < d; c++)
            out[(long)i * d + c] =
                fj_half_to_f32(fj_f32_to_half(l > 0 ? (float)(acc[c] / l) : 0.f, dt), dt);
    }
    free(s);
    free(acc);
}

typedef struct cmp { double max_abs, max_ref; } cmp;

/* The largest error / budget ratio seen per threshold, reported by cond_rescale_random. */
static double g_worst8, g_worst0;

static cmp compare_f(const float *got, const double *ref, long n)
{
    cmp c = {0, 0};
    for (long i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        c.max_abs = e > c.max_abs || isnan(e) ? (isnan(e) ? INFINITY : e) : c.max_abs;
        c.max_ref = fabs(ref[i]) > c.max_ref ? fabs(ref[i]) : c.max_ref;
    }
    return c;
}

/* Runs one problem: exact, same-precision and the emulation at threshold 8 and 0; checks
 * the gpu suite's bound for both thresholds and that they are comparable. Adds the
 * emulation's branch counts at threshold 8 to *st. */
static void run_problem(const problem *pr, int poly_every, fj_cond_rescale_stats *st)
{
    long n = (long)pr->sq * pr->d;
    double *exact = malloc(sizeof(double) * (size_t)n), *sp = malloc(sizeof(double) * (size_t)n);
    float *o8 = malloc(sizeof(float) * (size_t)n), *o0 = malloc(sizeof(float) * (size_t)n);
    fj_cpu_attention(&pr->p, pr->dtype, exact, NULL);
    same_precision(pr, sp);
    fj_cond_rescale_stats s8, s0;
    fj_cpu_attn_cond_rescale(&pr->p, pr->dtype, 8.0f, 128, poly_every, o8, &s8);
    fj_cpu_attn_cond_rescale(&pr->p, pr->dtype, 0.0f, 128, poly_every, o0, &s0);
    double es = 0;
    for (long i = 0; i < n; i++)
        es = fmax(es, fabs(sp[i] - exact[i]));
    cmp c8 = compare_f(o8, exact, n), c0 = compare_f(o0, exact, n);
    const double out_ulp = pr->dtype == FJ_DT_BF16 ? 1.0 / 256 : 1.0 / 2048;
    /* test_gpu.c's budget for a fast kernel. */
    double bound = 2 * es + out_ulp * fmax(c8.max_ref, 1e-3) + 1e-6;
    const char *what = pr->dtype == FJ_DT_BF16 ? "bf16" : "fp16";
    ck_assert_msg(c8.max_abs <= bound, "%s sq %d sk %d d %d poly %d: threshold 8 error %g > %g "
                  "(same-precision %g)", what, pr->sq, pr->sk, pr->d, poly_every, c8.max_abs,
                  bound, es);
    ck_assert_msg(c0.max_abs <= bound, "%s sq %d sk %d d %d poly %d: threshold 0 error %g > %g",
                  what, pr->sq, pr->sk, pr->d, poly_every, c0.max_abs, bound);
    g_worst8 = fmax(g_worst8, c8.max_abs / bound);
    g_worst0 = fmax(g_worst0, c0.max_abs / bound);
    /* Comparable: neither is more than 2x the other plus an output rounding. */
    double slack = out_ulp * fmax(c8.max_ref, 1e-3) + 1e-6;
    ck_assert_msg(c8.max_abs <= 2 * c0.max_abs + slack && c0.max_abs <= 2 * c8.max_abs + slack,
                  "%s sk %d: thresholds 8 and 0 differ: %g vs %g", what, pr->sk, c8.max_abs,
                  c0.max_abs);
    /* Threshold 0 never skips; probabilities stay <= 2^threshold (plus exp2's error). */
    ck_assert_int_eq(s0.skipped, 0);
    ck_assert(s0.p_max <= 1.0f + 1e-4f);
    ck_assert_msg(s8.p_max <= 256.0f * (1 + 1e-4f), "p_max %g > 2^8", (double)s8.p_max);
    st->rescaled += s8.rescaled, st->skipped += s8.skipped;
    st->p_max = s8.p_max > st->p_max ? s8.p_max : st->p_max;
    free(exact), free(sp), free(o8), free(o0);
}

START_TEST(cond_rescale_random)
{
    /* _i: seed. Plain random inputs (the maximum rarely grows by 8 from block to block),
     * then inputs with a growing maximum (both branches), several lengths and both dtypes;
     * poly_every 16 as FA4 (about 1 in 16 exponentials on the FMA pipe) and 1 (all). */
    const int sks[] = {1, 100, 128, 129, 1000, 2048};
    fj_cond_rescale_stats plain = {0, 0, 0}, grown = {0, 0, 0};
    g_worst8 = g_worst0 = 0;
    for (int dtype = 0; dtype <= 1; dtype++)
        for (size_t t = 0; t < sizeof sks / sizeof sks[0]; t++) {
            int sk = sks[t], d = t % 2 ? 128 : 64, sq = 24 + (int)t * 7;
            problem pr;
            g_rng = 0x5eed0000u + (uint64_t)_i * 1000 + (uint64_t)dtype * 100 + t;
            make_problem(&pr, sq, sk, d, dtype, 0, t == 4);
            run_problem(&pr, 16, &plain);
            free_problem(&pr);
            make_problem(&pr, sq, sk, d, dtype, 16.0, t == 5);
            run_problem(&pr, t % 2 ? 1 : 16, &grown);
            free_problem(&pr);
        }
    printf("cond_rescale seed %d: plain inputs %ld rescaled / %ld skipped; growing max %ld "
           "rescaled / %ld skipped, largest P %g; worst error / budget: threshold 8 %.3f, "
           "threshold 0 %.3f\n", _i, plain.rescaled, plain.skipped, grown.rescaled,
           grown.skipped, (double)fmaxf(plain.p_max, grown.p_max), g_worst8, g_worst0);
    /* Both branches ran, and a skipped rescale really produced P > 1. */
    ck_assert_int_gt(grown.rescaled, 0);
    ck_assert_int_gt(grown.skipped, 0);
    ck_assert_int_gt(plain.skipped, 0);
    ck_assert(grown.p_max > 1.0f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sm100_host");
    TCase *td = tcase_create("descriptors");
    tcase_add_test(td, idesc_fields);
    tcase_add_test(td, idesc_known);
    tcase_add_test(td, smem_desc_fields);
    tcase_add_test(td, tmem_helpers);
    suite_add_tcase(s, td);
    TCase *te = tcase_create("exp2");
    tcase_set_timeout(te, 300);
    tcase_add_test(te, exp2_poly_accuracy);
    tcase_add_test(te, exp2_poly_special);
    tcase_add_test(te, exp2_device_floor);
    suite_add_tcase(s, te);
    TCase *tr = tcase_create("cond_rescale");
    tcase_set_timeout(tr, 300);
    tcase_add_loop_test(tr, cond_rescale_random, 0, 4);
    suite_add_tcase(s, tr);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
