/* spec.c - the spec parser, presets lookup, shape buckets and problem signatures; see
 * spec.h and docs/spec-format.md.
 *
 * The parser reads one line at a time into the section being built; a section is checked
 * and turned into an fj_problem when the next header or the end of the text arrives.
 * Every error names the origin, the line and the rule, and the first error ends the
 * parse (nothing half-built is returned). */
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Names of fajit_op values, indexed by value. */
static const char *const op_names[] = {
    [FAJIT_OP_FWD] = "fwd",
};
#define N_OPS (int)(sizeof op_names / sizeof op_names[0])

const char *fj_op_name(int op)
{
    return op >= 0 && op < N_OPS ? op_names[op] : NULL;
}

int fj_op_parse(const char *s)
{
    for (int i = 0; s && i < N_OPS; i++)
        if (op_names[i] && strcmp(s, op_names[i]) == 0)
            return i;
    return -1;
}

enum {
    K_OP, K_DTYPE, K_HEAD_DIM, K_HEADS_Q, K_HEADS_KV, K_MASK, K_WINDOW, K_BATCH, K_PREFILL,
    K_DECODE, K_SHAPES, K_PAGE_SIZE, K_SOFTCAP, K_SINKS, K_ALIBI, K_HEAD_DIM_V, K_KV_DTYPE,
    N_KEYS
};

static const char *const key_names[N_KEYS] = {
    "op", "dtype", "head_dim", "heads_q", "heads_kv", "mask", "window", "batch", "prefill",
    "decode", "shapes", "page_size", "softcap", "sinks", "alibi", "head_dim_v", "kv_dtype",
};

typedef struct ivec {
    int *v;
    size_t n, cap;
} ivec;

/* The section being read. */
typedef struct section {
    char name[64];
    int line;            /* of its header */
    int at[N_KEYS];      /* line where each key was set; 0 = not set */
    int op, dtype, head_dim, heads_q, heads_kv, mask, window, page_size;
    unsigned features;   /* FJ_PROBLEM_* bits of softcap, sinks, alibi */
    int head_dim_v, kv_dtype;
    ivec lists[N_KEYS];  /* batch, prefill, decode; shapes as sq, sk pairs */
} section;

typedef struct parser {
    const char *origin;
    char *err;
    size_t err_len;
    fj_spec *out;
    size_t cap;          /* of out->problems */
    int open;            /* a section is being read */
    section sec;
} parser;

/* ---- helpers ---------------------------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(parser *p, int line, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err && p->err_len) {
        if (line > 0)
            snprintf(p->err, p->err_len, "%s:%d: %s", p->origin, line, msg);
        else
            snprintf(p->err, p->err_len, "%s: %s", p->origin, msg);
    }
    return -1;
}

static int push(ivec *a, int x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        int *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static void section_reset(section *s)
{
    for (int k = 0; k < N_KEYS; k++)
        free(s->lists[k].v);
    memset(s, 0, sizeof *s);
}

/* [s, s + n) without leading and trailing blanks. */
static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* "123", "16k" (times 1024) or "16M" (times 1024 * 1024). Returns 0, or -1 when not such
 * a number or beyond 2^40 (no overflow; the caller checks the real range). */
static int parse_num(const char *s, size_t n, long long *v)
{
    const long long cap = 1LL << 40;
    long long x = 0;
    size_t i = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++) {
        x = 10 * x + (s[i] - '0');
        if (x > cap)
            return -1;
    }
    if (i == 0)
        return -1;
    if (i < n && (s[i] == 'k' || s[i] == 'K' || s[i] == 'M')) {
        long long scale = s[i] == 'M' ? 1LL << 20 : 1LL << 10;
        if (x > cap / scale)
            return -1;
        x *= scale;
        i++;
    }
    if (i != n)
        return -1;
    *v = x;
    return 0;
}

/* ---- values ----------------------------------------------------------------------- */

static int scalar(parser *p, int line, int key, const char *v, size_t n, long long lo,
                  long long hi, int *out)
{
    long long x;
    if (parse_num(v, n, &x) == -1)
        return fail(p, line, "%s: expected a number (N, Nk or NM), got '%.*s'", key_names[key],
                    (int)n, v);
    if (x < lo || x > hi)
        return fail(p, line, "%s must be in %lld..%lld, got %lld", key_names[key], lo, hi, x);
    *out = (int)x;
    return 0;
}

