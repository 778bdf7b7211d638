#!/usr/bin/env bash
# call21e.sh - lab (2026-12-04, session 21): (1) is the fused merge's time its code's first
# run? Timelines with the merge done twice by the last CTA (lib_tl2.so: a worktree edited by
# timeline_apply.py --twice). (2) The index arithmetic moved before griddepcontrol.wait: the
# latency-bound bench against main's kernels (lib_base.so, 83d3df4), in turns. (3) The
# gpu-decode suite and memcheck on the candidate build (summaries last, so that they show).
set -u
cp dev/decode/lib_tl2.so /tmp/libfajit_tl2.so
FAJIT_CACHE_DIR=$PWD/.fjcache/c21e_tl timeout 120 python3 dev/decode/timeline.py \
    --lib /tmp/libfajit_tl2.so --calls 2 --shapes 1x4096,1x1024,1x32768 2>&1 |
    grep -E "^1x|cold|graph|merge|wait|epi1" | cut -c1-220
FAJIT_CACHE_DIR=$PWD/.fjcache/c21e_tl timeout 60 python3 dev/decode/timeline.py \
    --lib /tmp/libfajit_tl2.so --calls 1 --shapes 1x4096 --q-len 8 2>&1 |
    grep -E "^1x|graph|merge|wait|epi1|loop" | cut -c1-220
cp dev/decode/lib_base.so /tmp/libfajit_base.so
mkdir -p .fjcache/c21e_base .fjcache/c21e
bench() {   # $1 library, $2 cache dir, $3 tag
    FAJIT_CACHE_DIR=$2 timeout 100 python3 bench/bench_decode.py --lib $1 --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,1x32768 --page-sizes 16 --no-mixed --no-peers \
        --rounds 3 --reps 10 --graph-replays 10 --out "$OUT/bench_$3.md" > /dev/null 2>&1
    echo "== $3 rc=$?"
    grep -E '^\| 1x32768 \| [148] ' "$OUT/bench_$3.md" | cut -d'|' -f2,3,5,8,9
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$3.md" | grep -E '^\| 1x' | cut -c1-60 | tr '\n' ' '
    echo
}
bench /tmp/libfajit_base.so $PWD/.fjcache/c21e_base base1
bench build/libfajit.so $PWD/.fjcache/c21e new1
bench /tmp/libfajit_base.so $PWD/.fjcache/c21e_base base2
bench build/libfajit.so $PWD/.fjcache/c21e new2
export FAJIT_CACHE_DIR=$PWD/.fjcache/c21e
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep|Checks|ERROR SUMMARY|Invalid|warm:|decode:|san:" /tmp/suite.txt | cut -c1-200
