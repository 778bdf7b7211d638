/* validate.c - the first-use validation gate: a kernel family is checked against the
 * reference kernel on a few fixed problems before it is trusted on a GPU class (name,
 * target, SM count, driver, fajit version); the verdict goes to the cache, and a family
 * that failed is quarantined there: dispatch (dispatch.c) skips it. A kernel that has never
 * run on a GPU (a new generation's family, a new driver's code generation) is exactly the
 * one whose bugs no test here could see. Model features compile other kernel code, so a
 * verdict is of one model-feature set: its problems have those features on, the reference
 * kernel too, and a FAIL quarantines the family for that set only. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "oracle.h"

/*------ the validation problems ------*/

/* A fixed problem: a spec problem and shape, varlen lengths when lens_q[0] > 0. Small, so a
 * family's check takes well under a second after its kernels are compiled. */
typedef struct vcase {
    const char *text;
    fajit_dtype dtype;
    int head_dim, heads_q, heads_kv;
    fajit_mask mask;
    int window_left, window_right, page_size;
    fj_shape shape;
    int lens_q[4], lens_k[4];
} vcase;

/* Together they cover what the families branch on: head_dim 64 and 128, both dtypes, no
 * mask, causal (square and bottom-right), a window, GQA and MQA, lengths off every tile,
 * varlen with an empty-ish sequence, decode steps (contiguous and paged), speculative
 * decode, paged chunked prefill. Each family takes those it applies to. */
static const vcase k_cases[] = {
    {"bf16 hd128 causal b2 h8/8 sq512 sk512", FAJIT_BF16, 128, 8, 8, FAJIT_MASK_CAUSAL,
     -1, -1, 0, {512, 512, 2}, {0}, {0}},
    {"f16 hd64 none gqa4 b2 h8/2 sq333 sk333", FAJIT_F16, 64, 8, 2, FAJIT_MASK_NONE,
     -1, -1, 0, {333, 333, 2}, {0}, {0}},
    {"bf16 hd128 causal gqa2 b1 h8/4 sq200 sk1000", FAJIT_BF16, 128, 8, 4, FAJIT_MASK_CAUSAL,
     -1, -1, 0, {200, 1000, 1}, {0}, {0}},
    {"bf16 hd64 causal varlen b3 h4/4 q(300,1,77) k(300,50,77)", FAJIT_BF16, 64, 4, 4,
     FAJIT_MASK_CAUSAL, -1, -1, 0, {300, 300, 3}, {300, 1, 77}, {300, 50, 77}},
    {"f16 hd128 window(64,16) b1 h4/4 sq700 sk700", FAJIT_F16, 128, 4, 4, FAJIT_MASK_WINDOW,
     64, 16, 0, {700, 700, 1}, {0}, {0}},
    {"bf16 hd128 decode paged(16) gqa4 b3 h32/8 sq1 sk1500", FAJIT_BF16, 128, 32, 8,
     FAJIT_MASK_NONE, -1, -1, 16, {1, 1500, 3}, {0}, {0}},
    {"f16 hd64 spec-decode causal gqa8 b2 h16/2 sq4 sk777", FAJIT_F16, 64, 16, 2,
     FAJIT_MASK_CAUSAL, -1, -1, 0, {4, 777, 2}, {0}, {0}},
    {"bf16 hd128 decode mqa b4 h8/1 sq1 sk2049", FAJIT_BF16, 128, 8, 1, FAJIT_MASK_NONE,
     -1, -1, 0, {1, 2049, 4}, {0}, {0}},
    {"bf16 hd64 paged(32) prefill causal b2 h8/8 sq100 sk600", FAJIT_BF16, 64, 8, 8,
     FAJIT_MASK_CAUSAL, -1, -1, 32, {100, 600, 2}, {0}, {0}},
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))
#define MAX_PER_FAMILY 6

/*------ model-feature sets ------*/

_Static_assert((int)FAJIT_FEATURE_SOFTCAP == FJ_FEAT_SOFTCAP &&
               (int)FAJIT_FEATURE_SINKS == FJ_FEAT_SINKS &&
               (int)FAJIT_FEATURE_ALIBI == FJ_FEAT_ALIBI &&
               (int)FAJIT_FEATURE_HEAD_DIM_V == FJ_FEAT_HDIM_V &&
               (int)FAJIT_FEATURE_KV_FP8 == FJ_FEAT_KV_FP8, "fajit.h: feature bits");

/* With head_dim_v in the set, a case's V and O have half its head_dim: 64 of 128 and 32 of
 * 64, multiples of 16 at most head_dim, as the Hopper and portable kernels take them (the
 * decode family takes none). */
static int dv_of(const vcase *c, unsigned fset)
{
    return fset & FJ_FEAT_HDIM_V ? c->head_dim / 2 : 0;
}

