#!/usr/bin/env bash
# call26a.sh - lab (session 26, prepared without a GPU): correctness of main after sessions
# 25-26 (the head_dim 49..64 defaults, fill_splits): the whole gpu-decode suite, with
# defaults_per_class's full-batch case (8 x 40 KV heads x 2k keys: 2 splits at head_dim 128)
# that has never run, and the cluster launches without counters or partials (e37f81d).
# tests/gpu_sanitize.sh is call26f (its own 10 minutes). Carry build/ (built here from
# main).
set -u
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
mkdir -p "$FAJIT_CACHE_DIR"
s0=$(date +%s)
timeout 560 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1
echo "gpu_decode rc=$? $(( $(date +%s) - s0 )) s"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:|defaults_per_class|full batch" "$OUT/gd.log" | cut -c1-200
