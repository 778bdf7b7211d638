/* test_unit_decode.h - the fake device shared by the decode family's unit tests
 * (test_unit_decode.c, test_unit_decode_launch.c, test_unit_decode_plans.c): a 132-SM sm_90
 * driver table whose launches are recorded in g_dec, and contexts on it. */
#ifndef FJ_TEST_UNIT_DECODE_H
#define FJ_TEST_UNIT_DECODE_H

#include <check.h>

#include "fake_cuda.h"
#include "../src/families/decode.h"
#include "../src/families/fa3.h"

/* t with the decode family's options `loader` and `pack` (held in *o) */
fj_target dec_target(fj_target t, fj_fopts *o, int loader, int pack);

/* The last four launches' parameters, grids and block sizes (index: launch % 4), the
 * launch count and how many asked for programmatic dependent launch. */
typedef struct dec_record {
    fj_decode_params p[4];
    unsigned grid[4][3], threads[4];
    int launches, pdl_launches;
} dec_record;
extern dec_record g_dec;

/* cuLaunchKernelEx recording into g_dec. */
CUresult dec_launch_ex(const fj_cu_launch_config *c, CUfunction f, void **a, void **e);
/* The splits that a launch of configuration `cfg` (a tuning-row name) takes for d. */
int dec_splits_of(fajit_ctx *ctx, const char *cfg, const fajit_attn_desc *d);
/* The fake 132-SM sm_90 device (launches recorded in g_dec, allocations faked). */
fj_cuda dec_fake_device(void);
/* A context on the fake device that fj_cuda_set_for_testing() installed. */
fajit_ctx *fake_ctx(void);

/* The tests of test_unit_decode_launch.c and test_unit_decode_plans.c, added to tc. */
void fj_decode_tests_launch(TCase *tc);
void fj_decode_tests_plans(TCase *tc);

#endif