/* One item of a length list: "N", "Nk", "NM" or "A..B" (A, 2A, 4A, ... B). */
static int list_item(parser *p, int line, int key, const char *v, size_t n, long long hi,
                     ivec *out)
{
    const char *dots = NULL;
    long long a, b;
    for (size_t i = 0; i + 1 < n; i++)
        if (v[i] == '.' && v[i + 1] == '.') {
            dots = v + i;
            break;
        }
    if (!dots) {
        if (parse_num(v, n, &a) == -1)
            return fail(p, line, "%s: '%.*s' is not a length (N, Nk, NM or A..B)",
                        key_names[key], (int)n, v);
        b = a;
    } else {
        const char *ra = v, *rb = dots + 2;
        size_t na = (size_t)(dots - v), nb = n - na - 2;
        trim(&ra, &na);
        trim(&rb, &nb);
        if (parse_num(ra, na, &a) == -1 || parse_num(rb, nb, &b) == -1)
            return fail(p, line, "%s: '%.*s' is not a range A..B of lengths",
                        key_names[key], (int)n, v);
    }
    if (a < 1 || a > hi || b < 1 || b > hi)
        return fail(p, line, "%s: values must be in 1..%lld, got '%.*s'", key_names[key],
                    hi, (int)n, v);
    long long x = a;
    while (x < b)
        x *= 2;
    if (x != b)
        return fail(p, line, "%s: range %lld..%lld must double from %lld to exactly %lld",
                    key_names[key], a, b, a, b);
    for (x = a; x <= b; x *= 2)
        if (push(out, (int)x) == -1)
            return fail(p, line, "out of memory");
    return 0;
}

/* One item of a shapes list: "SQ:SK". */
static int shape_item(parser *p, int line, const char *v, size_t n, ivec *out)
{
    const char *colon = memchr(v, ':', n), *rk;
    long long q, k;
    size_t nq, nk;
    if (!colon)
        return fail(p, line, "shapes: expected SQ:SK, got '%.*s'", (int)n, v);
    nq = (size_t)(colon - v);
    rk = colon + 1;
    nk = n - nq - 1;
    trim(&v, &nq);
    trim(&rk, &nk);
    if (parse_num(v, nq, &q) == -1 || parse_num(rk, nk, &k) == -1)
        return fail(p, line, "shapes: expected SQ:SK, got '%.*s'", (int)n, v);
    if (q < 1 || q > FJ_SPEC_MAX_SEQLEN || k < 1 || k > FJ_SPEC_MAX_SEQLEN)
        return fail(p, line, "shapes: lengths must be in 1..%d, got %lld:%lld",
                    FJ_SPEC_MAX_SEQLEN, q, k);
    if (push(out, (int)q) == -1 || push(out, (int)k) == -1)
        return fail(p, line, "out of memory");
    return 0;
}

/* A comma-separated list. */
static int list(parser *p, int line, int key, const char *v, size_t n, ivec *out)
{
    const long long hi = key == K_BATCH ? FJ_SPEC_MAX_BATCH : FJ_SPEC_MAX_SEQLEN;
    while (n) {
        const char *comma = memchr(v, ',', n);
        size_t len = comma ? (size_t)(comma - v) : n;
        const char *item = v;
        size_t ni = len;
        trim(&item, &ni);
        if (ni == 0)
            return fail(p, line, "%s: empty item in the list", key_names[key]);
        int rc = key == K_SHAPES ? shape_item(p, line, item, ni, out)
                                 : list_item(p, line, key, item, ni, hi, out);
        if (rc == -1)
            return -1;
        if (!comma)
            break;
        v = comma + 1;
        n -= len + 1;
        if (n == 0)
            return fail(p, line, "%s: empty item in the list", key_names[key]);
    }
    return 0;
}

/* ---- sections --------------------------------------------------------------------- */

static int has_shape(const fj_problem *pr, int q, int k, int b)
{
    for (size_t i = 0; i < pr->n_shapes; i++)
        if (pr->shapes[i].seqlen_q == q && pr->shapes[i].seqlen_k == k
            && pr->shapes[i].batch == b)
            return 1;
    return 0;
}

static void add_shape(fj_problem *pr, int q, int k, const ivec *batch)
{
    for (size_t i = 0; i < batch->n; i++)
        if (!has_shape(pr, q, k, batch->v[i]))
            pr->shapes[pr->n_shapes++] = (fj_shape){ q, k, batch->v[i] };
}

