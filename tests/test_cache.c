/* test_cache.c - unit tests of src/cache (no CUDA): round trip, persistence, leases
 * across threads and processes, corruption recovery, read-only and memory-only modes,
 * maintenance calls, schema migration, tuning rows, bundles (export, import, merge,
 * immutable open) and explaining misses. Only the migration test speaks SQL itself, to
 * build a file of the old schema. Each test works in its own directory under a per-TCase root that
 * the unchecked teardown removes, so a failed test (which exits early) leaves nothing.
 * Works in CK_FORK and CK_NOFORK modes; forked helpers never call ck_assert. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <xxhash.h>

#include "cache.h"

/* cache.c's test hook: open existing files read-only (chmod does not stop root). */
extern int fj_cache_debug_force_readonly;

/* ---- fixtures and helpers --------------------------------------------------------- */

static char g_root[64];   /* per TCase, made by the unchecked setup */

static struct {
    pthread_mutex_t mu;
    int n[4];
    char last[4][512];
} g_log = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void log_cb(void *user, int level, const char *msg)
{
    (void)user;
    if (level < 0 || level > 3)
        return;
    pthread_mutex_lock(&g_log.mu);
    g_log.n[level]++;
    snprintf(g_log.last[level], sizeof g_log.last[level], "%s", msg);
    pthread_mutex_unlock(&g_log.mu);
}

static int log_count(int level)
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

