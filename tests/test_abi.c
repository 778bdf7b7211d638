/* test_abi.c - the binary interface, in the `unit` suite: structs that grow (a caller built
 * against the first sized layouts of tests/abi_v1.h, or against a newer header), and
 * context pointers that are not live contexts (destroyed, garbage, NULL). */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi_v1.h"
#include "unit_util.h"

TCase *fj_tcase_abi(void);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/*------ structs that grow ------*/

_Static_assert(sizeof(abi_v1_attn_desc) == FAJIT_ATTN_DESC_SIZE_V1, "desc v1 size");
_Static_assert(sizeof(abi_v1_ctx_opts) == FAJIT_CTX_OPTS_SIZE_V1, "opts v1 size");
_Static_assert(sizeof(abi_v1_tune_opts) == FAJIT_TUNE_OPTS_SIZE_V1, "tune opts v1 size");
_Static_assert(offsetof(fajit_attn_desc, op) == sizeof(abi_v1_attn_desc), "appended");
_Static_assert(offsetof(abi_v1_attn_desc, lse) == offsetof(fajit_attn_desc, lse), "lse");
_Static_assert(offsetof(abi_v1_attn_desc, softmax_scale) ==
                   offsetof(fajit_attn_desc, softmax_scale), "scale");
_Static_assert(offsetof(abi_v1_ctx_opts, family) == offsetof(fajit_ctx_opts, family), "fam");
/* The verdict structs grew by the feature set: the first sized layouts are their prefix. */
_Static_assert(sizeof(abi_v1_verdict_info) == FAJIT_VERDICT_INFO_SIZE_V1, "verdict v1 size");
_Static_assert(offsetof(fajit_verdict_info, features) == FAJIT_VERDICT_INFO_SIZE_V1,
               "appended");
_Static_assert(offsetof(abi_v1_verdict_info, created) == offsetof(fajit_verdict_info, created),
               "created");
_Static_assert(offsetof(abi_v1_verdict_info, fajit_version) ==
                   offsetof(fajit_verdict_info, fajit_version), "fajit_version");
_Static_assert(offsetof(fajit_validation_report, features) >= FAJIT_VALIDATION_REPORT_SIZE_V1,
               "appended");
_Static_assert(offsetof(abi_v1_validation_report, error) ==
                   offsetof(fajit_validation_report, error), "error");
/* num_splits_max, appended after num_splits: where the struct had its tail padding. */
_Static_assert(offsetof(fajit_attn_desc, num_splits_max) ==
                   offsetof(fajit_attn_desc, num_splits) + sizeof(int), "appended last");
_Static_assert(sizeof(fajit_attn_desc) >= offsetof(fajit_attn_desc, num_splits_max) + sizeof(int),
               "inside the struct");

/* A descriptor of `size` bytes in a heap block of exactly that size (ASan sees any read
 * past it), filled as a caller's fajit_attn_desc_init does: with its own size. */
static fajit_attn_desc *desc_of_size(size_t size)
{
    fajit_attn_desc *d = malloc(size);
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init_sized(d, size, p, p, p, p, 2, 8, 2, 100, 130, 64, FAJIT_BF16);
    ck_assert_uint_eq(d->struct_size, size);
    return d;
}

/* The answers of check, describe (two targets), explain and fwd for a descriptor. */
typedef struct answers {
    fajit_status check, d90, d80, explain, fwd;
    char msg[512], s90[512], s80[512];
} answers;

static void ask(fajit_ctx *ctx, const fajit_attn_desc *d, answers *a)
{
    char buf[4096];
    a->check = fajit_attn_check(ctx, d);
    snprintf(a->msg, sizeof a->msg, "%s", fajit_errmsg(ctx));
    a->d90 = fajit_dispatch_describe(ctx, "sm_90a", d, a->s90, sizeof a->s90);
    a->d80 = fajit_dispatch_describe(ctx, "sm_80", d, a->s80, sizeof a->s80);
    a->explain = fajit_cache_explain(ctx, "sm_90a", d, buf, sizeof buf);
    a->fwd = fajit_attn_fwd(ctx, d, NULL);
}

