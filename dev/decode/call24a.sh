#!/usr/bin/env bash
# call24a.sh - lab (2026-12-04, session 24): (1) the fourth split class (SPLIT_STREAM_MANY:
# 9..16 packed rows on 128x2m1n8 where >= 27 sequence x KV head pairs stream) in
# dev/decode/lib_s24.so against main 52220c5 (dev/decode/lib_main.so), two turns, q_len 4 x
# 4 heads and q_len 1 x 16 heads; (2) q_len 8 on one row-warp layouts (two q tiles per
# group) through dev/decode/lib_lab.so's FJ_LAB_CFG8, graph replay at batch 1-2.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --heads-kv $5 --page-sizes 16 \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/a_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/a_$2.md" | head -12 | cut -d'|' -f2,3,5 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/a_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S4=2x4096,4x2048,4x4096,8x4096,16x8192,1x32768
S1=4x16384,8x8192,16x8192
for turn in 1 2; do
    bench dev/decode/lib_main.so m4_$turn 4 $S4 8
    bench dev/decode/lib_s24.so n4_$turn 4 $S4 8
    bench dev/decode/lib_main.so m1g16_$turn 1 $S1 2
    bench dev/decode/lib_s24.so n1g16_$turn 1 $S1 2
done
S8=1x1024,1x2048,1x4096,2x2048
bench dev/decode/lib_lab.so q8def 1,8 $S8 8
for cfg in 128,2,1,8 128,2,1,4 64,3,1,4; do
    FJ_LAB_CFG8=$cfg bench dev/decode/lib_lab.so q8_${cfg//,/_} 8 $S8 8
done
