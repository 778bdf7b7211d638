#!/usr/bin/env bash
# call23l.sh - lab (2026-12-04, session 23): the gpu-decode suite and a graph-replay check at
# batch 1 after the tidy of epilogue 2 (each thread's chunks computed once per CTA; the same
# registers within one, no behaviour change intended).
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/l FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/l
timeout 200 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|combine_paths: .*ok|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-200
timeout 100 python3 bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
    --shapes 1x1024,1x2048,1x4096 --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 \
    --graph-replays 10 --out "$OUT/l.md" > /dev/null 2>&1; echo "bench rc=$?"
sed -n '/^Latency-bound/,$p' "$OUT/l.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