static void same_answers(const answers *a, const answers *b)
{
    ck_assert_int_eq(a->check, b->check);
    if (a->check != FAJIT_OK)   /* (after a success the message is an older one's) */
        ck_assert_str_eq(a->msg, b->msg);
    ck_assert_int_eq(a->d90, b->d90);
    ck_assert_int_eq(a->d80, b->d80);
    if (a->d90 == FAJIT_OK)
        ck_assert_str_eq(a->s90, b->s90);
    if (a->d80 == FAJIT_OK)
        ck_assert_str_eq(a->s80, b->s80);
    ck_assert_int_eq(a->explain, b->explain);
    ck_assert_int_eq(a->fwd, b->fwd);
}

/* A caller built against the first sized header: its shorter struct, in a block of
 * exactly its size, gets the answers the full struct gets, good and bad. */
START_TEST(desc_older_caller)
{
    fajit_ctx *ctx = unit_memory_ctx();
    for (int variant = 0; variant < 4; variant++) {
        abi_v1_attn_desc *old = (abi_v1_attn_desc *)desc_of_size(sizeof *old);
        fajit_attn_desc *full = desc_of_size(sizeof *full);
        ck_assert_uint_eq(full->op, FAJIT_OP_FWD);
        ck_assert_ptr_null(full->workspace);
        ck_assert_int_eq(memcmp(old, full, sizeof *old) != 0, 1);   /* (struct_size differs) */
        ck_assert_int_eq(memcmp((char *)old + sizeof(size_t), (char *)full + sizeof(size_t),
                                sizeof *old - sizeof(size_t)), 0);
        switch (variant) {
        case 1: old->mask = full->mask = FAJIT_MASK_CAUSAL; old->seqlen_q = full->seqlen_q = 8192;
                break;
        case 2: old->head_dim = full->head_dim = 100; break;          /* UNSUPPORTED */
        case 3: old->lse = full->lse = (float *)(uintptr_t)0x2002; break;   /* misaligned */
        }
        answers a, b;
        ask(ctx, (const fajit_attn_desc *)old, &a);
        ask(ctx, full, &b);
        same_answers(&a, &b);
        if (variant < 2) {
            ck_assert_int_eq(a.check, FAJIT_OK);
            ck_assert_int_eq(a.d90, FAJIT_OK);
            ck_assert_int_eq(a.d80, FAJIT_OK);
            ck_assert_ptr_nonnull(strstr(a.s90, "fa3"));
            ck_assert_ptr_nonnull(strstr(a.s80, "fa2"));
            ck_assert_int_eq(a.fwd, FAJIT_NO_DEVICE);   /* validated, then: no device */
        } else {
            ck_assert_int_ne(a.check, FAJIT_OK);
        }
        free(old);
        free(full);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(desc_too_small)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    const size_t sizes[] = {0, 8, FAJIT_ATTN_DESC_SIZE_V1 - 8};
    char want[256];
    for (int i = 0; i < 3; i++) {
        d.struct_size = sizes[i];
        ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
        snprintf(want, sizeof want,
                 "fajit_attn_desc.struct_size must be at least %zu (the first sized "
                 "fajit_attn_desc; this library's is %zu), got %zu: fill it with "
                 "fajit_attn_desc_init", (size_t)FAJIT_ATTN_DESC_SIZE_V1, sizeof d, sizes[i]);
        ck_assert_msg(strstr(fajit_errmsg(ctx), want), "'%s'", fajit_errmsg(ctx));
        char buf[256];
        ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_90a", &d, buf, sizeof buf),
                         FAJIT_INVALID_ARGUMENT);
        ck_assert_int_eq(fajit_attn_fwd(ctx, &d, NULL), FAJIT_INVALID_ARGUMENT);
    }
    d.struct_size = (size_t)1 << 40;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "must be at most 4096"));
    fajit_ctx_destroy(ctx);
}
END_TEST

/* A caller built against a newer header: a larger struct is taken when the bytes this
 * library does not know are zero, refused (naming the byte) when one is not. */
