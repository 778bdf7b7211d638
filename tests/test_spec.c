/* test_spec.c - unit tests of src/autotune/spec.c: the spec format (a good text, a file,
 * every error rule), the presets, shape buckets and problem signatures. No CUDA. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/autotune/spec.h"

static int parse(const char *text, fj_spec *s, char *err, size_t n)
{
    return fj_spec_parse(text, strlen(text), "spec.txt", s, err, n);
}

static void assert_shape(const fj_shape *s, int q, int k, int b)
{
    ck_assert_int_eq(s->seqlen_q, q);
    ck_assert_int_eq(s->seqlen_k, k);
    ck_assert_int_eq(s->batch, b);
}

/* ---- a good spec ------------------------------------------------------------------ */

static const char k_good[] =
    "# two problems\n"
    "[model tiny-gqa]   # a comment\n"
    "dtype = f16\n"
    "head_dim = 64\n"
    "heads_q = 16\n"
    "heads_kv = 4\n"
    "mask = none\n"
    "prefill = 128, 1k\n"
    "decode = 2k..8k\n"
    "shapes = 256:4096, 128 : 128\n"   /* the second repeats a prefill shape */
    "batch = 1, 8\n"
    "\n"
    "[ model win.x_1 ]\r\n"
    "  dtype=BF16\n"
    "mask = window\n"
    "\twindow = 4k\n"
    "head_dim = 256\n"
    "heads_q = 8\n"
    "heads_kv = 8\n"
    "prefill = 512\n"
    "op = fwd\n";

