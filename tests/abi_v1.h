/* abi_v1.h - the first sized layouts of the public structs, as a caller compiled against
 * that header sees them: fajit_attn_desc without the fields appended after it (op,
 * workspace, workspace_bytes), fajit_ctx_opts, fajit_tune_opts, fajit_verdict_info and
 * fajit_validation_report as first sized. Frozen:
 * never edit these to follow include/fajit.h; test_abi.c checks the library still takes
 * them. */
#ifndef FJ_ABI_V1_H
#define FJ_ABI_V1_H

#include <stddef.h>
#include <stdint.h>

typedef struct abi_v1_attn_desc {
    size_t struct_size;
    const void *q, *k, *v;
    void *o;
    int64_t q_batch_stride, q_row_stride, q_head_stride;
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    int64_t o_batch_stride, o_row_stride, o_head_stride;
    int batch, heads_q, heads_kv;
    int seqlen_q, seqlen_k;
    int head_dim;
    int dtype;
    int mask;
    int window_left, window_right;
    float softmax_scale;
    const int32_t *cu_seqlens_q;
    const int32_t *cu_seqlens_k;
    int total_q, total_k;
    float *lse;
} abi_v1_attn_desc;

typedef struct abi_v1_ctx_opts {
    size_t struct_size;
    int device;
    const char *cache_dir;
    int policy;
    void (*log)(void *, int, const char *);
    void *log_user;
    int log_level;
    void (*progress)(void *, int, int, double, const char *);
    void *progress_user;
    int family;
    int64_t cache_max_bytes;
} abi_v1_ctx_opts;

typedef struct abi_v1_tune_opts {
    size_t struct_size;
    int reps;
    double noise_band;
    int pin;
    int force;
} abi_v1_tune_opts;

/* The validation gate's structs as first sized (before the model-feature set was
 * appended). */
typedef struct abi_v1_verdict_info {
    size_t struct_size;
    int family;
    char family_name[16];
    int verdict;
    char failed_case[160];
    char error[256];
    int64_t created;
    char gpu_name[128];
    char arch[16];
    int sm_count;
    int driver_version;
    char fajit_version[16];
} abi_v1_verdict_info;

typedef struct abi_v1_validation_report {
    size_t struct_size;
    int families, failed, cases;
    int first_failed;
    char failed_case[160];
    char error[256];
} abi_v1_validation_report;

#endif /* FJ_ABI_V1_H */
