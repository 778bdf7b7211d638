#!/usr/bin/env bash
# call25a.sh - lab (2026-12-04, session 25): the group's first arrival runs the staged merge
# dry (loads, no stores) so that after the flush the merge's code is in the L2 when the
# last split merges (lib_warm.so; session 21's timeline: the merge took 1.4 + 1.8 us cold
# at 1x32k, 1.0 + 1.1 warm) against main 66cbe54 (lib_m25.so), two turns, ps16 shuffled;
# then the gpu-decode suite on the candidate (build/ holds it).
set -u
LAB_PREFIX=a
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S=1x32768,1x131072,2x32768,4x16384,1x8192,2x4096,8x8192
L=1x1024,1x2048,1x4096,2x2048
for turn in 1 2; do
    bench dev/decode/lib_m25.so m_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_warm.so w_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_m25.so ml_$turn 1,4 $L 8 --page-sizes 16
    bench dev/decode/lib_warm.so wl_$turn 1,4 $L 8 --page-sizes 16
done
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
timeout 240 build/tests/test_gpu_decode > /tmp/a_gd.log 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" /tmp/a_gd.log | cut -c1-220
