#!/usr/bin/env bash
# call18b.sh - lab (2026-12-03, session 18): second device call. The whole decode bench with
# FlashInfer 0.7.2 (carried: carry/fi, dev/decode/fi_setup.sh) beside SDPA FLASH and CUDNN,
# then the latency-bound shapes A/B/C in separate processes: clusters with the spread policy
# (this build), the global merge (FAJIT_DECODE_MERGE=global), clusters packed (build/old:
# commit 01592db).
set -u
source dev/decode/fi_setup.sh
export FAJIT_CACHE_DIR=$PWD/.fjcache/c18
mkdir -p "$FAJIT_CACHE_DIR"
timeout 200 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
mkdir -p "$OUT/full"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/full/decode.md" > "$OUT/full/bench.log" 2>&1
echo "bench full rc=$?"; grep -E "^\| [0-9]|flashinfer|FI " "$OUT/full/decode.md" | cut -c1-260 | head -60
tail -5 "$OUT/full/bench.log" | cut -c1-300
args=(--shapes 1x1024,1x2048,1x4096 --q-lens 1,8 --page-sizes 16 --no-mixed --no-peers)
for m in spread global packed; do
    lib=build/libfajit.so; [ $m = packed ] && lib=build/old/libfajit.so
    mm=auto; [ $m = global ] && mm=global
    mkdir -p "$OUT/$m"
    FAJIT_DECODE_MERGE=$mm PYTHONUNBUFFERED=1 timeout 100 python3 bench/bench_decode.py \
        --lib $lib --out "$OUT/$m/decode.md" "${args[@]}" > "$OUT/$m/bench.log" 2>&1
    echo "bench $m rc=$?"; grep -E "^\| 1x" "$OUT/$m/decode.md" | cut -c1-160
done