static void rm_rf(const char *path)
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
static void make_dir(char *buf, size_t n)
{
    ck_assert_msg(g_root[0], "no temp root");
    snprintf(buf, n, "%s/t.XXXXXX", g_root);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

static fj_key key_of(int seed)
{
    fj_key k;
    for (int i = 0; i < 16; i++)
        k.b[i] = (uint8_t)(seed * 31 + i * 7 + 1);
    return k;
}

/* A deterministic entry; free with fj_entry_free. */
static void make_entry(fj_entry *e, int seed, size_t size)
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

static void assert_same(const fj_entry *got, const fj_entry *want)
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
static int same_blob(const fj_entry *got, const fj_entry *want)
{
    return got->blob_size == want->blob_size
           && memcmp(got->blob, want->blob, want->blob_size) == 0
           && strcmp(got->name, want->name) == 0;
}

static fj_cache *open_ok(const char *dir)
{
    fj_cache *c = NULL;
    ck_assert_int_eq(fj_cache_open(&c, dir, log_cb, NULL), 0);
    ck_assert_ptr_nonnull(c);
    return c;
}

static void put_seed(fj_cache *c, int seed, size_t size)
{
    fj_entry e;
    make_entry(&e, seed, size);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_entry_free(&e);
}

static int64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int count_aside(const char *dir)
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

static int wait_child(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- basics ----------------------------------------------------------------------- */

START_TEST(test_round_trip)
{
    char dir[128], want_path[160];
    fj_entry e, got, empty;
    fj_cache_counters k;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    snprintf(want_path, sizeof want_path, "%s/kernels.db", dir);
    ck_assert_str_eq(fj_cache_path(c), want_path);
    ck_assert_int_eq(fj_cache_readonly(c), 0);

    make_entry(&e, 2, 5000);
    int64_t t0 = (int64_t)time(NULL);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_int_ge(got.created, t0);
    ck_assert_int_ge(got.last_used, got.created);
    ck_assert_int_eq(got.hits, 1);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    ck_assert_int_eq(got.hits, 2);
    fj_entry_free(&got);

    /* An empty blob and NULL strings are stored as empty, not as SQL NULL. */
    memset(&empty, 0, sizeof empty);
    empty.key = key_of(99);
    strcpy(empty.arch, "sm_100a");
    ck_assert_int_eq(fj_cache_put(c, &empty), 0);
    ck_assert_int_eq(fj_cache_get(c, &empty.key, &got), 1);
    ck_assert_uint_eq(got.blob_size, 0);
    ck_assert_str_eq(got.name, "");
    ck_assert_str_eq(got.arch, "sm_100a");
    fj_entry_free(&got);

    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.puts, 2);
    ck_assert_uint_eq(k.hits, 3);
    ck_assert_uint_eq(k.misses, 0);
    ck_assert_uint_eq(k.corrupt, 0);
    fj_entry_free(&e);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_miss)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_key unknown = key_of(1234);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 1, 64);
    ck_assert_int_eq(fj_cache_get(c, &unknown, &got), 0);
    ck_assert_ptr_null(got.blob);
    ck_assert_ptr_null(got.name);
    fj_entry_free(&got);   /* harmless on a miss */
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.misses, 1);
    ck_assert_uint_eq(k.hits, 0);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_persistence)
{
    char dir[128], nested[192];
    fj_entry e, got;
    struct stat sb;
    make_dir(dir, sizeof dir);
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);   /* mkdir -p */
    fj_cache *c = open_ok(nested);
    ck_assert_ptr_nonnull(fj_cache_path(c));
    ck_assert_int_eq(stat(nested, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    make_entry(&e, 3, 70000);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    c = open_ok(nested);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_int_eq(got.hits, 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* ---- leases ----------------------------------------------------------------------- */

#define N_THREADS 8

static struct {
    fj_cache *c;
    pthread_barrier_t go;
    atomic_int compiles, hits, bad;
} g_race;

static void *race_thread(void *arg)
{
    fj_entry want, got;
    fj_key k = key_of(7);
    (void)arg;
    make_entry(&want, 7, 4096);
    pthread_barrier_wait(&g_race.go);
    int r = fj_cache_lease(g_race.c, &k, 10000, &got);
    if (r == 0) {
        atomic_fetch_add(&g_race.compiles, 1);
        nap_ms(100);   /* "compiling" */
        if (fj_cache_put(g_race.c, &want) != 0)
            atomic_fetch_add(&g_race.bad, 1);
    } else if (r == 1 && same_blob(&got, &want)) {
        atomic_fetch_add(&g_race.hits, 1);
    } else {
        atomic_fetch_add(&g_race.bad, 1);
    }
    fj_entry_free(&got);
    fj_entry_free(&want);
    return NULL;
}

START_TEST(test_lease_threads)
{
    char dir[128];
    pthread_t t[N_THREADS];
    fj_cache_counters k;
    make_dir(dir, sizeof dir);
    g_race.c = open_ok(dir);
    atomic_store(&g_race.compiles, 0);
    atomic_store(&g_race.hits, 0);
    atomic_store(&g_race.bad, 0);
    pthread_barrier_init(&g_race.go, NULL, N_THREADS);
    for (int i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, race_thread, NULL), 0);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&g_race.go);
    ck_assert_int_eq(atomic_load(&g_race.compiles), 1);
    ck_assert_int_eq(atomic_load(&g_race.hits), N_THREADS - 1);
    ck_assert_int_eq(atomic_load(&g_race.bad), 0);
    fj_cache_counters_get(g_race.c, &k);
    ck_assert_uint_eq(k.puts, 1);
    ck_assert_uint_ge(k.lease_waits, 1);
    ck_assert_uint_eq(k.lease_takeovers, 0);
    fj_cache_close(g_race.c);
    rm_rf(dir);
}
END_TEST

#define N_PROCS 4

/* One racing process: opens (all at once: creating the file races too), waits at the
 * gate so that the leases start together, then leases; the owner appends a line. */
static int race_child(const char *dir, const char *counter, int ready, int gate)
{
    fj_cache *c = NULL;
    fj_entry want, got;
    fj_key k = key_of(11);
    char ch;
    int rc = 0;

    if (fj_cache_open(&c, dir, NULL, NULL) != 0 || !fj_cache_path(c))
        return 21;
    if (write(ready, "r", 1) != 1)
        return 26;
    if (read(gate, &ch, 1) != 0)   /* EOF when the parent closes its end */
        return 20;
    make_entry(&want, 11, 20000);
    int r = fj_cache_lease(c, &k, 15000, &got);
    if (r == 0) {
        int fd = open(counter, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd == -1 || write(fd, "compiled\n", 9) != 9)
            rc = 22;
        if (fd != -1)
            close(fd);
        nap_ms(150);
        if (fj_cache_put(c, &want) != 0)
            rc = 23;
    } else if (r != 1 || !same_blob(&got, &want)) {
        rc = 24;
    }
    fj_entry_free(&got);
    if (!rc && (fj_cache_get(c, &k, &got) != 1 || !same_blob(&got, &want)))
        rc = 25;
    fj_entry_free(&got);
    fj_entry_free(&want);
    fj_cache_close(c);
    return rc;
}

START_TEST(test_lease_processes)
{
    char dir[128], counter[160], buf[256];
    int gate[2], ready[2], n_ready = 0;
    pid_t pid[N_PROCS];
    fj_entry got;
    fj_key k = key_of(11);
    make_dir(dir, sizeof dir);
    snprintf(counter, sizeof counter, "%s/compiles.txt", dir);
    ck_assert_int_eq(pipe(gate), 0);
    ck_assert_int_eq(pipe(ready), 0);
    for (int i = 0; i < N_PROCS; i++) {
        pid[i] = fork();
        ck_assert_int_ge(pid[i], 0);
        if (pid[i] == 0) {
            close(gate[1]);
            close(ready[0]);
            _exit(race_child(dir, counter, ready[1], gate[0]));
        }
    }
    close(gate[0]);
    close(ready[1]);
    while (n_ready < N_PROCS && read(ready[0], buf, 1) == 1)
        n_ready++;
    close(ready[0]);
    close(gate[1]);   /* opens the gate: every child reads EOF at once */
    for (int i = 0; i < N_PROCS; i++)
        ck_assert_int_eq(wait_child(pid[i]), 0);
    ck_assert_int_eq(n_ready, N_PROCS);

    int fd = open(counter, O_RDONLY);
    ck_assert_int_ne(fd, -1);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    ck_assert_int_eq(n, 9);   /* exactly one "compiled\n" */

    fj_cache *c = open_ok(dir);
    ck_assert_int_eq(fj_cache_get(c, &k, &got), 1);
    ck_assert_uint_eq(got.blob_size, 20000);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_lease_dead_owner)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_key key = key_of(21);
    make_dir(dir, sizeof dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {   /* takes the lease and dies without releasing it */
        fj_cache *c = NULL;
        fj_entry e;
        if (fj_cache_open(&c, dir, NULL, NULL) != 0 || !fj_cache_path(c))
            _exit(1);
        _exit(fj_cache_lease(c, &key, 1000, &e) == 0 ? 0 : 2);
    }
    ck_assert_int_eq(wait_child(pid), 0);   /* reaped: the pid is now gone */

    fj_cache *c = open_ok(dir);
    int64_t t0 = ms_now();
    ck_assert_int_eq(fj_cache_lease(c, &key, 3000, &got), 0);
    ck_assert_int_lt(ms_now() - t0, 1000);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.lease_takeovers, 1);
    ck_assert_uint_eq(k.lease_waits, 0);
    put_seed(c, 21, 100);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* A live owner that never publishes: the waiter gives up after timeout_ms. */
START_TEST(test_lease_timeout)
{
    char dir[128], ch = 0;
    int ready[2], hold[2];
    fj_entry got;
    fj_cache_counters k;
    fj_key key = key_of(31);
    make_dir(dir, sizeof dir);
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        fj_cache *c = NULL;
        fj_entry e;
        struct pollfd p = { hold[0], POLLIN, 0 };
        close(ready[0]);
        close(hold[1]);
        if (fj_cache_open(&c, dir, NULL, NULL) != 0 || fj_cache_lease(c, &key, 1000, &e) != 0)
            _exit(1);
        if (write(ready[1], "r", 1) != 1)
            _exit(2);
        poll(&p, 1, 10000);   /* until the parent is done (or gone) */
        fj_cache_close(c);
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    ck_assert_int_eq(read(ready[0], &ch, 1), 1);

    fj_cache *c = open_ok(dir);
    int64_t t0 = ms_now();
    ck_assert_int_eq(fj_cache_lease(c, &key, 300, &got), 0);
    int64_t dt = ms_now() - t0;
    ck_assert_int_ge(dt, 300);
    ck_assert_int_lt(dt, 3000);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.lease_waits, 1);
    ck_assert_uint_eq(k.lease_takeovers, 0);
    fj_cache_close(c);
    close(hold[1]);
    close(ready[0]);
    ck_assert_int_eq(wait_child(pid), 0);
    rm_rf(dir);
}
END_TEST

/* Release hands the key to the next caller at once; put makes the next caller a hit. */
START_TEST(test_lease_release_and_put)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_key key = key_of(41);
    make_dir(dir, sizeof dir);
    fj_cache *a = open_ok(dir), *b = open_ok(dir);

    ck_assert_int_eq(fj_cache_lease(a, &key, 1000, &got), 0);
    fj_cache_lease_release(a, &key);
    int64_t t0 = ms_now();
    ck_assert_int_eq(fj_cache_lease(b, &key, 3000, &got), 0);
    ck_assert_int_lt(ms_now() - t0, 1000);
    fj_cache_counters_get(b, &k);
    ck_assert_uint_eq(k.lease_waits, 0);
    ck_assert_uint_eq(k.lease_takeovers, 0);

    put_seed(b, 41, 333);   /* also drops b's lease */
    ck_assert_int_eq(fj_cache_lease(a, &key, 1000, &got), 1);
    ck_assert_uint_eq(got.blob_size, 333);
    fj_entry_free(&got);

    /* Memory-only caches do not lease. */
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_lease(m, &key, 1000, &got), 0);
    fj_cache_close(m);
    fj_cache_close(a);
    fj_cache_close(b);
    rm_rf(dir);
}
END_TEST

