#!/usr/bin/env bash
# call22h.sh - lab (2026-12-04, session 22): the committed kernels after call22g (fewer splits
# for the cluster merge only up to 16 packed rows: q_len 8 at 1x1k had lost 0.7 us): the
# latency-bound graph replays with clusters and without (same library, two turns), then the
# gpu-decode suite.
set -u
bench() {   # $1 FAJIT_DECODE_CLUSTER, $2 tag, $3 cache
    FAJIT_DECODE_CLUSTER=$1 FAJIT_CACHE_DIR=$PWD/.fjcache/$3 timeout 120 python3 \
        bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096 --page-sizes 16 --no-mixed --no-peers --rounds 3 \
        --reps 10 --graph-replays 10 --out "$OUT/ab_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ab_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/on .fjcache/off
bench 0 off1 off
bench 1 on1 on
bench 0 off2 off
bench 1 on2 on
export FAJIT_CACHE_DIR=$PWD/.fjcache/on
timeout 200 build/tests/test_gpu_decode > /tmp/gd.log 2>&1
echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|combine_paths: .*ok|Checks|:F:|:E:" /tmp/gd.log | cut -c1-200