/* Checks the rules that span keys and appends the problem. */
static int finish_section(parser *p)
{
    static const int required[] = { K_DTYPE, K_HEAD_DIM, K_HEADS_Q, K_HEADS_KV, K_MASK };
    section *s = &p->sec;
    ivec *batch = &s->lists[K_BATCH];
    size_t n_len, n_all;
    fj_problem *pr;

    if (!p->open)
        return 0;
    p->open = 0;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!s->at[required[i]])
            return fail(p, s->line, "model '%s': missing %s", s->name,
                        key_names[required[i]]);
    if (s->heads_q % s->heads_kv)
        return fail(p, s->at[K_HEADS_Q], "heads_q (%d) must be a multiple of heads_kv (%d)",
                    s->heads_q, s->heads_kv);
    if (s->mask == FAJIT_MASK_WINDOW && !s->at[K_WINDOW])
        return fail(p, s->at[K_MASK], "mask = window needs window = N (keys before the "
                    "query that each query sees)");
    if (s->mask != FAJIT_MASK_WINDOW && s->at[K_WINDOW])
        return fail(p, s->at[K_WINDOW], "window is only for mask = window");
    n_len = s->lists[K_PREFILL].n + s->lists[K_DECODE].n + s->lists[K_SHAPES].n / 2;
    if (n_len == 0)
        return fail(p, s->line, "model '%s': no prefill, decode or shapes", s->name);
    if (batch->n == 0 && push(batch, 1) == -1)
        return fail(p, 0, "out of memory");
    n_all = n_len * batch->n;
    if (n_all > FJ_SPEC_MAX_SHAPES)
        return fail(p, s->line, "model '%s': %zu shapes (lengths times batches), more "
                    "than %d", s->name, n_all, FJ_SPEC_MAX_SHAPES);

    if (p->out->n_problems == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4;
        fj_problem *v = realloc(p->out->problems, cap * sizeof *v);
        if (!v)
            return fail(p, 0, "out of memory");
        p->out->problems = v;
        p->cap = cap;
    }
    pr = &p->out->problems[p->out->n_problems];
    memset(pr, 0, sizeof *pr);
    if (!(pr->shapes = malloc(n_all * sizeof *pr->shapes)))
        return fail(p, 0, "out of memory");
    p->out->n_problems++;
    memcpy(pr->name, s->name, sizeof pr->name);
    pr->line = s->line;
    pr->op = s->op;
    pr->dtype = (fajit_dtype)s->dtype;
    pr->head_dim = s->head_dim;
    pr->heads_q = s->heads_q;
    pr->heads_kv = s->heads_kv;
    pr->mask = (fajit_mask)s->mask;
    pr->window_left = pr->mask == FAJIT_MASK_WINDOW ? s->window : -1;
    pr->window_right = pr->mask == FAJIT_MASK_WINDOW ? 0 : -1;
    pr->page_size = s->page_size;
    pr->features = s->features;
    pr->head_dim_v = s->head_dim_v == s->head_dim ? 0 : s->head_dim_v;
    pr->kv_dtype = s->kv_dtype;
    for (size_t i = 0; i < s->lists[K_PREFILL].n; i++)
        add_shape(pr, s->lists[K_PREFILL].v[i], s->lists[K_PREFILL].v[i], batch);
    for (size_t i = 0; i < s->lists[K_DECODE].n; i++)
        add_shape(pr, 1, s->lists[K_DECODE].v[i], batch);
    for (size_t i = 0; i + 1 < s->lists[K_SHAPES].n; i += 2)
        add_shape(pr, s->lists[K_SHAPES].v[i], s->lists[K_SHAPES].v[i + 1], batch);
    return 0;
}

