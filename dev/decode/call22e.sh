#!/usr/bin/env bash
# call22e.sh - lab (2026-12-04, session 22): cluster launches with more than half an SM's
# shared memory (one CTA of a cluster per SM; the wave rule then counts the clusters the
# GPU runs at that size) against call22d's (lib_stack.so: the kernel's own shared memory, a
# GPC may stack 2-3 CTAs of a cluster on one SM) and against no clusters, each library in
# turns with its own cache; then the gpu-decode suite and memcheck on the build.
set -u
cp dev/decode/lib_stack.so /tmp/libfajit_stack.so
bench() {   # $1 library, $2 FAJIT_DECODE_CLUSTER, $3 tag, $4 cache
    FAJIT_DECODE_CLUSTER=$2 FAJIT_CACHE_DIR=$PWD/.fjcache/$4 timeout 150 python3 \
        bench/bench_decode.py --lib $1 --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,2x2048,4x2048,2x4096,4x4096 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/bench_$3.md" > "$OUT/bench_$3.log" 2>&1
    echo "== $3 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/bench_$3.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/on .fjcache/off .fjcache/stack
bench build/libfajit.so 0 off1 off
bench build/libfajit.so 1 on1 on
bench /tmp/libfajit_stack.so 1 stack1 stack
bench build/libfajit.so 0 off2 off
bench build/libfajit.so 1 on2 on
bench /tmp/libfajit_stack.so 1 stack2 stack
export FAJIT_CACHE_DIR=$PWD/.fjcache/on
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|warm:|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