START_TEST(desc_newer_caller)
{
    fajit_ctx *ctx = unit_memory_ctx();
    const size_t big = sizeof(fajit_attn_desc) + 40;
    fajit_attn_desc *d = desc_of_size(big), *full = desc_of_size(sizeof *full);
    for (size_t i = sizeof *full; i < big; i++)
        ck_assert_uint_eq(((unsigned char *)d)[i], 0);   /* init zeroed the newer fields */
    answers a, b;
    ask(ctx, d, &a);
    ask(ctx, full, &b);
    same_answers(&a, &b);
    ck_assert_int_eq(a.check, FAJIT_OK);
    const size_t at = sizeof *full + 13;
    ((unsigned char *)d)[at] = 1;
    ck_assert_int_eq(fajit_attn_check(ctx, d), FAJIT_INVALID_ARGUMENT);
    char want[256];
    snprintf(want, sizeof want, "fajit_attn_desc.struct_size is %zu, larger than this "
             "library's %zu, and byte %zu is not zero", big, sizeof *full, at);
    ck_assert_msg(strstr(fajit_errmsg(ctx), want), "'%s'", fajit_errmsg(ctx));
    char buf[256];
    ck_assert_int_eq(fajit_dispatch_describe(ctx, "sm_80", d, buf, sizeof buf),
                     FAJIT_INVALID_ARGUMENT);
    ck_assert_int_eq(fajit_attn_fwd(ctx, d, NULL), FAJIT_INVALID_ARGUMENT);
    free(d);
    free(full);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(desc_appended_fields)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    d.op = (fajit_op)7;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "op must be FAJIT_OP_FWD (0), got 7"));
    d.op = FAJIT_OP_FWD;
    d.workspace = (void *)(uintptr_t)0x40000;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "workspace and workspace_bytes must be "
                                                    "given together"));
    d.workspace = NULL, d.workspace_bytes = 4096;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "workspace_bytes 4096"));
    d.workspace = (void *)(uintptr_t)0x40080;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "workspace must be 256-byte aligned, got 0x40080"));
    d.workspace = (void *)(uintptr_t)0x40100;
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The split bound, the field appended last: fajit_attn_desc_init leaves it 0 (no bound) in
 * a struct of any size; a caller whose struct ends before it (the first sized layout, or one
 * built before the bound) gets 0 without a byte past its struct read (an exact heap block);
 * a bound given is the bound checked and used. */
START_TEST(desc_split_bound)
{
    fajit_ctx *ctx = unit_memory_ctx();
    const size_t sizes[] = {FAJIT_ATTN_DESC_SIZE_V1, offsetof(fajit_attn_desc, num_splits_max),
                            sizeof(fajit_attn_desc)};
    for (int i = 0; i < 3; i++) {
        fajit_attn_desc *d = desc_of_size(sizes[i]), local;
        ck_assert_int_eq(fj_desc_import(ctx, d, &local), FAJIT_OK);
        ck_assert_int_eq(local.num_splits_max, 0);
        ck_assert_int_eq(local.num_splits, 0);
        ck_assert_uint_eq(local.struct_size, sizeof local);
        if (sizes[i] == sizeof local) {
            ck_assert_int_eq(d->num_splits_max, 0);
            d->num_splits_max = 5;
            ck_assert_int_eq(fj_desc_import(ctx, d, &local), FAJIT_OK);
            ck_assert_int_eq(local.num_splits_max, 5);
            d->num_splits = 6;
            ck_assert_int_eq(fajit_attn_check(ctx, d), FAJIT_INVALID_ARGUMENT);
            ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "num_splits (6, a forced count) "
                                         "must be at most num_splits_max (5, the bound)"));
        }
        free(d);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

static fajit_status create_with(void *opts, fajit_ctx **ctx)
{
    return fajit_ctx_create(ctx, (const fajit_ctx_opts *)opts);
}

