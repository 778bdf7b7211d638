/* test_cache.c - the cache TCase of the unit suite: fixtures and helpers shared by the
 * test_cache_*.c files (one per file of src/cache), and the TCase that runs them all.
 * Each test works in its own directory under a per-TCase root that the unchecked teardown
 * removes, so a failed test (which exits early) leaves nothing. Works in CK_FORK and
 * CK_NOFORK modes; forked helpers never call ck_assert. */
#include "test_cache.h"

/* ---- fixtures and helpers --------------------------------------------------------- */

char g_root[64];   /* per TCase, made by the unchecked setup */

struct test_log g_log = { .mu = PTHREAD_MUTEX_INITIALIZER };

void log_cb(void *user, int level, const char *msg)
{
    (void)user;
    if (level < 0 || level > 3)
        return;
    pthread_mutex_lock(&g_log.mu);
    g_log.n[level]++;
    snprintf(g_log.last[level], sizeof g_log.last[level], "%s", msg);
    pthread_mutex_unlock(&g_log.mu);
}

int log_count(int level)
{
    pthread_mutex_lock(&g_log.mu);
    int n = g_log.n[level];
    pthread_mutex_unlock(&g_log.mu);
    return n;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)ftw;
    if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR)
        chmod(p, 0700);   /* undo the read-only test's chmod */
    return remove(p) == 0 || errno == ENOENT ? 0 : -1;
}