static int name_ok(const char *s, size_t n, size_t cap)
{
    if (n == 0 || n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return 0;
    return 1;
}

/* "[model NAME]" */
static int header(parser *p, int line, const char *s, size_t n)
{
    const char *in = s + 1, *name;
    size_t nin = n - 2, nn;

    if (finish_section(p) == -1)
        return -1;
    trim(&in, &nin);
    if (nin < 6 || strncmp(in, "model", 5) != 0 || !isspace((unsigned char)in[5]))
        return fail(p, line, "a section header is [model NAME], got '%.*s'", (int)n, s);
    name = in + 5;
    nn = nin - 5;
    trim(&name, &nn);
    if (!name_ok(name, nn, sizeof p->sec.name))
        return fail(p, line, "model names are 1..63 letters, digits, '.', '-' or '_', "
                    "got '%.*s'", (int)nn, name);
    for (size_t i = 0; i < p->out->n_problems; i++)
        if (strlen(p->out->problems[i].name) == nn
            && strncmp(p->out->problems[i].name, name, nn) == 0)
            return fail(p, line, "model '%.*s' is already defined at line %d", (int)nn,
                        name, p->out->problems[i].line);
    section_reset(&p->sec);
    memcpy(p->sec.name, name, nn);
    p->sec.line = line;
    p->open = 1;
    return 0;
}

/* The model features' keys: softcap, sinks, alibi (yes or no), head_dim_v, kv_dtype. */
static int feature_key(parser *p, int line, int key, const char *v, size_t nv)
{
    section *sec = &p->sec;
    switch (key) {
    case K_HEAD_DIM_V:
        if (scalar(p, line, key, v, nv, 8, 256, &sec->head_dim_v) == -1)
            return -1;
        if (sec->head_dim_v % 8)
            return fail(p, line, "head_dim_v must be a multiple of 8 in 8..256, got %d",
                        sec->head_dim_v);
        return 0;
    case K_KV_DTYPE:
        if (nv == 4 && strncasecmp(v, "e4m3", 4) == 0)
            sec->kv_dtype = FAJIT_KV_E4M3;
        else if (nv == 4 && strncasecmp(v, "e5m2", 4) == 0)
            sec->kv_dtype = FAJIT_KV_E5M2;
        else if (!(nv == 5 && strncasecmp(v, "dtype", 5) == 0))
            return fail(p, line, "kv_dtype must be dtype (as Q), e4m3 or e5m2, got '%.*s'",
                        (int)nv, v);
        return 0;
    default: {   /* softcap, sinks, alibi */
        const unsigned bit = key == K_SOFTCAP ? FJ_PROBLEM_SOFTCAP
                             : key == K_SINKS ? FJ_PROBLEM_SINKS : FJ_PROBLEM_ALIBI;
        if (nv == 3 && strncasecmp(v, "yes", 3) == 0)
            sec->features |= bit;
        else if (!(nv == 2 && strncasecmp(v, "no", 2) == 0))
            return fail(p, line, "%s must be yes or no, got '%.*s'", key_names[key], (int)nv,
                        v);
        return 0;
    }
    }
}

/* "key = value" */
static int assignment(parser *p, int line, const char *s, size_t n)
{
    const char *eq = memchr(s, '=', n), *k = s, *v;
    size_t nk, nv;
    int key = -1;
    section *sec = &p->sec;

    if (!eq)
        return fail(p, line, "expected '[model NAME]' or 'key = value', got '%.*s'", (int)n,
                    s);
    nk = (size_t)(eq - s);
    v = eq + 1;
    nv = n - nk - 1;
    trim(&k, &nk);
    trim(&v, &nv);
    for (int i = 0; i < N_KEYS; i++)
        if (strlen(key_names[i]) == nk && strncmp(key_names[i], k, nk) == 0)
            key = i;
    if (key < 0)
        return fail(p, line, "unknown key '%.*s' (known: op, dtype, head_dim, heads_q, "
                    "heads_kv, mask, window, batch, prefill, decode, shapes, page_size, softcap, sinks, "
                    "alibi, head_dim_v, kv_dtype)", (int)nk, k);
    if (!p->open)
        return fail(p, line, "%s is outside a [model NAME] section", key_names[key]);
    if (sec->at[key])
        return fail(p, line, "%s is already set at line %d", key_names[key], sec->at[key]);
    if (nv == 0)
        return fail(p, line, "%s has no value", key_names[key]);
    sec->at[key] = line;

    switch (key) {
    case K_OP: {
        char name[16];
        int op = -1;
        if (nv < sizeof name) {
            memcpy(name, v, nv);
            name[nv] = '\0';
            op = fj_op_parse(name);
        }
        if (op < 0) {
            char known[64] = "";
            for (int i = 0; fj_op_name(i); i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         i ? ", " : "", fj_op_name(i));
            return fail(p, line, "op must be one of %s, got '%.*s'", known, (int)nv, v);
        }
        sec->op = op;
        return 0;
    }
    case K_DTYPE:
        if (nv == 3 && strncasecmp(v, "f16", 3) == 0)
            sec->dtype = FAJIT_F16;
        else if (nv == 4 && strncasecmp(v, "bf16", 4) == 0)
            sec->dtype = FAJIT_BF16;
        else
            return fail(p, line, "dtype must be f16 or bf16, got '%.*s'", (int)nv, v);
        return 0;
    case K_MASK:
        if (nv == 4 && strncasecmp(v, "none", 4) == 0)
            sec->mask = FAJIT_MASK_NONE;
        else if (nv == 6 && strncasecmp(v, "causal", 6) == 0)
            sec->mask = FAJIT_MASK_CAUSAL;
        else if (nv == 6 && strncasecmp(v, "window", 6) == 0)
            sec->mask = FAJIT_MASK_WINDOW;
        else
            return fail(p, line, "mask must be none, causal or window, got '%.*s'", (int)nv,
                        v);
        return 0;
    case K_HEAD_DIM:
        if (scalar(p, line, key, v, nv, 8, 256, &sec->head_dim) == -1)
            return -1;
        if (sec->head_dim % 8)
            return fail(p, line, "head_dim must be a multiple of 8 in 8..256, got %d",
                        sec->head_dim);
        return 0;
    case K_HEADS_Q:
        return scalar(p, line, key, v, nv, 1, FJ_SPEC_MAX_HEADS, &sec->heads_q);
    case K_HEADS_KV:
        return scalar(p, line, key, v, nv, 1, FJ_SPEC_MAX_HEADS, &sec->heads_kv);
    case K_WINDOW:
        return scalar(p, line, key, v, nv, 0, FJ_SPEC_MAX_SEQLEN, &sec->window);
    case K_PAGE_SIZE:
        return scalar(p, line, key, v, nv, 1, FJ_SPEC_MAX_PAGE, &sec->page_size);
    case K_SOFTCAP:
    case K_SINKS:
    case K_ALIBI:
    case K_HEAD_DIM_V:
    case K_KV_DTYPE:
        return feature_key(p, line, key, v, nv);
    default:
        return list(p, line, key, v, nv, &sec->lists[key]);
    }
}

/* ---- entry points ----------------------------------------------------------------- */

void fj_spec_free(fj_spec *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_problems; i++)
        free(s->problems[i].shapes);
    free(s->problems);
    s->problems = NULL;
    s->n_problems = 0;
}