START_TEST(ctx_opts_sizes)
{
    fajit_ctx *ctx = NULL;
    /* The first sized layout, in a block of exactly its size. */
    abi_v1_ctx_opts *old = malloc(sizeof *old);
    fajit_ctx_opts_init_sized((fajit_ctx_opts *)old, sizeof *old);
    ck_assert_uint_eq(old->struct_size, sizeof *old);
    ck_assert_int_eq(old->log_level, FAJIT_LOG_WARN);
    old->device = FAJIT_DEVICE_NONE;
    old->cache_dir = "";
    old->family = FAJIT_FAMILY_FA2;
    ck_assert_int_eq(create_with(old, &ctx), FAJIT_OK);
    ck_assert_int_eq(ctx->opts.family, FAJIT_FAMILY_FA2);
    ck_assert_uint_eq(ctx->opts.struct_size, sizeof(fajit_ctx_opts));
    fajit_ctx_destroy(ctx);
    /* Too small. */
    old->struct_size = FAJIT_CTX_OPTS_SIZE_V1 - 4;
    ck_assert_int_eq(create_with(old, &ctx), FAJIT_INVALID_ARGUMENT);
    char want[256];
    snprintf(want, sizeof want, "fajit_ctx_opts.struct_size must be at least %zu (the first "
             "sized fajit_ctx_opts; this library's is %zu), got %zu",
             (size_t)FAJIT_CTX_OPTS_SIZE_V1, sizeof(fajit_ctx_opts),
             (size_t)FAJIT_CTX_OPTS_SIZE_V1 - 4);
    ck_assert_msg(strstr(fajit_errmsg(ctx), want), "'%s'", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    free(old);
    /* Larger, zero tail: taken; a nonzero byte past this library's size: refused. */
    const size_t big = sizeof(fajit_ctx_opts) + 24;
    fajit_ctx_opts *o = malloc(big);
    fajit_ctx_opts_init_sized(o, big);
    o->device = FAJIT_DEVICE_NONE;
    o->cache_dir = "";
    ck_assert_int_eq(create_with(o, &ctx), FAJIT_OK);
    fajit_ctx_destroy(ctx);
    ((unsigned char *)o)[big - 1] = 0x80;
    ck_assert_int_eq(create_with(o, &ctx), FAJIT_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "and byte %zu is not zero", big - 1);
    ck_assert_msg(strstr(fajit_errmsg(ctx), want), "'%s'", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    free(o);
}
END_TEST

START_TEST(tune_opts_sizes)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_attn_desc d = unit_desc();
    fajit_tune_result r;
    abi_v1_tune_opts *old = malloc(sizeof *old);
    fajit_tune_opts_init_sized((fajit_tune_opts *)old, sizeof *old);
    ck_assert_int_eq(old->reps, 20);
    /* Accepted (the context has no device, so tuning then stops there). */
    ck_assert_int_eq(fajit_tune(ctx, &d, (fajit_tune_opts *)old, &r), FAJIT_NO_DEVICE);
    ck_assert_int_eq(fajit_tune_spec(ctx, "llama-3-8b", (fajit_tune_opts *)old, NULL, NULL),
                     FAJIT_NO_DEVICE);
    ck_assert_int_eq(fajit_tune(ctx, &d, NULL, &r), FAJIT_NO_DEVICE);
    old->struct_size = 16;
    ck_assert_int_eq(fajit_tune(ctx, &d, (fajit_tune_opts *)old, &r), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "fajit_tune_opts.struct_size must be at least"));
    ck_assert_int_eq(fajit_tune_spec(ctx, "llama-3-8b", (fajit_tune_opts *)old, NULL, NULL),
                     FAJIT_INVALID_ARGUMENT);
    free(old);
    const size_t big = sizeof(fajit_tune_opts) + 8;
    fajit_tune_opts *o = malloc(big);
    fajit_tune_opts_init_sized(o, big);
    ck_assert_int_eq(fajit_tune(ctx, &d, o, &r), FAJIT_NO_DEVICE);
    ((unsigned char *)o)[sizeof(fajit_tune_opts)] = 1;
    ck_assert_int_eq(fajit_tune(ctx, &d, o, &r), FAJIT_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(fajit_errmsg(ctx), "is not zero"));
    free(o);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The init functions take NULL (they used to write through it). */
START_TEST(init_null)
{
    fajit_ctx_opts_init(NULL);
    fajit_attn_desc_init(NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 1, 1, 64, FAJIT_F16);
    fajit_tune_opts_init(NULL);
    fajit_ctx_opts_init_sized(NULL, sizeof(fajit_ctx_opts));
    fajit_attn_desc_init_sized(NULL, sizeof(fajit_attn_desc), NULL, NULL, NULL, NULL, 1, 1, 1,
                               1, 1, 64, FAJIT_F16);
    fajit_tune_opts_init_sized(NULL, sizeof(fajit_tune_opts));
    /* A size too small to hold struct_size writes nothing. */
    unsigned char four[4] = {7, 7, 7, 7};
    fajit_ctx_opts_init_sized((fajit_ctx_opts *)(void *)four, sizeof four);
    ck_assert_int_eq(four[0] + four[1] + four[2] + four[3], 28);
}
END_TEST

/*------ small contracts ------*/

START_TEST(counters_null)
{
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_counters_get(ctx, NULL);   /* wrote through NULL before */
    fajit_counters_get(NULL, NULL);
    fajit_ctx_destroy(ctx);
}
END_TEST

/* NVRTC is loaded once per process: these run only in Check's forked test processes. */
static int forked(void) { return !getenv("CK_FORK") || strcmp(getenv("CK_FORK"), "no") != 0; }

/* An explicit FAJIT_NVRTC_PATH that does not load is FAJIT_NO_NVRTC with the path and
 * the loader's reason, never a silent fall back to the default NVRTC. */
START_TEST(nvrtc_path_not_a_library)
{
    if (!forked())
        return;
    char path[] = "/tmp/fajit-abi-nvrtc-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "not a shared object\n", 20), 20);
    close(fd);
    ck_assert_ptr_null(dlopen(path, RTLD_NOW | RTLD_LOCAL));
    char want[1024], why[1024] = "";
    snprintf(want, sizeof want, "FAJIT_NVRTC_PATH=%s could not be loaded: %s", path, dlerror());
    setenv("FAJIT_NVRTC_PATH", path, 1);
    ck_assert_ptr_null(fj_nvrtc_get(why, sizeof why));
    ck_assert_msg(strstr(why, want), "'%s' lacks '%s'", why, want);
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_sysinfo si;
    ck_assert_int_eq(fajit_sysinfo_get(ctx, &si), FAJIT_OK);
    ck_assert_int_eq(si.nvrtc_loaded, 0);
    int compiled = -1, cached = -1;
    ck_assert_int_eq(fajit_warm(ctx, "sm_80", 1, &compiled, &cached), FAJIT_NO_NVRTC);
    ck_assert_msg(strstr(fajit_errmsg(ctx), path), "'%s'", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    unsetenv("FAJIT_NVRTC_PATH");
    unlink(path);
}
END_TEST

START_TEST(nvrtc_path_not_nvrtc)
{
    if (!forked())
        return;
    char why[1024] = "";
    setenv("FAJIT_NVRTC_PATH", "libm.so.6", 1);   /* loads, but is no NVRTC */
    ck_assert_ptr_null(fj_nvrtc_get(why, sizeof why));
    ck_assert_msg(strstr(why, "FAJIT_NVRTC_PATH=libm.so.6 is not NVRTC: it lacks nvrtc"), "'%s'",
                  why);
    unsetenv("FAJIT_NVRTC_PATH");
}
END_TEST

START_TEST(family_names)
{
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_AUTO), "auto");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_REF), "ref");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA2), "fa2");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA3), "fa3");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_DECODE), "decode");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_FA4), "fa4");
    ck_assert_str_eq(fajit_family_name(FAJIT_FAMILY_MIXED), "mixed");
    ck_assert_ptr_null(fajit_family_name((fajit_family)7));
    /* the never-run Blackwell family says so; the others have nothing to say */
    ck_assert_ptr_nonnull(strstr(fajit_family_status_note(FAJIT_FAMILY_FA4), "not run on hardware"));
    ck_assert_ptr_null(fajit_family_status_note(FAJIT_FAMILY_FA3));
    ck_assert_ptr_null(fajit_family_status_note(FAJIT_FAMILY_AUTO));
    ck_assert_ptr_null(fajit_family_status_note((fajit_family)7));
    ck_assert_ptr_null(fajit_family_name((fajit_family)-1));
}
END_TEST

