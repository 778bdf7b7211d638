/* test_nvrtc.h - what the `nvrtc` suite's files share: the test's cache directory and
 * contexts on it (test_nvrtc.c), and the tests of test_nvrtc_policies.c. */
#ifndef FJ_TEST_NVRTC_H
#define FJ_TEST_NVRTC_H

#include <check.h>
#include <stdint.h>

#include "../src/api/internal.h"

extern char g_dir[64];   /* the test's cache directory (make_dir) */
void make_dir(void);
void remove_dir(void);
/* A context on the test's cache directory. */
fajit_ctx *test_ctx(int device, fajit_policy policy, int64_t cache_max_bytes);
/* A compile-only context (no device, blocking policy). */
fajit_ctx *compile_ctx(void);

/* Compile policies through a fake driver, added to the TCase "nvrtc"; the TCases
 * "hostcost" and "memory". */
void fj_nvrtc_tests_policies(TCase *tc);
TCase *fj_tcase_hostcost(void);
TCase *fj_tcase_memory(void);

#endif
