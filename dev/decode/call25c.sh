#!/usr/bin/env bash
# call25c.sh - lab (2026-12-04, session 25): decode at head_dim 64 and 256 against SDPA FLASH
# and CUDNN in the same run (every earlier decode table is head_dim 128), 32 q / 8 KV heads,
# q_len 1 and 4, ps16 shuffled, main 66cbe54 (build/).
set -u
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
for hd in 64 256; do
    PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/h$hd timeout 280 python3 bench/bench_decode.py \
        --lib build/libfajit.so --head-dim $hd --q-lens 1,4 --page-sizes 16 --no-mixed \
        --out "$OUT/decode_hd$hd.md" > "$OUT/bench_hd$hd.log" 2>&1
    echo "hd $hd bench rc=$?"
    grep -E '^\| shape \| q' "$OUT/decode_hd$hd.md" | head -1 | cut -c1-200
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/decode_hd$hd.md" | cut -c1-200
    sed -n '/^Latency-bound/,$p' "$OUT/decode_hd$hd.md" | grep -E '^\| (shape|[0-9]x)' | cut -c1-160
    tail -3 "$OUT/bench_hd$hd.log"
done
