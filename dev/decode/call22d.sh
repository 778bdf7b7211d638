#!/usr/bin/env bash
# call22d.sh - lab (2026-12-04, session 22): call22c's A/B with the clusters launched under
# the SPREAD scheduling policy (call22c: q_len 8, whose 74 KB CTAs fit 2-3 per SM, was 1.4-4.3
# us slower with clusters while the 1-CTA-per-SM q_len 1 gained: were a cluster's CTAs
# stacked on fewer SMs?).
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