/* ---- corruption ------------------------------------------------------------------- */

START_TEST(test_corrupt_entry)
{
    char dir[128];
    fj_entry got;
    fj_cache_counters k;
    fj_cache_stats st;
    fj_key key = key_of(5), other = key_of(6);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 5, 1000);
    put_seed(c, 6, 1000);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &key), 0);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    ck_assert_ptr_null(got.blob);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_uint_eq(k.misses, 1);
    /* The bad row is gone; the good one untouched. */
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &key), -1);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(fj_cache_get(c, &other, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_corrupt_file)
{
    char dir[128], path[160], junk[8192];
    fj_entry e, got;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = "this is not an SQLite database. "[i % 32];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);

    fj_cache *c = open_ok(dir);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(count_aside(dir), 1);
    ck_assert_int_ge(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "corrupt"));
    make_entry(&e, 8, 2048);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    c = open_ok(dir);   /* the fresh file is a good one */
    ck_assert_int_eq(count_aside(dir), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    fj_entry_free(&e);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* Damage inside the file (not its header): SQLite reports it while reading; a miss. */
START_TEST(test_corrupt_page)
{
    char dir[128], path[160], junk[4096];
    struct stat sb;
    fj_entry got;
    fj_cache_counters k;
    fj_key key = key_of(15);
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 15, 40000);   /* about ten overflow pages at the end of the file */
    fj_cache_close(c);
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_ge(sb.st_size, 10 * 4096);
    memset(junk, 0xff, sizeof junk);
    int fd = open(path, O_WRONLY);
    ck_assert_int_ne(fd, -1);
    for (off_t off = sb.st_size - 3 * 4096; off < sb.st_size; off += 4096)
        ck_assert_int_eq(pwrite(fd, junk, sizeof junk, off), (ssize_t)sizeof junk);
    close(fd);

    c = open_ok(dir);   /* header and schema are intact: the file is kept */
    ck_assert_ptr_nonnull(fj_cache_path(c));
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    ck_assert_ptr_null(got.blob);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    ck_assert_uint_eq(k.misses, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* A file from a newer fajit is left alone: memory only, with a warning. */
START_TEST(test_newer_version)
{
    char dir[128], path[160];
    unsigned char v[4] = { 0, 0, 0, 99 }, back[4];
    fj_entry got;
    fj_key key = key_of(9);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 9, 256);
    fj_cache_close(c);
    /* user_version is the big-endian 32-bit word at offset 60 of the file header. */
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    int fd = open(path, O_RDWR);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pwrite(fd, v, 4, 60), 4);
    close(fd);

    c = open_ok(dir);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_ge(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "newer"));
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    put_seed(c, 9, 256);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    ck_assert_int_eq(count_aside(dir), 0);
    fd = open(path, O_RDONLY);
    ck_assert_int_eq(pread(fd, back, 4, 60), 4);
    close(fd);
    ck_assert_mem_eq(back, v, 4);
    rm_rf(dir);
}
END_TEST

/* ---- read-only and memory-only ---------------------------------------------------- */

START_TEST(test_readonly)
{
    char dir[128], path[160];
    fj_entry e, got;
    fj_cache_counters k;
    fj_key fresh = key_of(77);
    int n_checked = -1;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 4, 3000);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);

    /* root ignores modes, so there the test hook stands in for them. */
    if (geteuid() == 0) {
        fj_cache_debug_force_readonly = 1;
    } else {
        ck_assert_int_eq(chmod(path, 0444), 0);
        ck_assert_int_eq(chmod(dir, 0555), 0);
    }
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);

    int64_t t0 = ms_now();
    ck_assert_int_eq(fj_cache_lease(c, &fresh, 5000, &got), 0);   /* at once */
    ck_assert_int_lt(ms_now() - t0, 500);
    int info0 = log_count(FJ_LOG_INFO);
    put_seed(c, 77, 10);
    put_seed(c, 78, 10);
    ck_assert_int_eq(log_count(FJ_LOG_INFO), info0 + 1);   /* said once */
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.put_skipped, 2);
    ck_assert_uint_eq(k.puts, 0);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);
    ck_assert_int_eq(fj_cache_clear(c), -1);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &e.key), -1);
    ck_assert_int_eq(fj_cache_verify(c, &n_checked), 0);
    ck_assert_int_eq(n_checked, 1);
    fj_cache_close(c);

    chmod(dir, 0755);
    chmod(path, 0644);
    c = open_ok(dir);   /* writable again: nothing was persisted */
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_int_eq(fj_cache_get(c, &fresh, &got), 0);
    fj_cache_close(c);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* The real detection (access() on the file and the directory), without the hook. Root
 * ignores modes, so there a child drops to uid/gid 65534 first. Returns 0 when fine. */
static int readonly_checks(const char *dir, const fj_entry *e)
{
    fj_cache *c = NULL;
    fj_entry got;
    fj_cache_counters k;
    int rc = 0;
    if (fj_cache_open(&c, dir, NULL, NULL) != 0)
        return 1;
    if (!fj_cache_readonly(c) || !fj_cache_path(c))
        rc = 2;
    else if (fj_cache_get(c, &e->key, &got) != 1 || !same_blob(&got, e))
        rc = 3;
    else if (fj_cache_put(c, e) != 0)
        rc = 4;
    fj_entry_free(&got);
    fj_cache_counters_get(c, &k);
    if (!rc && (k.put_skipped != 1 || k.hits != 1))
        rc = 5;
    fj_cache_close(c);
    return rc;
}

START_TEST(test_readonly_modes)
{
    char dir[128], path[160];
    fj_entry e;
    int rc;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 14, 1500);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    fj_cache_close(c);
    ck_assert_int_eq(chmod(path, 0444), 0);
    ck_assert_int_eq(chmod(dir, 0555), 0);
    ck_assert_int_eq(chmod(g_root, 0711), 0);   /* traversable by the unprivileged child */
    if (geteuid() == 0) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            if (setgroups(0, NULL) == -1 || setgid(65534) == -1 || setuid(65534) == -1)
                _exit(77);   /* cannot drop privileges here: nothing to check */
            _exit(readonly_checks(dir, &e));
        }
        rc = wait_child(pid);
        if (rc == 77)
            rc = 0;
    } else {
        rc = readonly_checks(dir, &e);
    }
    chmod(g_root, 0700);
    ck_assert_int_eq(rc, 0);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

