#!/usr/bin/env bash
# call24f.sh - lab (2026-12-04, session 24): the session's final figures and checks on main
# (8ff9d8e: split classes with LATENCY_FEW, 128x3m1n8 streaming): (1) the decode bench with
# SDPA FLASH and CUDNN and the mixed batch; (2) the gpu-decode suite; (3) the decode half of
# tests/gpu_sanitize.sh (memcheck, synccheck, racecheck); (4) the gpu suite and quickstart.
set -u
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 300 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^SDPA/p' "$OUT/decode.md" | grep -E '^\| [0-9]x' | cut -c1-120
grep -iE "mixed" -A4 "$OUT/decode.md" | grep -E "^\|" | head -6 | cut -c1-160
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
timeout 240 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-220
sed -e '/^runs=("fwd|CK_RUN_CASE=san|/s/^runs=("fwd|[^"]*"/runs=(/' tests/gpu_sanitize.sh \
    -e "s/FAJIT_TEST_DECODE_CASES=10/FAJIT_TEST_DECODE_CASES=4/" > tests/.gpu_sanitize_decode.sh
timeout 330 bash tests/.gpu_sanitize_decode.sh build /tmp/san24 2>&1 | tail -12
echo "sanitize rc=$?"
export FAJIT_CACHE_DIR=$PWD/.fjcache/h FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/h
timeout 200 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
timeout 420 build/tests/test_gpu > "$OUT/gpu.log" 2>&1
echo "gpu suite rc=$?"
grep -E "Checks|:F:|:E:" "$OUT/gpu.log" | tail -8 | cut -c1-220
timeout 60 build/tests/quickstart > "$OUT/qs.log" 2>&1; echo "quickstart rc=$?"
