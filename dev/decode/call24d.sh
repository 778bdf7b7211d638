#!/usr/bin/env bash
# call24d.sh - lab (2026-12-04, session 24): call24c found the shuffled pages' cost at
# 16 x 8k (ps16 1.04-1.05x contiguous, in order 1.01) smaller on 128x3m1n8 (1.02; 1x32k
# 40.9 against 42.5 us). Two turns, bba6651 defaults (lib_s24c.so) against 128x3m1n8
# forced through lib_lab.so: q_len 1 bandwidth-bound (STREAM and STREAM_MID shapes), q_len 4,
# and q_len 1 latency-bound in graph replay.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv, $6.. extra
    local lib=$1 tag=$2 q=$3 sh=$4 hk=$5; shift 5
    FAJIT_CACHE_DIR=$PWD/.fjcache/$tag timeout 200 python3 \
        bench/bench_decode.py --lib $lib --q-lens $q --shapes $sh --heads-kv $hk \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "/tmp/d_$tag.md" "$@" > /tmp/d_$tag.log 2>&1
    echo "== $tag rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "/tmp/d_$tag.md" | cut -d'|' -f2,3,5,9,10 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "/tmp/d_$tag.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S1=16x8192,1x32768,1x131072,2x32768,4x16384,8x8192
S4=16x8192,1x32768,2x4096,4x4096
L=1x1024,1x2048,1x4096
for turn in 1 2; do
    bench dev/decode/lib_s24c.so def1_$turn 1 $S1 8 --page-sizes 16,1
    FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so w8s3_1_$turn 1 $S1 8 --page-sizes 16,1
    bench dev/decode/lib_s24c.so def4_$turn 4 $S4 8 --page-sizes 16
    FJ_LAB_CFG4=128,3,1,8 bench dev/decode/lib_lab.so w8s3_4_$turn 4 $S4 8 --page-sizes 16
    bench dev/decode/lib_s24c.so defl_$turn 1 $L 8 --page-sizes 16
    FJ_LAB_CFG1=128,3,1,8 bench dev/decode/lib_lab.so w8s3_l_$turn 1 $L 8 --page-sizes 16
done
grep "^- " /tmp/d_def1_1.md | cut -c1-200
grep "^- " /tmp/d_w8s3_1_1.md | cut -c1-200
