/* oracle.c - a kernel against the reference kernel on random inputs: what the tuner
 * (tune.c) and the validation gate (validate.c) share. Inputs are uniform in [-1, 1),
 * outputs poisoned (NaN) before each checked run, and a result passes within one
 * rounding of the output dtype at the largest |O| of the reference (plus 1e-6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oracle.h"

static float half_to_f32(uint16_t h, int bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                        : ldexpf((float)(m | 0x400), e - 25);
    return h & 0x8000 ? -v : v;
}

/* O's columns: head_dim_v where set, else head_dim. */
static int o_cols(const fajit_attn_desc *d) { return d->head_dim_v ? d->head_dim_v : d->head_dim; }

/* Elements of O from its base pointer up to the last valid one. */
static size_t o_extent(const fajit_attn_desc *d, const int32_t *cu_q)
{
    int64_t rows = cu_q ? cu_q[d->batch] : d->seqlen_q;
    int64_t last = (rows ? rows - 1 : 0) * d->o_row_stride + (int64_t)(d->heads_q - 1) *
                   d->o_head_stride + o_cols(d);
    if (!cu_q)
        last += (int64_t)(d->batch - 1) * d->o_batch_stride;
    return (size_t)last;
}

fajit_status fj_oracle_init(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d)
{
    memset(o, 0, sizeof *o);
    if (d->cu_seqlens_q) {
        o->cu_q = malloc(sizeof(int32_t) * (size_t)(d->batch + 1));
        FJ_RETURN_IF(!o->cu_q, ctx, FAJIT_OUT_OF_MEMORY, "allocating the oracle");
        ctx->cu->cuMemcpyDtoH(o->cu_q, (CUdeviceptr)d->cu_seqlens_q,
                              sizeof(int32_t) * (size_t)(d->batch + 1));
    }
    o->raw_elems = o_extent(d, o->cu_q);
    size_t valid = (size_t)(o->cu_q ? o->cu_q[d->batch] : (int64_t)d->batch * d->seqlen_q) *
                   (size_t)d->heads_q * (size_t)o_cols(d);
    o->raw = malloc(o->raw_elems * 2 + 16);
    o->ref = malloc(valid * sizeof(float) + 16);
    o->out = malloc(valid * sizeof(float) + 16);
    FJ_RETURN_IF(!o->raw || !o->ref || !o->out, ctx, FAJIT_OUT_OF_MEMORY,
                 "allocating the oracle's buffers");
    return FAJIT_OK;
}

void fj_oracle_free(fj_oracle *o)
{
    free(o->raw), free(o->ref), free(o->out), free(o->cu_q);
    memset(o, 0, sizeof *o);
}

fajit_status fj_oracle_read(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d, float *dst)
{
    char err[64];
    CUresult r = ctx->cu->cuCtxSynchronize();
    if (!r)
        r = ctx->cu->cuMemcpyDtoH(o->raw, (CUdeviceptr)d->o, o->raw_elems * 2);
    FJ_RETURN_IF(r, ctx, FAJIT_CUDA_ERROR, "reading the output back: %s",
                 fj_cuda_errname(ctx->cu, r, err, sizeof err));
    size_t n = 0;
    for (int b = 0; b < d->batch; b++) {
        int64_t r0 = o->cu_q ? o->cu_q[b] : 0;
        int sq = o->cu_q ? o->cu_q[b + 1] - o->cu_q[b] : d->seqlen_q;
        int64_t base = o->cu_q ? r0 * d->o_row_stride : (int64_t)b * d->o_batch_stride;
        for (int i = 0; i < sq; i++)
            for (int h = 0; h < d->heads_q; h++)
                for (int c = 0; c < o_cols(d); c++)
                    dst[n++] = half_to_f32(o->raw[base + i * d->o_row_stride +
                                                  h * d->o_head_stride + c],
                                           d->dtype == FAJIT_BF16);
    }
    o->n_valid = n;
    return FAJIT_OK;
}

/* A paged or FP8 problem runs as its twin (k_twin, v_twin: fj_inputs_make's copy of the
 * keys in sequence order, in Q's dtype, descaled): the reference kernel reads no block
 * table and no FP8. */
