/* test_cache_key.c - unit tests of src/cache/key.c: the key parts text and explaining misses. */
#include "test_cache.h"

START_TEST(test_key_parts)
{
    static const char pre[] = "#define FJ_DTYPE 1\n";
    char want[400];
    char *p = fj_key_parts(k_digest, "fj_attn_fa2", pre, "-arch=sm_90a -DX=1;2%", "sm_90a",
                           13000, 1);
    ck_assert_ptr_nonnull(p);
    snprintf(want, sizeof want, "digest=0102030405060708090a0b0c0d0e0f10;function=fj_attn_fa2;"
             "preamble_hash=%016llx;options=-arch=sm_90a -DX=1%%3B2%%25;arch=sm_90a;"
             "nvrtc=13000;format=1", (unsigned long long)XXH3_64bits(pre, sizeof pre - 1));
    ck_assert_str_eq(p, want);
    free(p);
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
        e.parts = fj_key_parts(k_digest, "fj_attn_fa2", pre, opts, arch, nvrtc, 1);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
}

/* fj_cache_explain for a wanted key that is not key_of(seed) for any entry put here. */
static int explain(fj_cache *c, const fj_key *key, const char *name, const unsigned char *d,
                   const char *pre, const char *arch, const char *opts, int nvrtc,
                   fj_explain *out)
{
    char *parts = fj_key_parts(d, "fj_attn_fa2", pre, opts, arch, nvrtc, 1);
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

void fj_cache_tests_key(TCase *tc)
{
    tcase_add_test(tc, test_key_parts);
    tcase_add_test(tc, test_explain);
}