START_TEST(test_memory_only)
{
    char dir[128], file[160], bad[192];
    fj_entry e, got;
    fj_cache_stats st;
    make_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/plain", dir);
    snprintf(bad, sizeof bad, "%s/plain/sub", dir);   /* mkdir fails: ENOTDIR */
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    close(fd);

    fj_cache *c = open_ok(bad);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "memory only"));
    make_entry(&e, 12, 777);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(st.bytes, 777);
    ck_assert_int_eq(st.file_bytes, 0);
    fj_cache_close(c);

    /* dir == NULL: memory only by request, so no warning. */
    c = open_ok(NULL);
    ck_assert_ptr_null(fj_cache_path(c));
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 0);
    fj_cache_close(c);
    fj_cache_close(NULL);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

/* ---- maintenance ------------------------------------------------------------------ */

START_TEST(test_verify)
{
    char dir[128];
    int n = -1;
    fj_cache_counters k;
    fj_key bad = key_of(2);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 500 * (size_t)s);
    ck_assert_int_eq(fj_cache_verify(c, &n), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fj_cache_debug_corrupt(c, &bad), 0);
    ck_assert_int_eq(fj_cache_verify(c, &n), 1);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(fj_cache_verify(c, &n), 0);
    ck_assert_int_eq(n, 2);
    fj_cache_counters_get(c, &k);
    ck_assert_uint_eq(k.corrupt, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_clear)
{
    char dir[128];
    fj_entry got;
    fj_cache_stats st;
    fj_key key = key_of(1);
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 100);
    ck_assert_int_eq(fj_cache_clear(c), 0);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(st.bytes, 0);
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 0);
    put_seed(c, 1, 100);   /* still usable */
    ck_assert_int_eq(fj_cache_get(c, &key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_prune)
{
    char dir[128];
    fj_entry got;
    fj_cache_stats st;
    int64_t removed = -1, freed = -1;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 5; s++)
        put_seed(c, s, 1000);
    /* loads make 2 and 4 the most recently used (or, within one second, the most hit) */
    for (int s = 2; s <= 4; s += 2) {
        fj_key k = key_of(s);
        ck_assert_int_eq(fj_cache_get(c, &k, &got), 1);
        fj_entry_free(&got);
    }
    ck_assert_int_eq(fj_cache_prune(c, 5000, NULL, &removed, &freed), 0);   /* fits */
    ck_assert_int_eq(removed, 0);
    fj_key keep = key_of(5);
    ck_assert_int_eq(fj_cache_prune(c, 3000, &keep, &removed, &freed), 0);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(freed, 2000);
    for (int s = 1; s <= 5; s++) {
        fj_key k = key_of(s);
        int want = s != 1 && s != 3;
        ck_assert_msg(fj_cache_get(c, &k, &got) == want, "seed %d %s", s,
                      want ? "was pruned" : "was kept");
        if (want)
            fj_entry_free(&got);
    }
    /* `keep` stays even when it alone is over the cap; everything else goes */
    ck_assert_int_eq(fj_cache_prune(c, 10, &keep, &removed, &freed), 0);
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 1);
    ck_assert_int_eq(fj_cache_prune(c, 0, NULL, &removed, &freed), 0);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(fj_cache_prune(c, -1, NULL, NULL, NULL), -1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_stats)
{
    char dir[128];
    fj_cache_stats st;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 0);
    ck_assert_int_eq(st.bytes, 0);
    put_seed(c, 1, 100);
    put_seed(c, 2, 300000);
    put_seed(c, 2, 300);   /* replaces */
    ck_assert_int_eq(fj_cache_stats_get(c, &st), 0);
    ck_assert_int_eq(st.entries, 2);
    ck_assert_int_eq(st.bytes, 400);
    ck_assert_int_ge(st.file_bytes, 300000);   /* the big blob went through the WAL */
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

typedef struct { int calls, stop_after, bad; size_t sizes; } list_acc;

static int list_cb(void *user, const fj_entry *e)
{
    list_acc *a = user;
    char want[32];
    int seed = (int)(e->blob_size / 10);
    fj_key k = key_of(seed);
    snprintf(want, sizeof want, "ref f16 #%d", seed);
    a->calls++;
    a->sizes += e->blob_size;
    if (e->blob || strcmp(e->name, want) != 0 || memcmp(e->key.b, k.b, 16) != 0
        || e->nvrtc_version != 12080 + seed || e->regs != 128)
        a->bad++;
    return a->stop_after && a->calls >= a->stop_after;
}

START_TEST(test_list)
{
    char dir[128];
    list_acc a = { 0, 0, 0, 0 };
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    for (int s = 1; s <= 3; s++)
        put_seed(c, s, 10 * (size_t)s);   /* size encodes the seed for list_cb */
    ck_assert_int_eq(fj_cache_list(c, list_cb, &a), 0);
    ck_assert_int_eq(a.calls, 3);
    ck_assert_int_eq(a.bad, 0);
    ck_assert_uint_eq(a.sizes, 60);

    list_acc stop = { 0, 1, 0, 0 };
    ck_assert_int_eq(fj_cache_list(c, list_cb, &stop), 0);
    ck_assert_int_eq(stop.calls, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* ---- key parts and schema migration ----------------------------------------------- */

static const unsigned char k_digest[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                            15, 16 };

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

static int count_parts_cb(void *user, const fj_entry *e)
{
    *(int *)user += e->parts != NULL;
    return 0;
}

START_TEST(test_parts_round_trip)
{
    char dir[128];
    fj_entry e, plain, got;
    int n_parts = 0;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_entry(&e, 21, 100);
    e.parts = fj_key_parts(k_digest, "f", "P", "-O3", "sm_90a", 13000, 1);
    ck_assert_int_eq(fj_cache_put(c, &e), 0);
    make_entry(&plain, 22, 100);   /* parts NULL: accepted, read back as NULL */
    ck_assert_int_eq(fj_cache_put(c, &plain), 0);
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    ck_assert_str_eq(got.parts, e.parts);
    fj_entry_free(&got);
    ck_assert_ptr_null(got.parts);
    ck_assert_int_eq(fj_cache_get(c, &plain.key, &got), 1);
    ck_assert_ptr_null(got.parts);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_list(c, count_parts_cb, &n_parts), 0);
    ck_assert_int_eq(n_parts, 1);
    fj_cache_close(c);
    fj_entry_free(&e);
    fj_entry_free(&plain);
    rm_rf(dir);
}
END_TEST

/* The file layout of schema 1 (fajit 0.1.0), as it shipped. */
static const char v1_schema[] =
    "PRAGMA journal_mode = WAL;"
    "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT);"
    "CREATE TABLE kernels ("
    " key BLOB PRIMARY KEY, arch TEXT NOT NULL, nvrtc_version INTEGER NOT NULL,"
    " name TEXT NOT NULL, options TEXT NOT NULL, blob BLOB NOT NULL,"
    " blob_size INTEGER NOT NULL, checksum INTEGER NOT NULL, log TEXT NOT NULL,"
    " compile_ms REAL, regs INTEGER, smem INTEGER, spill_bytes INTEGER,"
    " created INTEGER, last_used INTEGER, hits INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX kernels_last_used ON kernels (last_used);"
    "CREATE TABLE tuning ("
    " gpu_name TEXT, arch TEXT, sm_count INTEGER, signature TEXT, bucket TEXT,"
    " config TEXT, time_ms REAL, table_json TEXT, pinned INTEGER, fajit_version TEXT,"
    " nvrtc_version INTEGER, created INTEGER,"
    " PRIMARY KEY (gpu_name, arch, sm_count, signature, bucket));"
    "CREATE TABLE leases ("
    " key BLOB PRIMARY KEY, pid INTEGER, host TEXT, token INTEGER, heartbeat INTEGER);"
    "INSERT INTO meta VALUES ('format', '1'), ('created', '0');"
    "PRAGMA user_version = 1;";

static void write_v1_file(const char *path, const fj_entry *e)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, v1_schema, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO kernels VALUES (?1, ?2, ?3, ?4, ?5,"
                                        " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 7, 7, 0)",
                                        -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_blob(st, 1, e->key.b, 16, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, e->arch, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, e->nvrtc_version);
    sqlite3_bind_text(st, 4, e->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, e->options, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 6, e->blob, (int)e->blob_size, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)e->blob_size);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)XXH3_64bits(e->blob, e->blob_size));
    sqlite3_bind_text(st, 9, e->log, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 10, e->compile_ms);
    sqlite3_bind_int(st, 11, e->regs);
    sqlite3_bind_int(st, 12, e->smem);
    sqlite3_bind_int(st, 13, e->spill_bytes);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/* PRAGMA user_version: the big-endian 32-bit word at offset 60 of the file header. */
