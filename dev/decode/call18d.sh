#!/usr/bin/env bash
# call18d.sh - lab (2026-12-03, session 18): fourth and fifth device calls, the figures of the
# new sm_90 latency-bound defaults (128x2m1n8 at <= 16 packed rows, 64x2m2n2 at 17..32):
# warm, the gpu-decode suite, then the whole decode bench with FlashInfer 0.7.2 beside
# SDPA FLASH and CUDNN in the same process.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c18d
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "warm|rc=|decode sweep: [0-9]|Checks|combine_paths: .*ok|graph_replay: cluster" | cut -c1-200
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 timeout 240 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench full rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^Mixed/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
