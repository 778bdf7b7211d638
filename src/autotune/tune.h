/* tune.h - the choice part of the autotuner, free of CUDA: run every candidate through
 * prepare (compile; pruned on spills, local memory or a bad compile log), check (against
 * the reference kernel) and time (median and spread of repeated runs), then pick the
 * winner deterministically. The GPU side supplies the hooks (src/api/tune.c); tests supply
 * fakes.
 *
 * Choice rule: the fastest median wins, except that every candidate whose median is within
 * `band` (relative) of the fastest is considered equal, and among equals the earliest in
 * candidate order wins. Candidate 0 is the default configuration, so the default is kept
 * unless something is measurably faster. Same inputs, same winner: no run-to-run flips.
 */
#ifndef FJ_TUNE_H
#define FJ_TUNE_H

#include <stddef.h>

typedef struct fj_tune_hooks {
    /* Compile candidate i. 0 = usable; -1 = pruned, reason in why. */
    int (*prepare)(void *user, int i, char *why, size_t n);
    /* Run candidate i once and compare with the reference. 0 = correct; -1 + reason. */
    int (*check)(void *user, int i, char *why, size_t n);
    /* Run candidate i n times (after its own warm-up), one time in ms per sample. */
    int (*time)(void *user, int i, double *samples_ms, int n, char *why, size_t why_n);
    /* Progress: candidate i of n done (may be NULL). */
    void (*progress)(void *user, int i, int n);
    void *user;
} fj_tune_hooks;

typedef struct fj_tune_entry {
    char config[32];     /* as fj_fa2_config_name */
    int ok;              /* 1 = measured; 0 = pruned (why) */
    char why[160];
    double median_ms;
    double spread;       /* (p90 - p10) / median of the samples */
} fj_tune_entry;

#define FJ_TUNE_MAX_REPS 200

/* Runs the candidates named in entries[i].config (filled by the caller), fills the rest
 * of each entry, and returns the winner's index, or -1 when every candidate was pruned. */
int fj_tune_run(fj_tune_entry *entries, int n, const fj_tune_hooks *h, int reps, double band);

/* The choice rule alone, over entries already measured. */
int fj_tune_pick(const fj_tune_entry *entries, int n, double band);

/* Median and (p90 - p10) / median of n samples (sorted in place). */
void fj_tune_stats(double *samples, int n, double *median, double *spread);

/* The whole timing table as JSON: [{"config":..,"ok":..,"median_ms":..,"spread":..,
 * "why":..}, ...]. Returns the length written (truncated to len-1), like snprintf. */
int fj_tune_table_json(const fj_tune_entry *entries, int n, char *buf, size_t len);

#endif /* FJ_TUNE_H */