static int file_user_version(const char *path)
{
    unsigned char v[4] = { 0 };
    int fd = open(path, O_RDONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pread(fd, v, 4, 60), 4);
    close(fd);
    return v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3];
}

/* An old file is read as it is when read-only, and migrated (not set aside) when
 * writable; its entries keep hitting: the kernel keys did not change. */
START_TEST(test_migrate_v1)
{
    char dir[128], path[160], bundle[160];
    fj_entry e, e2, got;
    fj_tune_row row;
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    snprintf(bundle, sizeof bundle, "%s/old.fjb", dir);
    make_entry(&e, 23, 3000);
    write_v1_file(path, &e);
    ck_assert_int_eq(file_user_version(path), 1);

    fj_cache_debug_force_readonly = 1;
    fj_cache *c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_ptr_null(got.parts);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_tune_get(c, "g", "sm_90a", 1, "s", "b", &row), 0);
    /* An old read-only file exports (without parts); an old file imports as it is. */
    ck_assert_int_eq(fj_cache_export(c, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    fj_cache_close(c);
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m, bundle, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(fj_cache_import(m, path, &st), 0);
    ck_assert_int_eq(st.kernels_present, 1);
    ck_assert_int_eq(fj_cache_get(m, &e.key, &got), 1);
    assert_same(&got, &e);
    fj_entry_free(&got);
    fj_cache_close(m);
    ck_assert_int_eq(file_user_version(path), 1);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_readonly(c), 0);
    ck_assert_str_eq(fj_cache_path(c), path);
    ck_assert_int_eq(count_aside(dir), 0);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), 0);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_INFO], "migrated"));
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    assert_same(&got, &e);
    ck_assert_ptr_null(got.parts);
    fj_entry_free(&got);
    make_entry(&e2, 24, 500);
    e2.parts = fj_key_parts(k_digest, "f", "P", "O", "sm_90a", 13000, 1);
    ck_assert_int_eq(fj_cache_put(c, &e2), 0);
    fj_cache_close(c);   /* checkpoints the WAL into the file */
    ck_assert_int_eq(file_user_version(path), FJ_CACHE_SCHEMA_VERSION);

    c = open_ok(dir);   /* a second open finds schema 2: nothing more to do */
    ck_assert_int_eq(fj_cache_get(c, &e2.key, &got), 1);
    ck_assert_str_eq(got.parts, e2.parts);
    fj_entry_free(&got);
    ck_assert_int_eq(fj_cache_get(c, &e.key, &got), 1);
    fj_entry_free(&got);
    fj_cache_close(c);
    fj_entry_free(&e);
    fj_entry_free(&e2);
    rm_rf(dir);
}
END_TEST

/* ---- tuning rows ------------------------------------------------------------------ */

static void make_row(fj_tune_row *r, const char *arch, const char *sig, const char *bucket,
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
static const char *config_of(fj_cache *c, const char *sig, const char *bucket)
{
    static char buf[128];
    fj_tune_row r;
    buf[0] = '\0';
    if (fj_cache_tune_get(c, "NVIDIA H200", "sm_90a", 132, sig, bucket, &r) == 1)
        snprintf(buf, sizeof buf, "%s", r.config);
    fj_tune_row_free(&r);
    return buf;
}

static void assert_same_row(const fj_tune_row *got, const fj_tune_row *want)
{
    ck_assert_str_eq(got->gpu_name, want->gpu_name);
    ck_assert_str_eq(got->arch, want->arch);
    ck_assert_int_eq(got->sm_count, want->sm_count);
    ck_assert_str_eq(got->signature, want->signature);
    ck_assert_str_eq(got->bucket, want->bucket);
    ck_assert_str_eq(got->config, want->config);
    ck_assert_double_eq(got->time_ms, want->time_ms);
    ck_assert_str_eq(got->table_json, want->table_json ? want->table_json : "");
    ck_assert_int_eq(got->pinned, want->pinned);
    ck_assert_str_eq(got->fajit_version, want->fajit_version);
    ck_assert_int_eq(got->nvrtc_version, want->nvrtc_version);
}

typedef struct { int n, stop_after; char first[64]; } tune_acc;

static int tune_list_cb(void *user, const fj_tune_row *r)
{
    tune_acc *a = user;
    if (a->n++ == 0)
        snprintf(a->first, sizeof a->first, "%s", r->bucket);
    return a->stop_after && a->n >= a->stop_after;
}

START_TEST(test_tune_round_trip)
{
    char dir[128];
    fj_tune_row r, r2, got;
    tune_acc acc = { 0, 0, "" }, stop = { 0, 1, "" };
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_row(&r, "sm_90a", "fwd.bf16.hd128.causal.gqa4", "sq<=2k", "128x64w4s1", 0.8125, 0, 0);
    r.table_json = "{\"128x64w4s1\": 0.8125, \"64x64w4s1\": 0.9}";
    int64_t t0 = (int64_t)time(NULL);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    make_row(&r2, "sm_90a", "fwd.bf16.hd128.causal.gqa4", "sq<=1k", "64x64w4s1", 0.5, 0, 1234);
    ck_assert_int_eq(fj_cache_tune_put(c, &r2), 0);   /* table_json NULL: stored as "" */
    fj_cache_close(c);

    c = open_ok(dir);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, r.sm_count, r.signature,
                                       r.bucket, &got), 1);
    assert_same_row(&got, &r);
    ck_assert_int_ge(got.created, t0);
    fj_tune_row_free(&got);
    ck_assert_ptr_null(got.table_json);
    ck_assert_int_eq(fj_cache_tune_get(c, r2.gpu_name, r2.arch, r2.sm_count, r2.signature,
                                       r2.bucket, &got), 1);
    assert_same_row(&got, &r2);
    ck_assert_int_eq(got.created, 1234);
    fj_tune_row_free(&got);
    /* Every part of the key matters. */
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, r.sm_count, r.signature,
                                       "sq<=4k", &got), 0);
    ck_assert_ptr_null(got.table_json);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, r.arch, 114, r.signature, r.bucket,
                                       &got), 0);
    ck_assert_int_eq(fj_cache_tune_get(c, r.gpu_name, "sm_100a", r.sm_count, r.signature,
                                       r.bucket, &got), 0);
    ck_assert_int_eq(fj_cache_tune_list(c, tune_list_cb, &acc), 0);
    ck_assert_int_eq(acc.n, 2);
    ck_assert_str_eq(acc.first, "sq<=1k");   /* ordered by key */
    ck_assert_int_eq(fj_cache_tune_list(c, tune_list_cb, &stop), 0);
    ck_assert_int_eq(stop.n, 1);
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

