#!/usr/bin/env bash
# call24d.sh - lab (2026-12-04, session 24): call24c found the shuffled pages' cost at
# 16 x 8k (ps16 1.04-1.05x contiguous, in order 1.01) smaller on 128x3m1n8 (1.02; 1x32k
# 40.9 against 42.5 us). Two turns, bba6651 defaults (lib_s24c.so) against 128x3m1n8
# forced through lib_lab.so: q_len 1 bandwidth-bound (STREAM and STREAM_MID shapes), q_len 4,
# and q_len 1 latency-bound in graph replay.
set -u
LAB_PREFIX=d LAB_FIELDS=2,3,5,9,10
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S1=16x8192,1x32768,1x131072,2x32768,4x16384,8x8192
S4=16x8192,1x32768,2x4096,4x4096
L=1x1024,1x2048,1x4096
for turn in 1 2; do
    bench dev/decode/lib_s24c.so def1_$turn 1 $S1 8 --page-sizes 16,1
    FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so w8s3_1_$turn 1 $S1 8 --page-sizes 16,1
    bench dev/decode/lib_s24c.so def4_$turn 4 $S4 8 --page-sizes 16
    FJ_LAB_CFG4=128,3,1,8 bench dev/decode/lib_lab.so w8s3_4_$turn 4 $S4 8 --page-sizes 16
    bench dev/decode/lib_s24c.so defl_$turn 1 $L 8 --page-sizes 16
    FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so w8s3_l_$turn 1 $L 8 --page-sizes 16
done
grep "^- " /tmp/d_def1_1.md | cut -c1-200
grep "^- " /tmp/d_w8s3_1_1.md | cut -c1-200
