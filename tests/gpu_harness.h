/* gpu_harness.h - what every program of the `gpu` suite shares (test_gpu, test_gpu_decode,
 * test_gpu_decode_features, test_gpu_features): the driver table, device 0's primary
 * context, the seed, the cache directory, and the run of the program's Check suite in one
 * process. A program's main is gpu_harness_start (or gpu_harness_open, its own
 * command-line modes, gpu_harness_setup), its test cases, gpu_harness_run. */
#ifndef FJ_TEST_GPU_HARNESS_H
#define FJ_TEST_GPU_HARNESS_H

#include <check.h>

#include "../src/api/internal.h"

extern const fj_cuda *cu;
extern char g_cache_dir[256];   /* FAJIT_TEST_CACHE_DIR, or a fresh temporary one */
extern unsigned g_seed;         /* FAJIT_TEST_SEED (default: the time) */

#define CU(call)                                                                  \
    do {                                                                          \
        CUresult r_ = (call);                                                     \
        char e_[64];                                                              \
        ck_assert_msg(r_ == 0, "%s: %s", #call, fj_cuda_errname(cu, r_, e_, 64)); \
    } while (0)

/* The integer value of environment variable `name`; `def` when unset or empty. */
int env_int(const char *name, int def);

/* Loads the CUDA driver into `cu` and makes device 0's primary context current (for the
 * tests' raw allocations). Returns 0; or, without a driver or a usable device 0, prints
 * "<suite> suite skipped: <why>" and returns 77, which meson counts as skipped. */
int gpu_harness_open(const char *suite);

/* Sets g_seed, and g_cache_dir: FAJIT_TEST_CACHE_DIR, or a new /tmp/fajit-<suite>-XXXXXX
 * that gpu_harness_run removes at the end. Then prints "<suite> suite: seed <n>
 * (FAJIT_TEST_SEED), cache <dir><more>" (more may be NULL). 0, or 1 when no directory
 * could be made. */
int gpu_harness_setup(const char *suite, const char *more);

/* gpu_harness_open, then gpu_harness_setup: 0, 77 or 1 as they return. */
int gpu_harness_start(const char *suite, const char *more);

/* Adds `test` alone in a TCase of its name, so that CK_RUN_CASE=<name> runs it alone. */
void gpu_harness_add(Suite *s, const char *name, const TTest *test, int timeout);

/* Runs `s` in this process (CK_NOFORK: one CUDA context for the whole run) and removes
 * the cache directory gpu_harness_setup made. The exit status of the program: 0, or 1 when
 * a test failed or the directory could not be removed. */
int gpu_harness_run(Suite *s);

#endif