START_TEST(test_tune_pin)
{
    char dir[128];
    static const char sig[] = "fwd.bf16.hd128.causal.gqa4", b[] = "sq<=4k";
    fj_tune_row r;
    make_dir(dir, sizeof dir);
    fj_cache *c = open_ok(dir);
    make_row(&r, "sm_90a", sig, b, "a", 1.0, 0, 0);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 1), 1);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, "sq<=8k", 1), 0);

    make_row(&r, "sm_90a", sig, b, "b", 0.5, 0, 0);   /* faster, but not pinned */
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 1);
    ck_assert_str_eq(config_of(c, sig, b), "a");
    make_row(&r, "sm_90a", sig, b, "c", 2.0, 1, 0);   /* pinned replaces pinned */
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_str_eq(config_of(c, sig, b), "c");
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 0), 1);
    make_row(&r, "sm_90a", sig, b, "d", 3.0, 0, 0);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    ck_assert_str_eq(config_of(c, sig, b), "d");
    fj_cache_close(c);

    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), -1);
    ck_assert_int_eq(fj_cache_tune_pin(c, r.gpu_name, "sm_90a", 132, sig, b, 1), -1);
    ck_assert_str_eq(config_of(c, sig, b), "d");
    fj_cache_close(c);
    rm_rf(dir);
}
END_TEST

/* ---- bundles ---------------------------------------------------------------------- */

static const char k_sig[] = "fwd.bf16.hd128.causal.gqa4";

/* Kernels 1 (sm_80), 2 (sm_90a, with parts), 3 (sm_80); one tuning row per arch. */
static void fill_source(fj_cache *c)
{
    fj_entry e;
    fj_tune_row r;
    for (int s = 1; s <= 3; s++) {
        make_entry(&e, s, 1000 * (size_t)s);
        if (s == 2)
            e.parts = fj_key_parts(k_digest, "f", "P", "O", "sm_90a", 12082, 1);
        ck_assert_int_eq(fj_cache_put(c, &e), 0);
        fj_entry_free(&e);
    }
    make_row(&r, "sm_90a", k_sig, "sq<=1k", "128x64w4s1", 0.25, 1, 1000);
    r.table_json = "{}";
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
    make_row(&r, "sm_80", k_sig, "sq<=1k", "128x64w4s1", 0.5, 0, 1000);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
}

/* 1 when seed `s`'s entry is in c with its blob intact, 0 when it misses. */
static int has_seed(fj_cache *c, int s)
{
    fj_entry want, got;
    fj_key k = key_of(s);
    int hit = fj_cache_get(c, &k, &got);
    if (hit) {
        make_entry(&want, s, 1000 * (size_t)s);
        assert_same(&got, &want);
        fj_entry_free(&want);
    }
    fj_entry_free(&got);
    return hit;
}

