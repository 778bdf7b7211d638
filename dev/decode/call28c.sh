#!/usr/bin/env bash
# call28c.sh - lab (session 28): the decode bench at head_dim 32 and 48 with SDPA FLASH and
# CUDNN in the same run (every earlier table at these head dims had fajit alone): q_len 1/4,
# ps16 shuffled, the default shapes. Carry build/. About 2 x 2.5 minutes.
set -u
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
for hd in 32 48; do
    PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/f$hd timeout 270 python3 bench/bench_decode.py \
        --lib build/libfajit.so --head-dim $hd --q-lens 1,4 --page-sizes 16 --no-mixed \
        --out "$OUT/decode_hd$hd.md" > "$OUT/bench_hd$hd.log" 2>&1
    echo "hd $hd bench rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/decode_hd$hd.md" | cut -d'|' -f2,3,5,9,11,12,13 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/decode_hd$hd.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4,7,9 | tr '\n' ' '
    echo
done