/* REF is a family name, not a dispatch choice: refused with the reason, by option and by
 * FAJIT_FAMILY; the others are taken as before. */
START_TEST(family_ref_refused)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    o.family = FAJIT_FAMILY_REF;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "(auto, fa2, fa3, decode, fa4, mixed), got 1 (REF: the reference "
                                            "kernel is not a dispatch choice"), "'%s'",
                  fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    o.family = FAJIT_FAMILY_AUTO;
    setenv("FAJIT_FAMILY", "ref", 1);
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fajit_errmsg(ctx), "FAJIT_FAMILY must be auto, fa2, fa3, decode, fa4, mixed, got 'ref': "
                                            "the reference kernel is not a dispatch choice"),
                  "'%s'", fajit_errmsg(ctx));
    fajit_ctx_destroy(ctx);
    const char *ok[] = {"auto", "fa2", "FA3"};
    const fajit_family want[] = {FAJIT_FAMILY_AUTO, FAJIT_FAMILY_FA2, FAJIT_FAMILY_FA3};
    for (int i = 0; i < 3; i++) {
        setenv("FAJIT_FAMILY", ok[i], 1);
        ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
        ck_assert_int_eq(ctx->opts.family, want[i]);
        fajit_ctx_destroy(ctx);
    }
    unsetenv("FAJIT_FAMILY");
}
END_TEST

