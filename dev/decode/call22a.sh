#!/usr/bin/env bash
# call22a.sh - lab (2026-12-04, session 22): the cluster merge (the splits of a group as one
# thread-block cluster, partials through distributed shared memory). (1) Smoke: one
# latency-bound shape with clusters, under a short timeout (a barrier bug hangs). (2) A/B in
# one process per turn, the same library: FAJIT_DECODE_CLUSTER=0 (last-CTA merge / combine
# kernel, as main) against the default, two turns each, each with its own cache. (3) The
# gpu-decode suite and memcheck (summaries last, so that they show).
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
mkdir -p .fjcache/on .fjcache/off
FAJIT_CACHE_DIR=$PWD/.fjcache/on timeout 90 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1 --shapes 1x4096 --page-sizes 16 --no-mixed --no-peers --rounds 1 --reps 3 \
    --graph-replays 3 --out "$OUT/smoke.md" > "$OUT/smoke.log" 2>&1
echo "smoke rc=$?"; tail -3 "$OUT/smoke.log" | cut -c1-200
bench() {   # $1 FAJIT_DECODE_CLUSTER, $2 tag
    FAJIT_DECODE_CLUSTER=$1 FAJIT_CACHE_DIR=$PWD/.fjcache/$3 timeout 120 python3 \
        bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,1x32768,1x131072 --page-sizes 16 --no-mixed --no-peers \
        --rounds 3 --reps 10 --graph-replays 10 --out "$OUT/bench_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    grep -E '^\| 1x(32768|131072) \| [148] ' "$OUT/bench_$2.md" | cut -d'|' -f2,3,5,8,9 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$2.md" | grep -E '^\| 1x' | cut -c1-60 | tr '\n' ' '
    echo
}
bench 0 off1 off
bench 1 on1 on
bench 0 off2 off
bench 1 on2 on
export FAJIT_CACHE_DIR=$PWD/.fjcache/on
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|warm:|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
