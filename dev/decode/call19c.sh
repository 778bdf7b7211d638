#!/usr/bin/env bash
# call19c.sh - lab (2026-12-03, session 19): third device call, commit 002e832 (plans and
# tuning buckets per decode split class): warm, the gpu-decode suite and the whole gpu
# suite; which plans a 128x2k call followed by a 1x2k call make, before (lib_v1.so, plans
# keyed without the batch) and after; the whole decode bench with FlashInfer (the final
# figures); fajit-tune on the paged preset shapes at batch 1 and 64 (rows per class).
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c19c
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "warm|rc=|decode sweep: [0-9]|Checks" | cut -c1-200
t0=$(date +%s)
FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR timeout 400 build/tests/test_gpu >"$OUT/gpu.log" 2>&1
echo "gpu suite rc=$? $(( $(date +%s) - t0 )) s"
grep -E "sweep|second process|graph|Checks|:F:|:E:" "$OUT/gpu.log" | tail -12 | cut -c1-200
cp dev/decode/lib_v1.so /tmp/libfajit_v1.so
for lib in /tmp/libfajit_v1.so build/libfajit.so; do
    FAJIT_LOG_LEVEL=debug timeout 120 python3 bench/bench_decode.py --lib $lib \
        --shapes 128x2048,1x2048 --q-lens 1 --page-sizes 16 --no-mixed --no-peers --rounds 1 \
        --reps 5 --graph-replays 10 --out "$OUT/plans.md" >"$OUT/plans.log" 2>&1
    echo "== $lib rc=$?"; grep -E "dispatch: dec [^c]" "$OUT/plans.log" | sort | uniq -c | cut -c1-150
    grep -E '^\| (1|128)x2048' "$OUT/plans.md" | cut -d'|' -f2-5
done
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 timeout 240 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench full rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^Mixed/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
t0=$(date +%s)
timeout 300 build/fajit-tune tune --spec dev/decode/tune_paged.spec --reps 10 --force \
    >"$OUT/tune.log" 2>&1
echo "tune rc=$? $(( $(date +%s) - t0 )) s"; grep -v "^\[" "$OUT/tune.log" | head -12 | cut -c1-200
