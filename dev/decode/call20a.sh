#!/usr/bin/env bash
# call20a.sh - lab (2026-12-03, session 20): the read floor. fajit warmed, then floor.py
# (dev/decode/floor.py: copy, torch sum, Triton streaming and decode-pattern gather reads,
# fajit ps16/contiguous and CUDNN, one process) over the shapes.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20a
mkdir -p "$FAJIT_CACHE_DIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
t0=$(date +%s)
timeout 200 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
echo "warm $(( $(date +%s) - t0 )) s"
PYTHONUNBUFFERED=1 timeout 420 python3 dev/decode/floor.py --lib build/libfajit.so \
    --out "$OUT/floor.md" > "$OUT/floor.log" 2>&1
echo "floor rc=$? $(( $(date +%s) - t0 )) s"
tail -30 "$OUT/floor.log" | cut -c1-400
