/* decode_opts.c - the decode family's options (fj_dec_opts), read from the environment at
 * context creation through its table's options hook: FAJIT_DECODE_LOADER, FAJIT_DECODE_HEAD_PACK
 * and FAJIT_DECODE_CLUSTER. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "decode.h"

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

static fajit_status refuse(char *why, size_t n, const char *what, const char *e)
{
    snprintf(why, n, "%s, got '%s'", what, e);
    return FAJIT_INVALID_ARGUMENT;
}

fajit_status fj_dec_options(void *opts, char *why, size_t n)
{
    fj_dec_opts *o = opts;
    const char *e;
    if ((e = getenv("FAJIT_DECODE_LOADER")) && *e) {
        static const char *const loaders[] = {"auto", "cpasync", "tma"};   /* FJ_DEC_LOADER_* */
        int i = lookup(e, loaders, 3);
        if (i < 0)
            return refuse(why, n, "FAJIT_DECODE_LOADER must be auto, cpasync or tma", e);
        o->loader = i;
    }
    if ((e = getenv("FAJIT_DECODE_HEAD_PACK")) && *e) {
        static const char *const packs[] = {"auto", "off", "2", "4"};
        static const int values[] = {FJ_DEC_PACK_AUTO, FJ_DEC_PACK_OFF, FJ_DEC_PACK_2,
                                     FJ_DEC_PACK_4};
        int i = lookup(e, packs, 4);
        if (i < 0)
            return refuse(why, n, "FAJIT_DECODE_HEAD_PACK must be auto, off, 2 or 4", e);
        o->pack = values[i];
    }
    if ((e = getenv("FAJIT_DECODE_CLUSTER")) && *e) {
        if (strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
            return refuse(why, n, "FAJIT_DECODE_CLUSTER must be 0 or 1", e);
        o->no_cluster = e[0] == '0';
    }
    return FAJIT_OK;
}
