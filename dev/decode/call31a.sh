#!/usr/bin/env bash
# call31a.sh - lab (session 31): on the H200, the checks head packing still owes: (1) the
# paged sweep against the float64 oracle with packing forced to 2 and 4 at head_dims the
# rule leaves unpacked (8, 16, 24, 40, 56; call30b's, never run), (2) the gpu-decode suite
# with the rule, (3) the rule against no packing in one build (FAJIT_DECODE_HEAD_PACK=off
# vs auto) at head_dim 32, 48, 64, q_len 1 and 4, ps16. About 6-8 minutes. Carry build/.
set -u
LAB_PREFIX=a
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
T0=$(date +%s)
bash "$(dirname "$0")/call30b.sh"   # (1)
echo "t=$(( $(date +%s) - T0 ))"
timeout 300 build/tests/test_gpu_decode > "$OUT/gpu_decode.log" 2>&1
echo "== gpu-decode rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "decode sweep: [0-9]|FAILED|Checks|:F:|:E:" "$OUT/gpu_decode.log" | cut -c1-200 | head -20
S=64x16384,128x2048,16x8192,1x32768,1x131072,1x4096
for hd in 32 48 64; do
    FAJIT_DECODE_HEAD_PACK=off LAB_FIELDS=2,3,5,6,9,10,11 bench build/libfajit.so off_h$hd 1,4 $S 8 --head-dim $hd --page-sizes 16
    LAB_FIELDS=2,3,5,6,9,10,11 bench build/libfajit.so auto_h$hd 1,4 $S 8 --head-dim $hd --page-sizes 16
    echo "t=$(( $(date +%s) - T0 ))"
    tar czf "$OUT/a_md.tgz" -C /tmp $(cd /tmp && ls a_*.md a_*.log 2>/dev/null)   # (so far)
done
