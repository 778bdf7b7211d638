#!/usr/bin/env bash
# call22c.sh - lab (2026-12-04, session 22): call22b's A/B after the cluster merge's items
# became a contiguous 1/S per rank (call22b's item = k*S + rank: q_len 8 4-7 us slower with
# clusters, bank conflicts on every remote 16-byte load), then the gpu-decode suite and
# memcheck on that build (summaries last).
set -u
bench() {   # $1 FAJIT_DECODE_CLUSTER, $2 tag, $3 cache
    FAJIT_DECODE_CLUSTER=$1 FAJIT_CACHE_DIR=$PWD/.fjcache/$3 timeout 150 python3 \
        bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,2x2048,4x2048,2x4096,4x4096 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/bench_$2.md" > "$OUT/bench_$2.log" 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/on .fjcache/off
bench 0 off1 off
bench 1 on1 on
bench 0 off2 off
bench 1 on2 on
export FAJIT_CACHE_DIR=$PWD/.fjcache/on
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|warm:|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
