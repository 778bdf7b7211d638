/* tune.c - measuring candidates through hooks and choosing a winner deterministically
 * (the rule is in tune.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void fj_tune_stats(double *s, int n, double *median, double *spread)
{
    if (n <= 0) {
        *median = *spread = 0;
        return;
    }
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    double p10 = s[n / 10], p90 = s[n - 1 - n / 10];
    *spread = *median > 0 ? (p90 - p10) / *median : 0;
}

int fj_tune_pick(const fj_tune_entry *e, int n, double band)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (e[i].ok && (best < 0 || e[i].median_ms < e[best].median_ms))
            best = i;
    if (best < 0)
        return -1;
    /* The earliest candidate within the band of the fastest. */
    for (int i = 0; i < n; i++)
        if (e[i].ok && e[i].median_ms <= e[best].median_ms * (1 + band))
            return i;
    return best;
}

int fj_tune_run(fj_tune_entry *e, int n, const fj_tune_hooks *h, int reps, double band)
{
    double samples[FJ_TUNE_MAX_REPS];
    reps = reps < 1 ? 1 : reps > FJ_TUNE_MAX_REPS ? FJ_TUNE_MAX_REPS : reps;
    for (int i = 0; i < n; i++) {
        e[i].ok = 0;
        e[i].why[0] = 0;
        e[i].median_ms = e[i].spread = 0;
        if (h->prepare(h->user, i, e[i].why, sizeof e[i].why) == 0 &&
            h->check(h->user, i, e[i].why, sizeof e[i].why) == 0 &&
            h->time(h->user, i, samples, reps, e[i].why, sizeof e[i].why) == 0) {
            fj_tune_stats(samples, reps, &e[i].median_ms, &e[i].spread);
            e[i].ok = 1;
        }
        if (h->progress)
            h->progress(h->user, i, n);
    }
    return fj_tune_pick(e, n, band);
}

/* Appends `s` as a JSON string (quotes and backslashes escaped, control bytes dropped). */
static size_t json_str(char *buf, size_t len, size_t at, const char *s)
{
    at += (size_t)snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, "\"");
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20)
            continue;
        const char *esc = *s == '"' ? "\\\"" : *s == '\\' ? "\\\\" : NULL;
        char one[2] = {*s, 0};
        at += (size_t)snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, "%s",
                               esc ? esc : one);
    }
    return at + (size_t)snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, "\"");
}

int fj_tune_table_json(const fj_tune_entry *e, int n, char *buf, size_t len)
{
    size_t at = 0;
#define OUT(...) (at += (size_t)snprintf(buf + (at < len ? at : len), at < len ? len - at : 0, __VA_ARGS__))
    OUT("[");
    for (int i = 0; i < n; i++) {
        OUT("%s{\"config\":", i ? "," : "");
        at = json_str(buf, len, at, e[i].config);
        OUT(",\"ok\":%d,\"median_ms\":%.6f,\"spread\":%.4f,\"why\":", e[i].ok, e[i].median_ms,
            e[i].spread);
        at = json_str(buf, len, at, e[i].why);
        OUT("}");
    }
    OUT("]");
#undef OUT
    return (int)at;
}
