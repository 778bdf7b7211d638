#!/usr/bin/env bash
# call20d.sh - lab (2026-12-03, session 20): the split step's issue path made shorter
# (32-bit row offsets in 16-byte units, shifts for power-of-two pages, O rescaled only when
# a row maximum moved) against main's kernels (dev/decode/lib_base.so, built from 0884c45):
# the gpu-decode suite and memcheck on the new build, then the bench of both libraries in
# turns (each its own cache), then ncu's instruction count of the new split step at 16x8k.
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20d
mkdir -p "$FAJIT_CACHE_DIR" .fjcache/c20d_base
timeout 200 $B/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
(STEPS="decode san" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "rc=|decode sweep: [0-9]|Checks|ERROR SUMMARY|Invalid" | cut -c1-200
cp dev/decode/lib_base.so /tmp/libfajit_base.so
bench() {   # $1 library, $2 cache dir, $3 tag
    FAJIT_CACHE_DIR=$2 timeout 150 python3 bench/bench_decode.py --lib $1 --q-lens 1,8 \
        --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 \
        --out "$OUT/bench_$3.md" > "$OUT/bench_$3.log" 2>&1
    echo "== $3 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [18] ' "$OUT/bench_$3.md" | cut -d'|' -f2,3,5,8,9 | head -16
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$3.md" | grep -E '^\| 1x' | cut -c1-100
}
bench /tmp/libfajit_base.so $PWD/.fjcache/c20d_base base1
bench $B/libfajit.so $FAJIT_CACHE_DIR new1
bench /tmp/libfajit_base.so $PWD/.fjcache/c20d_base base2
bench $B/libfajit.so $FAJIT_CACHE_DIR new2
timeout 200 ncu --target-processes all -k regex:fj_attn_decode$ -c 2 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --section InstructionStats \
    python3 bench/bench_decode.py --lib $B/libfajit.so --shapes 16x8192 --q-lens 1 \
    --page-sizes 16 --no-peers --no-mixed --rounds 1 --reps 1 > "$OUT/ncu.txt" 2>&1
echo "ncu rc=$?"
grep -E "Duration|DRAM Throughput|Issued Warp|Executed Ipc|Instructions" "$OUT/ncu.txt" | head -20
