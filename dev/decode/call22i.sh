#!/usr/bin/env bash
# call22i.sh - lab (2026-12-04, session 22): FlashInfer 0.7.2 (carry/fi from fi_carry.sh --aot,
# its sm_90a decode modules precompiled) beside fajit's committed kernels, SDPA FLASH and
# CUDNN, q_len 1 (flashinfer's decode wrapper takes one query row), page size 16.
set -u
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=/tmp/fajit-cache timeout 330 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1 --page-sizes 16 --no-mixed --out "$OUT/fi.md" \
    > "$OUT/fi.log" 2>&1
echo "bench rc=$?"
grep -iE "flashinfer|FI " "$OUT/fi.log" | head -5 | cut -c1-200
grep -E '^\| shape|^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/fi.md" | cut -c1-260
