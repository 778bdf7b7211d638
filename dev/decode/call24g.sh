#!/usr/bin/env bash
# call24g.sh - lab (2026-12-04, session 24): does q_len 8 (32 packed rows, 128x2m2n4 where
# the keys split) gain from a third stage on the bandwidth-bound shapes as 16 rows did
# (8ff9d8e)? main 8ff9d8e (lib_s24d.so) against 128x3m2n4 forced through lib_lab.so
# (FJ_LAB_CFG8), two turns, ps16 shuffled.
set -u
LAB_PREFIX=g
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
S8=16x8192,1x32768,1x131072,4x16384,2x4096
for turn in 1 2; do
    bench dev/decode/lib_s24d.so d8_$turn 8 $S8 8 --page-sizes 16
    FJ_LAB_CFG8=128,3,2,4 bench dev/decode/lib_lab.so s3_$turn 8 $S8 8 --page-sizes 16
done
