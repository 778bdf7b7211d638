/* bench.c - `fajit-tune bench`: fajit_attn_fwd timed on a spec's shapes, or on a default set
 * (prefill as bench/bench_attn.py runs it, decode as bench/bench_decode.py), printed as
 * TFLOP/s (and TB/s of K and V for decode shapes) and written as JSON with every sample.
 * The timing itself is fajit_bench_spec's (CUDA events, L2 flushed). Public API only. */
#include <fajit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MAX_ROWS 4096

typedef struct row {
    char problem[64], kernel[256];
    fajit_attn_desc d;
    double median, min, max, p10, p90, flops, kv_bytes;
    double *samples;
    int reps;
} row;

typedef struct table {
    row *rows;
    int n;
} table;

/* Visible (query, key) pairs of one sequence, by the rule in fajit.h. */
static double visible_pairs(const fajit_attn_desc *d)
{
    if (d->mask == FAJIT_MASK_NONE)
        return (double)d->seqlen_q * d->seqlen_k;
    long long off = (long long)d->seqlen_k - d->seqlen_q, n = 0;
    long long left = d->mask == FAJIT_MASK_WINDOW ? d->window_left : -1;
    long long right = d->mask == FAJIT_MASK_WINDOW ? d->window_right : 0;
    for (long long i = 0; i < d->seqlen_q; i++) {
        long long lo = left < 0 ? 0 : i + off - left, hi = right < 0 ? d->seqlen_k - 1 : i + off + right;
        lo = lo < 0 ? 0 : lo;
        hi = hi > d->seqlen_k - 1 ? d->seqlen_k - 1 : hi;
        n += hi >= lo ? hi - lo + 1 : 0;
    }
    return (double)n;
}

static void on_result(void *user, const fajit_bench_result *r)
{
    table *t = user;
    if (t->n >= MAX_ROWS)
        return;
    row *w = &t->rows[t->n];
    w->samples = malloc(sizeof(double) * (size_t)r->reps);
    if (!w->samples)
        return;
    memcpy(w->samples, r->samples_ms, sizeof(double) * (size_t)r->reps);
    snprintf(w->problem, sizeof w->problem, "%s", r->problem);
    snprintf(w->kernel, sizeof w->kernel, "%s", r->kernel);
    w->d = *r->desc;
    w->reps = r->reps;
    w->median = r->median_ms, w->min = r->min_ms, w->max = r->max_ms;
    w->p10 = r->p10_ms, w->p90 = r->p90_ms;
    const fajit_attn_desc *d = r->desc;
    /* Q K^T over head_dim, P V over head_dim_v (4 * d where they are equal) */
    const double dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
    w->flops = 2.0 * d->batch * d->heads_q * (d->head_dim + dv) * visible_pairs(d);
    const double kv_elem = d->kv_dtype != FAJIT_KV_AS_Q ? 1.0 : 2.0;   /* FP8: a byte */
    w->kv_bytes = kv_elem * d->batch * (double)d->seqlen_k * d->heads_kv * (d->head_dim + dv);
    t->n++;
}

/* The default set as spec text: prefill at 16k tokens per call, hidden 2048 (heads =
 * 2048 / head_dim, batch = 16k / seqlen), and three decode shapes. */
