#!/usr/bin/env bash
# call30b.sh - lab (session 30, prepared, its device calls refused): head packing forced to 2
# and 4 at the head_dims the default rule leaves unpacked because no GPU ran them packed
# (8, 16, 24, 40, 56): the paged sweep against the float64 oracle. About 2-3 minutes.
# If it passes, 40 and 56 may join the rule after a timing (call30a with --head-dim 40|56).
# Carry build/.
set -u
for hp in 2 4; do
    FAJIT_DECODE_HEAD_PACK=$hp CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=120 \
        FAJIT_TEST_DECODE_HDS=8,16,24,40,56 timeout 120 build/tests/test_gpu_decode \
        > "$OUT/sw_$hp.log" 2>&1
    echo "== $hp rc=$? $(grep -E 'decode sweep: [0-9]|Checks|:F:' "$OUT/sw_$hp.log" | cut -c1-230)"
done
