#!/usr/bin/env bash
# call24h.sh - lab (2026-12-04, session 24): the combine kernel instead of the last CTA's
# merge wherever a group's splits do not merge in a cluster (lib_nofuse.so: decode.c's
# DEC_STAGE_MAX 0, so no fused counters) against main 8ff9d8e (lib_s24d.so), two turns. The
# idea: after the flush the last CTA's merge code comes cold from DRAM at the end of the
# chain (session 21: merge 1.4 + 1.8 us cold at 1x32k), while the combine kernel's CTAs are
# launched early by PDL (the split step triggers at its start) on SMs with room to spare.
set -u
LAB_PREFIX=h
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
S=1x32768,1x131072,2x32768,4x16384,1x8192,2x4096
L=1x1024,1x2048,1x4096,2x2048
for turn in 1 2; do
    bench dev/decode/lib_s24d.so m_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_nofuse.so n_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_s24d.so ml_$turn 1,4 $L 8 --page-sizes 16
    bench dev/decode/lib_nofuse.so nl_$turn 1,4 $L 8 --page-sizes 16
done
grep "^- " /tmp/h_n_1.md | cut -c1-180