unsigned fj_feature_set(const fajit_attn_desc *d)
{
    return fj_features(d) | (unsigned)d->kv_dtype << FJ_FSET_KV_SHIFT;
}

void fj_feature_set_name(unsigned fset, char *out, size_t n)
{
    static const char *const names[] = {"softcap", "sinks", "alibi", "head_dim_v"};
    static const char *const kv[] = {"", "kv_e4m3", "kv_e5m2"};
    const unsigned k = fset >> FJ_FSET_KV_SHIFT;
    size_t at = 0;
    if (!n)
        return;
    out[0] = 0;
    for (unsigned i = 0; i < 4; i++)
        if (fset & 1u << i && at < n)
            at += (size_t)snprintf(out + at, n - at, "%s%s", at ? "," : "", names[i]);
    if (k && at < n)
        snprintf(out + at, n - at, "%s%s", at ? "," : "", k < 3 ? kv[k] : "kv_?");
}

int fj_feature_set_parse(const char *s, unsigned *fset)
{
    static const char *const names[] = {"softcap", "sinks", "alibi", "head_dim_v", "kv_e4m3",
                                        "kv_e5m2"};
    static const unsigned bits[] = {
        FJ_FEAT_SOFTCAP, FJ_FEAT_SINKS, FJ_FEAT_ALIBI, FJ_FEAT_HDIM_V,
        FJ_FEAT_KV_FP8 | (unsigned)FAJIT_KV_E4M3 << FJ_FSET_KV_SHIFT,
        FJ_FEAT_KV_FP8 | (unsigned)FAJIT_KV_E5M2 << FJ_FSET_KV_SHIFT};
    unsigned f = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ","), i = 0;
        while (i < 6 && !(strlen(names[i]) == len && strncmp(p, names[i], len) == 0))
            i++;
        if (i == 6)
            return -1;
        f |= bits[i];
        p += len + (p[len] == ',');
    }
    char again[64];   /* one spelling per set: in order, no repeats, one FP8 format */
    fj_feature_set_name(f, again, sizeof again);
    if (strcmp(again, s) != 0)
        return -1;
    *fset = f;
    return 0;
}

/* " for softcap,sinks" (the set, for messages), or "" for the feature-free set. */
static const char *for_set(unsigned fset, char *buf, size_t n)
{
    char name[64];
    fj_feature_set_name(fset, name, sizeof name);
    snprintf(buf, n, "%s%s", fset ? " for " : "", name);
    return buf;
}

/* The set of public features / kv_dtype: 0 and *fset, or -1 when they name none. */
static int fset_of(unsigned features, fajit_kv_dtype kv, unsigned *fset)
{
    if ((features & ~(unsigned)FJ_FEAT_ALL) || (unsigned)kv > FAJIT_KV_E5M2 ||
        !(features & FJ_FEAT_KV_FP8) != (kv == FAJIT_KV_AS_Q))
        return -1;
    *fset = features | (unsigned)kv << FJ_FSET_KV_SHIFT;
    return 0;
}

/* A case's problem with the set's features on (fj_inputs_make: softcap 30, random sinks,
 * ALiBi slopes, FP8 K/V with a descale per tensor, V and O of dv_of's columns). */
static fj_problem problem_of(const vcase *c, unsigned fset)
{
    fj_problem p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "validation");
    p.op = FAJIT_OP_FWD;
    p.dtype = c->dtype;
    p.head_dim = c->head_dim, p.heads_q = c->heads_q, p.heads_kv = c->heads_kv;
    p.head_dim_v = dv_of(c, fset);
    p.mask = c->mask;
    p.window_left = c->window_left, p.window_right = c->window_right;
    p.page_size = c->page_size;
    p.features = (fset & FJ_FEAT_SOFTCAP ? FJ_PROBLEM_SOFTCAP : 0u) |
                 (fset & FJ_FEAT_SINKS ? FJ_PROBLEM_SINKS : 0u) |
                 (fset & FJ_FEAT_ALIBI ? FJ_PROBLEM_ALIBI : 0u);
    p.kv_dtype = (int)(fset >> FJ_FSET_KV_SHIFT);
    return p;
}

/* Whether f serves case c with the features of fset on t: asked of a descriptor with the
 * case's shape (its pointers are never used). */
