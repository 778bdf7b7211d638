/* fa4_config.c - see fa4_config.h. */
#include "fa4_config.h"

#include <stdio.h>
#include <string.h>

#define KIB 1024u

int fj_fa4_target_ok(int sm) { return sm == 100 || sm == 103; }

size_t fj_fa4_smem_bytes(const fj_fa4_config *c, int head_dim)
{
    const size_t dc = (size_t)(head_dim + 63) / 64, qt = (size_t)c->block_m / 128;
    return qt * dc * 128u * 128u + (size_t)c->stages * dc * (size_t)c->block_n * 128u + 512u +
           qt * 128u * 12u + 1024u;
}

int fj_fa4_tmem_cols(const fj_fa4_config *c, int head_dim)
{
    return c->block_m / 128 * (c->block_n + head_dim);
}

static fj_fa4_config cfg(int m, int n, int stages, int emu, int sched)
{
    fj_fa4_config c = {m, n, stages, emu, 8, sched};
    return c;
}

fj_fa4_config fj_fa4_default(int head_dim, int mask, int sm)
{
    const int dyn = mask != FJ_MASK_NONE;
    fj_fa4_config c;
    if (head_dim <= 128)
        c = cfg(256, 128, 4, 10, dyn);
    else if (head_dim <= 192)
        c = cfg(256, 64, 4, 16, dyn);
    else
        c = cfg(128, 128, 2, 16, dyn);
    /* FA4 turns the emulation off on sm_103 (flash_fwd_sm100.py: enable_ex2_emu ... and not
     * is_sm103): B300's MUFU ex2 throughput leaves the exponentials off the critical path */
    if (sm == 103)
        c.emu = 0;
    /* the most stages up to 4 that fit (head_dim 64 .. 192 take 4) */
    while (c.stages > 2 && fj_fa4_smem_bytes(&c, head_dim) > 227 * KIB)
        c.stages--;
    return c;
}

int fj_fa4_check(const fj_fa4_config *c, int head_dim, int sm, char *why, size_t n)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        n = sizeof dummy;
    }
    if (!fj_fa4_target_ok(sm)) {
        snprintf(why, n, "the sm_100a kernel needs compute capability 10.0 or 10.3, got sm_%d", sm);
        return -1;
    }
    if (head_dim != 64 && head_dim != 96 && head_dim != 128 && head_dim != 192 && head_dim != 256) {
        snprintf(why, n, "head_dim must be 64, 96, 128, 192 or 256, got %d", head_dim);
        return -1;
    }
    if (c->block_m != 128 && c->block_m != 256) {
        snprintf(why, n, "block_m must be 128 or 256, got %d", c->block_m);
        return -1;
    }
    if (c->block_n != 64 && c->block_n != 128) {
        snprintf(why, n, "block_n must be 64 or 128 (an S row of block_n values lives in one "
                 "thread's registers), got %d", c->block_n);
        return -1;
    }
    if (c->stages < 2 || c->stages > 8 || c->emu < 0 || c->emu > 64 || c->rescale < 0 ||
        c->rescale > 16 || (c->sched != 0 && c->sched != 1)) {
        snprintf(why, n, "stages must be 2..8, emu 0..64, rescale 0..16, sched 0 or 1, got %d, "
                 "%d, %d and %d", c->stages, c->emu, c->rescale, c->sched);
        return -1;
    }
    const int cols = fj_fa4_tmem_cols(c, head_dim);
    if (cols > 512) {
        snprintf(why, n, "Tensor Memory: %d columns > 512 ((block_m/128) * (block_n + head_dim), "
                 "block_m %d, block_n %d, head_dim %d)", cols, c->block_m, c->block_n, head_dim);
        return -1;
    }
    const size_t smem = fj_fa4_smem_bytes(c, head_dim);
    if (smem > 227 * KIB) {
        snprintf(why, n, "shared memory %zu bytes > 227 KiB (block_m %d, block_n %d, stages %d, "
                 "head_dim %d)", smem, c->block_m, c->block_n, c->stages, head_dim);
        return -1;
    }
    return 0;
}

static int add(fj_fa4_config *out, int k, int max, fj_fa4_config c, int head_dim, int sm)
{
    if (k >= max || fj_fa4_check(&c, head_dim, sm, NULL, 0))
        return k;
    for (int i = 0; i < k; i++)
        if (memcmp(&out[i], &c, sizeof c) == 0)
            return k;
    out[k] = c;
    return k + 1;
}

int fj_fa4_candidates(int head_dim, int mask, int sm, fj_fa4_config *out, int max)
{
    const fj_fa4_config d = fj_fa4_default(head_dim, mask, sm);
    fj_fa4_config c;
    int k = 0;
    if (max > 6)
        max = 6;
    if (max <= 0)
        return 0;
    out[k++] = d;
    if (mask != FJ_MASK_NONE) {  /* the other scheduler */
        c = d;
        c.sched = !d.sched;
        k = add(out, k, max, c, head_dim, sm);
    }
    c = d;  /* the exponential split: all MUFU, or twice the software share */
    c.emu = d.emu ? 0 : 16;
    k = add(out, k, max, c, head_dim, sm);
    if (d.emu) {
        c.emu = d.emu > 8 ? d.emu / 2 : 16;
        k = add(out, k, max, c, head_dim, sm);
    }
    c = d;  /* the smaller key block (more stages), and one Q tile */
    c.block_n = 64;
    c.stages = d.stages * 2 > 8 ? 8 : d.stages * 2;
    while (c.stages > 2 && fj_fa4_smem_bytes(&c, head_dim) > 227 * KIB)
        c.stages--;
    k = add(out, k, max, c, head_dim, sm);
    c = d;  /* rescale every growth */
    c.rescale = 0;
    k = add(out, k, max, c, head_dim, sm);
    return k;
}
