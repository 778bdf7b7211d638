/* alias_family.h - test families that serve the portable family's kernels (fj_family_fa2)
 * under another name: a family ranked above the shipped ones that dispatch picks first, for
 * the validation gate's tests (tests/test_gate*.c with a fake driver, tests/test_gpu_gate.c
 * on a GPU). The shared hooks forward to fj_family_fa2 with the configuration renamed to it
 * (the portable family reads only configurations that name it); kernel names are wrapped as
 * "NAME(fa2 ...)", NAME the alias's family name. FJ_ALIAS_HOOKS defines the three hooks that
 * must name the alias itself. */
#ifndef FJ_TEST_ALIAS_FAMILY_H
#define FJ_TEST_ALIAS_FAMILY_H

#include "../src/api/internal.h"

/* c with the portable family as its family. */
fj_kcfg fj_alias_as_fa2(const fj_kcfg *c);
int fj_alias_check(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *why,
                   size_t n);
void fj_alias_cfg_name(const fj_kcfg *c, char *out, size_t n);
void fj_alias_kernels(const fj_kcfg *c, const fajit_attn_desc *d, fj_kernels *out);
void fj_alias_grid(const fj_kcfg *c, const fajit_attn_desc *d, const fj_target *t, char *out,
                   size_t n);

/* static NAME_default, NAME_one (candidates and shipped: the default alone) and NAME_parse,
 * whose configurations name the family SELF. */
#define FJ_ALIAS_HOOKS(name, self)                                                           \
    static void name##_default(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out)  \
    {                                                                                        \
        fj_family_fa2.default_cfg(d, t, out);                                                \
        out->fam = &(self);                                                                  \
    }                                                                                        \
    static int name##_one(const fajit_attn_desc *d, const fj_target *t, fj_kcfg *out,        \
                          int max)                                                           \
    {                                                                                        \
        if (max < 1)                                                                         \
            return 0;                                                                        \
        name##_default(d, t, out);                                                           \
        return 1;                                                                            \
    }                                                                                        \
    static int name##_parse(const char *s, fj_kcfg *c)                                       \
    {                                                                                        \
        int r = fj_family_fa2.cfg_parse(s, c);                                               \
        c->fam = &(self);                                                                    \
        return r;                                                                            \
    }

/* The hooks of an alias family whose static hooks FJ_ALIAS_HOOKS(name, ...) made. */
#define FJ_ALIAS_TABLE(name)                                                                 \
    .default_cfg = name##_default, .candidates = name##_one, .shipped = name##_one,          \
    .cfg_parse = name##_parse, .check = fj_alias_check, .cfg_name = fj_alias_cfg_name,       \
    .kernels = fj_alias_kernels, .describe_grid = fj_alias_grid

#endif /* FJ_TEST_ALIAS_FAMILY_H */