static int case_applies(const fj_family *f, const vcase *c, const fj_target *t, unsigned fset)
{
    void *p = (void *)(uintptr_t)0x100000;
    fajit_attn_desc d;
    fajit_attn_desc_init(&d, p, p, p, p, c->shape.batch, c->heads_q, c->heads_kv,
                         c->shape.seqlen_q, c->shape.seqlen_k, c->head_dim, c->dtype);
    d.mask = c->mask;
    d.window_left = c->window_left, d.window_right = c->window_right;
    if (c->lens_q[0]) {
        d.cu_seqlens_q = d.cu_seqlens_k = (const int32_t *)p;
        d.total_q = d.total_k = 1;
    }
    if (c->page_size) {
        d.block_table = (const int32_t *)p;
        d.page_size = c->page_size;
        d.block_table_stride = (c->shape.seqlen_k + c->page_size - 1) / c->page_size;
        d.num_pages = (int)d.block_table_stride * c->shape.batch;
    }
    d.softcap = fset & FJ_FEAT_SOFTCAP ? 30.f : 0.f;
    d.sinks = fset & FJ_FEAT_SINKS ? (const float *)p : NULL;
    d.alibi_slopes = fset & FJ_FEAT_ALIBI ? (const float *)p : NULL;
    d.kv_dtype = (fajit_kv_dtype)(fset >> FJ_FSET_KV_SHIFT);
    if (d.kv_dtype != FAJIT_KV_AS_Q)
        d.k_descale = d.v_descale = (const float *)p;
    if ((d.head_dim_v = dv_of(c, fset)) != 0) {   /* V and O packed at their own width */
        d.v_head_stride = d.o_head_stride = d.head_dim_v;
        d.v_row_stride = (int64_t)c->heads_kv * d.head_dim_v;
        d.o_row_stride = (int64_t)c->heads_q * d.head_dim_v;
        d.v_batch_stride = d.v_row_stride * c->shape.seqlen_k;
        d.o_batch_stride = d.o_row_stride * c->shape.seqlen_q;
    }
    return f->op == (int)d.op && f->applies(&d, t);
}

/* The cases f is validated on for fset, indices into k_cases; returns how many. */
static int cases_of(const fj_family *f, const fj_target *t, unsigned fset, int *out)
{
    int n = 0;
    for (int i = 0; i < N_CASES && n < MAX_PER_FAMILY; i++)
        if (case_applies(f, &k_cases[i], t, fset))
            out[n++] = i;
    return n;
}

/*------ running one case ------*/

/* Runs f's default kernels on case c against the reference kernel. FAJIT_OK with *failed
 * 0 (passed) or 1 (why says it); another status when the case could not be run at all
 * (inputs, compiling, the reference): no verdict. */
static fajit_status run_case(fajit_ctx *ctx, const fj_family *f, const vcase *c,
                             unsigned fset, unsigned flags, int *failed, char *why, size_t n)
{
    const fj_target t = fj_target_of(ctx, NULL);
    const fj_problem p = problem_of(c, fset);
    fj_inputs in;
    fj_oracle orc;
    fj_kplan kp;
    *failed = 0;
    FJ_CHECK(fj_inputs_make(ctx, &p, &c->shape, 1, c->lens_q[0] ? c->lens_q : NULL,
                            c->lens_k, FJ_INPUTS_TWIN, &in));
    const fajit_attn_desc *d = &in.d[0];
    memset(&kp, 0, sizeof kp);
    fajit_status st = fajit_attn_check(ctx, d);
    if (st == FAJIT_OK)
        st = fj_oracle_init(ctx, &orc, d);
    else
        memset(&orc, 0, sizeof orc);
    if (st == FAJIT_OK)
        st = fj_oracle_reference(ctx, &orc, d, in.k_twin, in.v_twin);
    if (st == FAJIT_OK) {
        f->default_cfg(d, &t, &kp.cfg);
        st = fj_kplan_load(ctx, &kp, d, flags);
    }
    if (st == FAJIT_OK)
        *failed = fj_oracle_check(ctx, &orc, &kp, d, why, n) != 0;
    fj_oracle_free(&orc);
    fj_inputs_free(ctx->cu, &in);
    return st;
}

/*------ verdicts ------*/

/* The class, family and feature-set part of a verdict for the context's device. */
static void verdict_key(const fajit_ctx *ctx, const fj_family *f, unsigned fset, fj_verdict *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->gpu_name, sizeof v->gpu_name, "%s", ctx->gpu_name);
    snprintf(v->arch, sizeof v->arch, "%s", ctx->arch);
    v->sm_count = ctx->sm_count;
    v->driver_version = ctx->cu ? ctx->cu->version : 0;
    snprintf(v->fajit_version, sizeof v->fajit_version, "%s", FAJIT_VERSION_STRING);
    snprintf(v->family, sizeof v->family, "%s", f->name);
    fj_feature_set_name(fset, v->features, sizeof v->features);
}

/* The slot of f and fset, read from the cache at its first need; NULL when the table is
 * full (no verdict then). Under verdict_lock. */
