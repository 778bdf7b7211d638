/* target.c - per-target facts (target.h). */
#include "target.h"

#define KIB 1024u

size_t fj_smem_limit(int sm)
{
    switch (sm) {
    case 80: case 87:
        return 163 * KIB;
    case 90: case 100: case 103: case 110:
        return 227 * KIB;
    default:
        return 99 * KIB;
    }
}