static int count_prefix(const char *dir, const char *prefix)
{
    int n = 0;
    struct dirent *d;
    DIR *dp = opendir(dir);
    if (!dp)
        return -1;
    while ((d = readdir(dp)) != NULL)
        n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
    closedir(dp);
    return n;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

START_TEST(test_export_import)
{
    char dir[128], src[160], dst[160], bundle[160], side[200];
    unsigned char hdr[2];
    fj_bundle_stats st;
    fj_entry got;
    fj_tune_row r;
    fj_key k2 = key_of(2);
    make_dir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(dst, sizeof dst, "%s/dst", dir);
    snprintf(bundle, sizeof bundle, "%s/fleet.fjb", dir);
    fj_cache *a = open_ok(src);
    fill_source(a);
    ck_assert_int_eq(has_seed(a, 2), 1);
    ck_assert_int_eq(has_seed(a, 2), 1);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_int_eq(st.corrupt, 0);

    /* One self-contained file in rollback-journal mode (header bytes 18, 19 = 1), with
     * nothing beside it. */
    int fd = open(bundle, O_RDONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pread(fd, hdr, 2, 18), 2);
    close(fd);
    ck_assert_int_eq(hdr[0], 1);
    ck_assert_int_eq(hdr[1], 1);
    snprintf(side, sizeof side, "%s-journal", bundle);
    ck_assert(!exists(side));
    snprintf(side, sizeof side, "%s-wal", bundle);
    ck_assert(!exists(side));
    ck_assert_int_eq(count_prefix(dir, "fleet.fjb"), 1);   /* no temporary file left */
    ck_assert_int_eq(file_user_version(bundle), FJ_CACHE_SCHEMA_VERSION);

    fj_cache *b = open_ok(dst);
    ck_assert_int_eq(fj_cache_import(b, bundle, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.kernels_present, 0);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_int_eq(st.rows_kept, 0);
    ck_assert_int_eq(st.corrupt, 0);
    ck_assert_int_eq(fj_cache_get(b, &k2, &got), 1);
    ck_assert_ptr_nonnull(got.parts);
    ck_assert_ptr_nonnull(strstr(got.parts, "nvrtc=12082"));
    ck_assert_int_eq(got.hits, 1);   /* its own count: the source's 2 are not exported */
    fj_entry_free(&got);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    ck_assert_int_eq(fj_cache_tune_get(b, "NVIDIA H200", "sm_90a", 132, k_sig, "sq<=1k", &r),
                     1);
    ck_assert_str_eq(r.table_json, "{}");
    ck_assert_int_eq(r.pinned, 1);
    ck_assert_int_eq(r.created, 1000);
    fj_tune_row_free(&r);

    /* Importing again changes nothing. */
    ck_assert_int_eq(fj_cache_import(b, bundle, &st), 0);
    ck_assert_int_eq(st.kernels, 0);
    ck_assert_int_eq(st.kernels_present, 3);
    ck_assert_int_eq(st.rows, 0);
    ck_assert_int_eq(st.rows_kept, 2);

    /* Filtered by target, over an existing bundle, into a memory-only cache. */
    ck_assert_int_eq(fj_cache_export(a, bundle, "sm_90a", &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(st.rows, 1);
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m, bundle, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(has_seed(m, 2), 1);
    ck_assert_int_eq(has_seed(m, 1), 0);
    ck_assert_int_eq(fj_cache_tune_get(m, "NVIDIA H200", "sm_80", 132, k_sig, "sq<=1k", &r),
                     0);
    fj_cache_close(m);
    fj_cache_close(b);
    fj_cache_close(a);
    rm_rf(dir);
}
END_TEST

/* Offset of the first run of `n` bytes equal to `ch` in the file, or -1. */
static off_t find_run(const char *path, int ch, size_t n)
{
    static unsigned char buf[1 << 16];
    int fd = open(path, O_RDONLY);
    ssize_t got;
    size_t run = 0;
    off_t at = 0;
    if (fd == -1)
        return -1;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++, at++) {
            run = buf[i] == ch ? run + 1 : 0;
            if (run == n) {
                close(fd);
                return at - (off_t)n + 1;
            }
        }
    }
    close(fd);
    return -1;
}

START_TEST(test_import_corrupt)
{
    char dir[128], bundle[160];
    fj_bundle_stats st;
    fj_entry e, got;
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    fj_cache *a = open_ok(NULL);
    fill_source(a);
    make_entry(&e, 30, 3000);
    memset(e.blob, 'Z', e.blob_size);   /* findable in the file */
    ck_assert_int_eq(fj_cache_put(a, &e), 0);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 4);
    fj_cache_close(a);

    /* Damage one byte of that blob inside the file: SQLite cannot tell, the checksum can. */
    off_t at = find_run(bundle, 'Z', 256);
    ck_assert_int_ge(at, 0);
    int fd = open(bundle, O_WRONLY);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(pwrite(fd, "z", 1, at + 100), 1);
    close(fd);

    fj_cache *b = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(b, bundle, &st), 0);
    ck_assert_int_eq(st.corrupt, 1);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 2);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "corrupt"));
    ck_assert_int_eq(fj_cache_get(b, &e.key, &got), 0);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    fj_cache_close(b);
    fj_entry_free(&e);
    rm_rf(dir);
}
END_TEST

START_TEST(test_bundle_readonly)
{
    char dir[128], bundle[160], tier[160], junk[200];
    fj_bundle_stats st;
    fj_cache_counters k;
    fj_entry e, got;
    fj_tune_row r;
    fj_key fresh = key_of(50);
    make_dir(dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "%s/b.fjb", dir);
    snprintf(tier, sizeof tier, "%s/tier", dir);
    fj_cache *a = open_ok(NULL);
    fill_source(a);
    ck_assert_int_eq(fj_cache_export(a, bundle, NULL, &st), 0);
    ck_assert_int_eq(mkdir(tier, 0755), 0);
    snprintf(junk, sizeof junk, "%s/kernels.db", tier);   /* a bundle as a cache dir */
    ck_assert_int_eq(fj_cache_export(a, junk, NULL, &st), 0);
    fj_cache_close(a);
    ck_assert_int_eq(chmod(bundle, 0444), 0);

    fj_cache *b = NULL;
    ck_assert_int_eq(fj_cache_open_bundle(&b, bundle, log_cb, NULL), 0);
    ck_assert_int_eq(fj_cache_readonly(b), 1);
    ck_assert_str_eq(fj_cache_path(b), bundle);
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(b, s), 1);
    ck_assert_int_eq(fj_cache_tune_get(b, "NVIDIA H200", "sm_90a", 132, k_sig, "sq<=1k", &r),
                     1);
    fj_tune_row_free(&r);
    make_entry(&e, 50, 10);
    ck_assert_int_eq(fj_cache_put(b, &e), 0);   /* skipped, as for any read-only cache */
    ck_assert_int_eq(fj_cache_get(b, &fresh, &got), 0);
    ck_assert_int_eq(fj_cache_lease(b, &fresh, 5000, &got), 0);
    make_row(&r, "sm_90a", k_sig, "sq<=1k", "x", 0.1, 1, 0);
    ck_assert_int_eq(fj_cache_tune_put(b, &r), -1);
    fj_cache_counters_get(b, &k);
    ck_assert_uint_eq(k.put_skipped, 1);
    ck_assert_uint_eq(k.hits, 3);
    fj_cache_close(b);
    fj_entry_free(&e);

    fj_cache_debug_force_readonly = 1;
    b = open_ok(tier);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(b), 1);
    ck_assert_int_eq(has_seed(b, 2), 1);
    fj_cache_close(b);

    /* Missing, and not an SQLite file: -1, *out NULL, a warning. */
    snprintf(junk, sizeof junk, "%s/missing.fjb", dir);
    b = (fj_cache *)1;
    ck_assert_int_eq(fj_cache_open_bundle(&b, junk, log_cb, NULL), -1);
    ck_assert_ptr_null(b);
    snprintf(junk, sizeof junk, "%s/junk.fjb", dir);
    int fd = open(junk, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, "not a database, not at all, not even close......", 48), 48);
    close(fd);
    int warn0 = log_count(FJ_LOG_WARN);
    ck_assert_int_eq(fj_cache_open_bundle(&b, junk, log_cb, NULL), -1);
    ck_assert_ptr_null(b);
    ck_assert_int_eq(log_count(FJ_LOG_WARN), warn0 + 1);
    chmod(bundle, 0644);
    rm_rf(dir);
}
END_TEST

/* Tuning rows of two bundles in conflict: the merge does not depend on the order. */
static void put_row(fj_cache *c, const char *bucket, const char *config, double ms, int pin,
                    int64_t created)
{
    fj_tune_row r;
    make_row(&r, "sm_90a", k_sig, bucket, config, ms, pin, created);
    ck_assert_int_eq(fj_cache_tune_put(c, &r), 0);
}

static void check_merged(fj_cache *m)
{
    ck_assert_str_eq(config_of(m, k_sig, "X"), "bx");   /* pinned beats newer */
    ck_assert_str_eq(config_of(m, k_sig, "Y"), "by");   /* newer */
    ck_assert_str_eq(config_of(m, k_sig, "Z"), "bz");   /* same age: faster */
    ck_assert_str_eq(config_of(m, k_sig, "W"), "aw");   /* pinned beats newer and faster */
    ck_assert_str_eq(config_of(m, k_sig, "V"), "av");   /* only in one */
    for (int s = 1; s <= 3; s++)
        ck_assert_int_eq(has_seed(m, s), 1);
}