/*------ context pointers that are not live contexts ------*/

static int on_entry(void *user, const fajit_cache_entry *e)
{
    (void)user, (void)e;
    return 0;
}

/* Every public entry point taking a context refuses `c` without reading through it. */
static void all_refuse(fajit_ctx *c)
{
    const fajit_status bad = FAJIT_INVALID_ARGUMENT;
    fajit_attn_desc d = unit_desc();
    char buf[256];
    int a = 0, b = 0;
    int64_t x = 0, y = 0, z = 0;
    fajit_sysinfo si;
    fajit_device_info di;
    fajit_tune_opts to;
    fajit_tune_result tr;
    fajit_tune_opts_init(&to);
    if (c)   /* (NULL is a valid "no context" here) */
        ck_assert_int_eq(fajit_attn_check(c, &d), bad);
    ck_assert_int_eq(fajit_attn_fwd(c, &d, NULL), bad);
    ck_assert_int_eq(fajit_attn_fwd_reference(c, &d, NULL), bad);
    ck_assert_int_eq(fajit_dispatch_describe(c, "sm_90a", &d, buf, sizeof buf), bad);
    ck_assert_int_eq(fajit_cache_explain(c, "sm_90a", &d, buf, sizeof buf), bad);
    ck_assert_int_eq(fajit_warm(c, "sm_80", 1, &a, &b), bad);
    ck_assert_int_eq(fajit_warm_spec(c, "llama-3-8b", "sm_80", 1, &a, &b), bad);
    ck_assert_int_eq(fajit_tune(c, &d, &to, &tr), bad);
    ck_assert_int_eq(fajit_tune_spec(c, "llama-3-8b", &to, NULL, NULL), bad);
    ck_assert_int_eq(fajit_bench_spec(c, "llama-3-8b", 5, NULL, NULL), bad);
    ck_assert_int_eq(fajit_sysinfo_get(c, &si), bad);
    if (c)   /* device_info_get takes NULL: no context */
        ck_assert_int_eq(fajit_device_info_get(c, 0, &di), bad);
    ck_assert_int_eq(fajit_cache_list(c, on_entry, NULL), bad);
    ck_assert_int_eq(fajit_cache_verify(c, &a, &b), bad);
    ck_assert_int_eq(fajit_cache_verify_recompile(c, on_entry, NULL, &a, &b, &a), bad);
    ck_assert_int_eq(fajit_cache_clear(c), bad);
    ck_assert_int_eq(fajit_cache_stats(c, &x, &y, &z), bad);
    ck_assert_int_eq(fajit_cache_prune(c, 0, &x, &y), bad);
    ck_assert_int_eq(fajit_cache_export(c, "/tmp/fajit-abi-never.db", NULL, &a, &b), bad);
    ck_assert_int_eq(fajit_cache_import(c, "/tmp/fajit-abi-never.db", &a, &b, &a), bad);
    ck_assert_uint_eq(fajit_hits_other_nvrtc(c), 0);
    fajit_counters k;
    memset(&k, 0xff, sizeof k);
    fajit_counters_get(c, &k);
    ck_assert_uint_eq(k.calls, 0);
    ck_assert_uint_eq(k.fallback_launches, 0);
    if (c) {
        ck_assert_ptr_nonnull(strstr(fajit_errmsg(c), "not a live fajit context"));
        ck_assert_ptr_nonnull(strstr(fajit_compile_log(c), "not a live fajit context"));
    } else {
        ck_assert_str_eq(fajit_errmsg(c), "no context");
        ck_assert_str_eq(fajit_compile_log(c), "");
    }
    fajit_ctx_destroy(c);   /* a no-op */
}

