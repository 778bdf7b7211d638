#!/usr/bin/env bash
# call21f.sh - lab (2026-12-04, session 21): the candidate (call21d's changes, the index
# arithmetic before griddepcontrol.wait, and the fused merge's merger chosen when its loop
# ends: one round trip less after its partials) against main's kernels (lib_base.so,
# 83d3df4): the bench of both libraries in turns (each its own cache), timelines of the
# candidate (lib_tl.so, timeline_apply.py), then the gpu-decode suite and memcheck
# (summaries last, so that they show).
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c21f
mkdir -p "$FAJIT_CACHE_DIR" .fjcache/c21f_base
cp dev/decode/lib_base.so /tmp/libfajit_base.so
bench() {   # $1 library, $2 cache dir, $3 tag
    FAJIT_CACHE_DIR=$2 timeout 150 python3 bench/bench_decode.py --lib $1 --q-lens 1,4,8 \
        --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 \
        --out "$OUT/bench_$3.md" > "$OUT/bench_$3.log" 2>&1
    echo "== $3 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [148] ' "$OUT/bench_$3.md" | cut -d'|' -f2,3,5 | tr '\n' ';'
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$3.md" | grep -E '^\| 1x' | cut -d'|' -f2-4 | tr '\n' ';'
    echo
}
bench /tmp/libfajit_base.so $PWD/.fjcache/c21f_base base1
bench $B/libfajit.so $FAJIT_CACHE_DIR new1
bench /tmp/libfajit_base.so $PWD/.fjcache/c21f_base base2
bench $B/libfajit.so $FAJIT_CACHE_DIR new2
# where the time of the new kernels goes
cp dev/decode/lib_tl.so /tmp/libfajit_tl.so
FAJIT_CACHE_DIR=$PWD/.fjcache/c21f_tl timeout 120 python3 dev/decode/timeline.py \
    --lib /tmp/libfajit_tl.so --calls 1 --shapes 1x4096,1x1024,1x32768 2>&1 |
    grep -E "cold|graph|merge|wait|epi1|parts" | cut -c1-220
FAJIT_CACHE_DIR=$PWD/.fjcache/c21f_tl timeout 60 python3 dev/decode/timeline.py \
    --lib /tmp/libfajit_tl.so --calls 1 --shapes 1x4096 --q-len 4 2>&1 |
    grep -E "graph|merge|wait|epi1|parts" | cut -c1-220
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|Checks|ERROR SUMMARY|Invalid|warm:" /tmp/suite.txt | cut -c1-200
