#!/usr/bin/env bash
# call20f.sh - lab (2026-12-03, session 20): the final figures of this session's kernels:
# the whole decode bench with SDPA FLASH, CUDNN and FlashInfer (carry/fi, fi_setup.sh).
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20f
mkdir -p "$FAJIT_CACHE_DIR"
timeout 200 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench full rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^Mixed/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
