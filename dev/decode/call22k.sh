#!/usr/bin/env bash
# call22k.sh - lab (2026-12-04, session 22): the committed kernels after call22j (partials
# staged by the last CTA only up to 48 KiB, the combine kernel beyond): the gpu-decode suite,
# then the batch 1-4 latency shapes once.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/k
timeout 200 build/tests/test_gpu_decode > /tmp/gd.log 2>&1
echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|combine_paths: .*ok|Checks|:F:|:E:" /tmp/gd.log | cut -c1-200
timeout 100 python3 bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
    --shapes 1x1024,1x2048,1x4096,2x2048,4x2048,2x4096,4x4096 --page-sizes 16 --no-mixed \
    --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
    --out "$OUT/k.md" > /dev/null 2>&1
echo "== bench rc=$?"
sed -n '/^Latency-bound/,$p' "$OUT/k.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