fajit_status fj_oracle_reference(fajit_ctx *ctx, fj_oracle *o, const fajit_attn_desc *d,
                                 CUdeviceptr k_twin, CUdeviceptr v_twin)
{
    fajit_attn_desc twin = *d;
    if (d->block_table || d->kv_dtype) {
        FJ_RETURN_IF(!k_twin || !v_twin, ctx, FAJIT_INVALID_ARGUMENT, "the oracle of a paged "
                     "or FP8 problem needs its keys in sequence order and Q's dtype "
                     "(fj_inputs_make with twin)");
        twin.k = (const void *)(uintptr_t)k_twin, twin.v = (const void *)(uintptr_t)v_twin;
        twin.block_table = NULL, twin.block_table_stride = 0, twin.page_size = 0;
        twin.num_pages = 0, twin.k_page_stride = twin.v_page_stride = 0;
        twin.seqused_k = NULL;
        twin.kv_dtype = FAJIT_KV_AS_Q, twin.k_descale = twin.v_descale = NULL;
        twin.descale_batch_stride = twin.descale_head_stride = 0;
    }
    fajit_attn_desc ld;   /* (as fajit_attn_fwd_reference runs it) */
    FJ_CHECK(fj_desc_import(ctx, &twin, &ld));
    FJ_CHECK(fj_plan_run(ctx, &ld, NULL, 1, &fj_reference_chooser));
    return fj_oracle_read(ctx, o, d, o->ref);
}

int fj_oracle_check(fajit_ctx *ctx, fj_oracle *o, const fj_kplan *kp, const fajit_attn_desc *d,
                    char *why, size_t n)
{
    ctx->cu->cuMemsetD8((CUdeviceptr)d->o, 0xff, o->raw_elems * 2);   /* poison: NaN */
    if (fj_kplan_launch(ctx, kp, d, NULL) != FAJIT_OK ||
        fj_oracle_read(ctx, o, d, o->out) != FAJIT_OK) {
        snprintf(why, n, "launch failed: %s", fajit_errmsg(ctx));
        return -1;
    }
    double max_err = 0, max_ref = 0;
    for (size_t k = 0; k < o->n_valid; k++) {
        double e = fabs((double)o->out[k] - o->ref[k]);
        max_err = isnan(e) || e > max_err ? (isnan(e) ? INFINITY : e) : max_err;
        max_ref = fmax(max_ref, fabs(o->ref[k]));
    }
    double ulp = d->dtype == FAJIT_BF16 ? 1.0 / 128 : 1.0 / 1024;
    if (!(max_err <= ulp * fmax(max_ref, 1e-3) + 1e-6)) {
        snprintf(why, n, "wrong result: max error %g against the reference kernel", max_err);
        return -1;
    }
    return 0;
}

/*------ random inputs on the device ------*/

static uint64_t g_rand = 0x9E3779B97F4A7C15ull;
static uint64_t rand_u64(void)
{
    g_rand ^= g_rand << 13, g_rand ^= g_rand >> 7, g_rand ^= g_rand << 17;
    return g_rand;
}

/* f (|f| < 2^15) as bf16 (rounded to nearest even) or f16 (truncated; below the smallest
 * normal f16: a signed zero). */
static uint16_t f32_to_half(float f, int bf16)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (bf16)
        return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (e <= 0)
        return sign;
    return (uint16_t)(sign | e << 10 | ((u >> 13) & 0x3ff));
}

static uint16_t rand_half(int bf16)
{
    float f = (float)(rand_u64() >> 40) / (float)(1 << 24) * 2.f - 1.f;   /* [-1, 1) */
    return f32_to_half(f, bf16);
}

/* The value of an FP8 byte of format kv (FAJIT_KV_E4M3 or E5M2; a finite code). */
static float fp8_value(uint8_t b, int kv)
{
    const int mb = kv == FAJIT_KV_E4M3 ? 3 : 2, bias = kv == FAJIT_KV_E4M3 ? 7 : 15;
    const int e = (b & 0x7f) >> mb, m = b & ((1 << mb) - 1);
    const float v = e ? ldexpf(1.f + (float)m / (float)(1 << mb), e - bias)
                      : ldexpf((float)m / (float)(1 << mb), 1 - bias);
    return b & 0x80 ? -v : v;
}

/* A random normal FP8 byte of magnitude in [2^-7, 2): e4m3 exponents 1..7 (2^-6 .. 1.875),
 * e5m2 8..15 (2^-7 .. 1.75). With 3 or 2 mantissa bits and a power-of-two descale its value
 * is exact in f16 and bf16, so the reference reads exactly what the kernel dequantizes. */
static uint8_t rand_fp8(int kv)
{
    const uint64_t r = rand_u64();
    if (kv == FAJIT_KV_E4M3)
        return (uint8_t)((r & 0x80) | (1 + (r >> 8) % 7) << 3 | ((r >> 16) & 7));
    return (uint8_t)((r & 0x80) | (8 + (r >> 8) % 8) << 2 | ((r >> 16) & 3));
}

