#!/usr/bin/env bash
# call33c.sh - lab (session 33): call33a's whole decode report (main, SDPA FLASH and CUDNN,
# the goals table) then call33b, in one call. Carry build/ and dev/decode/lib_cfg33.so.
# About 5 minutes.
set -u
mkdir -p .fjcache "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 300 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/decode.log" 2>&1
echo "== full rc=$?"
sed -n '/^| goal |/,/met,/p' "$OUT/decode.md"
bash "$(dirname "$0")/call33b.sh"