START_TEST(test_merge)
{
    char dir[128], pa[160], pb[160], pm[160], m1dir[160];
    fj_bundle_stats st;
    make_dir(dir, sizeof dir);
    snprintf(pa, sizeof pa, "%s/a.fjb", dir);
    snprintf(pb, sizeof pb, "%s/b.fjb", dir);
    snprintf(pm, sizeof pm, "%s/merged.fjb", dir);
    snprintf(m1dir, sizeof m1dir, "%s/m1", dir);

    fj_cache *a = open_ok(NULL), *b = open_ok(NULL);
    put_seed(a, 1, 1000);
    put_seed(a, 2, 2000);
    put_seed(b, 2, 2000);
    put_seed(b, 3, 3000);
    put_row(a, "X", "ax", 2.0, 0, 100);
    put_row(b, "X", "bx", 3.0, 1, 50);
    put_row(a, "Y", "ay", 1.0, 0, 100);
    put_row(b, "Y", "by", 1.5, 0, 200);
    put_row(a, "Z", "az", 1.0, 0, 100);
    put_row(b, "Z", "bz", 0.5, 0, 100);
    put_row(a, "W", "aw", 9.0, 1, 100);
    put_row(b, "W", "bw", 1.0, 0, 300);
    put_row(a, "V", "av", 1.0, 0, 100);
    ck_assert_int_eq(fj_cache_export(a, pa, NULL, NULL), 0);
    ck_assert_int_eq(fj_cache_export(b, pb, NULL, NULL), 0);
    fj_cache_close(a);
    fj_cache_close(b);

    fj_cache *m1 = open_ok(m1dir), *m2 = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m1, pa, &st), 0);
    ck_assert_int_eq(fj_cache_import(m1, pb, &st), 0);
    ck_assert_int_eq(st.kernels, 1);
    ck_assert_int_eq(st.kernels_present, 1);
    ck_assert_int_eq(st.rows, 3);        /* X, Y, Z taken from b */
    ck_assert_int_eq(st.rows_kept, 1);   /* W */
    ck_assert_int_eq(fj_cache_import(m2, pb, NULL), 0);
    ck_assert_int_eq(fj_cache_import(m2, pa, NULL), 0);
    check_merged(m1);
    check_merged(m2);

    /* The merged bundle carries the same. */
    ck_assert_int_eq(fj_cache_export(m1, pm, NULL, &st), 0);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.rows, 5);
    fj_cache *m3 = open_ok(NULL);
    ck_assert_int_eq(fj_cache_import(m3, pm, NULL), 0);
    check_merged(m3);
    fj_cache_close(m3);
    fj_cache_close(m2);
    fj_cache_close(m1);
    rm_rf(dir);
}
END_TEST

START_TEST(test_bundle_errors)
{
    char dir[128], path[160], other[160];
    fj_bundle_stats st;
    sqlite3 *db = NULL;
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    fj_cache *c = open_ok(dir);
    put_seed(c, 1, 1000);

    /* Never over the cache's own file, never into a missing directory. */
    ck_assert_int_eq(fj_cache_export(c, path, NULL, &st), -1);
    snprintf(other, sizeof other, "%s/no/such/dir/b.fjb", dir);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, &st), -1);
    ck_assert_int_eq(has_seed(c, 1), 1);

    /* Missing, junk, someone else's SQLite file, a newer schema: -1, nothing imported. */
    snprintf(other, sizeof other, "%s/missing.fjb", dir);
    ck_assert_int_eq(fj_cache_import(c, other, &st), -1);
    snprintf(other, sizeof other, "%s/junk.fjb", dir);
    int fd = open(other, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ne(fd, -1);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
    close(fd);
    ck_assert_int_eq(fj_cache_import(c, other, &st), -1);
    snprintf(other, sizeof other, "%s/foreign.db", dir);
    ck_assert_int_eq(sqlite3_open(other, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ck_assert_int_eq(fj_cache_import(c, other, &st), -1);
    snprintf(other, sizeof other, "%s/newer.fjb", dir);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, &st), 0);
    unsigned char v[4] = { 0, 0, 0, 99 };
    fd = open(other, O_WRONLY);
    ck_assert_int_eq(pwrite(fd, v, 4, 60), 4);
    close(fd);
    ck_assert_int_eq(fj_cache_import(c, other, &st), -1);
    ck_assert_ptr_nonnull(strstr(g_log.last[FJ_LOG_WARN], "not a fajit bundle"));
    fj_cache_close(c);

    /* Into a read-only cache. */
    snprintf(other, sizeof other, "%s/good.fjb", dir);
    c = open_ok(NULL);
    put_seed(c, 2, 2000);
    ck_assert_int_eq(fj_cache_export(c, other, NULL, NULL), 0);
    fj_cache_close(c);
    fj_cache_debug_force_readonly = 1;
    c = open_ok(dir);
    fj_cache_debug_force_readonly = 0;
    ck_assert_int_eq(fj_cache_readonly(c), 1);
    ck_assert_int_eq(fj_cache_import(c, other, &st), -1);
    ck_assert_int_eq(has_seed(c, 2), 0);
    fj_cache_close(c);
    rm_rf(dir);
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

TCase *fj_tcase_cache(void)
{
    TCase *tc = tcase_create("cache");
    tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
    tcase_add_checked_fixture(tc, test_setup, test_teardown);
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_miss);
    tcase_add_test(tc, test_persistence);
    tcase_add_test(tc, test_lease_threads);
    tcase_add_test(tc, test_lease_processes);
    tcase_add_test(tc, test_lease_dead_owner);
    tcase_add_test(tc, test_lease_timeout);
    tcase_add_test(tc, test_lease_release_and_put);
    tcase_add_test(tc, test_corrupt_entry);
    tcase_add_test(tc, test_corrupt_file);
    tcase_add_test(tc, test_corrupt_page);
    tcase_add_test(tc, test_newer_version);
    tcase_add_test(tc, test_readonly);
    tcase_add_test(tc, test_readonly_modes);
    tcase_add_test(tc, test_memory_only);
    tcase_add_test(tc, test_verify);
    tcase_add_test(tc, test_clear);
    tcase_add_test(tc, test_prune);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_key_parts);
    tcase_add_test(tc, test_parts_round_trip);
    tcase_add_test(tc, test_migrate_v1);
    tcase_add_test(tc, test_tune_round_trip);
    tcase_add_test(tc, test_tune_pin);
    tcase_add_test(tc, test_export_import);
    tcase_add_test(tc, test_import_corrupt);
    tcase_add_test(tc, test_bundle_readonly);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_bundle_errors);
    tcase_add_test(tc, test_explain);
    return tc;
}