/* Random FP8 K or V: `elems` bytes on the device; host gets their values times descale in
 * Q's dtype (what the reference kernel reads). */
static CUresult upload_fp8(const fj_cuda *cu, CUdeviceptr *p, size_t elems, int kv,
                           float descale, int bf16, uint16_t *host)
{
    uint8_t *b = malloc(elems);
    if (!b)
        return 2;   /* (CUDA_ERROR_OUT_OF_MEMORY, as fj_inputs_make says it) */
    for (size_t i = 0; i < elems; i++) {
        b[i] = rand_fp8(kv);
        host[i] = f32_to_half(fp8_value(b[i], kv) * descale, bf16);
    }
    CUresult r = cu->cuMemAlloc(p, elems);
    r = r ? r : cu->cuMemcpyHtoD(*p, b, elems);
    free(b);
    return r;
}

static CUresult upload_random(const fj_cuda *cu, CUdeviceptr *p, size_t elems, int bf16,
                              uint16_t *host)
{
    for (size_t i = 0; i < elems; i++)
        host[i] = rand_half(bf16);
    CUresult r = cu->cuMemAlloc(p, elems * 2);
    return r ? r : cu->cuMemcpyHtoD(*p, host, elems * 2);
}

static CUresult upload_ints(const fj_cuda *cu, CUdeviceptr *p, const int32_t *v, size_t n)
{
    CUresult r = cu->cuMemAlloc(p, n * sizeof *v);
    return r ? r : cu->cuMemcpyHtoD(*p, v, n * sizeof *v);
}

/* Sinks in [0, 2) and flash-attn's ALiBi slopes 2^(-8 (h + 1) / heads) of every head, then
 * the FP8 descales (FJ_INPUTS_K_DESCALE, FJ_INPUTS_V_DESCALE), fp32. */
static CUresult upload_features(const fj_cuda *cu, CUdeviceptr *p, int heads)
{
    const size_t n = 2 * (size_t)heads + 2;
    float *v = malloc(sizeof *v * n);
    if (!v)
        return 2;   /* (CUDA_ERROR_OUT_OF_MEMORY, as fj_inputs_make says it) */
    for (int h = 0; h < heads; h++) {
        v[h] = (float)(rand() % 2000) / 1000.f;
        v[heads + h] = exp2f(-8.f * (float)(h + 1) / (float)heads);
    }
    v[2 * heads] = FJ_INPUTS_K_DESCALE, v[2 * heads + 1] = FJ_INPUTS_V_DESCALE;
    CUresult r = cu->cuMemAlloc(p, sizeof *v * n);
    r = r ? r : cu->cuMemcpyHtoD(*p, v, sizeof *v * n);
    free(v);
    return r;
}

/* The block table: a random permutation of 0 .. n-1 (n pages). */
static void pages_shuffle(int32_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)i;
    for (size_t i = n; i > 1; i--) {   /* Fisher-Yates */
        const size_t j = (size_t)(rand_u64() % i);
        const int32_t x = t[i - 1];
        t[i - 1] = t[j], t[j] = x;
    }
}

/* Uploads the physical pages `pool` (host, `pages` of `pe` elements) in sequence order:
 * logical page L (sequence L / pages per sequence) is physical page t[L] (t NULL: L). */
static CUresult upload_twin(const fj_cuda *cu, CUdeviceptr *p, const uint16_t *pool,
                           const int32_t *t, size_t pages, size_t pe, uint16_t *scratch)
{
    for (size_t l = 0; l < pages; l++)
        memcpy(scratch + l * pe, pool + (size_t)(t ? (size_t)t[l] : l) * pe, pe * 2);
    CUresult r = cu->cuMemAlloc(p, pages * pe * 2);
    return r ? r : cu->cuMemcpyHtoD(*p, scratch, pages * pe * 2);
}

/* Varlen: prefix sums of the lengths, cu_seqlens_q then cu_seqlens_k in one buffer. */
static CUresult upload_varlen(const fj_cuda *cu, fj_inputs *in, int batch, const int *lq,
                              const int *lk)
{
    int32_t cu_l[2 * (FJ_INPUT_MAX_BATCH + 1)] = {0};
    for (int b = 0; b < batch; b++) {
        cu_l[b + 1] = cu_l[b] + lq[b];
        cu_l[batch + 2 + b] = cu_l[batch + 1 + b] + lk[b];
    }
    in->total_q = cu_l[batch], in->total_k = cu_l[2 * batch + 1];
    return upload_ints(cu, &in->cu, cu_l, 2 * (size_t)(batch + 1));
}

