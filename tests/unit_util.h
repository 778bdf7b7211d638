/* unit_util.h - what the `unit` suite's host tests share: a context with no device and a
 * memory-only cache, and a valid descriptor at fake device addresses (nothing runs). */
#ifndef FJ_TEST_UNIT_UTIL_H
#define FJ_TEST_UNIT_UTIL_H

#include "../src/api/internal.h"

/* FAJIT_DEVICE_NONE, cache_dir "": must be created (checked). */
fajit_ctx *unit_memory_ctx(void);
/* bf16, batch 2, 8 query / 2 KV heads, 100 queries x 130 keys, head_dim 64, no mask; every
 * tensor at one aligned fake address. */
fajit_attn_desc unit_desc(void);

#endif /* FJ_TEST_UNIT_UTIL_H */