static fj_verdict_slot *slot_of(fajit_ctx *ctx, const fj_family *f, unsigned fset)
{
    for (int i = 0; i < ctx->n_verdicts; i++)
        if (ctx->verdicts[i].fam == f && ctx->verdicts[i].fset == fset)
            return &ctx->verdicts[i];
    if (ctx->n_verdicts == FJ_MAX_VERDICTS)
        return NULL;
    fj_verdict_slot *s = &ctx->verdicts[ctx->n_verdicts++];
    memset(s, 0, sizeof *s);
    s->fam = f;
    s->fset = fset;
    fj_verdict key;
    verdict_key(ctx, f, fset, &key);
    if (fj_cache_verdict_get(ctx->cache, &key, &s->v))
        s->state = s->v.pass ? FJ_VS_PASS : FJ_VS_FAIL;
    return s;
}

int fj_verdict_state(fajit_ctx *ctx, const fj_family *f, unsigned fset, fj_verdict *v)
{
    if (!ctx->cu)
        return FJ_VS_NONE;
    pthread_mutex_lock(&ctx->verdict_lock);
    fj_verdict_slot *s = slot_of(ctx, f, fset);
    int state = s ? s->state : FJ_VS_NONE;
    if (v && s)
        *v = s->v;
    pthread_mutex_unlock(&ctx->verdict_lock);
    return state;
}

/* Whether verdicts apply to f on t: the device's own target, a family above the oracle. */
static int gated(const fajit_ctx *ctx, const fj_target *t, const fj_family *f)
{
    return ctx->cu && t->sm == ctx->cc && f->rank > FJ_RANK_ORACLE;
}

int fj_quarantined(fajit_ctx *ctx, const fj_target *t, const fj_family *f, unsigned fset)
{
    if (!gated(ctx, t, f))
        return 0;
    pthread_mutex_lock(&ctx->verdict_lock);
    fj_verdict_slot *s = slot_of(ctx, f, fset);
    int q = s && s->state == FJ_VS_FAIL, warn = q && !s->warned;
    fj_verdict v;
    if (warn) {
        s->warned = 1;
        v = s->v;
    }
    pthread_mutex_unlock(&ctx->verdict_lock);
    char set[80];
    if (warn)
        fj_log(ctx, FAJIT_LOG_WARN, "family %s is quarantined%s on this GPU (%s, %s, %d SMs, "
               "driver %d): it failed validation on %s: %s; dispatch falls back to the next "
               "family that applies", f->name, for_set(fset, set, sizeof set), ctx->gpu_name,
               ctx->arch, ctx->sm_count, v.driver_version, v.failed_case, v.error);
    return q;
}

void fj_verdict_describe(fajit_ctx *ctx, const fj_target *t, const fj_family *f,
                         unsigned fset, char *out, size_t n)
{
    char set[80];
    if (!n)
        return;
    out[0] = 0;
    if (!gated(ctx, t, f))
        return;
    for_set(fset, set, sizeof set);
    switch (fj_verdict_state(ctx, f, fset, NULL)) {
    case FJ_VS_PASS:
        snprintf(out, n, "; verdict: %s passed validation on this GPU class%s", f->name,
                 fset ? set : " (no model features)");
        break;
    case FJ_VS_FAIL:   /* (only where the slots ran out of room: dispatch skips FAIL) */
        snprintf(out, n, "; verdict: %s FAILED validation on this GPU class%s", f->name, set);
        break;
    default:
        snprintf(out, n, "; verdict: none for %s on this GPU class%s", f->name,
                 fset ? set : " (no model features)");
    }
}

/* Records f's verdict for fset in the context and the cache; plans made before it are
 * retired. */
static void record(fajit_ctx *ctx, const fj_family *f, unsigned fset, int pass,
                   const char *failed_case, const char *error)
{
    fj_verdict v;
    char set[80];
    verdict_key(ctx, f, fset, &v);
    v.pass = pass;
    snprintf(v.failed_case, sizeof v.failed_case, "%s", failed_case);
    snprintf(v.error, sizeof v.error, "%s", error);
    v.created = (int64_t)time(NULL);
    fj_cache_verdict_put(ctx->cache, &v);   /* (read-only: kept in the slot only, warned) */
    pthread_mutex_lock(&ctx->verdict_lock);
    fj_verdict_slot *s = slot_of(ctx, f, fset);
    if (s) {
        s->v = v;
        s->state = pass ? FJ_VS_PASS : FJ_VS_FAIL;
        s->warned = 0;
    }
    pthread_mutex_unlock(&ctx->verdict_lock);
    fj_plans_retire(ctx);
    for_set(fset, set, sizeof set);
    if (pass)
        fj_log(ctx, FAJIT_LOG_INFO, "validation: %s passed%s on %s (%s, %d SMs, driver %d)",
               f->name, set, ctx->gpu_name, ctx->arch, ctx->sm_count, v.driver_version);
    else
        fj_log(ctx, FAJIT_LOG_WARN, "validation: %s FAILED%s on %s (%s, %d SMs, driver %d) at "
               "%s: %s; quarantined on this GPU class%s", f->name, set, ctx->gpu_name,
               ctx->arch, ctx->sm_count, v.driver_version, failed_case, error, set);
}

