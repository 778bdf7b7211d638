#!/usr/bin/env bash
# call25g.sh - lab (2026-12-04, session 25): splits that fill the last wave of a full batch
# (lib_fill.so: decode.c's fill_splits; e.g. 40 x 8k at head_dim 128: 320 CTAs over 264
# slots, 4 splits of 2k keys) against main 66cbe54 (lib_m25.so), and the candidate with
# FAJIT_DECODE_CLUSTER=0 (its splits merged by the last CTA instead of clusters); q_len 1,
# ps16 shuffled, two turns; then the candidate once with SDPA FLASH/CUDNN.
set -u
LAB_PREFIX=g
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
S=40x8192,48x8192,72x8192,80x8192,100x8192,40x2048,64x8192
for turn in 1 2; do
    LAB_FIELDS=2,5 bench dev/decode/lib_m25.so m_$turn 1 $S 8 --page-sizes 16
    LAB_FIELDS=2,5 bench dev/decode/lib_fill.so f_$turn 1 $S 8 --page-sizes 16
    FAJIT_DECODE_CLUSTER=0 LAB_FIELDS=2,5 bench dev/decode/lib_fill.so n_$turn 1 $S 8 --page-sizes 16
done
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/p timeout 100 python3 bench/bench_decode.py \
    --lib dev/decode/lib_fill.so --q-lens 1 --shapes $S --page-sizes 16 --no-mixed \
    --rounds 3 --reps 10 --out "$OUT/fill.md" > "$OUT/fill.log" 2>&1
echo "peers rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/fill.md" | cut -d'|' -f2,5,9,10,11,12,13
