/* key.c - the kernel key, in one place: the key itself (XXH3-128), its inputs as text
 * (stored with each entry), its hex spelling, and explaining why a key misses by comparing
 * those texts with the nearest entry's.
 *
 * The key is XXH3-128 (canonical, big-endian bytes) over this byte string, fields
 * separated by one NUL byte and none after the last:
 *   "fajit-kernel-key" \0 hex(digest) \0 op \0 function \0 preamble \0 options \0 arch \0
 *   nvrtc version (decimal) \0 format version (decimal)
 * where hex(digest) is 32 lowercase hex digits of the 16-byte digest of every embedded
 * source and header, op is the operation's name ("fwd"), options are NVRTC's options as
 * one sorted text and arch is the exact target ("sm_90a"). No field may contain a NUL, so
 * the string splits into its fields one way only. Format 1 had no op field. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "cache_int.h"

/* ---- key parts and explain -------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* A value of a parts text: '%', ';' and control characters as %XX. */
static void sb_esc(sbuf *b, const char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char hex[4];
        if (ch == '%' || ch == ';' || ch < 0x20 || ch == 0x7f) {
            snprintf(hex, sizeof hex, "%%%02X", ch);
            sb_put(b, hex, 3);
        } else {
            sb_put(b, s, 1);
        }
    }
}

/* The string built, or NULL (everything freed) when out of memory. */
static char *sb_take(sbuf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p ? b->p : dup_str("");
}

static const char *str_or_empty(const char *s) { return s ? s : ""; }

void fj_key_make(const fj_key_inputs *in, fj_key *out)
{
    static const unsigned char zero[16];
    const unsigned char *d = in->digest ? in->digest : zero;
    const char *text[] = { in->op, in->function, in->preamble, in->options, in->arch };
    char hex[33], num[32];
    XXH3_state_t st;
    XXH128_canonical_t c;
    int n;

    XXH3_128bits_reset(&st);
    XXH3_128bits_update(&st, "fajit-kernel-key", 17);   /* with its NUL */
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    XXH3_128bits_update(&st, hex, 33);
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
        XXH3_128bits_update(&st, str_or_empty(text[i]), strlen(str_or_empty(text[i])) + 1);
    n = snprintf(num, sizeof num, "%d", in->nvrtc_version);
    XXH3_128bits_update(&st, num, (size_t)n + 1);
    n = snprintf(num, sizeof num, "%d", in->format_version);
    XXH3_128bits_update(&st, num, (size_t)n);
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
    memcpy(out->b, c.digest, 16);
}

void fj_key_hex(const fj_key *k, char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", k->b[i]);
}

char *fj_key_parts(const fj_key_inputs *in)
{
    sbuf b = { 0 };
    char num[40];
    const char *pre = str_or_empty(in->preamble);

    sb_str(&b, "digest=");
    for (int i = 0; i < 16; i++) {
        snprintf(num, sizeof num, "%02x", in->digest ? in->digest[i] : 0);
        sb_str(&b, num);
    }
    sb_str(&b, ";op=");
    sb_esc(&b, in->op);
    sb_str(&b, ";function=");
    sb_esc(&b, in->function);
    snprintf(num, sizeof num, ";preamble_hash=%016llx",
             (unsigned long long)XXH3_64bits(pre, strlen(pre)));
    sb_str(&b, num);
    sb_str(&b, ";options=");
    sb_esc(&b, in->options);
    sb_str(&b, ";arch=");
    sb_esc(&b, in->arch);
    snprintf(num, sizeof num, ";nvrtc=%d;format=%d", in->nvrtc_version, in->format_version);
    sb_str(&b, num);
    return sb_take(&b);
}

static const struct {
    const char *name;
    unsigned bit;
} part_names[] = {
    { "digest", FJ_PART_DIGEST },   { "op", FJ_PART_OP },
    { "function", FJ_PART_FUNCTION },
    { "preamble_hash", FJ_PART_PREAMBLE }, { "options", FJ_PART_OPTIONS },
    { "arch", FJ_PART_ARCH },       { "nvrtc", FJ_PART_NVRTC },
    { "format", FJ_PART_FORMAT },
};
#define N_PARTS (sizeof part_names / sizeof part_names[0])

