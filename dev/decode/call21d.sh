#!/usr/bin/env bash
# call21d.sh - lab (2026-12-04, session 21): the shorter tail and prologue (the fused
# merge's row weights by a warp per row, tile 0's K/V issued before Q, padding rows skipped
# in epilogue 1) against main's kernels (dev/decode/lib_base.so, built from 83d3df4): the
# gpu-decode suite and memcheck on the new build, the bench of both libraries in turns
# (each its own cache), and timelines of the new kernels (lib_tl.so: a worktree edited by
# timeline_apply.py).
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c21d
mkdir -p "$FAJIT_CACHE_DIR" .fjcache/c21d_base
(STEPS="decode san" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "rc=|decode sweep: [0-9]|Checks|ERROR SUMMARY|Invalid|warm:" | cut -c1-200
cp dev/decode/lib_base.so /tmp/libfajit_base.so
bench() {   # $1 library, $2 cache dir, $3 tag
    FAJIT_CACHE_DIR=$2 timeout 150 python3 bench/bench_decode.py --lib $1 --q-lens 1,4,8 \
        --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 \
        --out "$OUT/bench_$3.md" > "$OUT/bench_$3.log" 2>&1
    echo "== $3 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [148] ' "$OUT/bench_$3.md" | cut -d'|' -f2,3,5,8,9 | head -24
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$3.md" | grep -E '^\| 1x' | cut -c1-100
}
bench /tmp/libfajit_base.so $PWD/.fjcache/c21d_base base1
bench $B/libfajit.so $FAJIT_CACHE_DIR new1
bench /tmp/libfajit_base.so $PWD/.fjcache/c21d_base base2
bench $B/libfajit.so $FAJIT_CACHE_DIR new2
# where the time of the new kernels goes
cp dev/decode/lib_tl.so /tmp/libfajit_tl.so
FAJIT_CACHE_DIR=$PWD/.fjcache/c21d_tl timeout 120 python3 dev/decode/timeline.py \
    --lib /tmp/libfajit_tl.so --calls 1 --shapes 1x4096,1x1024,1x32768 2>&1 | grep -v "^1x" | cut -c1-300
