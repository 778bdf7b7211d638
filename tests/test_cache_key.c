/* test_cache_key.c - unit tests of src/cache/key.c: the kernel key's known answer and
 * serialization, every input mattering, the parts text and hex, explaining misses. */
#include "test_cache.h"

/* ---- the key ------------------------------------------------------------------- */

static fj_key_inputs base_inputs(void)
{
    fj_key_inputs in = { .digest = k_digest, .op = "fwd", .function = "F", .preamble = "P",
                         .options = "O", .arch = "sm_90a", .nvrtc_version = 13000,
                         .format_version = FJ_CACHE_FORMAT_VERSION };
    return in;
}

static fj_key make(const fj_key_inputs *in)
{
    fj_key k;
    fj_key_make(in, &k);
    return k;
}

#define KEY_PINNED "fec62aa89b1d689ac709773c61f68587"

START_TEST(test_key_known_answer)
{
    fj_key_inputs in = { .digest = k_digest, .op = "fwd", .function = "fj_attn_ref",
                         .preamble = "#define FJ_DTYPE 1\n",
                         .options = "-arch=sm_90a -std=c++17", .arch = "sm_90a",
                         .nvrtc_version = 13000, .format_version = 2 };
    fj_key k = make(&in);
    char hex[33];
    fj_key_hex(&k, hex);
    /* Independent recomputation of the serialization documented in key.c. */
    const char ser[] = "fajit-kernel-key\0" "0102030405060708090a0b0c0d0e0f10\0" "fwd\0"
                       "fj_attn_ref\0" "#define FJ_DTYPE 1\n\0" "-arch=sm_90a -std=c++17\0"
                       "sm_90a\0" "13000\0" "2";
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(ser, sizeof ser - 1));
    ck_assert_mem_eq(k.b, c.digest, 16);
    /* Pinned: a change here invalidates every cache in the field. */
    ck_assert_str_eq(hex, KEY_PINNED);
    /* XXH3-128 of "" (xxHash's published test vector) */
    XXH128_canonicalFromHash(&c, XXH3_128bits("", 0));
    ck_assert_uint_eq(c.digest[0], 0x99);
    ck_assert_uint_eq(c.digest[15], 0x7f);
    /* NULL strings read as "", a NULL digest as zeros. */
    static const unsigned char zero[16];
    fj_key_inputs a = { .digest = NULL }, b = { .digest = zero, .op = "", .function = "",
                                                 .preamble = "", .options = "", .arch = "" };
    fj_key ka = make(&a), kb = make(&b);
    ck_assert_mem_eq(ka.b, kb.b, 16);
}
END_TEST

START_TEST(test_key_every_part_matters)
{
    unsigned char d2[16];
    fj_key_inputs in = base_inputs();
    fj_key base = make(&in), k;
    memcpy(d2, k_digest, 16);
    d2[7] ^= 1;
#define DIFFERS(field, value)                  \
    do {                                       \
        fj_key_inputs x = base_inputs();       \
        x.field = value;                       \
        k = make(&x);                          \
        ck_assert_mem_ne(base.b, k.b, 16);     \
    } while (0)
    DIFFERS(digest, d2);
    DIFFERS(op, "bwd");
    DIFFERS(function, "G");
    DIFFERS(preamble, "P2");
    DIFFERS(options, "O2");
    DIFFERS(arch, "sm_90");
    DIFFERS(nvrtc_version, 12090);
    DIFFERS(format_version, 1);
#undef DIFFERS
    /* Field boundaries are unambiguous: moving a byte between fields changes the key. */
    fj_key_inputs a = base_inputs(), b = base_inputs();
    a.preamble = "PO";
    a.options = "";
    fj_key ka = make(&a), kb = make(&b);
    ck_assert_mem_ne(ka.b, kb.b, 16);
    a = base_inputs();
    a.op = "fwdF";
    a.function = "";
    ka = make(&a);
    ck_assert_mem_ne(ka.b, kb.b, 16);
    k = make(&in);
    ck_assert_mem_eq(base.b, k.b, 16);
}
END_TEST

