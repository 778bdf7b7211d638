/* alias_family.c - see alias_family.h. */
#include <stdio.h>

#include "alias_family.h"

fj_kcfg fj_alias_as_fa2(const fj_kcfg *c)
{
    fj_kcfg f = *c;
    f.fam = &fj_family_fa2;
    return f;
}

int fj_alias_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                   size_t n)
{
    fj_kcfg f = fj_alias_as_fa2(c);
    return fj_family_fa2.check(&f, d, t, why, n);
}

void fj_alias_cfg_name(const fj_kcfg *c, char *out, size_t n)
{
    fj_kcfg f = fj_alias_as_fa2(c);
    fj_family_fa2.cfg_name(&f, out, n);
}

void fj_alias_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out)
{
    fj_kcfg f = fj_alias_as_fa2(c);
    fj_family_fa2.kernels(&f, d, out);
    for (int i = 0; i < out->n; i++) {
        char was[96];
        snprintf(was, sizeof was, "%s", out->v[i].name);
        snprintf(out->v[i].name, sizeof out->v[i].name, "%s(%.80s)", c->fam->name, was);
    }
}

void fj_alias_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                   size_t n)
{
    fj_kcfg f = fj_alias_as_fa2(c);
    fj_family_fa2.describe_grid(&f, d, t, out, n);
}