int fj_spec_parse(const char *text, size_t len, const char *origin, fj_spec *out,
                  char *err, size_t err_len)
{
    parser p;
    int rc = 0, line = 0;

    if (err && err_len)
        err[0] = '\0';
    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    memset(&p, 0, sizeof p);
    p.origin = origin ? origin : "spec";
    p.err = err;
    p.err_len = err_len;
    p.out = out;
    if (!text)
        len = 0;
    for (size_t at = 0; rc == 0 && at < len; ) {
        const char *s = text + at, *nl = memchr(s, '\n', len - at), *hash;
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + 1;
        line++;
        if ((hash = memchr(s, '#', n)) != NULL)
            n = (size_t)(hash - s);
        trim(&s, &n);
        if (n == 0)
            continue;
        if (s[0] == '[' && s[n - 1] == ']')
            rc = header(&p, line, s, n);
        else if (s[0] == '[')
            rc = fail(&p, line, "a section header is [model NAME], got '%.*s'", (int)n, s);
        else
            rc = assignment(&p, line, s, n);
    }
    if (rc == 0)
        rc = finish_section(&p);
    if (rc == 0 && out->n_problems == 0)
        rc = fail(&p, 0, "no [model NAME] section");
    section_reset(&p.sec);
    if (rc != 0)
        fj_spec_free(out);
    return rc;
}