void rm_rf(const char *path)
{
    chmod(path, 0700);
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void root_setup(void)
{
    strcpy(g_root, "/tmp/fj_cache_test.XXXXXX");
    if (!mkdtemp(g_root))
        g_root[0] = '\0';
}

static void root_teardown(void)
{
    if (g_root[0])
        rm_rf(g_root);
}

static void test_setup(void)
{
    fj_cache_debug_force_readonly = 0;
    pthread_mutex_lock(&g_log.mu);
    memset(g_log.n, 0, sizeof g_log.n);
    memset(g_log.last, 0, sizeof g_log.last);
    pthread_mutex_unlock(&g_log.mu);
}

static void test_teardown(void)
{
    fj_cache_debug_force_readonly = 0;
}

/* A fresh directory for one test (removed by the test, or by root_teardown). */
void make_dir(char *buf, size_t n)
{
    ck_assert_msg(g_root[0], "no temp root");
    snprintf(buf, n, "%s/t.XXXXXX", g_root);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

fj_key key_of(int seed)
{
    fj_key k;
    for (int i = 0; i < 16; i++)
        k.b[i] = (uint8_t)(seed * 31 + i * 7 + 1);
    return k;
}

/* A deterministic entry; free with fj_entry_free. */
void make_entry(fj_entry *e, int seed, size_t size)
{
    memset(e, 0, sizeof *e);
    e->key = key_of(seed);
    snprintf(e->arch, sizeof e->arch, "%s", seed % 2 ? "sm_80" : "sm_90a");
    e->nvrtc_version = 12080 + seed;
    e->name = malloc(32);
    snprintf(e->name, 32, "ref f16 #%d", seed);
    e->options = strdup("--gpu-architecture=sm_90a -O3 -DFJ_HEAD_DIM=128");
    e->log = strdup(seed % 3 ? "ptxas info    : Used 128 registers" : "");
    e->blob_size = size;
    e->blob = size ? malloc(size) : NULL;
    for (size_t i = 0; i < size; i++)
        ((uint8_t *)e->blob)[i] = (uint8_t)(i * 7 + (size_t)seed);
    e->compile_ms = 123.25 + seed;
    e->regs = 128;
    e->smem = 49152 + seed;
    e->spill_bytes = seed % 2 ? -1 : 16;
}

void assert_same(const fj_entry *got, const fj_entry *want)
{
    ck_assert_mem_eq(got->key.b, want->key.b, 16);
    ck_assert_str_eq(got->arch, want->arch);
    ck_assert_int_eq(got->nvrtc_version, want->nvrtc_version);
    ck_assert_str_eq(got->name, want->name);
    ck_assert_str_eq(got->options, want->options);
    ck_assert_str_eq(got->log, want->log);
    ck_assert_uint_eq(got->blob_size, want->blob_size);
    if (want->blob_size)
        ck_assert_int_eq(memcmp(got->blob, want->blob, want->blob_size), 0);
    ck_assert_double_eq(got->compile_ms, want->compile_ms);
    ck_assert_int_eq(got->regs, want->regs);
    ck_assert_int_eq(got->smem, want->smem);
    ck_assert_int_eq(got->spill_bytes, want->spill_bytes);
}

/* Same check for forked children, which must not use ck_assert. */
int same_blob(const fj_entry *got, const fj_entry *want)
{
    return got->blob_size == want->blob_size
           && memcmp(got->blob, want->blob, want->blob_size) == 0
           && strcmp(got->name, want->name) == 0;
}

fj_cache *open_ok(const char *dir)
{
    fj_cache *c = NULL;
    ck_assert_int_eq(fj_cache_open(&c, dir, log_cb, NULL), 0);
    ck_assert_ptr_nonnull(c);
    return c;
}

void put_seed(fj_cache *c, int seed, size_t size)
{
    fj_entry e;
    make_entry(&e, seed, size);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
}

int64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int count_aside(const char *dir)
{
    int n = 0;
    struct dirent *d;
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    while ((d = readdir(dp)) != NULL)
        n += strncmp(d->d_name, "kernels.db.corrupt-", 19) == 0;
    closedir(dp);
    return n;
}

int wait_child(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

const unsigned char k_digest[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

char *test_parts(const unsigned char *digest, const char *function, const char *preamble,
                 const char *options, const char *arch, int nvrtc_version, int format_version)
{
    fj_key_inputs in = { .digest = digest, .op = "fwd", .function = function,
                         .preamble = preamble, .options = options, .arch = arch,
                         .nvrtc_version = nvrtc_version, .format_version = format_version };
    return fj_key_parts(&in);
}

void make_row(fj_tune_row *r, const char *arch, const char *sig, const char *bucket,
                     const char *config, double ms, int pinned, int64_t created)
{
    memset(r, 0, sizeof *r);
    snprintf(r->gpu_name, sizeof r->gpu_name, "NVIDIA H200");
    snprintf(r->arch, sizeof r->arch, "%s", arch);
    r->sm_count = 132;
    snprintf(r->signature, sizeof r->signature, "%s", sig);
    snprintf(r->bucket, sizeof r->bucket, "%s", bucket);
    snprintf(r->config, sizeof r->config, "%s", config);
    r->time_ms = ms;
    r->pinned = pinned;
    snprintf(r->fajit_version, sizeof r->fajit_version, "0.1.0");
    r->nvrtc_version = 13000;
    r->created = created;
}

/* The winner stored for (sig, bucket) on sm_90a, or "" when none. */
const char *config_of(fj_cache *c, const char *sig, const char *bucket)
{
    static char buf[128];
    fj_tune_row r;
    buf[0] = '\0';
    if (fj_cache_tune_get(c, "NVIDIA H200", "sm_90a", 132, sig, bucket, &r) == 1)
        snprintf(buf, sizeof buf, "%s", r.config);
    fj_tune_row_free(&r);
    return buf;
}

/* PRAGMA user_version: the big-endian 32-bit word at offset 60 of the file header. */
int file_user_version(const char *path)
{
    unsigned char v[4] = { 0 };
    int fd = open(path, O_RDONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pread(fd, v, 4, 60), 4);
    close(fd);
    return v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3];
}

/* Swaps blob, blob_size and checksum of kernels `a` and `b` in the file at `path` (closed
 * by every cache), as someone editing a bundle would. */
void swap_blobs(const char *path, const fj_key *a, const fj_key *b)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *get = NULL, *set = NULL;
    void *blob[2] = { NULL, NULL };
    int n[2] = { 0, 0 };
    sqlite3_int64 sum[2] = { 0, 0 };
    const fj_key *k[2] = { a, b };
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT blob, checksum FROM kernels WHERE key = ?1",
                                        -1, &get, NULL), SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_blob(get, 1, k[i]->b, 16, SQLITE_STATIC);
        ck_assert_int_eq(sqlite3_step(get), SQLITE_ROW);
        n[i] = sqlite3_column_bytes(get, 0);
        blob[i] = malloc((size_t)n[i] + 1);
        memcpy(blob[i], sqlite3_column_blob(get, 0), (size_t)n[i]);
        sum[i] = sqlite3_column_int64(get, 1);
        sqlite3_reset(get);
    }
    ck_assert_int_eq(sqlite3_prepare_v2(db, "UPDATE kernels SET blob = ?2, blob_size = ?3,"
                                        " checksum = ?4 WHERE key = ?1", -1, &set, NULL),
                     SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        sqlite3_bind_blob(set, 1, k[i]->b, 16, SQLITE_STATIC);
        sqlite3_bind_blob(set, 2, blob[1 - i], n[1 - i], SQLITE_STATIC);
        sqlite3_bind_int(set, 3, n[1 - i]);
        sqlite3_bind_int64(set, 4, sum[1 - i]);
        ck_assert_int_eq(sqlite3_step(set), SQLITE_DONE);
        ck_assert_int_eq(sqlite3_changes(db), 1);
        sqlite3_reset(set);
    }
    sqlite3_finalize(get);
    sqlite3_finalize(set);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    free(blob[0]);
    free(blob[1]);
}

TCase *fj_tcase_cache(void)
{
    TCase *tc = tcase_create("cache");
    tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 20);
    fj_cache_tests_kernels(tc);
    fj_cache_tests_lease(tc);
    fj_cache_tests_open(tc);
    fj_cache_tests_key(tc);
    fj_cache_tests_tuning(tc);
    fj_cache_tests_verdicts(tc);
    fj_cache_tests_bundle(tc);
    return tc;
}
