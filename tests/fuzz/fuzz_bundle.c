/* fuzz_bundle.c - libFuzzer target: a bundle file of any bytes, opened read-only
 * (fj_cache_open_bundle, then list and verify) and imported into a fresh memory-only cache
 * (fj_cache_import). Either may refuse the file; none may crash, leak or read out of
 * bounds (built with ASan + UBSan). SQLite needs a path: the input is written to one
 * temporary file per process. Seeds: tests/fuzz/bundle. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[64];

static int count(void *user, const fj_entry *e)
{
    (void)e;
    ++*(int *)user;
    return 0;
}

static void remove_file(void)
{
    unlink(g_path);
}

/* The input as the file at g_path, replacing the last one. */
static int write_input(const uint8_t *data, size_t size)
{
    if (!g_path[0]) {
        snprintf(g_path, sizeof g_path, "/tmp/fajit-fuzz-%d.db", (int)getpid());
        atexit(remove_file);
    }
    FILE *f = fopen(g_path, "wb");
    if (!f)
        return -1;
    size_t put = fwrite(data, 1, size, f);
    return fclose(f) == 0 && put == size ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fj_cache *b = NULL, *m = NULL;
    fj_bundle_stats st;
    int n = 0, checked = 0;
    if (write_input(data, size) != 0)
        abort();
    if (fj_cache_open_bundle(&b, g_path, NULL, NULL) == 0) {
        fj_cache_list(b, count, &n);
        fj_cache_verify(b, &checked);
        fj_cache_close(b);
    }
    if (fj_cache_open(&m, NULL, NULL, NULL) != 0)
        abort();
    fj_cache_import(m, g_path, NULL, &st);
    fj_cache_close(m);
    return 0;
}
