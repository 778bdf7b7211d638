#!/usr/bin/env bash
# call17.sh - lab (2026-12-02, session 17): one device call. The new sm_90 default for
# bandwidth-bound decode (128x2m1n4) through the gpu-decode suite and the bench, the
# previous lib (build/old, commit 949fb0a) benched in the same call, the Python tests with
# the GPU, then graph-replay latency of forced configurations at 1x4k (tuning rows rewritten).
set -u
export FAJIT_CACHE_DIR=/tmp/fjc
(STEPS="decode bench" OUT=$OUT/new BENCH_ARGS="--q-lens 1,8" bash dev/gpu/run.sh) 2>&1 |
    grep -vE "^graph_replay: (caller|context)|^merge_partials|^paged_plans" | cut -c1-220 | tail -60
mkdir -p $OUT/old
PYTHONUNBUFFERED=1 timeout 200 python3 bench/bench_decode.py --lib build/old/libfajit.so \
    --q-lens 1 --no-mixed --out $OUT/old/decode.md >$OUT/old/log 2>&1
echo "old bench rc=$?"; grep -E "^\| [0-9]" $OUT/old/decode.md | cut -c1-200 | head -24
t0=$(date +%s)
FAJIT_LIB=$PWD/build/libfajit.so PYTHONPATH=python timeout 240 python3 -m pytest -q -rs \
    python/tests >$OUT/pytest.log 2>&1
echo "pytest rc=$? ($(( $(date +%s) - t0 )) s)"; tail -8 $OUT/pytest.log
bash dev/decode/lat_cfg.sh 2>&1 | tail -40