int fj_spec_parse_file(const char *path, fj_spec *out, char *err, size_t err_len)
{
    char *text = NULL;
    size_t len = 0;
    int rc = -1;
    FILE *f;

    if (out)
        memset(out, 0, sizeof *out);
    if (!path || !out)
        return -1;
    f = fopen(path, "rb");
    if (!f) {
        if (err && err_len)
            snprintf(err, err_len, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    text = malloc(FJ_SPEC_MAX_BYTES + 1);
    if (text) {
        len = fread(text, 1, FJ_SPEC_MAX_BYTES + 1, f);
        if (ferror(f)) {
            if (err && err_len)
                snprintf(err, err_len, "%s: cannot read: %s", path, strerror(errno));
        } else if (len > FJ_SPEC_MAX_BYTES) {
            if (err && err_len)
                snprintf(err, err_len, "%s: larger than %d bytes", path, FJ_SPEC_MAX_BYTES);
        } else {
            rc = fj_spec_parse(text, len, path, out, err, err_len);
        }
    } else if (err && err_len) {
        snprintf(err, err_len, "%s: out of memory", path);
    }
    free(text);
    fclose(f);
    return rc;
}

int fj_spec_preset(const char *name, fj_spec *out, char *err, size_t err_len)
{
    char origin[96];
    const char *text = name ? fj_spec_preset_text(name) : NULL;

    if (out)
        memset(out, 0, sizeof *out);
    if (!text) {
        if (err && err_len) {
            size_t at = (size_t)snprintf(err, err_len, "unknown preset '%s'; known:",
                                         name ? name : "(null)");
            for (int i = 0; fj_spec_preset_name(i) && at < err_len; i++)
                at += (size_t)snprintf(err + at, err_len - at, "%s %s", i ? "," : "",
                                       fj_spec_preset_name(i));
        }
        return -1;
    }
    snprintf(origin, sizeof origin, "preset %s", name);
    return fj_spec_parse(text, strlen(text), origin, out, err, err_len);
}

/* ---- names of tuning rows --------------------------------------------------------- */

/* "512", "1k", ... "16k": the smallest step of the ladder >= x; 0 when above it. */
static int ladder(int x, char *buf, size_t n)
{
    for (int step = 512; step <= 16384; step *= 2)
        if (x <= step) {
            if (step < 1024)
                snprintf(buf, n, "%d", step);
            else
                snprintf(buf, n, "%dk", step / 1024);
            return 1;
        }
    return 0;
}

int fj_shape_bucket(int seqlen_q, int seqlen_k, char *buf, size_t n)
{
    char step[8];
    int r;
    if (!buf || n == 0 || seqlen_q < 1 || seqlen_k < 1)
        return -1;
    if (seqlen_q == 1)
        r = ladder(seqlen_k, step, sizeof step)
                ? snprintf(buf, n, "sq=1,sk<=%s", step) : snprintf(buf, n, "sq=1,sk>16k");
    else if (seqlen_q <= 16) {   /* speculative decode: its own rows per query-length class */
        const int qc = seqlen_q <= 4 ? 4 : seqlen_q <= 8 ? 8 : 16;
        r = ladder(seqlen_k, step, sizeof step)
                ? snprintf(buf, n, "sq<=%d,sk<=%s", qc, step)
                : snprintf(buf, n, "sq<=%d,sk>16k", qc);
    } else
        r = ladder(seqlen_q, step, sizeof step)
                ? snprintf(buf, n, "sq<=%s", step) : snprintf(buf, n, "sq>16k");
    return r > 0 && (size_t)r < n ? 0 : -1;
}

int fj_tune_signature(const fj_problem *pr, char *buf, size_t n)
{
    char mask[40];
    const char *op = pr ? fj_op_name(pr->op) : NULL;
    int r;
    if (!pr || !buf || n == 0 || !op)
        return -1;
    if (pr->mask == FAJIT_MASK_WINDOW)
        snprintf(mask, sizeof mask, "win%d-%d", pr->window_left, pr->window_right);
    else
        snprintf(mask, sizeof mask, "%s", pr->mask == FAJIT_MASK_CAUSAL ? "causal" : "none");
    /* (features after the rest: the rows of problems without any keep their names) */
    char dv[16] = "";
    if (pr->head_dim_v && pr->head_dim_v != pr->head_dim)
        snprintf(dv, sizeof dv, ".dv%d", pr->head_dim_v);
    r = snprintf(buf, n, "%s.%s.hd%d.%s.gqa%d%s%s%s%s%s%s", op,
                 pr->dtype == FAJIT_BF16 ? "bf16" : "f16", pr->head_dim, mask,
                 pr->heads_kv > 0 ? pr->heads_q / pr->heads_kv : 0,
                 pr->page_size > 0 ? ".paged" : "",
                 pr->features & FJ_PROBLEM_SOFTCAP ? ".softcap" : "",
                 pr->features & FJ_PROBLEM_SINKS ? ".sinks" : "",
                 pr->features & FJ_PROBLEM_ALIBI ? ".alibi" : "", dv,
                 pr->kv_dtype == FAJIT_KV_E4M3 ? ".kv-e4m3"
                 : pr->kv_dtype == FAJIT_KV_E5M2 ? ".kv-e5m2" : "");
    return r > 0 && (size_t)r < n ? 0 : -1;
}