START_TEST(ctx_destroyed)
{
    fajit_ctx *ctx = unit_memory_ctx();
    ck_assert(fj_ctx_live(ctx));
    fajit_attn_desc d = unit_desc();
    ck_assert_int_eq(fajit_attn_check(ctx, &d), FAJIT_OK);
    fajit_ctx_destroy(ctx);
    /* No context is created from here on, so no new one can take the freed address. */
    ck_assert(!fj_ctx_live(ctx));
    all_refuse(ctx);
    fajit_ctx_destroy(ctx);   /* a second destroy is a no-op too */
}
END_TEST

START_TEST(ctx_garbage)
{
    int on_stack[64];
    memset(on_stack, 0x5a, sizeof on_stack);
    fajit_ctx *g = (fajit_ctx *)(void *)on_stack;
    ck_assert(!fj_ctx_live(g));
    all_refuse(g);
    all_refuse((fajit_ctx *)(uintptr_t)1);
    all_refuse((fajit_ctx *)(uintptr_t)0xdeadbeef0ull);
    /* A live context's bytes copied elsewhere are not a context either. */
    fajit_ctx *ctx = unit_memory_ctx();
    fajit_ctx *copy = malloc(sizeof *copy);
    memcpy(copy, ctx, sizeof *copy);
    ck_assert(!fj_ctx_live(copy));
    all_refuse(copy);
    free(copy);
    fajit_ctx_destroy(ctx);
}
END_TEST

START_TEST(ctx_null)
{
    ck_assert(!fj_ctx_live(NULL));
    all_refuse(NULL);
    fajit_attn_desc d = unit_desc();
    ck_assert_int_eq(fajit_attn_check(NULL, &d), FAJIT_OK);   /* NULL: no context, checks run */
}
END_TEST

/* Many contexts created and destroyed in an interleaved order: each is live exactly
 * between its create and destroy (the registry's tombstones are reclaimed: many more
 * create/destroy cycles than it has slots). */
START_TEST(ctx_registry_churn)
{
    enum { N = 64 };
    fajit_ctx *live[N] = {0};
    unsigned seed = 12345;
    for (int round = 0; round < 6000; round++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % N);
        if (live[i]) {
            ck_assert(fj_ctx_live(live[i]));
            fajit_ctx_destroy(live[i]);
            live[i] = NULL;
        } else {
            live[i] = unit_memory_ctx();
        }
        if (round % 97 == 0)
            for (int j = 0; j < N; j++)
                if (live[j])
                    ck_assert(fj_ctx_live(live[j]));
    }
    for (int j = 0; j < N; j++)
        fajit_ctx_destroy(live[j]);
}
END_TEST

