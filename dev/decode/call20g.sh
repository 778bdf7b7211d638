#!/usr/bin/env bash
# call20g.sh - lab (2026-12-03, session 20): commit ac7f448's final kernels (head_dim guard
# on the lazy rescale) through the gpu-decode suite, memcheck and the whole gpu suite.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20g
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode san" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "warm|rc=|decode sweep: [0-9]|Checks|ERROR SUMMARY|Invalid" | cut -c1-220
t0=$(date +%s)
FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR timeout 300 build/tests/test_gpu >"$OUT/gpu.log" 2>&1
echo "gpu suite rc=$? $(( $(date +%s) - t0 )) s"
grep -E "sweep|second process|graph|Checks|:F:|:E:" "$OUT/gpu.log" | tail -12 | cut -c1-220
