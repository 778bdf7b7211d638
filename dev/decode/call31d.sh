#!/usr/bin/env bash
# call31d.sh - lab (session 31): head packing's rule with head_dim 48 packed x2 where the keys
# stream (up to 16 packed rows): defaults_per_class (now over head_dim 32, 48, 64, 128)
# against the float64 oracle, then the rule against FAJIT_DECODE_HEAD_PACK=off at head_dim
# 48 on the stream shapes, q_len 1 and 4. About 2 minutes. Carry build/.
set -u
LAB_PREFIX=f
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
CK_RUN_CASE=defaults_per_class timeout 200 build/tests/test_gpu_decode > "$OUT/dpc.log" 2>&1
echo "== defaults_per_class rc=$?"
grep -E "head_dim 48|Checks|:F:|:E:" "$OUT/dpc.log" | cut -c1-200
for p in off auto; do
    FAJIT_DECODE_HEAD_PACK=$p LAB_FIELDS=2,3,5,6 bench build/libfajit.so h48_$p 1,4 \
        16x8192,1x32768,1x131072,4x16384 8 --head-dim 48 --page-sizes 16
done
