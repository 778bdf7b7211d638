#!/usr/bin/env bash
# call27a.sh - lab (session 27): main with the session-27 decode rules, against lib_cfg26.so
# (main c86365c + the lab hooks, hooks unused here = the old rules): (1) the gpu-decode
# suite (defaults_per_class now at head_dim 32 too); (2) A/B old/new, ps16 shuffled, two
# turns (one at head_dim 32/48), no peers: fill_splits with the partials' cost (head_dim 128 and 64, q_len 1/4/8);
# head_dim 64 SPLIT_NONE at most two CTAs per SM on 128x3m1n8; head_dim 32/48 128x2m1n8
# where latency-bound or streaming; (3) the full benchmark with peers and the goals' table.
# Carry build/ and dev/decode/lib_cfg26.so.
set -u
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
export FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
mkdir -p "$FAJIT_TEST_CACHE_DIR" .fjcache
s0=$(date +%s)
timeout 200 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1
echo "gpu_decode rc=$? $(( $(date +%s) - s0 )) s"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:|head_dim 32" "$OUT/gd.log" | cut -c1-160
LAB_PREFIX=a
. "$(dirname "$0")/lab_bench.sh"
O=dev/decode/lib_cfg26.so N=build/libfajit.so
for turn in 1 2; do
    for v in old new; do
        L=$O; [ $v = new ] && L=$N
        LAB_FIELDS=2,3,5 bench $L h128_${v}_$turn 1,4,8 40x8192,100x8192,200x4096,64x8192 8 \
            --page-sizes 16
        LAB_FIELDS=2,3,5 bench $L h64_${v}_$turn 1,4,8 100x8192,200x8192,17x16384,24x16384,32x16384,33x8192,32x2048,40x8192 8 \
            --page-sizes 16 --head-dim 64
        [ $turn = 2 ] && continue   # (head_dim 32/48: differences of 5-25%, one turn)
        for hd in 32 48; do
            LAB_FIELDS=2,3,5 bench $L h${hd}_${v}_$turn 1,4 16x8192,1x131072,1x32768,1x1024,1x2048,1x4096,64x16384,128x2048 8 \
                --page-sizes 16 --head-dim $hd
        done
    done
done
echo "ab done $(( $(date +%s) - s0 )) s"
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 200 python3 \
    bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" \
    > "$OUT/bench.log" 2>&1
echo "bench rc=$? $(( $(date +%s) - s0 )) s"
sed -n '/^The serving goals/,$p' "$OUT/decode.md" | grep -E '^\||met,' | cut -c1-150