/*------ validating families ------*/

typedef struct vrun {
    fajit_validation_report rep;
    unsigned fset;           /* the model-feature set validated */
    unsigned flags;          /* fj_kplan_load's for the family's kernels */
    int done, total;         /* progress */
    struct timespec t0;
} vrun;

/* The text of case c with the set's features: "bf16 hd128 ... sk512 with softcap". */
static void case_text(const vcase *c, unsigned fset, char *out, size_t n)
{
    char set[64];
    fj_feature_set_name(fset, set, sizeof set);
    char dv[16] = "";
    if (dv_of(c, fset))
        snprintf(dv, sizeof dv, " dv%d", dv_of(c, fset));
    snprintf(out, n, "%s%s%s%s", c->text, dv, fset ? " with " : "", set);
}

static void progress(fajit_ctx *ctx, vrun *r, const fj_family *f, const char *text,
                     const char *result)
{
    r->done++;
    if (!ctx->opts.progress)
        return;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (t1.tv_sec - r->t0.tv_sec) + (t1.tv_nsec - r->t0.tv_nsec) / 1e9;
    char what[300];
    snprintf(what, sizeof what, "validate %s: %s: %s", f->name, text, result);
    ctx->opts.progress(ctx->opts.progress_user, r->done, r->total,
                       el / r->done * (r->total - r->done), what);
}

/* Validates f on its cases for r->fset; its verdict recorded unless a case could not be
 * run (that status is returned). A fail stops at the first failing case. */
static fajit_status validate_family(fajit_ctx *ctx, const fj_family *f, vrun *r)
{
    const fj_target t = fj_target_of(ctx, NULL);
    int idx[MAX_PER_FAMILY], n = cases_of(f, &t, r->fset, idx), failed = 0;
    char why[256] = "", text[160];
    for (int i = 0; i < n && !failed; i++) {
        const vcase *c = &k_cases[idx[i]];
        case_text(c, r->fset, text, sizeof text);
        fajit_status st = run_case(ctx, f, c, r->fset, r->flags, &failed, why, sizeof why);
        if (st != FAJIT_OK) {
            char msg[512];   /* the cause, without its status name (fj_fail adds one) */
            const char *e = fajit_errmsg(ctx), *colon = strstr(e, ": ");
            snprintf(msg, sizeof msg, "%s", strncmp(e, "FAJIT_", 6) == 0 && colon ? colon + 2 : e);
            return fj_fail(ctx, st, "validating %s on %s: %s (no verdict recorded)", f->name,
                           text, msg);
        }
        r->rep.cases++;
        progress(ctx, r, f, text, failed ? "FAIL" : "ok");
        if (failed) {
            record(ctx, f, r->fset, 0, text, why);
            if (!r->rep.failed++) {
                r->rep.first_failed = (fajit_family)f->id;
                snprintf(r->rep.failed_case, sizeof r->rep.failed_case, "%s", text);
                snprintf(r->rep.error, sizeof r->rep.error, "%s", why);
            }
        }
    }
    if (!failed)
        record(ctx, f, r->fset, 1, "", "");
    r->rep.families++;
    return FAJIT_OK;
}

/* The families fajit_validate(AUTO) checks for fset: every one above the oracle with a
 * case. */
static int validated_by_auto(const fj_family *f, const fj_target *t, unsigned fset)
{
    int idx[MAX_PER_FAMILY];
    return f->rank > FJ_RANK_ORACLE && cases_of(f, t, fset, idx) > 0;
}

void fajit_validation_report_init_sized(fajit_validation_report *r, size_t struct_size)
{
    fajit_validation_report d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    fj_struct_export(r, struct_size, &d, sizeof d);
}

void fajit_verdict_info_init_sized(fajit_verdict_info *v, size_t struct_size)
{
    fajit_verdict_info d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    fj_struct_export(v, struct_size, &d, sizeof d);
}

/* An output struct of the caller's size: its struct_size checked (check_out), then filled
 * from `full` (export_out). */
