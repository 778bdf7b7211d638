#!/usr/bin/env bash
# call19b.sh - lab (2026-12-03, session 19): second device call, the figures of commit
# 1e2ee26 (acq_rel arrival count, the combine's 16-split step) and the tuner on shuffled
# pages: warm, the whole gpu suite (tests/test_gpu: tuning, validation, graph capture),
# the gpu-decode suite, the whole decode bench with FlashInfer 0.7.2 beside SDPA FLASH and
# CUDNN in one process, then fajit-tune on the paged preset shapes (dev/decode/tune_paged.spec).
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c19b
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "warm|rc=|decode sweep: [0-9]|Checks" | cut -c1-200
t0=$(date +%s)
FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR timeout 400 build/tests/test_gpu >"$OUT/gpu.log" 2>&1
echo "gpu suite rc=$? $(( $(date +%s) - t0 )) s"
grep -E "sweep|second process|graph|Checks|:F:|:E:" "$OUT/gpu.log" | tail -12 | cut -c1-200
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 timeout 240 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench full rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^Mixed/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
grep -E -A4 '^Mixed' "$OUT/decode.md" | cut -c1-200
t0=$(date +%s)
timeout 300 build/fajit-tune tune --spec dev/decode/tune_paged.spec --reps 10 --force \
    >"$OUT/tune.log" 2>&1
echo "tune rc=$? $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/tune.log" | cut -c1-200
python3 dev/decode/tune_table.py "$FAJIT_CACHE_DIR/kernels.db" 2>&1 | cut -c1-330
