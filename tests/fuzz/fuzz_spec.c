/* fuzz_spec.c - libFuzzer target: the spec parser (src/autotune/spec.c) on any bytes.
 * Every input must parse or fail with a message, never crash, leak or read out of bounds
 * (built with ASan + UBSan). Seeds: tests/fuzz/spec. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../src/autotune/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fj_spec s;
    char err[512];
    if (fj_spec_parse((const char *)data, size, "fuzz.spec", &s, err, sizeof err) == 0)
        fj_spec_free(&s);
    else if (!memchr(err, 0, sizeof err))
        __builtin_trap();   /* the message must be a terminated string */
    return 0;
}
