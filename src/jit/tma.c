/* tma.c - tiled TMA descriptors (CUtensorMap) through the driver's cuTensorMapEncodeTiled:
 * the checks the driver would make, with messages that name the tensor and the rule. */
#include <stdio.h>
#include <string.h>

#include "jit.h"

/* A stride of a dimension of `extent` entries, `elems` elements of `esize` bytes apart. A
 * dimension of one entry never steps, so any valid stride stands in for it. */
static int stride_bytes(long long elems, long long extent, unsigned esize, unsigned long long *out)
{
    if (extent <= 1) {
        *out = 16;
        return 0;
    }
    if (elems <= 0 || (elems * esize) % 16 || elems * esize >= (1ll << 40))
        return -1;
    *out = (unsigned long long)elems * esize;
    return 0;
}

int fj_tma_encode(const fj_cuda *cu, const fj_tma_tile *t, fj_tmap *out, char *why, size_t n)
{
    unsigned long long dim[FJ_TMA_MAX_RANK], str[FJ_TMA_MAX_RANK - 1];
    const unsigned estr[FJ_TMA_MAX_RANK] = {1, 1, 1, 1, 1};
    const char *name = t->name ? t->name : "tensor";
    char dummy[8];
    if (!why) {
        why = dummy;
        n = sizeof dummy;
    }
    if (!cu || !cu->cuTensorMapEncodeTiled) {
        snprintf(why, n, "no cuTensorMapEncodeTiled in the driver (needs CUDA 12.0 or newer)");
        return -1;
    }
    if (t->rank < 1 || t->rank > FJ_TMA_MAX_RANK) {
        snprintf(why, n, "%s: rank must be in [1, %d], got %u", name, FJ_TMA_MAX_RANK, t->rank);
        return -1;
    }
    if (t->addr % 16) {
        snprintf(why, n, "%s must be 16-byte aligned for TMA, got address 0x%llx", name,
                 (unsigned long long)t->addr);
        return -1;
    }
    for (unsigned i = 0; i < t->rank; i++)
        dim[i] = t->dim[i] < 1 ? 1 : (unsigned long long)t->dim[i]; /* empty: never loaded */
    for (unsigned i = 1; i < t->rank; i++)
        if (stride_bytes(t->stride[i - 1], (long long)dim[i], t->elem_bytes, &str[i - 1])) {
            snprintf(why, n, "%s strides must be positive multiples of %u elements for TMA, got "
                     "%lld (dimension %u)", name, 16 / t->elem_bytes, t->stride[i - 1], i);
            return -1;
        }
    fj_tmap m;
    memset(&m, 0, sizeof m);
    CUresult r = cu->cuTensorMapEncodeTiled(&m, t->data_type, t->rank, (void *)(size_t)t->addr,
                                            dim, str, t->box, estr, FJ_TMA_INTERLEAVE_NONE,
                                            t->swizzle, t->l2_promotion, FJ_TMA_OOB_ZERO);
    if (r != 0) {
        snprintf(why, n, "cuTensorMapEncodeTiled(%s) failed with CUresult %d", name, r);
        return -1;
    }
    memcpy(out, &m, sizeof m);
    return 0;
}
