/* gate_fake.h - what the unit tests of the validation gate (test_gate.c, the gate itself;
 * test_gate_features.c, per model-feature set) share: a fake sm_90a device ("Fake GPU",
 * 132 SMs, driver 12080) whose allocations for validation's inputs fail unless granted, two
 * test families over the portable kernels ranked above the shipped ones (gt: head_dim 128
 * on sm_90, family value 10; gn: gt with a status note, as FA4's), a context on the fake
 * device that counts warnings, and verdicts written straight into its cache. */
#ifndef FJ_TEST_GATE_FAKE_H
#define FJ_TEST_GATE_FAKE_H

#include "alias_family.h"

typedef struct gate_fake_state {
    int allocs;                /* cuMemAlloc calls other than the counter ring's */
    int capturing;             /* cuStreamIsCapturing's answer */
    int grant;                 /* 1: every allocation is granted (and counted) */
    size_t alloc_bytes[16];    /* the sizes of the first 16 counted allocations */
} gate_fake_state;
extern gate_fake_state gate_fake;

/* A test's start: gate_fake cleared, the fake driver installed, families a and b (NULL:
 * none) registered; its end: both undone. */
void gate_begin(const fj_family *a, const fj_family *b);
void gate_end(void);

#define GATE_GT_ID 10
extern const fj_family gate_gt, gate_gn;

/* Warnings a context logged: how many, how many say a family is quarantined, the last. */
typedef struct gate_sink {
    int warns, quarantine_warns;
    char last_warn[1024];
} gate_sink;

/* A context on the fake device, memory-only cache, logging warnings into s. */
fajit_ctx *gate_ctx(gate_sink *s, fajit_validate_policy v, fajit_policy policy);
/* A verdict on `family` for the class of ctx's device (driver as the fake reports it) and
 * the feature set named `features` ("" for none; gate_put_verdict). */
void gate_put_verdict_set(fajit_ctx *ctx, const char *family, int pass, int driver,
                          const char *features);
void gate_put_verdict(fajit_ctx *ctx, const char *family, int pass, int driver);
/* bf16, head_dim 128, causal, batch 2, 8/8 heads, 1024 x 1024 (gt applies). */
fajit_attn_desc gate_desc(void);
/* fajit_dispatch_describe on the device, which must succeed. */
void gate_describe(fajit_ctx *ctx, const fajit_attn_desc *d, char *line, size_t n);

#endif /* FJ_TEST_GATE_FAKE_H */
