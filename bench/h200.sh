#!/usr/bin/env bash
# h200.sh - everything one GPU-host call does, in order: device state, `fajit-tune info`,
# the gpu suite, the README quick start, and the benchmark against PyTorch SDPA.
# Logs go under $OUT. Build here first (bash tools/setup.sh)
# and carry build; optionally carry a cache warmed here (FAJIT_CACHE_DIR).
# Every GPU program runs under `timeout`.
set -u
B=${B:-build}
OUT=${OUT:-/tmp/fajit-out}
mkdir -p "$OUT"
export FAJIT_CACHE_DIR=${FAJIT_CACHE_DIR:-/tmp/fajit-cache}
export FAJIT_TEST_CACHE_DIR=${FAJIT_TEST_CACHE_DIR:-$FAJIT_CACHE_DIR}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
timeout 60 "$B/fajit-tune" info 2>&1 | tee "$OUT/info.txt"
if [ "${SKIP_GPU_SUITE:-0}" != 1 ]; then
    timeout 1200 "$B/tests/test_gpu" >"$OUT/gpu.log" 2>&1
    echo "gpu suite rc=$?"
    grep -E "sweep:|second process:|timing|Checks|Failures|Error" "$OUT/gpu.log" | head -40
fi
timeout 120 "$B/tests/quickstart"
echo "quickstart rc=$?"
if [ "${SKIP_TUNE:-0}" != 1 ]; then
    # Tuning a preset: from an empty cache (compiles + measures), then again (rows kept).
    T=/tmp/fajit-tune-cache
    rm -rf "$T"
    for pass in cold warm; do
        start=$(date +%s.%N)
        timeout 400 "$B/fajit-tune" -q --cache-dir "$T" tune --spec "${TUNE_SPEC:-llama-3-8b}" \
            >"$OUT/tune_$pass.txt" 2>&1
        rc=$?; echo "tune $pass rc=$rc in $(awk "BEGIN{print $(date +%s.%N) - $start}") s"
        cat "$OUT/tune_$pass.txt"
    done
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    PYTHONUNBUFFERED=1 timeout 1200 python3 bench/bench_attn.py --lib "$B/libfajit.so" \
        --out "$OUT/bench.md" ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
    echo "bench rc=$?"
    cat "$OUT/bench.md" 2>/dev/null || tail -30 "$OUT/bench.log"
fi
