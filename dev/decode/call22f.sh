#!/usr/bin/env bash
# call22f.sh - lab (2026-12-04, session 22): with the cluster merge (clusters of <= 8, one CTA
# per SM; call22e), would fewer splits that fit a cluster beat the wave rule's 16 on the
# latency-bound shapes? Forced 8 splits (1 x 1k-4k: 8 clusters of 8) and forced 7 (2 x 2k-4k:
# 16 clusters of 7, if the GPU runs them in one wave) against the default, in turns.
set -u
bench() {   # $1 tag, $2 shapes, $3 num_splits
    FAJIT_CACHE_DIR=$PWD/.fjcache/on timeout 150 python3 bench/bench_decode.py \
        --lib build/libfajit.so --q-lens 1,4,8 --shapes $2 --num-splits $3 --page-sizes 16 \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/b_$1.md" > "$OUT/b_$1.log" 2>&1
    echo "== $1 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/b_$1.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/on
for turn in 1 2; do
    bench b1_def$turn 1x1024,1x2048,1x4096 0
    bench b1_s8_$turn 1x1024,1x2048,1x4096 8
    bench b2_def$turn 2x2048,2x4096 0
    bench b2_s7_$turn 2x2048,2x4096 7
done
