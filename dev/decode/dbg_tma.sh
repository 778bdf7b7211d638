#!/usr/bin/env bash
# dbg_tma.sh - lab: which shapes hang the TMA decode kernel (2026-12-02). GPU host.
export FAJIT_CACHE_DIR=${FAJIT_CACHE_DIR:-/tmp/fjc} FAJIT_DECODE_LOADER=tma
B=${B:-build}
for x in "64x16384 16" "64x16384 64" "16x16384 16" "64x2048 16" "33x2048 16" "32x2048 16"; do
    set -- $x
    echo "== $1 ps$2"
    timeout 25 python3 bench/bench_decode.py --lib $B/libfajit.so --shapes $1 --q-lens 1 \
        --page-sizes $2 --rounds 1 --reps 3 --verbose --no-peers --no-mixed 2>&1 |
        grep -E "first call|fajit ps|ABORT|rror" | cut -c1-220 | head -6
    echo "rc=${PIPESTATUS[0]}"
done
