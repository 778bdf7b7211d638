/* bench.h - `fajit-tune bench` (tools/bench.c). */
#ifndef FAJIT_TUNE_BENCH_H
#define FAJIT_TUNE_BENCH_H

#include <fajit.h>

/* Times fajit_attn_fwd on SPEC's shapes (NULL: the default set) with `reps` repetitions,
 * prints a table on stdout and, with `json`, writes every sample there. Returns the exit
 * code: 0, or 1 with the reason on stderr. */
int cli_bench(fajit_ctx *ctx, const char *spec, int reps, const char *json);

#endif