START_TEST(test_key_parts)
{
    static const char pre[] = "#define FJ_DTYPE 1\n";
    char want[400];
    fj_key_inputs in = { .digest = k_digest, .op = "fwd", .function = "fj_attn_fa2",
                         .preamble = pre, .options = "-arch=sm_90a -DX=1;2%", .arch = "sm_90a",
                         .nvrtc_version = 13000, .format_version = 2 };
    char *p = fj_key_parts(&in);
    ck_assert_ptr_nonnull(p);
    snprintf(want, sizeof want, "digest=0102030405060708090a0b0c0d0e0f10;op=fwd;"
             "function=fj_attn_fa2;preamble_hash=%016llx;options=-arch=sm_90a -DX=1%%3B2%%25;"
             "arch=sm_90a;nvrtc=13000;format=2",
             (unsigned long long)XXH3_64bits(pre, sizeof pre - 1));
    ck_assert_str_eq(p, want);
    free(p);
    fj_key k = { { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0, 1, 2, 3, 4, 5, 6, 0xff } };
    char hex[33];
    fj_key_hex(&k, hex);
    ck_assert_str_eq(hex, "0123456789abcdef00010203040506ff");
}
END_TEST

/* ---- explain ---------------------------------------------------------------------- */

static const char k_opts90[] = "-arch=sm_90a -O3", k_opts100[] = "-arch=sm_100a -O3";
static const char k_pre128[] = "#define FJ_BLOCK_M 128\n", k_pre64[] = "#define FJ_BLOCK_M 64\n";

static void put_variant(fj_cache *c, int seed, const char *name, const char *pre,
                        const char *arch, const char *opts, int nvrtc, int with_parts)
{
    fj_entry e;
    make_entry(&e, seed, 64);
    free(e.name);
    free(e.options);
    e.name = strdup(name);
    e.options = strdup(opts);
    snprintf(e.arch, sizeof e.arch, "%s", arch);
    e.nvrtc_version = nvrtc;
    if (with_parts)
        e.parts = test_parts(k_digest, "fj_attn_fa2", pre, opts, arch, nvrtc, 2);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
}

/* fj_cache_explain for a wanted key that is not key_of(seed) for any entry put here. */
static int explain(fj_cache *c, const fj_key *key, const char *name, const unsigned char *d,
                   const char *pre, const char *arch, const char *opts, int nvrtc,
                   fj_explain *out)
{
    char *parts = test_parts(d, "fj_attn_fa2", pre, opts, arch, nvrtc, 2);
    ck_assert_ptr_nonnull(parts);
    int r = fj_cache_explain(c, key, name, parts, out);
    free(parts);
    return r;
}

START_TEST(test_explain)
{
    static const char v128[] = "fa2 bf16 h128 causal 128x64w4s1";
    static const char v64[] = "fa2 bf16 h128 causal 64x64w4s1";
    unsigned char d2[16];
    fj_explain x;
    fj_key k40 = key_of(40), k41 = key_of(41), k42 = key_of(42), k43 = key_of(43);
    fj_key wanted = key_of(99);
    fj_cache *c = open_ok(NULL);
    put_variant(c, 40, v128, k_pre128, "sm_90a", k_opts90, 12080, 1);

    /* Present: a hit. */
    ck_assert_int_eq(explain(c, &k40, v128, k_digest, k_pre128, "sm_90a", k_opts90, 12080, &x),
                     1);
    ck_assert_int_eq(x.hit, 1);

    /* The same variant compiled by another NVRTC. */
    ck_assert_int_eq(explain(c, &wanted, v128, k_digest, k_pre128, "sm_90a", k_opts90, 13000,
                             &x), 0);
    ck_assert_int_eq(x.hit, 0);
    ck_assert_int_eq(x.has_nearest, 1);
    ck_assert_mem_eq(x.nearest.b, k40.b, 16);
    ck_assert_str_eq(x.nearest_name, v128);
    ck_assert_uint_eq(x.differs, FJ_PART_NVRTC);
    ck_assert_ptr_nonnull(strstr(x.text, "nvrtc (entry 12080, wanted 13000)"));

    /* For another target; a different variant of that target does not win over the same
     * variant of another target. Without a name, function + preamble tell the variant. */
    put_variant(c, 42, v64, k_pre64, "sm_100a", k_opts100, 12080, 1);
    ck_assert_int_eq(explain(c, &wanted, NULL, k_digest, k_pre128, "sm_100a", k_opts100, 12080,
                             &x), 0);
    ck_assert_mem_eq(x.nearest.b, k40.b, 16);
    ck_assert_uint_eq(x.differs, FJ_PART_ARCH | FJ_PART_OPTIONS);
    ck_assert_ptr_nonnull(strstr(x.text, "arch (entry sm_90a, wanted sm_100a)"));

    /* A variant nobody compiled: the nearest of the same target. */
    ck_assert_int_eq(explain(c, &wanted, "fa2 other", k_digest, "#define FJ_BLOCK_M 32\n",
                             "sm_100a", k_opts100, 12080, &x), 0);
    ck_assert_mem_eq(x.nearest.b, k42.b, 16);
    ck_assert_uint_eq(x.differs, FJ_PART_PREAMBLE);

    /* Other sources (another fajit build). */
    memcpy(d2, k_digest, 16);
    d2[3] ^= 0x40;
    ck_assert_int_eq(explain(c, &wanted, v128, d2, k_pre128, "sm_90a", k_opts90, 12080, &x), 0);
    ck_assert_mem_eq(x.nearest.b, k40.b, 16);
    ck_assert_uint_eq(x.differs, FJ_PART_DIGEST);
    ck_assert_ptr_nonnull(strstr(x.text, "digest"));

    /* An entry stored without parts: what its columns record is compared; the rest is
     * named as unrecorded. */
    put_variant(c, 43, "ref f16", "", "sm_80", "-arch=sm_80", 12080, 0);
    ck_assert_int_eq(explain(c, &wanted, "ref f16", k_digest, "", "sm_80", "-arch=sm_80",
                             12080, &x), 0);
    ck_assert_mem_eq(x.nearest.b, k43.b, 16);
    ck_assert_uint_eq(x.differs, FJ_PART_UNRECORDED);
    ck_assert_int_eq(explain(c, &wanted, "ref f16", k_digest, "", "sm_80", "-arch=sm_80",
                             13000, &x), 0);
    ck_assert_uint_eq(x.differs, FJ_PART_NVRTC);

    /* Nothing of that variant or target. */
    ck_assert_int_eq(explain(c, &k41, "fa2 other", k_digest, "x", "sm_120", "-arch=sm_120",
                             13000, &x), 0);
    ck_assert_int_eq(x.has_nearest, 0);
    ck_assert_ptr_nonnull(strstr(x.text, "no entry"));
    ck_assert_int_eq(fj_cache_explain(c, &k41, NULL, NULL, &x), -1);
    fj_cache_close(c);
}
END_TEST