void fj_inputs_free(const fj_cuda *cu, fj_inputs *in)
{
    CUdeviceptr *all[] = {&in->o, &in->bt, &in->cu, &in->k_twin, &in->v_twin, &in->feat};
    for (int s = 0; s < FJ_INPUT_SETS; s++) {
        if (in->q[s]) cu->cuMemFree(in->q[s]);
        if (in->k[s]) cu->cuMemFree(in->k[s]);
        if (in->v[s]) cu->cuMemFree(in->v[s]);
    }
    for (int i = 0; i < 6; i++)
        if (*all[i])
            cu->cuMemFree(*all[i]);
    memset(in, 0, sizeof *in);
}

/* The descriptor of set k: contiguous, or paged over whole pages per sequence (the batch
 * strides are the twin's), or varlen packed rows. */
static void describe_set(fj_inputs *in, int k, const fj_problem *p, const fj_shape *sh,
                         int pps, size_t rows_k)
{
    fajit_attn_desc *d = &in->d[k];
    fajit_attn_desc_init(d, (void *)in->q[k], (void *)in->k[k], (void *)in->v[k],
                         (void *)in->o, sh->batch, p->heads_q, p->heads_kv, sh->seqlen_q,
                         sh->seqlen_k, p->head_dim, p->dtype);
    d->mask = p->mask;
    d->window_left = p->window_left;
    d->window_right = p->window_right;
    if (p->head_dim_v) {   /* V and O of head_dim_v columns, packed as fajit_attn_desc_init */
        const int64_t dv = p->head_dim_v;
        d->head_dim_v = p->head_dim_v;
        d->v_head_stride = d->o_head_stride = dv;
        d->v_row_stride = dv * p->heads_kv, d->o_row_stride = dv * p->heads_q;
        d->v_batch_stride = dv * p->heads_kv * sh->seqlen_k;
        d->o_batch_stride = dv * p->heads_q * sh->seqlen_q;
    }
    if (p->page_size) {
        d->k_batch_stride = (int64_t)rows_k * p->heads_kv * p->head_dim;   /* (the oracle's) */
        d->v_batch_stride = (int64_t)rows_k * p->heads_kv * (p->head_dim_v ? p->head_dim_v
                                                                          : p->head_dim);
        d->block_table = (const int32_t *)(uintptr_t)in->bt;
        d->block_table_stride = pps, d->page_size = p->page_size;
        d->num_pages = sh->batch * pps;
    }
    if (p->features & FJ_PROBLEM_SOFTCAP)
        d->softcap = 30.f;   /* (Grok-1's; Gemma 2 takes 50) */
    if (p->features & FJ_PROBLEM_SINKS)
        d->sinks = (const float *)(uintptr_t)in->feat;
    if (p->features & FJ_PROBLEM_ALIBI)
        d->alibi_slopes = (const float *)(uintptr_t)in->feat + p->heads_q;
    if (p->kv_dtype) {   /* one descale per tensor */
        d->kv_dtype = (fajit_kv_dtype)p->kv_dtype;
        d->k_descale = (const float *)(uintptr_t)in->feat + 2 * p->heads_q;
        d->v_descale = d->k_descale + 1;
    }
    if (in->cu) {
        d->cu_seqlens_q = (const int32_t *)(uintptr_t)in->cu;
        d->cu_seqlens_k = (const int32_t *)(uintptr_t)in->cu + sh->batch + 1;
        d->total_q = in->total_q, d->total_k = in->total_k;
    }
}

/* K and V of set k (n[0] and n[1] elements: V of head_dim_v columns): random in Q's
 * dtype, or FP8 bytes (p->kv_dtype); with twin, set 0's once more in Q's dtype (descaled
 * where FP8), in sequence order through `table` where paged (`pages` of pe[i] elements;
 * else one run of n[i]): what the reference kernel reads. host and scratch hold the larger
 * n halves. */