typedef struct hammer {
    fajit_ctx *ctx;
    _Atomic int stop;
    long checks, failures;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    long n = 0, bad = 0;
    while (!atomic_load(&h->stop) || n < 100000) {
        bad += !fj_ctx_live(h->ctx);
        n++;
    }
    h->checks = n, h->failures = bad;
    return NULL;
}

/* Lookups are lock-free: a live context stays live for threads checking it while other
 * contexts come and go. */
START_TEST(ctx_registry_concurrent)
{
    fajit_ctx *ctx = unit_memory_ctx();
    hammer h[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        h[i] = (hammer){.ctx = ctx};
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
    }
    for (int r = 0; r < 300; r++) {
        fajit_ctx *a = unit_memory_ctx(), *b = unit_memory_ctx();
        fajit_ctx_destroy(a);
        ck_assert(fj_ctx_live(b));
        fajit_ctx_destroy(b);
    }
    for (int i = 0; i < 3; i++)
        atomic_store(&h[i].stop, 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(h[i].failures, 0);
    }
    fajit_ctx_destroy(ctx);
}
END_TEST

/* The cost of the check on fajit_attn_fwd's path (printed; the bound only catches a lock
 * or a system call creeping in, on a loaded machine or under sanitizers). */
START_TEST(ctx_check_cost)
{
    fajit_ctx *ctx = unit_memory_ctx(), *others[16];
    for (int i = 0; i < 16; i++)
        others[i] = unit_memory_ctx();
    const long n = 10 * 1000 * 1000;
    long live = 0;
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        __asm__ volatile("" : : "r"(ctx) : "memory");
        live += fj_ctx_live(ctx);
    }
    double ns = (now_s() - t0) / (double)n * 1e9;
    ck_assert_int_eq(live, n);
    fajit_attn_desc d = unit_desc();
    const long m = 1000 * 1000;
    long fails = 0;
    t0 = now_s();
    for (long i = 0; i < m; i++)   /* (no ck_assert inside: each one writes to a pipe) */
        fails += fajit_attn_check(ctx, &d) != FAJIT_OK;
    double ns_check = (now_s() - t0) / (double)m * 1e9;
    fajit_attn_desc local;
    t0 = now_s();
    for (long i = 0; i < m; i++) {
        fails += fj_desc_import(ctx, &d, &local) != FAJIT_OK;
        __asm__ volatile("" : : "r"(&local) : "memory");
    }
    double ns_import = (now_s() - t0) / (double)m * 1e9;
    ck_assert_int_eq(fails, 0);
    printf("test_abi: fj_ctx_live %.2f ns/call (10M calls, 17 live contexts); fj_desc_import "
           "(ctx check + struct_size copy) %.1f ns/call; fajit_attn_check (import + rules) "
           "%.1f ns/call\n", ns, ns_import, ns_check);
    ck_assert_msg(ns < 500, "fj_ctx_live takes %.1f ns", ns);
    for (int i = 0; i < 16; i++)
        fajit_ctx_destroy(others[i]);
    fajit_ctx_destroy(ctx);
}
END_TEST

TCase *fj_tcase_abi(void)
{
    TCase *tc = tcase_create("abi");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, desc_older_caller);
    tcase_add_test(tc, desc_too_small);
    tcase_add_test(tc, desc_newer_caller);
    tcase_add_test(tc, desc_appended_fields);
    tcase_add_test(tc, desc_split_bound);
    tcase_add_test(tc, ctx_opts_sizes);
    tcase_add_test(tc, tune_opts_sizes);
    tcase_add_test(tc, init_null);
    tcase_add_test(tc, counters_null);
    tcase_add_test(tc, nvrtc_path_not_a_library);
    tcase_add_test(tc, nvrtc_path_not_nvrtc);
    tcase_add_test(tc, family_names);
    tcase_add_test(tc, family_ref_refused);
    tcase_add_test(tc, ctx_destroyed);
    tcase_add_test(tc, ctx_garbage);
    tcase_add_test(tc, ctx_null);
    tcase_add_test(tc, ctx_registry_churn);
    tcase_add_test(tc, ctx_registry_concurrent);
    tcase_add_test(tc, ctx_check_cost);
    return tc;
}
