#!/usr/bin/env bash
# call17b.sh - lab (2026-12-02, session 17): second device call. The split-only 128x2 rule
# and the fused merge staged in rounds (q_len 8 over 16 splits no longer needs the combine
# kernel): gpu-decode suite, the bench, memcheck and racecheck over a decode sweep.
set -u
export FAJIT_CACHE_DIR=/tmp/fjc
(STEPS="decode bench" OUT=$OUT/new BENCH_ARGS="--q-lens 1,8" bash dev/gpu/run.sh) 2>&1 |
    grep -vE "^graph_replay: (caller|context)|^merge_partials|^paged_plans" | cut -c1-200 | tail -75
export FAJIT_TEST_CACHE_DIR=/tmp/fjc
CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=24 timeout 150 compute-sanitizer --tool memcheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|decode sweep: [0-9]" $OUT/memcheck.log
CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=12 timeout 150 compute-sanitizer --tool racecheck \
    --kernel-name kns=fj_attn_decode build/tests/test_gpu_decode > $OUT/racecheck.log 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|decode sweep: [0-9]" $OUT/racecheck.log | head
