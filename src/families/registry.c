/* registry.c - the kernel families fajit ships, in one table, and what the rest of the
 * library asks of all of them: the choice for a problem, configuration names in tuning
 * rows, and the variants warm-up compiles. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "family.h"
#include "../autotune/spec.h"

/* The families, by fajit_family value. A new family is a line here. */
static const fj_family *const k_families[] = {&fj_family_ref, &fj_family_fa2, &fj_family_fa3,
                                              &fj_family_decode, &fj_family_fa4,
                                              &fj_family_mixed};
#define N_SHIPPED ((int)(sizeof k_families / sizeof k_families[0]))

/* Families added by tests (fj_family_register_for_testing), after the shipped ones. */
#define MAX_ADDED 4
static const fj_family *g_added[MAX_ADDED];
static int g_n_added;

int fj_family_count(void) { return N_SHIPPED + g_n_added; }

const fj_family *fj_family_at(int i)
{
    if (i < 0 || i >= fj_family_count())
        return NULL;
    return i < N_SHIPPED ? k_families[i] : g_added[i - N_SHIPPED];
}

const fj_family *fj_family_by_id(int id)
{
    for (int i = 0; i < fj_family_count(); i++)
        if (fj_family_at(i)->id == id)
            return fj_family_at(i);
    return NULL;
}

void fj_family_register_for_testing(const fj_family *f)
{
    if (!f)
        g_n_added = 0;
    else if (g_n_added < MAX_ADDED)
        g_added[g_n_added++] = f;
}

int fj_family_selectable(int id)
{
    const fj_family *f = fj_family_by_id(id);
    return id == FAJIT_FAMILY_AUTO || (f && f->rank > FJ_RANK_ORACLE);
}

int fj_family_parse(const char *name)
{
    if (strcasecmp(name, "auto") == 0)
        return FAJIT_FAMILY_AUTO;
    for (int i = 0; i < fj_family_count(); i++)
        if (strcasecmp(fj_family_at(i)->name, name) == 0 && fj_family_selectable(fj_family_at(i)->id))
            return fj_family_at(i)->id;
    return -1;
}

void fj_family_names(char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "auto");
    for (int i = 0; i < fj_family_count() && at < n; i++)
        if (fj_family_selectable(fj_family_at(i)->id))
            at += (size_t)snprintf(out + at, n - at, ", %s", fj_family_at(i)->name);
}

const void *fj_fopts_of(const fj_fopts *o, int id)
{
    static const fj_fopts defaults;
    return (o ? o : &defaults)->b[id >= 0 && id < FJ_FOPTS_IDS ? id : 0];
}

fajit_status fj_family_options(fj_fopts *o, char *why, size_t n)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < fj_family_count(); i++) {
        const fj_family *f = fj_family_at(i);
        if (!f->options || f->id < 0 || f->id >= FJ_FOPTS_IDS)
            continue;
        const fajit_status st = f->options(o->b[f->id], why, n);
        if (st != FAJIT_OK)
            return st;
    }
    return FAJIT_OK;
}

fj_plan_class fj_family_plan_class(const fajit_attn_desc *d, const fj_target *t)
{
    fj_plan_class pc = {0, 0};
    for (int i = 0; i < fj_family_count(); i++)
        if (fj_family_at(i)->plan_class)
            fj_family_at(i)->plan_class(d, t, &pc);
    return pc;
}

int fj_family_bucket_suffix(const fajit_attn_desc *d, int sm_count, char *out, size_t n)
{
    size_t at = 0;
    if (n)
        out[0] = 0;
    for (int i = 0; i < fj_family_count(); i++) {
        const fj_family *f = fj_family_at(i);
        const int r = f->bucket_suffix ? snprintf(out + at, n - at, "%s",
                                                  f->bucket_suffix(d, sm_count)) : 0;
        if (r < 0 || (size_t)r >= n - at)
            return -1;
        at += (size_t)r;
    }
    return 0;
}

static int skipped(const fj_family *f, const fj_family *const *skip, int n)
{
    for (int i = 0; i < n; i++)
        if (skip[i] == f)
            return 1;
    return 0;
}

static int rank_of(const fj_family *f, const fajit_attn_desc *d, const fj_target *t)
{
    return f->rank_for ? f->rank_for(d, t) : f->rank;
}

const fj_family *fj_family_choose_except(const fajit_attn_desc *d, const fj_target *t, int want,
                                         const fj_family *const *skip, int n)
{
    const fj_family *forced = want != FAJIT_FAMILY_AUTO ? fj_family_by_id(want) : NULL;
    if (forced && !skipped(forced, skip, n) && forced->op == (int)d->op && forced->applies(d, t))
        return forced;
    const fj_family *best = NULL;
    int best_rank = 0;
    for (int i = 0; i < fj_family_count(); i++) {
        const fj_family *f = fj_family_at(i);
        if (f->op == (int)d->op && f->rank > 0 && !skipped(f, skip, n) && f->applies(d, t) &&
            (!best || rank_of(f, d, t) > best_rank)) {
            best = f;
            best_rank = rank_of(f, d, t);
        }
    }
    return best;
}

const fj_family *fj_family_choose(const fajit_attn_desc *d, const fj_target *t, int want)
{
    return fj_family_choose_except(d, t, want, NULL, 0);
}