/* The operation is a part: an entry of another op is named by it; an entry of format 1
 * (no op recorded) differs in format and op. */
START_TEST(test_explain_op)
{
    static const char name[] = "fa2 bf16 h128 causal 128x64w4s1";
    fj_explain x;
    fj_key wanted = key_of(99);
    fj_cache *c = open_ok(NULL);
    fj_entry e;
    fj_key_inputs in = { .digest = k_digest, .op = "bwd", .function = "fj_attn_fa2",
                         .preamble = k_pre128, .options = k_opts90, .arch = "sm_90a",
                         .nvrtc_version = 12080, .format_version = FJ_CACHE_FORMAT_VERSION };
    make_entry(&e, 50, 64);
    free(e.name);
    free(e.options);
    e.name = strdup(name);
    e.options = strdup(k_opts90);
    snprintf(e.arch, sizeof e.arch, "sm_90a");
    e.nvrtc_version = 12080;
    e.parts = fj_key_parts(&in);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
    ck_assert_int_eq(explain(c, &wanted, name, k_digest, k_pre128, "sm_90a", k_opts90, 12080,
                             &x), 0);
    ck_assert_uint_eq(x.differs, FJ_PART_OP);
    ck_assert_ptr_nonnull(strstr(x.text, "op (entry bwd, wanted fwd)"));

    /* A parts text as format 1 wrote it (no op field). */
    fj_cache_clear(c);
    make_entry(&e, 51, 64);
    free(e.name);
    free(e.options);
    e.name = strdup(name);
    e.options = strdup(k_opts90);
    snprintf(e.arch, sizeof e.arch, "sm_90a");
    e.nvrtc_version = 12080;
    char *p = test_parts(k_digest, "fj_attn_fa2", k_pre128, k_opts90, "sm_90a", 12080, 1);
    char *op = strstr(p, ";op=fwd");
    ck_assert_ptr_nonnull(op);
    memmove(op, op + 7, strlen(op + 7) + 1);
    e.parts = p;
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
    ck_assert_int_eq(explain(c, &wanted, name, k_digest, k_pre128, "sm_90a", k_opts90, 12080,
                             &x), 0);
    ck_assert_uint_eq(x.differs, FJ_PART_OP | FJ_PART_FORMAT);
    ck_assert_ptr_nonnull(strstr(x.text, "format (entry 1, wanted 2)"));
    fj_cache_close(c);
}
END_TEST

void fj_cache_tests_key(TCase *tc)
{
    tcase_add_test(tc, test_key_known_answer);
    tcase_add_test(tc, test_key_every_part_matters);
    tcase_add_test(tc, test_key_parts);
    tcase_add_test(tc, test_explain_op);
    tcase_add_test(tc, test_explain);
}