/* The value of field `name` in a parts text, as (*v, *n); 0 when absent. */
static int part_value(const char *parts, const char *name, const char **v, size_t *n)
{
    size_t len = strlen(name);
    for (const char *p = parts; p && *p; ) {
        const char *end = strchr(p, ';');
        size_t flen = end ? (size_t)(end - p) : strlen(p);
        if (flen > len && strncmp(p, name, len) == 0 && p[len] == '=') {
            *v = p + len + 1;
            *n = flen - len - 1;
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    *v = "";
    *n = 0;
    return 0;
}

/* The parts in which `have` differs from `want`. With `partial` (an entry without
 * recorded parts, described by its columns), fields `have` lacks are not compared. */
static unsigned parts_diff(const char *want, const char *have, int partial)
{
    unsigned d = 0;
    for (size_t i = 0; i < N_PARTS; i++) {
        const char *a, *b;
        size_t na, nb;
        int ha = part_value(want, part_names[i].name, &a, &na);
        int hb = part_value(have, part_names[i].name, &b, &nb);
        if (partial && !hb)
            continue;
        if (ha != hb || na != nb || memcmp(a, b, na) != 0)
            d |= part_names[i].bit;
    }
    return d;
}

/* What an entry stored without parts records of its key: options, arch, nvrtc. */
static char *column_parts(const char *arch, int nvrtc, const char *options)
{
    sbuf b = { 0 };
    char num[32];
    sb_str(&b, "options=");
    sb_esc(&b, options);
    sb_str(&b, ";arch=");
    sb_esc(&b, arch);
    snprintf(num, sizeof num, ";nvrtc=%d", nvrtc);
    sb_str(&b, num);
    return sb_take(&b);
}

static int n_bits(unsigned x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

typedef struct nearest {
    int tier;          /* 2 same variant, 1 same arch, 0 none yet */
    int n_diff;
    int64_t created;
    unsigned differs;
    fj_key key;
    char name[96], arch[16];
    char *parts;       /* recorded, or made by column_parts */
} nearest;

/* Appends to out->text (truncating quietly). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void text_add(fj_explain *out, const char *fmt, ...)
{
    size_t len = strlen(out->text);
    va_list ap;
    if (len + 1 >= sizeof out->text)
        return;
    va_start(ap, fmt);
    vsnprintf(out->text + len, sizeof out->text - len, fmt, ap);
    va_end(ap);
}

static void describe(fj_explain *out, const nearest *b, const char *want, int n_rows)
{
    char hex[33];
    const char *sep = "";

    if (!out->has_nearest) {
        text_add(out, "miss: no entry of the same variant or target among %d entries",
                 n_rows);
        return;
    }
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", b->key.b[i]);
    text_add(out, "miss: nearest entry '%s' (%s, key %.12s) differs in ", b->name, b->arch,
             hex);
    for (size_t i = 0; i < N_PARTS; i++) {
        const char *have, *wanted;
        size_t nh, nw;
        if (!(b->differs & part_names[i].bit))
            continue;
        part_value(b->parts, part_names[i].name, &have, &nh);
        part_value(want, part_names[i].name, &wanted, &nw);
        text_add(out, "%s%s (entry %.*s%s, wanted %.*s%s)", sep, part_names[i].name,
                 (int)(nh < 48 ? nh : 48), have, nh > 48 ? "..." : "",
                 (int)(nw < 48 ? nw : 48), wanted, nw > 48 ? "..." : "");
        sep = ", ";
    }
    if (b->differs & FJ_PART_UNRECORDED)
        text_add(out, "%sa part the entry did not record: digest, op, function or preamble "
                 "(stored without key parts)", sep);
    if (!b->differs)
        text_add(out, "nothing recorded (the key derivation itself changed)");
}

int fj_cache_explain(fj_cache *c, const fj_key *key, const char *name, const char *parts,
                     fj_explain *out)
{
    nearest best;
    sqlite3_stmt *st;
    int n_rows = 0, rc;

    if (!out)
        return -1;
    memset(out, 0, sizeof *out);
    memset(&best, 0, sizeof best);
    if (!c || !key || !parts)
        return -1;
    pthread_mutex_lock(&c->mu);
    st = c->st[ST_EXISTS];
    bind_key(st, 1, key);
    rc = fj_step(c, st);
    done(st);
    out->hit = rc == SQLITE_ROW;
    /* A miss: the nearest entry, by a scan of the metadata (no blobs are read). */
    st = c->st[ST_EXPLAIN];
    while (rc == SQLITE_DONE && (rc = fj_step(c, st)) == SQLITE_ROW) {
        const char *rname = (const char *)sqlite3_column_text(st, 1);
        const char *rarch = (const char *)sqlite3_column_text(st, 2);
        const char *rparts = (const char *)sqlite3_column_text(st, 5);
        int64_t created = sqlite3_column_int64(st, 6);
        char *own = NULL;
        n_rows++;
        if (!rparts
            && !(own = column_parts(rarch, sqlite3_column_int(st, 3),
                                    (const char *)sqlite3_column_text(st, 4)))) {
            rc = SQLITE_DONE;
            continue;   /* out of memory: this row is not a candidate */
        }
        unsigned d = parts_diff(parts, rparts ? rparts : own, !rparts);
        if (!rparts && !d)
            d = FJ_PART_UNRECORDED;
        int same_variant = (name && rname && strcmp(name, rname) == 0)
                           || (rparts && !(d & (FJ_PART_OP | FJ_PART_FUNCTION
                                                | FJ_PART_PREAMBLE)));
        int tier = same_variant ? 2 : !(d & FJ_PART_ARCH);
        int nd = n_bits(d);
        if (tier && (tier > best.tier || (tier == best.tier && (nd < best.n_diff
                     || (nd == best.n_diff && created > best.created))))) {
            char *keep = own ? own : dup_str(rparts);
            if (keep) {
                free(best.parts);
                best.parts = keep;
                own = NULL;
                best.tier = tier;
                best.n_diff = nd;
                best.created = created;
                best.differs = d;
                if (sqlite3_column_bytes(st, 0) == (int)sizeof best.key.b)
                    memcpy(best.key.b, sqlite3_column_blob(st, 0), sizeof best.key.b);
                snprintf(best.name, sizeof best.name, "%s", rname ? rname : "");
                snprintf(best.arch, sizeof best.arch, "%s", rarch ? rarch : "");
            }
        }
        free(own);
        rc = SQLITE_DONE;
    }
    done(st);
    if (rc != SQLITE_DONE && !out->hit)
        fj_cache_say(c, FJ_LOG_WARN, "explain failed (%s)", sqlite3_errmsg(c->db));
    fj_cache_unlock(c);

    if (rc != SQLITE_DONE && !out->hit) {
        free(best.parts);
        return -1;
    }
    if (out->hit) {
        snprintf(out->text, sizeof out->text, "hit: the key is in the cache");
    } else {
        out->has_nearest = best.tier > 0;
        out->nearest = best.key;
        out->differs = best.differs;
        snprintf(out->nearest_name, sizeof out->nearest_name, "%s", best.name);
        snprintf(out->nearest_arch, sizeof out->nearest_arch, "%s", best.arch);
        describe(out, &best, parts, n_rows);
    }
    free(best.parts);
    return out->hit;
}
