#!/usr/bin/env bash
# call21g.sh - lab (2026-12-04, session 21): the committed candidate (call21e's kernels:
# index arithmetic before griddepcontrol.wait, tile 0's K/V before Q, the merge's row
# weights by a warp per row, padding rows skipped in epilogue 1; the merger change of
# call21f reverted): the gpu-decode suite and memcheck, then the decode bench with SDPA
# FLASH and CUDNN (FlashInfer left out: device time) and the mixed batch.
set -u
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|Checks|ERROR SUMMARY|Invalid|warm:" /tmp/suite.txt | cut -c1-200
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=/tmp/fajit-cache timeout 220 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^SDPA/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
grep -iE "mixed" -A4 "$OUT/decode.md" | head -12
