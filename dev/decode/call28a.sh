#!/usr/bin/env bash
# call28a.sh - lab (prepared in session 27 without a device): the wave rule's fix (the best
# over split counts that launch). Before: lib_cfg27.so (main 2bbbcea + lab hooks, unused);
# after: build/ (main with the fix). Shapes the old rule left on few CTAs: 3 sequences x 1 KV
# head (8 query heads) x 8k keys (3 CTAs -> 32 splits), 3 x 8 KV heads x 1k (24 CTAs -> 4
# splits), 5 x 2 KV heads x 2k (10 CTAs -> 8), 9 x 1 x 4k, 17 x 1 x 2k; and shapes whose
# count must not move (1 x 8 x 4k, 1 x 8 x 32k, 2 x 8 x 8k). Then the suite's decode part
# (gpu-decode) on the fix, with SDPA CUDNN for the MQA shapes in the same run. ps16 shuffled,
# two turns. Carry build/ and dev/decode/lib_cfg27.so.
set -u
LAB_PREFIX=w
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
O=dev/decode/lib_cfg27.so N=build/libfajit.so
for turn in 1 2; do
    for v in old new; do
        L=$O; [ $v = new ] && L=$N
        LAB_FIELDS=2,3,5 bench $L mqa_${v}_$turn 1,4 3x8192,9x4096,17x2048 1 --heads-q 8 --page-sizes 16
        LAB_FIELDS=2,3,5 bench $L gqa2_${v}_$turn 1,4 5x2048,3x16384 2 --heads-q 16 --page-sizes 16
        LAB_FIELDS=2,3,5 bench $L gqa8_${v}_$turn 1,4 3x1024,1x4096,1x32768,2x8192 8 --page-sizes 16
    done
done
# the peers on the MQA shapes (cuDNN's GQA path with 8 query heads over 1 KV head)
FAJIT_CACHE_DIR=$PWD/.fjcache/peers timeout 200 python3 bench/bench_decode.py --lib $N \
    --q-lens 1 --shapes 3x8192,9x4096,17x2048 --heads-q 8 --heads-kv 1 --no-mixed \
    --page-sizes 16 --out "$OUT/mqa.md" > "$OUT/mqa.log" 2>&1
echo "peers rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/mqa.md" | cut -c1-200
timeout 200 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1
echo "gpu_decode rc=$?"; grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-160