static CUresult upload_kv(const fj_cuda *cu, fj_inputs *in, int k, const fj_problem *p,
                          const size_t n[2], const int32_t *table, size_t pages,
                          const size_t pe[2], uint16_t *host, uint16_t *scratch, int twin)
{
    const int bf16 = p->dtype == FAJIT_BF16;
    CUdeviceptr *dst[2] = {&in->k[k], &in->v[k]}, *tw[2] = {&in->k_twin, &in->v_twin};
    const float descale[2] = {FJ_INPUTS_K_DESCALE, FJ_INPUTS_V_DESCALE};
    CUresult r = 0;
    for (int i = 0; i < 2 && !r; i++) {
        r = p->kv_dtype ? upload_fp8(cu, dst[i], n[i], p->kv_dtype, descale[i], bf16, host)
                        : upload_random(cu, dst[i], n[i], bf16, host);
        if (!r && k == 0 && twin)
            r = upload_twin(cu, tw[i], host, pages ? table : NULL, pages ? pages : 1,
                            pages ? pe[i] : n[i], scratch);
    }
    return r;
}

fajit_status fj_inputs_make(fajit_ctx *ctx, const fj_problem *p, const fj_shape *sh, int sets,
                            const int *lens_q, const int *lens_k, unsigned flags,
                            fj_inputs *in)
{
    const fj_cuda *cu = ctx->cu;
    char err[64];
    memset(in, 0, sizeof *in);
    FJ_RETURN_IF(sets < 1 || sets > FJ_INPUT_SETS || (lens_q && (p->page_size ||
                 sh->batch > FJ_INPUT_MAX_BATCH)), ctx, FAJIT_INVALID_ARGUMENT,
                 "fj_inputs_make: %d sets, varlen %d x paged %d", sets, lens_q != NULL,
                 p->page_size);
    /* paged: whole pages per sequence (pps of them), scattered by the block table; V and O
     * of head_dim_v columns where the problem sets it */
    const int dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
    const int pps = p->page_size ? (sh->seqlen_k + p->page_size - 1) / p->page_size : 0;
    const size_t rows_k = p->page_size ? (size_t)pps * p->page_size : (size_t)sh->seqlen_k;
    const size_t pages = (size_t)sh->batch * pps;
    const size_t pe = (size_t)p->page_size * p->heads_kv * p->head_dim;   /* a page's elements */
    const size_t pev = (size_t)p->page_size * p->heads_kv * dv;           /* (of V) */
    size_t nq = (size_t)sh->batch * sh->seqlen_q * p->heads_q * p->head_dim;
    size_t nk = (size_t)sh->batch * rows_k * p->heads_kv * p->head_dim;
    const size_t no = (size_t)sh->batch * sh->seqlen_q * p->heads_q * dv;
    const size_t nv = (size_t)sh->batch * rows_k * p->heads_kv * dv;
    const int twin = (flags & FJ_INPUTS_TWIN) && (p->page_size || p->kv_dtype);
    const size_t nmax = nq > nk ? (nq > nv ? nq : nv) : (nk > nv ? nk : nv);
    uint16_t *host = malloc(nmax * 2);
    uint16_t *scratch = twin ? malloc((nk > nv ? nk : nv) * 2) : NULL;
    int32_t *table = pages ? malloc(pages * sizeof *table) : NULL;
    CUresult r = host && (!twin || scratch) && (!pages || table) ? 0 : 2;
    if (!r && pages)
        pages_shuffle(table, pages);
    const size_t n_kv[2] = {nk, nv}, page_kv[2] = {pe, pev};
    for (int k = 0; k < sets && !r; k++)
        if (!(r = upload_random(cu, &in->q[k], nq, p->dtype == FAJIT_BF16, host)))
            r = upload_kv(cu, in, k, p, n_kv, table, pages, page_kv, host, scratch, twin);
    free(host);
    free(scratch);
    if (!r)
        r = cu->cuMemAlloc(&in->o, no * 2);
    if (!r && pages)
        r = upload_ints(cu, &in->bt, table, pages);
    free(table);
    if (!r && lens_q)
        r = upload_varlen(cu, in, sh->batch, lens_q, lens_k);
    if (!r && ((p->features & (FJ_PROBLEM_SINKS | FJ_PROBLEM_ALIBI)) || p->kv_dtype))
        r = upload_features(cu, &in->feat, p->heads_q);
    if (r) {
        fj_inputs_free(cu, in);
        return fj_fail(ctx, FAJIT_CUDA_ERROR, "allocating inputs for %s (%d x %d x %d): %s",
                       p->name, sh->batch, sh->seqlen_q, sh->seqlen_k,
                       fj_cuda_errname(cu, r, err, sizeof err));
    }
    in->sets = sets;
    for (int k = 0; k < sets; k++)
        describe_set(in, k, p, sh, pps, rows_k);
    return FAJIT_OK;
}