static char *default_spec(void)
{
    size_t cap = 16384, at = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    static const int hdims[] = {64, 128, 256};
    static const char *const masks[] = {"none", "causal"};
    for (int h = 0; h < 3; h++)
        for (int m = 0; m < 2; m++)
            for (int len = 1024; len <= 16384; len *= 2)
                at += (size_t)snprintf(s + at, cap - at,
                                       "[model prefill.hd%d.%s.%dk]\ndtype = bf16\n"
                                       "head_dim = %d\nheads_q = %d\nheads_kv = %d\n"
                                       "mask = %s\nprefill = %d\nbatch = %d\n",
                                       hdims[h], masks[m], len / 1024, hdims[h],
                                       2048 / hdims[h], 2048 / hdims[h], masks[m], len,
                                       16384 / len);
    snprintf(s + at, cap - at,
             "[model decode.b1]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\n"
             "mask = causal\ndecode = 4k, 32k\nbatch = 1\n"
             "[model decode.b64]\ndtype = bf16\nhead_dim = 128\nheads_q = 32\nheads_kv = 8\n"
             "mask = causal\ndecode = 4k\nbatch = 64\n");
    return s;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static int write_json(const char *path, const table *t, const fajit_device_info *di, int reps,
                      const char *spec)
{
    static const char *const masks[] = {"none", "causal", "window"};
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    fprintf(f, "{\"fajit\": \"%s\", \"device\": ", fajit_version_string());
    json_str(f, di->name);
    fprintf(f, ", \"arch\": \"%s\", \"sm_count\": %d, \"reps\": %d, \"spec\": ", di->arch,
            di->sm_count, reps);
    json_str(f, spec ? spec : "default");
    fprintf(f, ",\n \"timing\": \"fajit_bench_spec: CUDA events around each fajit_attn_fwd, "
               "L2 flushed before each\",\n \"results\": [");
    for (int i = 0; i < t->n; i++) {
        const row *w = &t->rows[i];
        const fajit_attn_desc *d = &w->d;
        fprintf(f, "%s\n  {\"problem\": ", i ? "," : "");
        json_str(f, w->problem);
        fprintf(f, ", \"dtype\": \"%s\", \"head_dim\": %d, \"heads_q\": %d, \"heads_kv\": %d, "
                "\"mask\": \"%s\", \"window_left\": %d, \"window_right\": %d, \"batch\": %d, "
                "\"seqlen_q\": %d, \"seqlen_k\": %d, \"page_size\": %d, \"kernel\": ",
                d->dtype == FAJIT_BF16 ? "bf16" : "f16", d->head_dim, d->heads_q, d->heads_kv,
                masks[d->mask], d->window_left, d->window_right, d->batch, d->seqlen_q,
                d->seqlen_k, d->page_size);
        json_str(f, w->kernel);
        fprintf(f, ",\n   \"flops\": %.0f, \"kv_bytes\": %.0f, \"median_ms\": %.6f, "
                "\"min_ms\": %.6f, \"max_ms\": %.6f, \"p10_ms\": %.6f, \"p90_ms\": %.6f, "
                "\"tflops\": %.3f, \"kv_tbps\": %.4f,\n   \"samples_ms\": [",
                w->flops, w->kv_bytes, w->median, w->min, w->max, w->p10, w->p90,
                w->flops / (w->median * 1e-3) / 1e12, w->kv_bytes / (w->median * 1e-3) / 1e12);
        for (int k = 0; k < w->reps; k++)
            fprintf(f, "%s%.6f", k ? ", " : "", w->samples[k]);
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        perror(path);
        return 1;
    }
    return 0;
}

int cli_bench(fajit_ctx *ctx, const char *spec, int reps, const char *json)
{
    fajit_device_info di;
    fajit_status st = fajit_device_info_get(ctx, 0, &di);
    if (st) {
        fprintf(stderr, "fajit-tune: bench needs a GPU: %s\n  %s\n", fajit_strerror(st),
                fajit_errmsg(ctx));
        return 1;
    }
    char path[] = "/tmp/fajit-bench-XXXXXX";
    const char *use = spec;
    if (!spec) {   /* the default set goes through the spec parser like any file */
        char *text = default_spec();
        int fd = text ? mkstemp(path) : -1;
        size_t len = text ? strlen(text) : 0;
        int ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
        if (fd >= 0)
            close(fd);
        free(text);
        if (!ok) {
            fprintf(stderr, "fajit-tune: bench: could not write the default spec to %s\n", path);
            if (fd >= 0)
                unlink(path);
            return 1;
        }
        use = path;
    }
    table t = {calloc(MAX_ROWS, sizeof(row)), 0};
    if (!t.rows) {
        fprintf(stderr, "fajit-tune: bench: out of memory\n");
        return 1;
    }
    st = fajit_bench_spec(ctx, use, reps, on_result, &t);
    if (!spec)
        unlink(path);
    printf("%s, %s, %d SMs; median of %d (p10..p90), CUDA events, L2 flushed\n", di.name,
           di.arch, di.sm_count, reps);
    printf("%-24s %5s %6s %6s %5s %5s  %9s %19s  %8s %7s  %s\n", "problem", "batch", "sq", "sk",
           "hq", "hkv", "ms", "p10..p90 ms", "TFLOP/s", "TB/s", "kernel");
    for (int i = 0; i < t.n; i++) {
        const row *w = &t.rows[i];
        char tb[16] = "-";
        if (w->d.seqlen_q <= 16)   /* decode: memory bound; the bytes of K and V read */
            snprintf(tb, sizeof tb, "%.2f", w->kv_bytes / (w->median * 1e-3) / 1e12);
        printf("%-24s %5d %6d %6d %5d %5d  %9.4f %9.4f..%-9.4f  %8.1f %7s  %s\n", w->problem,
               w->d.batch, w->d.seqlen_q, w->d.seqlen_k, w->d.heads_q, w->d.heads_kv, w->median,
               w->p10, w->p90, w->flops / (w->median * 1e-3) / 1e12, tb, w->kernel);
    }
    int rc = 0;
    if (st) {
        fprintf(stderr, "fajit-tune: bench failed: %s\n  %s\n", fajit_strerror(st),
                fajit_errmsg(ctx));
        rc = 1;
    }
    if (json && write_json(json, &t, &di, reps, spec) != 0)
        rc = 1;
    else if (json)
        printf("bench: %d shapes written to %s\n", t.n, json);
    for (int i = 0; i < t.n; i++)
        free(t.rows[i].samples);
    free(t.rows);
    return rc;
}
