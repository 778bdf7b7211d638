#!/usr/bin/env bash
# call26a.sh - lab (session 26, prepared without a GPU): correctness of main after session
# 25 (the head_dim 49..64 defaults, fill_splits): (1) the whole gpu-decode suite, with
# defaults_per_class's full-batch case (8 x 40 KV heads x 2k keys: 2 splits at head_dim 128)
# that has never run; (2) tests/gpu_sanitize.sh whole (memcheck, racecheck, synccheck over
# the fwd san case, the paged sweep, the combine paths and the per-class defaults). Carry
# build/ (built here from main).
set -u
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
mkdir -p "$FAJIT_CACHE_DIR"
s0=$(date +%s)
timeout 330 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1
echo "gpu_decode rc=$? $(( $(date +%s) - s0 )) s"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:|defaults_per_class|full batch" "$OUT/gd.log" | cut -c1-200
s0=$(date +%s)
FAJIT_SAN_CACHE_DIR=$PWD/.fjcache/san timeout 240 bash tests/gpu_sanitize.sh build "$OUT/san" \
    > "$OUT/san.log" 2>&1
echo "gpu_sanitize rc=$? $(( $(date +%s) - s0 )) s"
tail -15 "$OUT/san.log"
