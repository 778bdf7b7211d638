#!/usr/bin/env bash
# prefill_call.sh - one GPU-host call for paged prefill: the build carried from the dev
# machine, the kernels of dev/gpu/*.spec warmed there on all cores (the sweep's random cases
# and the bench's problems: about a minute), then the steps named in STEPS:
#   tests  gpu-decode's prefill_sweep, hnd_layout and a short paged_sweep  -> $OUT/tests.log
#   bench  bench/bench_paged_prefill.py (paged vs contiguous, cuDNN, FlashInfer) -> $OUT/pp.md
#   host   bench/host_overhead.py (Python per-call host cost)              -> $OUT/host.md
#   pytest python/tests/test_gpu.py and test_torch_fast.py                 -> $OUT/pytest.log
# Every GPU program runs under `timeout`; the tail of each log is printed.
set -u
B=${B:-build}
OUT=${OUT:-/tmp/fajit-out}
mkdir -p "$OUT"
export FAJIT_CACHE_DIR=/tmp/fajit-cache FAJIT_TEST_CACHE_DIR=/tmp/fajit-cache
export FAJIT_PAGED_PREFILL=${FAJIT_PAGED_PREFILL:-hopper}   # the path under test (the default)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader
t0=$(date +%s)
for s in ${SPECS-dev/gpu/prefill_sweep.spec dev/gpu/paged_prefill.spec}; do   # SPECS="": none
    timeout 300 "$B/fajit-tune" -q warm --arch sm_90a --spec "$s" -j "$(nproc)" 2>&1 | tail -1
done
echo "[warm: $(( $(date +%s) - t0 )) s]"
for step in ${STEPS:-tests bench}; do
    t0=$(date +%s)
    case $step in
    tests)
        for c in ${TESTS:-prefill_sweep hnd_layout paged_sweep}; do
            CK_RUN_CASE=$c FAJIT_TEST_DECODE_CASES=${DEC_CASES:-40} \
                FAJIT_TEST_PREFILL_CASES=${PREFILL_CASES:-60} \
                timeout ${TEST_TIMEOUT:-240} stdbuf -oL "$B/tests/test_gpu_decode" \
                >>"$OUT/tests.log" 2>&1
            echo "$c rc=$?"
        done
        grep -E "sweep:|hnd|FAILED|Checks|:F:|:E:" "$OUT/tests.log" | tail -30 ;;
    bench)   # FlashInfer's paged prefill too where carry/fi came (dev/decode/fi_carry.sh)
        if [ -d carry/fi ]; then source dev/decode/fi_setup.sh >"$OUT/fi_setup.log" 2>&1; tail -2 "$OUT/fi_setup.log"; fi
        PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-420} python3 bench/bench_paged_prefill.py \
            --lib "$B/libfajit.so" --out "$OUT/pp.md" ${BENCH_ARGS:-} >"$OUT/pp.log" 2>&1
        echo "bench rc=$?"; cat "$OUT/pp.md" 2>/dev/null || tail -30 "$OUT/pp.log" ;;
    host)
        FAJIT_LIB=$PWD/$B/libfajit.so PYTHONPATH=$PWD/python timeout 300 python3 \
            bench/host_overhead.py --calls 2000 --out "$OUT/host.md" >"$OUT/host.log" 2>&1
        echo "host rc=$?"; cat "$OUT/host.md" 2>/dev/null || tail -20 "$OUT/host.log" ;;
    pytest)
        FAJIT_LIB=$PWD/$B/libfajit.so PYTHONPATH=$PWD/python timeout 400 python3 -m pytest -q \
            -p no:cacheprovider python/tests/test_gpu.py python/tests/test_torch_fast.py \
            >"$OUT/pytest.log" 2>&1
        echo "pytest rc=$?"; tail -15 "$OUT/pytest.log" ;;
    esac
    echo "[$step: $(( $(date +%s) - t0 )) s]"
done
