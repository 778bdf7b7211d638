#!/usr/bin/env bash
# call3.sh - lab (2026-12-02): decode tests, both loaders benched, memcheck/racecheck on the
# TMA loader. GPU host, one device call.
set -u
export FAJIT_CACHE_DIR=/tmp/fjc
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 | grep -vE "^graph_replay: (caller|context)|^merge_partials|^paged_plans" | tail -22
for L in cpasync tma; do
    (FAJIT_DECODE_LOADER=$L STEPS=bench OUT=$OUT/$L BENCH_ARGS="--q-lens 1,8" bash dev/gpu/run.sh) 2>&1 |
        grep -E "bench rc|^\| [0-9]" | cut -c1-200 | head -42
done
export FAJIT_TEST_CACHE_DIR=/tmp/fjc
CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=16 timeout 150 compute-sanitizer --tool memcheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|decode sweep: [0-9]" $OUT/memcheck.log
CK_RUN_CASE=loader_page_sizes timeout 120 compute-sanitizer --tool racecheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > $OUT/racecheck.log 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|loader_page_sizes" $OUT/racecheck.log | head
