#!/usr/bin/env bash
# call24g.sh - lab (2026-12-04, session 24): does q_len 8 (32 packed rows, 128x2m2n4 where
# the keys split) gain from a third stage on the bandwidth-bound shapes as 16 rows did
# (8ff9d8e)? main 8ff9d8e (lib_s24d.so) against 128x3m2n4 forced through lib_lab.so
# (FJ_LAB_CFG8), two turns, ps16 shuffled.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv, $6.. extra
    local lib=$1 tag=$2 q=$3 sh=$4 hk=$5; shift 5
    FAJIT_CACHE_DIR=$PWD/.fjcache/$tag timeout 200 python3 \
        bench/bench_decode.py --lib $lib --q-lens $q --shapes $sh --heads-kv $hk \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "/tmp/g_$tag.md" "$@" > /tmp/g_$tag.log 2>&1
    echo "== $tag rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "/tmp/g_$tag.md" | cut -d'|' -f2,3,5,9 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "/tmp/g_$tag.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
S8=16x8192,1x32768,1x131072,4x16384,2x4096
for turn in 1 2; do
    bench dev/decode/lib_s24d.so d8_$turn 8 $S8 8 --page-sizes 16
    FJ_LAB_CFG8=128,3,2,4 bench dev/decode/lib_lab.so s3_$turn 8 $S8 8 --page-sizes 16
done
