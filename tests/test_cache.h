/* test_cache.h - fixtures and helpers shared by the test_cache_*.c files (defined in
 * test_cache.c), and the function of each file that adds its tests to the cache TCase. */
#ifndef FJ_TEST_CACHE_H
#define FJ_TEST_CACHE_H

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

extern char g_root[64];   /* per TCase, made by the unchecked setup */
struct test_log {
    pthread_mutex_t mu;
    int n[4];
    char last[4][512];
};
extern struct test_log g_log;   /* what log_cb saw, per level, since the test began */
extern const unsigned char k_digest[16];
/* fj_key_parts of these inputs with op "fwd". */
char *test_parts(const unsigned char *digest, const char *function, const char *preamble,
                 const char *options, const char *arch, int nvrtc_version, int format_version);

void log_cb(void *user, int level, const char *msg);
int log_count(int level);
void rm_rf(const char *path);
void make_dir(char *buf, size_t n);
fj_key key_of(int seed);
void make_entry(fj_entry *e, int seed, size_t size);
void assert_same(const fj_entry *got, const fj_entry *want);
int same_blob(const fj_entry *got, const fj_entry *want);
fj_cache *open_ok(const char *dir);
void put_seed(fj_cache *c, int seed, size_t size);
int64_t ms_now(void);
void nap_ms(int ms);
int count_aside(const char *dir);
int wait_child(pid_t pid);

void make_row(fj_tune_row *r, const char *arch, const char *sig, const char *bucket,
                         const char *config, double ms, int pinned, int64_t created);
const char *config_of(fj_cache *c, const char *sig, const char *bucket);
int file_user_version(const char *path);
void swap_blobs(const char *path, const fj_key *a, const fj_key *b);

void fj_cache_tests_open(TCase *tc);
void fj_cache_tests_lease(TCase *tc);
void fj_cache_tests_kernels(TCase *tc);
void fj_cache_tests_tuning(TCase *tc);
void fj_cache_tests_verdicts(TCase *tc);
void fj_cache_tests_bundle(TCase *tc);
void fj_cache_tests_key(TCase *tc);

#endif /* FJ_TEST_CACHE_H */
