/* test_cache_lease.c - unit tests of src/cache/lease.c: one compile per key across threads
 * and processes, dead owners, timeouts, release. */
#include "test_cache.h"

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

/* _i = 0: a cache file; 1: memory only (the threads of one context share its leases). */
START_TEST(test_lease_threads)
{
    char dir[128];
    pthread_t t[N_THREADS];
    fj_cache_counters k;
    make_dir(dir, sizeof dir);
    g_race.c = open_ok(_i ? NULL : dir);
    ck_assert_int_eq(fj_cache_path(g_race.c) == NULL, _i);
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
    /* One per call that waited, however often it polled (src/api adds nothing to it). */
    ck_assert_uint_ge(k.lease_waits, 1);
    ck_assert_uint_le(k.lease_waits, N_THREADS - 1);
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

    /* A memory-only cache leases the same way. */
    fj_cache *m = open_ok(NULL);
    ck_assert_int_eq(fj_cache_lease(m, &key, 1000, &got), 0);
    put_seed(m, 41, 333);
    ck_assert_int_eq(fj_cache_lease(m, &key, 1000, &got), 1);
    ck_assert_uint_eq(got.blob_size, 333);
    fj_entry_free(&got);
    fj_cache_close(m);
    fj_cache_close(a);
    fj_cache_close(b);
    rm_rf(dir);
}
END_TEST

void fj_cache_tests_lease(TCase *tc)
{
    tcase_add_loop_test(tc, test_lease_threads, 0, 2);
    tcase_add_test(tc, test_lease_processes);
    tcase_add_test(tc, test_lease_dead_owner);
    tcase_add_test(tc, test_lease_timeout);
    tcase_add_test(tc, test_lease_release_and_put);
}
