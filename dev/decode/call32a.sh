#!/usr/bin/env bash
# call32a.sh - lab (session 32, prepared without a GPU): the split step's speculative
# prologue (seqused_k and the first tiles' page ids read before griddepcontrol.wait, checked
# after it; FAJIT_DECODE_SPECULATE=auto|off|check; branch lab/s32-spec, never on main: its
# build is what ran, carried as build/). (1) the gpu-decode suite: its new
# speculation_race (a kernel rewrites the block table and lengths 20 us after letting the
# decode step launch), the sweep's check context (every eighth case takes the miss path),
# defaults_per_class over head_dim 32/48/64/128 (call31d's first half, never run); (2) auto
# against off in one build, two turns, latency-bound shapes (graph replay decides the goal)
# and streaming ones, q_len 1/4/8, ps16 and ps1. About 5 minutes. Carry build/.
set -u
LAB_PREFIX=s
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
timeout 420 build/tests/test_gpu_decode > "$OUT/suite.log" 2>&1
echo "== gpu-decode rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "speculation_race: .*ok|decode sweep: [0-9]|FAILED|Checks|:F:|:E:" "$OUT/suite.log" |
    cut -c1-200 | head -40
S=1x1024,1x2048,1x4096,2x4096,16x8192,1x32768
for turn in 1 2; do
    for sp in off auto; do
        FAJIT_DECODE_SPECULATE=$sp bench build/libfajit.so ${sp}_$turn 1,4,8 $S 8 --page-sizes 16,1
    done
    echo "t=$(( $(date +%s) - T0 ))"
done
tar czf "$OUT/s_md.tgz" -C /tmp $(cd /tmp && ls s_*.md s_*.log 2>/dev/null)
