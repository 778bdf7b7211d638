/* unit_util.c - see unit_util.h. */
#include <check.h>

#include "unit_util.h"

fajit_ctx *unit_memory_ctx(void)
{
    fajit_ctx_opts o;
    fajit_ctx_opts_init(&o);
    o.device = FAJIT_DEVICE_NONE;
    o.cache_dir = "";
    fajit_ctx *ctx = NULL;
    ck_assert_int_eq(fajit_ctx_create(&ctx, &o), FAJIT_OK);
    return ctx;
}

fajit_attn_desc unit_desc(void)
{
    fajit_attn_desc d;
    void *p = (void *)(uintptr_t)0x10000;
    fajit_attn_desc_init(&d, p, p, p, p, 2, 8, 2, 100, 130, 64, FAJIT_BF16);
    return d;
}
