/* fa2.h - the portable family's configuration inside an fj_kcfg (for tests and tools). */
#ifndef FJ_FAMILY_FA2_H
#define FJ_FAMILY_FA2_H

#include "family.h"
#include "../autotune/fa2_config.h"

const fj_fa2_config *fj_fa2_of(const fj_kcfg *c);   /* NULL when c is not of this family */
void fj_fa2_kcfg(const fj_fa2_config *f, fj_kcfg *out);

#endif /* FJ_FAMILY_FA2_H */