int fj_kcfg_default(const fajit_attn_desc *d, const fj_target *t, int want, fj_kcfg *out)
{
    const fj_family *f = fj_family_choose(d, t, want);
    if (!f)
        return -1;
    f->default_cfg(d, t, out);
    return 0;
}

int fj_kcfg_candidates(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out, int max)
{
    const fj_family *first = fj_family_choose(d, t, FAJIT_FAMILY_AUTO);
    if (!first || max < 1)
        return 0;
    int n = first->candidates(d, t, out, max);
    for (int i = 0; i < fj_family_count() && n < max; i++) {
        const fj_family *f = fj_family_at(i);
        if (f != first && f->rank > FJ_RANK_ORACLE && f->op == (int)d->op && f->applies(d, t))
            n += f->candidates(d, t, out + n, max - n);
    }
    return n;
}

void fj_kcfg_name(const fj_kcfg *c, char out[32])
{
    size_t at = (size_t)snprintf(out, 32, "%s", c->fam->cfg_prefix);
    c->fam->cfg_name(c, out + at, 32 - at);
}

int fj_kcfg_parse(const char *s, fj_kcfg *c)
{
    /* Prefixed names first: the unprefixed family would misread none of them, but a
     * prefix is the exact claim. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < fj_family_count(); i++) {
            const fj_family *f = fj_family_at(i);
            size_t np = strlen(f->cfg_prefix);
            if ((np > 0) != (pass == 0) || strncmp(s, f->cfg_prefix, np) != 0)
                continue;
            memset(c, 0, sizeof *c);
            c->fam = f;
            if (f->cfg_parse(s + np, c) == 0)
                return 0;
        }
    memset(c, 0, sizeof *c);
    return -1;
}

int fj_kcfg_same(const fj_kcfg *a, const fj_kcfg *b)
{
    return a->fam == b->fam && memcmp(a->b, b->b, sizeof a->b) == 0;
}

int fj_family_variants(const fajit_attn_desc *d, const fj_target *t, int tune,
                       fj_variant *out, int *n, int max)
{
    enum { MAX_CFGS = 64 };
    fj_kcfg c[MAX_CFGS];
    for (int i = 0; i < fj_family_count(); i++) {
        const fj_family *f = fj_family_at(i);
        if (f->op != (int)d->op || !f->applies(d, t))
            continue;
        int nc = tune ? f->candidates(d, t, c, MAX_CFGS) : f->shipped(d, t, c, MAX_CFGS);
        for (int k = 0; k < nc; k++) {
            fj_kernels ks;
            f->kernels(&c[k], d, &ks);
            for (int j = 0; j < ks.n; j++) {
                int dup = 0;
                for (int m = 0; m < *n && !dup; m++)
                    dup = out[m].source == ks.v[j].source &&
                          strcmp(out[m].preamble, ks.v[j].preamble) == 0;
                if (!dup && *n == max)
                    return -1;
                if (!dup)
                    out[(*n)++] = ks.v[j];
            }
        }
    }
    return 0;
}

int fj_args_push(fj_args *a, const void *p, size_t size, size_t align)
{
    size_t at = (a->used + align - 1) / align * align;
    if (a->n >= FJ_ARGS_MAX || at + size > sizeof a->store)
        return -1;
    memcpy(a->store + at, p, size);
    a->ptr[a->n++] = a->store + at;
    a->used = at + size;
    return 0;
}

const char *fj_dtype_name(int dtype)
{
    static const char *const names[] = {"f16", "bf16"};
    return dtype >= 0 && dtype < 2 ? names[dtype] : "?";
}

const char *fj_mask_name(int mask)
{
    static const char *const names[] = {"none", "causal", "window"};
    return mask >= 0 && mask < 3 ? names[mask] : "?";
}

const char *fajit_family_name(fajit_family f)
{
    if (f == FAJIT_FAMILY_AUTO)
        return "auto";
    const fj_family *fam = fj_family_by_id((int)f);
    return fam ? fam->name : NULL;
}

const char *fajit_family_status_note(fajit_family f)
{
    const fj_family *fam = f == FAJIT_FAMILY_AUTO ? NULL : fj_family_by_id((int)f);
    return fam ? fam->status_note : NULL;
}

const char *fajit_op_name(fajit_op op) { return fj_op_name((int)op); }

/*------ model features ------*/

unsigned fj_features(const fajit_attn_desc *d)
{
    return (d->softcap > 0.f ? FJ_FEAT_SOFTCAP : 0u) | (d->sinks ? FJ_FEAT_SINKS : 0u) |
           (d->alibi_slopes ? FJ_FEAT_ALIBI : 0u) |
           (d->head_dim_v && d->head_dim_v != d->head_dim ? FJ_FEAT_HDIM_V : 0u) |
           (d->kv_dtype != FAJIT_KV_AS_Q ? FJ_FEAT_KV_FP8 : 0u);
}

void fj_feature_names(unsigned f, char *out, size_t n)
{
    static const char *const names[] = {"softcap", "sinks", "alibi_slopes",
                                        "head_dim_v != head_dim", "an FP8 kv_dtype"};
    size_t at = 0;
    if (!n)
        return;
    out[0] = 0;
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
        if (f & 1u << i && at < n) {
            int r = snprintf(out + at, n - at, "%s%s", at ? ", " : "", names[i]);
            at += r > 0 ? (size_t)r : 0;
        }
}