static fajit_status check_out(fajit_ctx *ctx, const char *type, const void *user,
                              size_t size_v1, size_t size)
{
    size_t n;
    memcpy(&n, user, sizeof n);
    FJ_RETURN_IF(n < size_v1 || n > 4096, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s.struct_size must be in [%zu, 4096] (this library's is %zu), got %zu: fill "
                 "it with %s_init", type, size_v1, size, n, type);
    return FAJIT_OK;
}

static void export_out(void *user, const void *full, size_t size)
{
    size_t n;
    memcpy(&n, user, sizeof n);
    fj_struct_export(user, n, full, size);
}

static fajit_status check_family_arg(fajit_ctx *ctx, fajit_family family, int auto_ok)
{
    const fj_family *f = fj_family_by_id((int)family);
    FJ_RETURN_IF(family == FAJIT_FAMILY_AUTO && !auto_ok, ctx, FAJIT_INVALID_ARGUMENT,
                 "family must name one family, got AUTO");
    FJ_RETURN_IF(family != FAJIT_FAMILY_AUTO && (!f || f->rank <= FJ_RANK_ORACLE), ctx,
                 FAJIT_INVALID_ARGUMENT, "family must be %sa kernel family other than the "
                 "reference kernel (the oracle), got %d", auto_ok ? "AUTO or " : "",
                 (int)family);
    return FAJIT_OK;
}

/* Validates `only` (NULL: every family AUTO takes) for r->fset under r->flags. */
static fajit_status validate_all(fajit_ctx *ctx, const fj_family *only, vrun *r)
{
    const fj_target t = fj_target_of(ctx, NULL);
    int idx[MAX_PER_FAMILY];
    for (int i = 0; i < fj_family_count(); i++) {
        const fj_family *f = fj_family_at(i);
        if (only ? f == only : validated_by_auto(f, &t, r->fset))
            r->total += cases_of(f, &t, r->fset, idx);
    }
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    fajit_status st = FAJIT_OK;
    for (int i = 0; i < fj_family_count() && st == FAJIT_OK; i++) {
        const fj_family *f = fj_family_at(i);
        if (only ? f == only : validated_by_auto(f, &t, r->fset))
            st = validate_family(ctx, f, r);
    }
    return st;
}

/* The feature set a caller's struct asks for: its features and kv_dtype (at *features and
 * *kv) where its struct_size, the first field, reaches past kv_dtype (`end`); else none. */
static fajit_status out_set(fajit_ctx *ctx, const char *what, const void *out, size_t end,
                            const unsigned *features, const fajit_kv_dtype *kv, unsigned *fset)
{
    size_t n;
    *fset = 0;
    memcpy(&n, out, sizeof n);
    if (n < end)
        return FAJIT_OK;
    FJ_RETURN_IF(fset_of(*features, *kv, fset) != 0, ctx, FAJIT_INVALID_ARGUMENT,
                 "%s.features must be FAJIT_FEATURE_* bits, with FAJIT_FEATURE_KV_FP8 exactly "
                 "when kv_dtype is FP8; got features 0x%x, kv_dtype %d", what, *features,
                 (int)*kv);
    return FAJIT_OK;
}

/* fajit_validate's feature set: out's (none without out), one the gate can run. */
static fajit_status asked_set(fajit_ctx *ctx, const fajit_validation_report *out,
                              unsigned *fset)
{
    *fset = 0;
    if (!out)
        return FAJIT_OK;
    FJ_CHECK(out_set(ctx, "fajit_validation_report", out,
                     offsetof(fajit_validation_report, kv_dtype) + sizeof out->kv_dtype,
                     &out->features, &out->kv_dtype, fset));
    return FAJIT_OK;
}

fajit_status fajit_validate(fajit_ctx *ctx, fajit_family family, fajit_validation_report *out)
{
    FJ_CTX_CHECK(ctx);
    FJ_CHECK(check_family_arg(ctx, family, 1));
    if (out)
        FJ_CHECK(check_out(ctx, "fajit_validation_report", out, FAJIT_VALIDATION_REPORT_SIZE_V1,
                           sizeof *out));
    vrun r;
    memset(&r, 0, sizeof r);
    FJ_CHECK(asked_set(ctx, out, &r.fset));
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "validation runs kernels: the context has "
                 "no device (FAJIT_DEVICE_NONE or no driver)");
    const fj_family *only = fj_family_by_id((int)family);
    const fj_target t = fj_target_of(ctx, NULL);
    int idx[MAX_PER_FAMILY];
    char set[80];
    FJ_RETURN_IF(only && cases_of(only, &t, r.fset, idx) == 0, ctx, FAJIT_UNSUPPORTED,
                 "family %s serves none of the validation problems on %s%s", only->name,
                 ctx->arch, for_set(r.fset, set, sizeof set));
    char err[64];
    CUresult cr = ctx->cu->cuCtxSetCurrent(ctx->cuctx);
    FJ_RETURN_IF(cr, ctx, FAJIT_CUDA_ERROR, "cuCtxSetCurrent: %s",
                 fj_cuda_errname(ctx->cu, cr, err, sizeof err));
    pthread_mutex_lock(&ctx->validate_lock);
    fajit_status st = validate_all(ctx, only, &r);
    pthread_mutex_unlock(&ctx->validate_lock);
    if (st == FAJIT_OK && r.rep.failed)
        st = fj_fail(ctx, FAJIT_VALIDATION_FAILED, "%d of %d families failed validation%s on "
                     "%s (%s); first: %s at %s: %s", r.rep.failed, r.rep.families,
                     for_set(r.fset, set, sizeof set), ctx->gpu_name, ctx->arch,
                     fajit_family_name(r.rep.first_failed), r.rep.failed_case, r.rep.error);
    r.rep.struct_size = sizeof r.rep;
    r.rep.features = r.fset & FJ_FEAT_ALL;
    r.rep.kv_dtype = (fajit_kv_dtype)(r.fset >> FJ_FSET_KV_SHIFT);
    if (out)
        export_out(out, &r.rep, sizeof r.rep);
    return st;
}

