/* family.c - kernel families behind one configuration type (fj_kcfg): which family serves
 * a problem on a target, its default and tuning candidates, the variant (source, entry,
 * preamble) and launch shape of a configuration, and the configuration's name in tuning
 * rows ("128x64w4s1" for FA2, "fa3:128x176o1p1s1" for FA3).
 *
 *   FA3 (attn_fwd_sm90.cu)  compute capability 9.0 exactly, f16/bf16, head_dim a multiple
 *                           of 16; varlen only with total_q/total_k given (TMA needs them)
 *   FA2 (attn_fwd_sm80.cu)  every target from sm_80, the whole descriptor
 *   REF (attn_ref.cu)       the oracle; never chosen by dispatch on sm_80+
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "../autotune/fa2_config.h"

static const char *const k_dtype_name[] = {"f16", "bf16"};
static const char *const k_mask_name[] = {"none", "causal", "window"};

/* The target string of `sm` for compiling: wgmma and setmaxnreg need the "a" target. */
int fj_arch_is_a(const char *arch)
{
    size_t n = arch ? strlen(arch) : 0;
    return n > 0 && arch[n - 1] == 'a';
}

static int fa3_applies(int sm, int arch_a, const fajit_attn_desc *d)
{
    fj_fa3_config c = fj_fa3_default(d->head_dim, (int)d->mask, d->seqlen_q);
    int varlen_ok = !d->cu_seqlens_q || (d->total_q > 0 && d->total_k > 0);
    return sm == 90 && arch_a && varlen_ok && fj_fa3_check(&c, d->head_dim, sm, NULL, 0) == 0;
}

void fj_kcfg_default(int sm, int arch_a, const fajit_attn_desc *d, fj_kcfg *out)
{
    memset(out, 0, sizeof *out);
    if (sm < 80) {
        out->family = FJ_FAM_REF;
    } else if (fa3_applies(sm, arch_a, d)) {
        out->family = FJ_FAM_FA3;
        out->fa3 = fj_fa3_default(d->head_dim, (int)d->mask, d->seqlen_q);
    } else {
        out->family = FJ_FAM_FA2;
        out->fa2 = fj_fa2_default(sm, d->head_dim, (int)d->mask);
    }
}

int fj_kcfg_candidates(int sm, int arch_a, const fajit_attn_desc *d, fj_kcfg *out, int max)
{
    fj_fa3_config c3[32];
    fj_fa2_config c2[32];
    int n = 0;
    if (fa3_applies(sm, arch_a, d)) {
        int k = fj_fa3_candidates(d->head_dim, (int)d->mask, d->seqlen_q, c3, 32);
        for (int i = 0; i < k && n < max; i++, n++) {
            memset(&out[n], 0, sizeof out[n]);
            out[n].family = FJ_FAM_FA3;
            out[n].fa3 = c3[i];
        }
    }
    if (sm >= 80) {
        int k = fj_fa2_candidates(sm, d->head_dim, (int)d->mask, c2, 32);
        for (int i = 0; i < k && n < max; i++, n++) {
            memset(&out[n], 0, sizeof out[n]);
            out[n].family = FJ_FAM_FA2;
            out[n].fa2 = c2[i];
        }
    }
    return n;
}

int fj_kcfg_valid(const fj_kcfg *c, int sm, int arch_a, const fajit_attn_desc *d)
{
    switch (c->family) {
    case FJ_FAM_FA3:
        return fa3_applies(sm, arch_a, d) && fj_fa3_check(&c->fa3, d->head_dim, sm, NULL, 0) == 0;
    case FJ_FAM_FA2:
        return sm >= 80 && fj_fa2_check(&c->fa2, d->head_dim, sm, NULL, 0) == 0;
    default:
        return c->family == FJ_FAM_REF;
    }
}

void fj_kcfg_name(const fj_kcfg *c, char out[32])
{
    if (c->family == FJ_FAM_FA3)
        snprintf(out, 32, "fa3:%dx%do%dp%ds%d", c->fa3.block_m, c->fa3.block_n, c->fa3.overlap,
                 c->fa3.pingpong, c->fa3.persistent);
    else if (c->family == FJ_FAM_FA2)
        fj_config_name(&c->fa2, out);
    else
        snprintf(out, 32, "ref");
}

int fj_kcfg_parse(const char *s, fj_kcfg *c)
{
    char tail;
    memset(c, 0, sizeof *c);
    if (strncmp(s, "fa3:", 4) == 0) {
        c->family = FJ_FAM_FA3;
        fj_fa3_config *f = &c->fa3;
        return sscanf(s + 4, "%dx%do%dp%ds%d%c", &f->block_m, &f->block_n, &f->overlap,
                      &f->pingpong, &f->persistent, &tail) == 5 ? 0 : -1;
    }
    c->family = FJ_FAM_FA2;
    return fj_config_parse(s, &c->fa2);
}

void fj_kcfg_variant(const fj_kcfg *c, const fajit_attn_desc *d, fj_variant *v, fj_launch *l)
{
    int dt = (int)d->dtype, hd = d->head_dim, mask = (int)d->mask;
    memset(l, 0, sizeof *l);
    l->family = c->family;
    switch (c->family) {
    case FJ_FAM_FA3:
        v->source = "attn_fwd_sm90.cu";
        v->function = "fj_attn_fwd_sm90";
        fj_fa3_preamble(&c->fa3, dt, hd, mask, v->preamble, sizeof v->preamble);
        snprintf(v->name, sizeof v->name, "fa3 %s d%d %s %dx%d o%d p%d s%d", k_dtype_name[dt], hd,
                 k_mask_name[mask], c->fa3.block_m, c->fa3.block_n, c->fa3.overlap,
                 c->fa3.pingpong, c->fa3.persistent);
        l->fa3 = c->fa3;
        l->block_m = c->fa3.block_m;
        l->threads = 128 * (c->fa3.block_m / 64 + 1);
        l->dyn_smem = (int)fj_fa3_smem_bytes(&c->fa3, hd);
        break;
    case FJ_FAM_FA2:
        fj_variant_fa2(v, &c->fa2, dt, hd, mask);
        l->block_m = c->fa2.block_m;
        l->threads = c->fa2.warps * 32;
        l->dyn_smem = (int)fj_fa2_smem_bytes(&c->fa2, hd);
        break;
    default:
        fj_variant_ref(v, dt);
        l->block_m = 1;
        l->threads = 256;
        l->dyn_smem = 0;
    }
}
