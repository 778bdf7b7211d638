#!/usr/bin/env bash
# h200.sh - everything one GPU-host call does, in order: device state, `fajit-tune info`,
# the gpu suite, the README quick start, tuning a preset, the benchmark against PyTorch
# SDPA (BENCH_ARGS; BENCH2_ARGS: a second table, e.g. "--family fa2 --hdims 256"), and an
# Nsight Compute profile of fajit's kernel on the shapes in NCU_ARGS (bench_attn.py
# arguments; the key lines are printed, the full report is $OUT/ncu.txt), and
# compute-sanitizer memcheck + racecheck on fajit's kernels for the shapes in SAN_ARGS (this
# step has not run yet: the one attempt used a wrong filter syntax).
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
if [ -n "${BENCH2_ARGS:-}" ]; then
    PYTHONUNBUFFERED=1 timeout 600 python3 bench/bench_attn.py --lib "$B/libfajit.so" \
        --out "$OUT/bench2.md" $BENCH2_ARGS >"$OUT/bench2.log" 2>&1
    echo "bench2 rc=$?"
    cat "$OUT/bench2.md" 2>/dev/null || tail -30 "$OUT/bench2.log"
fi
if [ -n "${NCU_ARGS:-}" ]; then
    # stall reasons and tensor-pipe activity, by the names this ncu knows for the GPU
    Q=$(timeout 60 ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
    M=$( (echo "$Q" | grep -E '^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active$' |
          sed 's/$/.ratio/'
          echo "$Q" | grep -E '^sm__pipe_tensor[a-z_]*_cycles_active$' |
          sed 's/$/.avg.pct_of_peak_sustained_active/') | paste -sd, -)
    timeout "${NCU_T:-240}" ncu --kernel-name regex:fj_attn_fwd --launch-skip 1 \
        --launch-count "${NCU_COUNT:-2}" --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section Occupancy ${M:+--metrics $M} \
        --log-file "$OUT/ncu.txt" python3 bench/bench_attn.py --lib "$B/libfajit.so" \
        --fajit-only 2 $NCU_ARGS >"$OUT/ncu_app.log" 2>&1
    echo "ncu rc=$? ($(echo "$M" | tr ',' '\n' | grep -c .) extra metrics)"
    grep -E "fj_attn_fwd|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Executed Ipc A|pipe_tensor|issue_stalled" \
        "$OUT/ncu.txt" | awk '$NF != 0 && $NF != "0.00"' | cut -c1-150 | head -90
fi
if [ -n "${SAN_ARGS:-}" ]; then
    for tool in memcheck racecheck; do
        timeout "${SAN_T:-150}" compute-sanitizer --tool $tool --kernel-name kns=fj_attn_fwd \
            python3 bench/bench_attn.py --lib "$B/libfajit.so" --fajit-only 1 $SAN_ARGS \
            >"$OUT/san_$tool.log" 2>&1
        echo "$tool rc=$?"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/san_$tool.log" | head -3
    done
fi