void fj_validate_first_use(fajit_ctx *ctx, const fj_family *f, unsigned fset, void *stream)
{
    const fj_target t = fj_target_of(ctx, NULL);
    int idx[MAX_PER_FAMILY], capturing = 0;
    char set[80];
    if (!ctx->cu || f->rank <= FJ_RANK_ORACLE || cases_of(f, &t, fset, idx) == 0)
        return;
    pthread_mutex_lock(&ctx->verdict_lock);
    fj_verdict_slot *s = slot_of(ctx, f, fset);
    int todo = s && s->state == FJ_VS_NONE && !s->lazy_tried;
    if (todo)
        s->lazy_tried = 1;
    pthread_mutex_unlock(&ctx->verdict_lock);
    if (!todo)
        return;
    for_set(fset, set, sizeof set);
    /* Validation synchronizes the context and allocates: never inside a capture. */
    if (ctx->cu->cuStreamIsCapturing &&
        ctx->cu->cuStreamIsCapturing((CUstream)stream, &capturing) != 0)
        capturing = 0;
    if (capturing) {
        fj_log(ctx, FAJIT_LOG_WARN, "validation: %s has no verdict%s on this GPU class and the "
               "stream is being captured into a CUDA graph: it dispatches unvalidated "
               "(validate before capturing: fajit_validate, fajit-tune validate)", f->name, set);
        return;
    }
    vrun r;
    memset(&r, 0, sizeof r);
    r.fset = fset;
    r.flags = ctx->opts.policy == FAJIT_POLICY_BLOCKING ? FJ_KF_SERVING : FJ_KF_NO_COMPILE;
    fj_log(ctx, FAJIT_LOG_INFO, "validation: %s%s on first use (FAJIT_VALIDATE=lazy)", f->name,
           set);
    pthread_mutex_lock(&ctx->validate_lock);
    fajit_status st = validate_all(ctx, f, &r);
    pthread_mutex_unlock(&ctx->validate_lock);
    if (st != FAJIT_OK)
        fj_log(ctx, FAJIT_LOG_WARN, "validation: %s could not be validated%s (%s); it "
               "dispatches unvalidated", f->name, set, fajit_errmsg(ctx));
}

/*------ reading verdicts ------*/

static void info_of(const fj_verdict *v, int found, fajit_verdict_info *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    int id = fj_family_parse(v->family);
    o->family = id > 0 ? (fajit_family)id : FAJIT_FAMILY_AUTO;
    snprintf(o->family_name, sizeof o->family_name, "%s", v->family);
    o->verdict = !found ? FAJIT_VERDICT_NONE : v->pass ? FAJIT_VERDICT_PASS : FAJIT_VERDICT_FAIL;
    snprintf(o->failed_case, sizeof o->failed_case, "%s", v->failed_case);
    snprintf(o->error, sizeof o->error, "%s", v->error);
    o->created = found ? v->created : 0;
    snprintf(o->gpu_name, sizeof o->gpu_name, "%s", v->gpu_name);
    snprintf(o->arch, sizeof o->arch, "%s", v->arch);
    o->sm_count = v->sm_count;
    o->driver_version = v->driver_version;
    snprintf(o->fajit_version, sizeof o->fajit_version, "%s", v->fajit_version);
    unsigned fset = 0;
    if (fj_feature_set_parse(v->features, &fset) == 0) {
        o->features = fset & FJ_FEAT_ALL;
        o->kv_dtype = (fajit_kv_dtype)(fset >> FJ_FSET_KV_SHIFT);
    }
    snprintf(o->features_name, sizeof o->features_name, "%s", v->features);
}