START_TEST(spec_good)
{
    fj_spec s;
    char err[256];
    ck_assert_int_eq(parse(k_good, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(s.n_problems, 2);

    const fj_problem *p = &s.problems[0];
    ck_assert_str_eq(p->name, "tiny-gqa");
    ck_assert_int_eq(p->line, 2);
    ck_assert_int_eq(p->op, FAJIT_OP_FWD);   /* the default */
    ck_assert_int_eq(p->dtype, FAJIT_F16);
    ck_assert_int_eq(p->head_dim, 64);
    ck_assert_int_eq(p->heads_q, 16);
    ck_assert_int_eq(p->heads_kv, 4);
    ck_assert_int_eq(p->mask, FAJIT_MASK_NONE);
    ck_assert_int_eq(p->window_left, -1);
    ck_assert_int_eq(p->window_right, -1);
    ck_assert_uint_eq(p->n_shapes, 12);   /* (2 prefill + 3 decode + 1 new shape) x 2 */
    assert_shape(&p->shapes[0], 128, 128, 1);
    assert_shape(&p->shapes[1], 128, 128, 8);
    assert_shape(&p->shapes[2], 1024, 1024, 1);
    assert_shape(&p->shapes[4], 1, 2048, 1);
    assert_shape(&p->shapes[7], 1, 4096, 8);
    assert_shape(&p->shapes[9], 1, 8192, 8);
    assert_shape(&p->shapes[10], 256, 4096, 1);
    assert_shape(&p->shapes[11], 256, 4096, 8);

    p = &s.problems[1];
    ck_assert_str_eq(p->name, "win.x_1");
    ck_assert_int_eq(p->line, 13);
    ck_assert_int_eq(p->op, FAJIT_OP_FWD);   /* op = fwd */
    ck_assert_int_eq(p->dtype, FAJIT_BF16);
    ck_assert_int_eq(p->mask, FAJIT_MASK_WINDOW);
    ck_assert_int_eq(p->window_left, 4096);
    ck_assert_int_eq(p->window_right, 0);
    ck_assert_uint_eq(p->n_shapes, 1);
    assert_shape(&p->shapes[0], 512, 512, 1);   /* batch defaults to 1 */
    fj_spec_free(&s);
    ck_assert_ptr_null(s.problems);
    fj_spec_free(&s);
    fj_spec_free(NULL);
}
END_TEST

START_TEST(spec_file)
{
    char path[] = "/tmp/fj_spec_test.XXXXXX", err[256], want[320];
    fj_spec s;
    static const char bad[] =
        "# line 1\n"
        "[model odd]\n"
        "dtype = bf16\n"
        "head_dim = 128\n"
        "mask = causal\n"
        "prefill = 1k\n"
        "heads_q = 30\n"
        "heads_kv = 8\n";
    int fd = mkstemp(path);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, k_good, sizeof k_good - 1), (ssize_t)(sizeof k_good - 1));
    close(fd);
    ck_assert_int_eq(fj_spec_parse_file(path, &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.n_problems, 2);
    fj_spec_free(&s);

    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    ck_assert_int_eq(fj_spec_parse_file(path, &s, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:7: heads_q (30) must be a multiple of heads_kv (8)",
             path);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(s.problems);
    ck_assert_uint_eq(s.n_problems, 0);
    unlink(path);

    ck_assert_int_eq(fj_spec_parse_file(path, &s, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: ", path);
    ck_assert_ptr_eq(strstr(err, want), err);
}
END_TEST

/* ---- every rule ------------------------------------------------------------------- */

#define OK_KEYS "dtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\nmask = causal\n"

static const struct {
    const char *text, *error;   /* error: the exact message */
} k_bad[] = {
    { "head_dim = 128\n", "spec.txt:1: head_dim is outside a [model NAME] section" },
    { "[model a]\nfoo = 1\n", "spec.txt:2: unknown key 'foo' (known: op, dtype, head_dim, "
      "heads_q, heads_kv, mask, window, batch, prefill, decode, shapes, page_size, softcap, "
      "sinks, alibi, head_dim_v, kv_dtype)" },
    { "[model a]\nsoftcap = 30\n", "spec.txt:2: softcap must be yes or no, got '30'" },
    { "[model a]\nsinks = maybe\n", "spec.txt:2: sinks must be yes or no, got 'maybe'" },
    { "[model a]\nhead_dim_v = 100\n",
      "spec.txt:2: head_dim_v must be a multiple of 8 in 8..256, got 100" },
    { "[model a]\nhead_dim_v = 264\n", "spec.txt:2: head_dim_v must be in 8..256, got 264" },
    { "[model a]\nkv_dtype = fp8\n",
      "spec.txt:2: kv_dtype must be dtype (as Q), e4m3 or e5m2, got 'fp8'" },
    { "[model a]\npage_size = 0\n", "spec.txt:2: page_size must be in 1..65536, got 0" },
    { "[model a]\npage_size = 65537\n",
      "spec.txt:2: page_size must be in 1..65536, got 65537" },
    { "[model a]\nhead_dim 128\n", "spec.txt:2: expected '[model NAME]' or 'key = value', "
      "got 'head_dim 128'" },
    { "[modl a]\n", "spec.txt:1: a section header is [model NAME], got '[modl a]'" },
    { "\n[model a\n", "spec.txt:2: a section header is [model NAME], got '[model a'" },
    { "[model a b]\n", "spec.txt:1: model names are 1..63 letters, digits, '.', '-' or '_', "
      "got 'a b'" },
    { "[model a]\n" OK_KEYS "prefill = 1k\n[model a]\n",
      "spec.txt:8: model 'a' is already defined at line 1" },
    { "[model a]\nhead_dim = 64\nhead_dim = 64\n",
      "spec.txt:3: head_dim is already set at line 2" },
    { "[model a]\nop = bwd\n", "spec.txt:2: op must be one of fwd, got 'bwd'" },
    { "[model a]\n\nop = FWD\n", "spec.txt:3: op must be one of fwd, got 'FWD'" },
    { "[model a]\nop = fwd.bf16\n", "spec.txt:2: op must be one of fwd, got 'fwd.bf16'" },
    { "[model a]\nop = fwd\nop = fwd\n", "spec.txt:3: op is already set at line 2" },
    { "op = fwd\n", "spec.txt:1: op is outside a [model NAME] section" },
    { "[model a]\nprefill =\n", "spec.txt:2: prefill has no value" },
    { "[model a]\nhead_dim = abc\n", "spec.txt:2: head_dim: expected a number (N, Nk or NM), "
      "got 'abc'" },
    { "[model a]\nwindow = 17M\n",
      "spec.txt:2: window must be in 0..16777216, got 17825792" },
    { "[model a]\nprefill = 1048577k\n",   /* 2^30 + 1024: in range of parse, not of lengths */
      "spec.txt:2: prefill: values must be in 1..16777216, got '1048577k'" },
    { "[model a]\nprefill = 9999999999999M\n",   /* past 2^40: refused before any overflow */
      "spec.txt:2: prefill: '9999999999999M' is not a length (N, Nk, NM or A..B)" },
    { "[model a]\nprefill = 1099511627777\n",   /* 2^40 + 1 */
      "spec.txt:2: prefill: '1099511627777' is not a length (N, Nk, NM or A..B)" },
    { "[model a]\nprefill = 16m\n",   /* m is not M: a metre, a milli? refused */
      "spec.txt:2: prefill: '16m' is not a length (N, Nk, NM or A..B)" },
    { "[model a]\nhead_dim = 100\n",
      "spec.txt:2: head_dim must be a multiple of 8 in 8..256, got 100" },
    { "[model a]\nhead_dim = 512\n", "spec.txt:2: head_dim must be in 8..256, got 512" },
    { "[model a]\nheads_q = 0\n", "spec.txt:2: heads_q must be in 1..1024, got 0" },
    { "[model a]\nheads_kv = 2000\n", "spec.txt:2: heads_kv must be in 1..1024, got 2000" },
    { "[model a]\ndtype = fp8\n", "spec.txt:2: dtype must be f16 or bf16, got 'fp8'" },
    { "[model a]\nmask = sliding\n",
      "spec.txt:2: mask must be none, causal or window, got 'sliding'" },
    { "[model a]\nwindow = 99999999\n",
      "spec.txt:2: window must be in 0..16777216, got 99999999" },
    { "[model a]\ndtype = bf16\nhead_dim = 128\nheads_q = 30\nheads_kv = 8\nmask = causal\n"
      "prefill = 1k\n", "spec.txt:4: heads_q (30) must be a multiple of heads_kv (8)" },
    { "[model a]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\nmask = window\n"
      "prefill = 1k\n", "spec.txt:6: mask = window needs window = N (keys before the query "
      "that each query sees)" },
    { "[model a]\n" OK_KEYS "window = 4096\nprefill = 1k\n",
      "spec.txt:7: window is only for mask = window" },
    { "[model a]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\nmask = causal\nprefill = 1k\n",
      "spec.txt:1: model 'a': missing heads_kv" },
    { "[model a]\n[model b]\n", "spec.txt:1: model 'a': missing dtype" },
    { "[model a]\n" OK_KEYS "batch = 4\n", "spec.txt:1: model 'a': no prefill, decode or shapes" },
    { "[model a]\nprefill = 3x\n",
      "spec.txt:2: prefill: '3x' is not a length (N, Nk, NM or A..B)" },
    { "[model a]\ndecode = 1k..x\n", "spec.txt:2: decode: '1k..x' is not a range A..B of "
      "lengths" },
    { "[model a]\nprefill = 500..16k\n",
      "spec.txt:2: prefill: range 500..16384 must double from 500 to exactly 16384" },
    { "[model a]\nprefill = 4k..1k\n",
      "spec.txt:2: prefill: range 4096..1024 must double from 4096 to exactly 1024" },
    { "[model a]\nprefill = 0\n", "spec.txt:2: prefill: values must be in 1..16777216, "
      "got '0'" },
    { "[model a]\nbatch = 100000\n", "spec.txt:2: batch: values must be in 1..65536, "
      "got '100000'" },
    { "[model a]\nprefill = 512,,1k\n", "spec.txt:2: prefill: empty item in the list" },
    { "[model a]\nprefill = 512,\n", "spec.txt:2: prefill: empty item in the list" },
    { "[model a]\nshapes = 512\n", "spec.txt:2: shapes: expected SQ:SK, got '512'" },
    { "[model a]\nshapes = 0:512\n",
      "spec.txt:2: shapes: lengths must be in 1..16777216, got 0:512" },
    { "", "spec.txt: no [model NAME] section" },
    { "# nothing\n\n   \n", "spec.txt: no [model NAME] section" },
};

START_TEST(spec_rules)
{
    fj_spec s;
    char err[512];
    memset(&s, 0xab, sizeof s);
    ck_assert_int_eq(parse(k_bad[_i].text, &s, err, sizeof err), -1);
    ck_assert_str_eq(err, k_bad[_i].error);
    ck_assert_ptr_null(s.problems);
    ck_assert_uint_eq(s.n_problems, 0);
    /* err may be NULL */
    ck_assert_int_eq(parse(k_bad[_i].text, &s, NULL, 0), -1);
}
END_TEST

/* The suffixes of docs/spec-format.md: k = 1024, M = 1024 * 1024, up to 16M. */
START_TEST(spec_suffixes)
{
    fj_spec s;
    char err[256];
    ck_assert_int_eq(parse("[model m]\n" OK_KEYS "prefill = 1M..16M\ndecode = 2K\n"
                           "batch = 64k\n", &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.n_problems, 1);
    const fj_problem *p = &s.problems[0];
    ck_assert_uint_eq(p->n_shapes, 6);
    for (int i = 0; i < 5; i++)
        assert_shape(&p->shapes[i], (1 << 20) << i, (1 << 20) << i, 65536);
    assert_shape(&p->shapes[5], 1, 2048, 65536);
    fj_spec_free(&s);
}
END_TEST

START_TEST(spec_too_many_shapes)
{
    char text[2048], err[256];
    fj_spec s;
    int at = snprintf(text, sizeof text, "[model big]\n" OK_KEYS "prefill = 1..16384k\n"
                      "batch = 1");
    for (int b = 2; b <= 200; b++)
        at += snprintf(text + at, sizeof text - (size_t)at, ",%d", b);
    ck_assert_int_lt(at, (int)sizeof text - 2);
    ck_assert_int_eq(parse(text, &s, err, sizeof err), -1);
    ck_assert_str_eq(err, "spec.txt:1: model 'big': 5000 shapes (lengths times batches), "
                     "more than 4096");
}
END_TEST

/* ---- presets ---------------------------------------------------------------------- */

static const struct {
    const char *name;
    int heads_q, heads_kv;
    fajit_mask mask;
    int window;
    const char *signature;
} k_presets[] = {
    { "llama-3-8b", 32, 8, FAJIT_MASK_CAUSAL, -1, "fwd.bf16.hd128.causal.gqa4" },
    { "llama-3-70b", 64, 8, FAJIT_MASK_CAUSAL, -1, "fwd.bf16.hd128.causal.gqa8" },
    { "qwen2.5-7b", 28, 4, FAJIT_MASK_CAUSAL, -1, "fwd.bf16.hd128.causal.gqa7" },
    { "mistral-7b", 32, 8, FAJIT_MASK_WINDOW, 4096, "fwd.bf16.hd128.win4096-0.gqa4" },
};

START_TEST(spec_presets)
{
    fj_spec s;
    char err[256], sig[128], bucket[FJ_BUCKET_LEN], seen[16][FJ_BUCKET_LEN];
    int n_seen = 0;
    ck_assert_str_eq(fj_spec_preset_name(_i), k_presets[_i].name);
    ck_assert_int_eq(fj_spec_preset(k_presets[_i].name, &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.n_problems, 1);
    const fj_problem *p = &s.problems[0];
    ck_assert_str_eq(p->name, k_presets[_i].name);
    ck_assert_int_eq(p->dtype, FAJIT_BF16);
    ck_assert_int_eq(p->head_dim, 128);
    ck_assert_int_eq(p->heads_q, k_presets[_i].heads_q);
    ck_assert_int_eq(p->heads_kv, k_presets[_i].heads_kv);
    ck_assert_int_eq(p->mask, k_presets[_i].mask);
    ck_assert_int_eq(p->window_left, k_presets[_i].window);
    ck_assert_int_eq(p->window_right, k_presets[_i].window < 0 ? -1 : 0);
    ck_assert_int_eq(fj_tune_signature(p, sig, sizeof sig), 0);
    ck_assert_str_eq(sig, k_presets[_i].signature);
    /* Prefill 512..16k and decode against 512..16k keys, batch 1. */
    ck_assert_uint_eq(p->n_shapes, 12);
    for (int i = 0; i < 6; i++) {
        assert_shape(&p->shapes[i], 512 << i, 512 << i, 1);
        assert_shape(&p->shapes[6 + i], 1, 512 << i, 1);
    }
    /* A model's shapes land in a handful of buckets: here one per shape. */
    for (size_t i = 0; i < p->n_shapes; i++) {
        int dup = 0;
        ck_assert_int_eq(fj_shape_bucket(p->shapes[i].seqlen_q, p->shapes[i].seqlen_k,
                                         bucket, sizeof bucket), 0);
        for (int j = 0; j < n_seen; j++)
            dup |= strcmp(seen[j], bucket) == 0;
        if (!dup)
            strcpy(seen[n_seen++], bucket);
    }
    ck_assert_int_eq(n_seen, 12);
    fj_spec_free(&s);
}
END_TEST

START_TEST(spec_preset_names)
{
    fj_spec s;
    char err[256];
    ck_assert_ptr_null(fj_spec_preset_name(8));
    ck_assert_ptr_null(fj_spec_preset_name(-1));
    ck_assert_int_eq(fj_spec_preset("Llama-3-8B", &s, err, sizeof err), 0);   /* any case */
    fj_spec_free(&s);
    ck_assert_ptr_nonnull(fj_spec_preset_text("mistral-7b"));
    ck_assert_ptr_null(fj_spec_preset_text("gpt-5"));
    ck_assert_int_eq(fj_spec_preset("gpt-5", &s, err, sizeof err), -1);
    ck_assert_str_eq(err, "unknown preset 'gpt-5'; known: llama-3-8b, llama-3-70b, "
                     "qwen2.5-7b, mistral-7b, llama-3-8b-paged, llama-3.2-1b-paged, gpt-oss, "
                     "deepseek-mla");
    ck_assert_ptr_null(s.problems);
    ck_assert_int_eq(fj_spec_preset(NULL, &s, err, sizeof err), -1);
}
END_TEST

/* ---- buckets and signatures ------------------------------------------------------- */

static const struct {
    int sq, sk;
    const char *bucket;
} k_buckets[] = {
    { 1, 1, "sq=1,sk<=512" },       { 1, 512, "sq=1,sk<=512" },
    { 1, 513, "sq=1,sk<=1k" },      { 1, 4096, "sq=1,sk<=4k" },
    { 1, 16384, "sq=1,sk<=16k" },   { 1, 16385, "sq=1,sk>16k" },
    { 2, 8192, "sq<=4,sk<=8k" },    { 8, 100, "sq<=8,sk<=512" },
    { 16, 20000, "sq<=16,sk>16k" }, { 17, 8192, "sq<=512" },       { 512, 512, "sq<=512" },
    { 513, 4096, "sq<=1k" },        { 1024, 1024, "sq<=1k" },
    { 1025, 1025, "sq<=2k" },       { 2048, 8192, "sq<=2k" },
    { 8192, 8192, "sq<=8k" },       { 16384, 16384, "sq<=16k" },
    { 16385, 16385, "sq>16k" },     { 1 << 24, 1 << 24, "sq>16k" },
};

START_TEST(bucket_known_answers)
{
    char b[FJ_BUCKET_LEN];
    for (size_t i = 0; i < sizeof k_buckets / sizeof k_buckets[0]; i++) {
        ck_assert_int_eq(fj_shape_bucket(k_buckets[i].sq, k_buckets[i].sk, b, sizeof b), 0);
        ck_assert_str_eq(b, k_buckets[i].bucket);
    }
    ck_assert_int_eq(fj_shape_bucket(0, 512, b, sizeof b), -1);
    ck_assert_int_eq(fj_shape_bucket(512, 0, b, sizeof b), -1);
    ck_assert_int_eq(fj_shape_bucket(-3, 512, b, sizeof b), -1);
    ck_assert_int_eq(fj_shape_bucket(1, 512, b, 6), -1);   /* too small a buffer */
    ck_assert_int_eq(fj_shape_bucket(1, 512, NULL, 16), -1);
}
END_TEST

START_TEST(signature_forms)
{
    fj_spec s;
    char sig[64], err[128];
    ck_assert_int_eq(parse(k_good, &s, err, sizeof err), 0);
    ck_assert_int_eq(fj_tune_signature(&s.problems[0], sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.f16.hd64.none.gqa4");
    ck_assert_int_eq(fj_tune_signature(&s.problems[1], sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd256.win4096-0.gqa1");
    ck_assert_int_eq(fj_tune_signature(&s.problems[1], sig, 8), -1);
    /* The first component is the operation's name; an unknown op has no signature. */
    fj_problem q = s.problems[0];
    q.op = 1;
    ck_assert_int_eq(fj_tune_signature(&q, sig, sizeof sig), -1);
    q.op = -1;
    ck_assert_int_eq(fj_tune_signature(&q, sig, sizeof sig), -1);
    fj_spec_free(&s);
}
END_TEST

/* A paged problem: page_size kept, ".paged" in its signature, the serving preset. */
START_TEST(spec_paged)
{
    fj_spec s;
    char sig[64], err[256];
    ck_assert_int_eq(parse("[model p]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\n"
                           "heads_kv = 8\nmask = causal\npage_size = 16\ndecode = 4k\n",
                           &s, err, sizeof err), 0);
    ck_assert_int_eq(s.problems[0].page_size, 16);
    ck_assert_int_eq(fj_tune_signature(&s.problems[0], sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd128.causal.gqa4.paged");
    fj_spec_free(&s);
    ck_assert_int_eq(fj_spec_preset("llama-3-8b-paged", &s, err, sizeof err), 0);
    const fj_problem *p = &s.problems[0];
    ck_assert_int_eq(p->page_size, 16);
    ck_assert_uint_eq(p->n_shapes, (6 + 3) * 2);   /* decode 1k..32k and 3 shapes, 2 batches */
    assert_shape(&p->shapes[0], 1, 1024, 1);
    assert_shape(&p->shapes[1], 1, 1024, 64);
    assert_shape(&p->shapes[17], 512, 4608, 64);
    fj_spec_free(&s);
    /* its head_dim 64 twin */
    ck_assert_int_eq(fj_spec_preset("llama-3.2-1b-paged", &s, err, sizeof err), 0);
    p = &s.problems[0];
    ck_assert_int_eq(p->head_dim, 64);
    ck_assert_int_eq(fj_tune_signature(p, sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd64.causal.gqa4.paged");
    ck_assert_uint_eq(p->n_shapes, (6 + 3) * 2);
    assert_shape(&p->shapes[0], 1, 1024, 1);
    fj_spec_free(&s);
    /* GPT-OSS: its sliding-window and full layers, sinks on both */
    ck_assert_int_eq(fj_spec_preset("gpt-oss", &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.n_problems, 2);
    ck_assert_int_eq(fj_tune_signature(&s.problems[0], sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd64.win127-0.gqa8.paged.sinks");
    ck_assert_int_eq(fj_tune_signature(&s.problems[1], sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd64.causal.gqa8.paged.sinks");
    ck_assert_uint_eq(s.problems[1].n_shapes, (6 + 2) * 2);
    fj_spec_free(&s);
    /* DeepSeek MLA prefill: Q/K 192, V/O 128, 128 heads each */
    ck_assert_int_eq(fj_spec_preset("deepseek-mla", &s, err, sizeof err), 0);
    ck_assert_uint_eq(s.n_problems, 1);
    p = &s.problems[0];
    ck_assert_int_eq(p->head_dim, 192);
    ck_assert_int_eq(p->head_dim_v, 128);
    ck_assert_int_eq(p->heads_q, 128);
    ck_assert_int_eq(p->heads_kv, 128);
    ck_assert_int_eq(fj_tune_signature(p, sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd192.causal.gqa1.dv128");
    ck_assert_uint_eq(p->n_shapes, 6);
    fj_spec_free(&s);
}
END_TEST

/* Model features: the spec keys, and their signature suffixes after the older components
 * (a problem without features keeps its row names). */
START_TEST(spec_features)
{
    fj_spec s;
    char sig[96], err[256];
    ck_assert_int_eq(parse("[model f]\n" OK_KEYS "softcap = yes\nsinks = yes\nalibi = no\n"
                           "page_size = 16\nkv_dtype = e4m3\ndecode = 4k\n",
                           &s, err, sizeof err), 0);
    const fj_problem *p = &s.problems[0];
    ck_assert_uint_eq(p->features, FJ_PROBLEM_SOFTCAP | FJ_PROBLEM_SINKS);
    ck_assert_int_eq(p->kv_dtype, FAJIT_KV_E4M3);
    ck_assert_int_eq(p->head_dim_v, 0);
    ck_assert_int_eq(fj_tune_signature(p, sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd128.causal.gqa4.paged.softcap.sinks.kv-e4m3");
    fj_spec_free(&s);
    /* head_dim_v equal to head_dim is no feature; a different one is */
    ck_assert_int_eq(parse("[model g]\n" OK_KEYS "head_dim_v = 128\nprefill = 4k\n", &s, err,
                           sizeof err), 0);
    ck_assert_int_eq(s.problems[0].head_dim_v, 0);
    fj_spec_free(&s);
    ck_assert_int_eq(parse("[model g]\ndtype = bf16\nhead_dim = 192\nheads_q = 16\n"
                           "heads_kv = 16\nhead_dim_v = 128\nalibi = yes\nkv_dtype = dtype\n"
                           "mask = none\nprefill = 4k\n", &s, err, sizeof err), 0);
    p = &s.problems[0];
    ck_assert_int_eq(p->head_dim_v, 128);
    ck_assert_int_eq(p->kv_dtype, FAJIT_KV_AS_Q);
    ck_assert_int_eq(fj_tune_signature(p, sig, sizeof sig), 0);
    ck_assert_str_eq(sig, "fwd.bf16.hd192.none.gqa1.alibi.dv128");
    fj_spec_free(&s);
}
END_TEST

START_TEST(op_names)
{
    ck_assert_str_eq(fj_op_name(FAJIT_OP_FWD), "fwd");
    ck_assert_ptr_null(fj_op_name(1));
    ck_assert_ptr_null(fj_op_name(-1));
    ck_assert_int_eq(fj_op_parse("fwd"), FAJIT_OP_FWD);
    ck_assert_int_eq(fj_op_parse("bwd"), -1);
    ck_assert_int_eq(fj_op_parse("FWD"), -1);
    ck_assert_int_eq(fj_op_parse(""), -1);
    ck_assert_int_eq(fj_op_parse(NULL), -1);
    for (int i = 0; fj_op_name(i); i++)
        ck_assert_int_eq(fj_op_parse(fj_op_name(i)), i);
}
END_TEST

TCase *fj_tcase_spec(void)
{
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, spec_good);
    tcase_add_test(tc, spec_file);
    tcase_add_loop_test(tc, spec_rules, 0, (int)(sizeof k_bad / sizeof k_bad[0]));
    tcase_add_test(tc, spec_suffixes);
    tcase_add_test(tc, spec_too_many_shapes);
    tcase_add_loop_test(tc, spec_presets, 0, (int)(sizeof k_presets / sizeof k_presets[0]));
    tcase_add_test(tc, spec_preset_names);
    tcase_add_test(tc, bucket_known_answers);
    tcase_add_test(tc, signature_forms);
    tcase_add_test(tc, spec_paged);
    tcase_add_test(tc, op_names);
    tcase_add_test(tc, spec_features);
    return tc;
}
