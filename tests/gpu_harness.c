/* gpu_harness.c - the shared start and end of the `gpu` suite's programs (gpu_harness.h). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gpu_harness.h"

const fj_cuda *cu;
char g_cache_dir[256];
unsigned g_seed;
static int g_made_dir;   /* g_cache_dir is ours to remove */

int env_int(const char *name, int def)
{
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

int gpu_harness_open(const char *suite)
{
    char why[256];
    cu = fj_cuda_get(why, sizeof why);
    if (!cu) {
        printf("%s suite skipped: %s\n", suite, why);
        return 77;
    }
    CUdevice dev;
    CUcontext pctx;
    if (cu->cuDeviceGet(&dev, 0) || cu->cuDevicePrimaryCtxRetain(&pctx, dev) ||
        cu->cuCtxSetCurrent(pctx)) {
        printf("%s suite skipped: no usable device 0\n", suite);
        return 77;
    }
    return 0;
}

int gpu_harness_setup(const char *suite, const char *more)
{
    g_seed = (unsigned)env_int("FAJIT_TEST_SEED", (int)time(NULL));
    const char *dir = getenv("FAJIT_TEST_CACHE_DIR");
    if (dir) {
        snprintf(g_cache_dir, sizeof g_cache_dir, "%s", dir);
    } else {
        snprintf(g_cache_dir, sizeof g_cache_dir, "/tmp/fajit-%s-XXXXXX", suite);
        if (!mkdtemp(g_cache_dir))
            return 1;
        g_made_dir = 1;
    }
    printf("%s suite: seed %u (FAJIT_TEST_SEED), cache %s%s\n", suite, g_seed, g_cache_dir,
           more ? more : "");
    return 0;
}

int gpu_harness_start(const char *suite, const char *more)
{
    int rc = gpu_harness_open(suite);
    return rc ? rc : gpu_harness_setup(suite, more);
}

void gpu_harness_add(Suite *s, const char *name, const TTest *test, int timeout)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

int gpu_harness_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);   /* one CUDA context for the whole run */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (g_made_dir) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_cache_dir);
        if (system(cmd) != 0)
            failed++;
    }
    return failed ? 1 : 0;
}
