# dev/gpu/prefill_feat_call.sh - one device call for the model features in prefill: the
# kernels of dev/gpu/prefill_features.spec warmed on all cores, bench/prefill_features.py
# (feature costs, GPT-OSS and DeepSeek 192/128 against cuDNN when carry/cfe holds the
# nvidia-cudnn-frontend wheel), then every family's feature sweep (a quarter of its cases
# with head_dim_v != head_dim), the paged feature cases, and the validation gate per
# feature set. Each step has its own timeout, so a slow step cuts itself, not the call.
#   STEPS (default "bench sweep paged gate"), CASES (sweep cases, default 60),
#   PAGED_CASES (default 30), BENCH_ARGS (more bench/prefill_features.py arguments)
set -u
OUT=${OUT:-/tmp/pf-out}
mkdir -p "$OUT" /tmp/fc
export FAJIT_TEST_CACHE_DIR=/tmp/fc FAJIT_CACHE_DIR=/tmp/fc FAJIT_VALIDATE=off
export FAJIT_MODEL_FEATURES=on PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader
if ls carry/cfe/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site carry/cfe/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} FAJIT_LIB=$PWD/build/libfajit.so
t0=$(date +%s)
timeout 120 build/fajit-tune -q warm --arch sm_90a --spec dev/gpu/prefill_features.spec \
    -j "$(nproc)" 2>&1 | tail -1
echo "[warm: $(( $(date +%s) - t0 )) s]"
for step in ${STEPS:-bench sweep paged gate}; do
    t0=$(date +%s)
    case $step in
    bench)
        timeout ${BENCH_S:-240} python3 bench/prefill_features.py --out "$OUT/pf.md" \
            ${BENCH_ARGS:-} >"$OUT/pf.log" 2>&1
        echo "bench rc=$?"; cat "$OUT/pf.md" 2>/dev/null || tail -30 "$OUT/pf.log" ;;
    sweep)
        FAJIT_TEST_FEATURES_VERBOSE=1 FAJIT_TEST_FEATURES_CASES=${CASES:-60} \
            CK_RUN_CASE=features_sweep timeout ${SWEEP_S:-200} stdbuf -oL \
            build/tests/test_gpu_features >"$OUT/sweep.log" 2>&1
        echo "sweep rc=$?"
        grep -c " dv" "$OUT/sweep.log"
        grep -E "sweep:|FAIL|fail|:F:|:E:|Checks" "$OUT/sweep.log" | tail -20
        grep " dv" "$OUT/sweep.log" | sort -k2,2 -gr | head -8 ;;
    paged)
        FAJIT_TEST_FEATURES_VERBOSE=1 FAJIT_TEST_FEATURES_CASES=${PAGED_CASES:-30} \
            CK_RUN_CASE=features_paged timeout ${PAGED_S:-90} stdbuf -oL \
            build/tests/test_gpu_features >"$OUT/paged.log" 2>&1
        echo "paged rc=$?"; grep -E "paged|FAIL|:F:|:E:|Checks" "$OUT/paged.log" | tail -8 ;;
    gate)
        for f in softcap sinks alibi softcap,sinks,alibi; do
            timeout 60 build/fajit-tune validate --features $f >>"$OUT/gate.log" 2>&1
            echo "validate --features $f rc=$?"
        done
        tail -20 "$OUT/gate.log" ;;
    esac
    echo "[$step: $(( $(date +%s) - t0 )) s]"
done
