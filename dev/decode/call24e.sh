#!/usr/bin/env bash
# call24e.sh - lab (2026-12-04, session 24): the candidate (lib_s24d.so: 128x3m1n8 for up to
# 16 packed rows in every bandwidth-bound split, the STREAM_MID class of bba6651 dropped)
# against bba6651 (lib_s24c.so), two turns, q_len 1 and 4, ps16 shuffled; shapes below
# 80 MiB also in graph replay.
set -u
LAB_PREFIX=e
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S1=16x8192,1x32768,1x131072,4x16384,8x8192,2x4096,1x8192
S4=16x8192,1x32768,2x4096,4x2048,4x4096,8x4096
for turn in 1 2; do
    bench dev/decode/lib_s24c.so o1_$turn 1 $S1 8 --page-sizes 16
    bench dev/decode/lib_s24d.so n1_$turn 1 $S1 8 --page-sizes 16
    bench dev/decode/lib_s24c.so o4_$turn 4 $S4 8 --page-sizes 16
    bench dev/decode/lib_s24d.so n4_$turn 4 $S4 8 --page-sizes 16
done
bench dev/decode/lib_s24c.so o16_1 1 16x8192,4x16384 2 --page-sizes 16
bench dev/decode/lib_s24d.so n16_1 1 16x8192,4x16384 2 --page-sizes 16
grep "^- " /tmp/e_n4_1.md | cut -c1-150
