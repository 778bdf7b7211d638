#!/usr/bin/env bash
# call24c.sh - lab (2026-12-04, session 24): (1) where the paged loop's cost at 16 x 8k
# comes from: fajit bba6651 (lib_s24c.so) with the pages shuffled and in order
# (--pages-in-order), page sizes 16, 1, 128 and contiguous, the default and 3-stage tiles
# (lib_lab.so FJ_LAB_CFG1); (2) q_len 8 at 1 x 4k on 64-key tiles with 16 forced splits (2-3
# CTAs per SM) against the new default; (3) the final rule against main in reversed order
# (lib_s24c first), and the gpu-decode suite on bba6651.
set -u
LAB_PREFIX=c LAB_FIELDS=rows
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
B=16x8192,1x32768
for turn in 1 2; do
    bench dev/decode/lib_s24c.so shuf_$turn 1 $B 8 --page-sizes 16,1,128
    bench dev/decode/lib_s24c.so ord_$turn 1 $B 8 --page-sizes 16,1,128 --pages-in-order
done
FJ_LAB_CFG1=128,3,1,4 bench dev/decode/lib_lab.so shuf3 1 $B 8 --page-sizes 16
FJ_LAB_CFG1=128,3,1,4 bench dev/decode/lib_lab.so ord3 1 $B 8 --page-sizes 16 --pages-in-order
FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so shuf3w8 1 $B 8 --page-sizes 16
FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so ord3w8 1 $B 8 --page-sizes 16 --pages-in-order
for cfg in 64,2,1,4 64,3,1,4; do
    FJ_LAB_CFG8=$cfg bench dev/decode/lib_lab.so q8_${cfg//,/_}_s16 8 1x4096,1x2048 8 --page-sizes 16 --num-splits 16
done
bench dev/decode/lib_s24c.so rev_new 1,4,8 1x1024,1x2048,1x4096,2x2048 8 --page-sizes 16
bench dev/decode/lib_main.so rev_main 1,4,8 1x1024,1x2048,1x4096,2x2048 8 --page-sizes 16
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
timeout 240 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-220
