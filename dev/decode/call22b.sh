#!/usr/bin/env bash
# call22b.sh - lab (2026-12-04, session 22): (1) cluster_bench (carry/cluster_bench, built
# from cluster_bench.cu): what clusters of 8 and 16 cost a decode-like graph-replayed launch
# and how many run at once. (2) The cluster merge capped at 8 splits, and only where the
# clusters take no more waves than the plain CTAs: A/B against FAJIT_DECODE_CLUSTER=0 in
# the same library, two turns, on shapes where the wave rule picks <= 8 splits (batch 2-4)
# and the batch-1 ones, graph replay up to 80 MiB of K+V.
set -u
timeout 60 ./carry/cluster_bench
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
