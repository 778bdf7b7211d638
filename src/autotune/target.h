/* target.h - facts of a compile target that the configuration rules (fa2_config.c) and the
 * families' resource models share. Plain C11. */
#ifndef FJ_AUTOTUNE_TARGET_H
#define FJ_AUTOTUNE_TARGET_H

#include <stddef.h>

/* Largest dynamic shared memory per block on `sm` (major*10 + minor), in bytes (opt-in
 * limit): 163 KiB on sm_80/87, 227 KiB on sm_90/100/103/110, 99 KiB elsewhere (sm_86, 89,
 * 120, 121, ...). */
size_t fj_smem_limit(int sm);

#endif /* FJ_AUTOTUNE_TARGET_H */