fajit_status fajit_family_verdict(fajit_ctx *ctx, fajit_family family, fajit_verdict_info *out)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!out, ctx, FAJIT_INVALID_ARGUMENT, "out must not be NULL");
    FJ_CHECK(check_family_arg(ctx, family, 0));
    FJ_CHECK(check_out(ctx, "fajit_verdict_info", out, FAJIT_VERDICT_INFO_SIZE_V1, sizeof *out));
    FJ_RETURN_IF(!ctx->cu, ctx, FAJIT_NO_DEVICE, "the context has no device: no GPU class "
                 "(fajit_verdict_list lists every class's verdicts)");
    unsigned fset;
    FJ_CHECK(out_set(ctx, "fajit_verdict_info", out,
                     offsetof(fajit_verdict_info, kv_dtype) + sizeof out->kv_dtype,
                     &out->features, &out->kv_dtype, &fset));
    const fj_family *f = fj_family_by_id((int)family);
    fj_verdict v;
    verdict_key(ctx, f, fset, &v);
    int state = fj_verdict_state(ctx, f, fset, &v);
    if (state == FJ_VS_NONE)
        verdict_key(ctx, f, fset, &v);
    fajit_verdict_info info;
    info_of(&v, state != FJ_VS_NONE, &info);
    info.family = family;
    export_out(out, &info, sizeof info);
    return FAJIT_OK;
}

typedef struct list_ctx { fajit_verdict_fn fn; void *user; } list_ctx;

static int list_one(void *user, const fj_verdict *v)
{
    list_ctx *l = user;
    fajit_verdict_info info;
    info_of(v, 1, &info);
    return l->fn(l->user, &info);
}

fajit_status fajit_verdict_list(fajit_ctx *ctx, fajit_verdict_fn fn, void *user)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!fn, ctx, FAJIT_INVALID_ARGUMENT, "fn must not be NULL");
    list_ctx l = {fn, user};
    FJ_RETURN_IF(fj_cache_verdict_list(ctx->cache, NULL, list_one, &l) != 0, ctx,
                 FAJIT_CACHE_ERROR, "listing the verdicts failed (see the log)");
    return FAJIT_OK;
}

/*------ verify the verdicts ------*/

typedef struct vcheck {
    fajit_bad_verdict_fn fn;
    void *user;
    int64_t now;
} vcheck;

/* Why verdict row `v` is malformed, or NULL: a family this library does not have (or the
 * reference kernel's, which is never validated), a target it does not know, a feature set
 * it does not name, a status other
 * than the integer 0 (fail) or 1 (pass), a time in the future or before 1970. */
static const char *verdict_flaw(const fj_verdict *v, int status_ok, int64_t now)
{
    int known = 0;
    for (int i = 0; i < fj_family_count() && !known; i++)
        known = strcmp(fj_family_at(i)->name, v->family) == 0
                && fj_family_at(i)->rank > FJ_RANK_ORACLE;
    if (!known)
        return "no family of this fajit has that name";
    if (fj_arch_sm(v->arch) < 0)
        return "its arch is no target (sm_80, sm_90a, ...)";
    unsigned fset;
    if (fj_feature_set_parse(v->features, &fset) != 0)
        return "its feature set is none this fajit names (softcap,sinks,alibi,head_dim_v,"
               "kv_e4m3 or kv_e5m2, in that order)";
    if (!status_ok)
        return "its status is neither pass (1) nor fail (0)";
    if (v->created > now)
        return "it is dated in the future";
    if (v->created < 0)
        return "it is dated before 1970";
    return NULL;
}

static int check_one(void *user, const fj_verdict *v, int status_ok)
{
    vcheck *vc = user;
    const char *why = verdict_flaw(v, status_ok, vc->now);
    if (why && vc->fn) {
        fajit_verdict_info o;
        info_of(v, 1, &o);
        vc->fn(vc->user, &o, why);
    }
    return why != NULL;
}

fajit_status fajit_cache_verify_verdicts(fajit_ctx *ctx, fajit_bad_verdict_fn on_bad,
                                         void *user, int *n_checked, int *n_bad)
{
    FJ_CTX_CHECK(ctx);
    FJ_RETURN_IF(!ctx, ctx, FAJIT_INVALID_ARGUMENT, "ctx must not be NULL");
    vcheck vc = {on_bad, user, (int64_t)time(NULL)};
    int checked = 0, bad = 0;
    FJ_RETURN_IF(fj_cache_verdict_check(ctx->cache, check_one, &vc, &checked, &bad) != 0, ctx,
                 FAJIT_CACHE_ERROR, "checking the verdicts of the cache failed");
    if (n_checked)
        *n_checked = checked;
    if (n_bad)
        *n_bad = bad;
    return FAJIT_OK;
}
