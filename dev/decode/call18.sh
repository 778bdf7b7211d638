#!/usr/bin/env bash
# call18.sh - lab (2026-12-03, session 18): first device call. The split merge through a
# thread-block cluster (distributed shared memory) against the global merge, same build:
# warm, the gpu-decode suite (a third of its sweep through FAJIT_DECODE_MERGE=global), then
# the latency-bound bench twice in separate processes (auto = clusters, global), CUDNN and
# FLASH timed in each, then memcheck over the cluster paths.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c18
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -vE "^graph_replay: (caller|context)|^merge_partials|^paged_plans" | cut -c1-220 | tail -40
args=(--shapes 1x1024,1x2048,1x4096,1x32768 --q-lens 1,4,8 --page-sizes 16,1 --no-mixed)
for m in auto global; do
    mkdir -p "$OUT/$m"
    FAJIT_DECODE_MERGE=$m PYTHONUNBUFFERED=1 timeout 150 python3 bench/bench_decode.py \
        --lib build/libfajit.so --out "$OUT/$m/decode.md" "${args[@]}" > "$OUT/$m/bench.log" 2>&1
    echo "bench $m rc=$?"
    grep -E "^\| 1x" "$OUT/$m/decode.md" | cut -c1-200
done
export FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR
CK_RUN_CASE=combine_paths timeout 120 compute-sanitizer --tool memcheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > "$OUT/a/memcheck.log" 2>&1
echo "memcheck combine_paths rc=$?"; grep -E "ERROR SUMMARY|combine_paths" "$OUT/a/memcheck.log" | head
CK_RUN_CASE=combine_paths timeout 120 compute-sanitizer --tool racecheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > "$OUT/a/racecheck.log" 2>&1
echo "racecheck combine_paths rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/a/racecheck.log" | head -4
