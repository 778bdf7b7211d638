#!/usr/bin/env bash
# run.sh - one GPU-host call (the device tool): build carried from the dev machine, the cache
# warmed there on all cores, then the steps named in STEPS (default "decode bench"):
#   decode  tests/test_gpu_decode (paged decode vs float64)      -> $OUT/gpu_decode.log
#   suite   tests/test_gpu + quickstart (the whole gpu suite)    -> $OUT/gpu.log
#   bench   bench/bench_decode.py (fajit vs SDPA FLASH/CUDNN)    -> $OUT/decode.md
#   san     compute-sanitizer memcheck on a short decode sweep   -> $OUT/san.log
#   sanitize tests/gpu_sanitize.sh: memcheck, racecheck, synccheck over the families (the
#           gpu suite's gpu-sanitize test)                       -> $OUT/sanitize/*.log
#   tune    fajit-tune tune --spec $TUNE_SPEC (default: dev/decode/tune.spec)
#   sweep   dev/decode/split_sweep.py (time per forced split count) -> $OUT/sweep.md
# Every GPU program runs under `timeout`; the last lines of each log are printed.
set -u
B=${B:-build}
OUT=${OUT:-/tmp/fajit-out}
mkdir -p "$OUT"
export FAJIT_CACHE_DIR=${FAJIT_CACHE_DIR:-/tmp/fajit-cache}
export FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
start=$(date +%s)
timeout 200 "$B/fajit-tune" -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -2
echo "warm: $(( $(date +%s) - start )) s"
for step in ${STEPS:-decode bench}; do
    t0=$(date +%s)
    case $step in
    decode)
        timeout 300 "$B/tests/test_gpu_decode" >"$OUT/gpu_decode.log" 2>&1
        echo "gpu_decode rc=$?"; grep -vE "^\s*$" "$OUT/gpu_decode.log" | tail -25 ;;
    suite)
        timeout 500 "$B/tests/test_gpu" >"$OUT/gpu.log" 2>&1
        echo "gpu suite rc=$?"
        grep -E "sweep|second process|graph|timing|Checks|Failures|Error|:F:|:E:" "$OUT/gpu.log" | tail -30
        timeout 60 "$B/tests/quickstart"; echo "quickstart rc=$?"
        # the gpu suite's sanitizer test (meson's gpu suite runs it as gpu-sanitize)
        timeout 900 bash tests/gpu_sanitize.sh "$B" "$OUT/sanitize" >"$OUT/sanitize.log" 2>&1
        echo "sanitize rc=$?"; grep -E "memcheck|synccheck|racecheck|gpu_sanitize" "$OUT/sanitize.log" ;;
    bench)
        PYTHONUNBUFFERED=1 timeout 400 python3 bench/bench_decode.py --lib "$B/libfajit.so" \
            --out "$OUT/decode.md" ${BENCH_ARGS:-} >"$OUT/bench_decode.log" 2>&1
        echo "bench rc=$?"; cat "$OUT/decode.md" 2>/dev/null || tail -30 "$OUT/bench_decode.log" ;;
    tune)
        timeout 400 "$B/fajit-tune" tune --spec "${TUNE_SPEC:-dev/decode/tune.spec}" \
            --reps "${TUNE_REPS:-10}" ${TUNE_ARGS:-} >"$OUT/tune.log" 2>&1
        echo "tune rc=$?"; tail -12 "$OUT/tune.log"
        python3 dev/decode/tune_table.py "$FAJIT_CACHE_DIR/kernels.db" 2>&1 | cut -c1-400 ;;
    sweep)
        PYTHONUNBUFFERED=1 timeout 300 python3 dev/decode/split_sweep.py --lib "$B/libfajit.so" \
            --out "$OUT/sweep.md" ${SWEEP_ARGS:-} >"$OUT/sweep.log" 2>&1
        echo "sweep rc=$?"; cat "$OUT/sweep.md" 2>/dev/null || tail -30 "$OUT/sweep.log" ;;
    sanitize)
        timeout 1500 bash tests/gpu_sanitize.sh "$B" "$OUT/sanitize" >"$OUT/sanitize.log" 2>&1
        echo "sanitize rc=$?"; tail -25 "$OUT/sanitize.log" ;;
    san)
        FAJIT_TEST_DECODE_CASES=${SAN_CASES:-12} timeout 300 compute-sanitizer --tool memcheck \
            --kernel-name kns=fj_attn_decode "$B/tests/test_gpu_decode" >"$OUT/san.log" 2>&1
        echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|Invalid|decode sweep" "$OUT/san.log" | head ;;
    esac
    echo "$step: $(( $(date +%s) - t0 )) s"
done
