# dev/gpu/levers_call.sh - one device call for kernel changes that compiled here but have not
# run: every family's feature sweep and paged feature cases, gpu-decode's prefill_sweep
# (paged prefill on the Hopper kernel), the feature costs in prefill for this build and for
# each library of carry/libs (dev/gpu/variant_libs.sh: one kernel define swept), paged
# prefill with pages of 16 against contiguous K/V, the Python host time, and tune + bench
# over an FP8 cache. Carry build, carry/cfe (the nvidia-cudnn-frontend wheel) and carry/libs.
# Each step has its own timeout and writes under $OUT; the tail of each is printed.
#   STEPS (default "tests cost paged host fp8")
set -u
OUT=${OUT:-/tmp/levers-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export FAJIT_CACHE_DIR=/tmp/fc FAJIT_TEST_CACHE_DIR=/tmp/fc FAJIT_MODEL_FEATURES=on
export PYTHONUNBUFFERED=1 FAJIT_VALIDATE=off
if ls carry/cfe/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site carry/cfe/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} FAJIT_LIB=$PWD/build/libfajit.so
T=build/fajit-tune
t0=$(date +%s)
el() { echo "[$1: $(( $(date +%s) - t0 )) s]"; }
for s in dev/gpu/prefill_features.spec dev/gpu/paged_prefill.spec; do
    timeout 100 $T -q warm --arch sm_90a --spec $s -j "$(nproc)" 2>&1 | tail -1
done
el warm
for step in ${STEPS:-tests cost paged host fp8}; do
    case $step in
    tests)
        FAJIT_TEST_FEATURES_CASES=${CASES:-50} CK_RUN_CASE=features_sweep timeout 120 \
            build/tests/test_gpu_features >"$OUT/sweep.log" 2>&1
        echo "features_sweep rc=$?"; grep -E "sweep:|failure|:F:|:E:" "$OUT/sweep.log" | tail -5
        FAJIT_TEST_FEATURES_CASES=30 CK_RUN_CASE=features_paged timeout 60 \
            build/tests/test_gpu_features >"$OUT/paged.log" 2>&1
        echo "features_paged rc=$?"; grep -E "features_paged|failure|:F:|:E:" "$OUT/paged.log" | tail -4
        CK_RUN_CASE=prefill_sweep FAJIT_TEST_PREFILL_CASES=${PREFILL_CASES:-40} timeout 120 \
            build/tests/test_gpu_decode >"$OUT/dec.log" 2>&1
        echo "prefill_sweep rc=$?"; grep -E "sweep:|FAIL|:F:|:E:|Checks" "$OUT/dec.log" | tail -6 ;;
    cost)   # the build's costs, then each variant library's softcap rows
        timeout 80 python3 bench/prefill_features.py --parts cost --out "$OUT/cost.md" \
            >"$OUT/cost.log" 2>&1
        echo "cost rc=$?"; grep "^| cost" "$OUT/cost.md" | awk -F'|' '{print $3,$4,$6}' | paste -sd' '
        for lib in carry/libs/*.so; do
            [ -e "$lib" ] || continue
            n=$(basename "$lib" .so)
            FAJIT_LIB=$PWD/$lib FAJIT_CACHE_DIR=/tmp/fc-$n timeout 70 python3 \
                bench/prefill_features.py --parts cost --out "$OUT/cost-$n.md" >"$OUT/cost-$n.log" 2>&1
            echo "$n rc=$?"; grep -E "^\| cost .* softcap " "$OUT/cost-$n.md" | awk -F'|' '{print $3,$6}' | paste -sd' '
        done ;;
    paged)
        timeout 90 python3 bench/bench_paged_prefill.py --lib build/libfajit.so --head-dims 128,64 \
            --seqlens 4096,16384 --chunks 512:4096 --mixed '' --no-peers --page-size 16 --rounds 3 \
            --out "$OUT/pp16.md" >"$OUT/pp16.log" 2>&1
        echo "paged rc=$?"; grep "^|" "$OUT/pp16.md" | head -12 ;;
    host)
        timeout 40 python3 bench/host_overhead.py --calls 2000 --sync 128 --out "$OUT/host.md" \
            2>&1 | grep "^|" ;;
    fp8)
        timeout 60 $T tune --spec dev/gpu/fp8_tune.spec >"$OUT/fp8tune.log" 2>&1
        echo "fp8 tune rc=$?"; tail -3 "$OUT/fp8tune.log"
        timeout 30 $T bench --spec dev/gpu/fp8_tune.spec 2>&1 | tail -2 ;;
    esac
    el "$step"
done
