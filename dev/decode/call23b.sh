#!/usr/bin/env bash
# call23b.sh - lab (2026-12-04, session 23): tile layouts forced through lib_lab.so (main's
# kernels; FJ_LAB_CFG1/4/8="bn,stages,wm,wn" replace decode.c's default for <= 8, 9..16 and
# 17..32 packed rows), graph replay, page size 16, batch 1-4: after call23a found 128x2m2n4
# 0.3-0.9 us faster than 64x2m2n2 at q_len 8.
set -u
bench() {   # $1 tag, $2 q_lens, $3 shapes  (env: the FJ_LAB_CFG* of the run)
    FAJIT_CACHE_DIR=$PWD/.fjcache/$1 timeout 150 python3 \
        bench/bench_decode.py --lib dev/decode/lib_lab.so --q-lens $2 --shapes $3 --page-sizes 16 \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/ab_$1.md" > /dev/null 2>&1
    echo "== $1 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ab_$1.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2,4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
S=1x1024,1x2048,1x4096,2x2048,2x4096,4x2048,4x4096
bench q8_default 8 $S
for c in 128,2,2,4 128,3,2,4 128,2,2,8 64,2,2,4; do FJ_LAB_CFG8=$c bench q8_${c//,/_} 8 $S; done
bench q8_default2 8 $S
FJ_LAB_CFG8=128,2,2,4 bench q8_128_2_2_4_b 8 $S
bench q4_default 4 $S
for c in 128,2,1,8 128,2,1,4 128,3,1,8 128,2,2,4; do FJ_LAB_CFG4=$c bench q4_${c//,/_} 4 $S; done
bench q4_default2 4 $S
S1=1x1024,1x2048,1x4096,2x2048,2x4096
bench q1_default 1 $S1
for c in 128,3,1,8 128,2,1,4 64,2,1,4; do FJ_LAB_CFG1=$c bench q1_${c//,/_} 1 $S1; done
