#!/usr/bin/env bash
# call23k.sh - lab (2026-12-04, session 23): 9..16 packed rows in the streaming class on
# 128x2m1n8 (lib_lab.so with FJ_LAB_CFG4=128,2,1,8; its epilogue is main's before 2951f80,
# which at 8 warps x 16 rows is the same one item per thread) against the committed default
# 128x2m1n4 (build/libfajit.so, 2951f80): q_len 4 x 4 heads per call at batch 2-16, and
# q_len 1 x 16 heads (32 query / 2 KV heads), two turns.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --heads-kv $5 --page-sizes 16 \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/k_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/k_$2.md" | head -12 | cut -d'|' -f2,3,5 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/k_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
S4=2x4096,4x2048,4x4096,16x8192,1x32768,1x131072
S1=4x16384,16x8192,1x32768,1x131072
for turn in 1 2; do
    bench build/libfajit.so n4_$turn 4 $S4 8
    FJ_LAB_CFG4=128,2,1,8 bench dev/decode/lib_lab.so w8_4_$turn 4 $S4 8
    bench build/libfajit.so n4g16_$turn 1 $S1 2
    FJ_LAB_CFG4=128,2,1,8 bench dev/decode/lib_lab.so w8g16_$turn 1 $S1 2
done
