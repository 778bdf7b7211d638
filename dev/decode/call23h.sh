#!/usr/bin/env bash
# call23h.sh - lab (2026-12-04, session 23): the gpu suite (tests/test_gpu, quickstart; not
# its sanitizer test: device time) and the gpu-decode suite on main 2951f80, after the
# session's two decode changes.
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/h FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/h
timeout 200 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
timeout 420 build/tests/test_gpu > "$OUT/gpu.log" 2>&1
echo "gpu suite rc=$?"
grep -E "Checks|:F:|:E:" "$OUT/gpu.log" | tail -8 | cut -c1-220
timeout 60 build/tests/quickstart > "$OUT/qs.log" 2>&1; echo "quickstart rc=$?"
timeout 200 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-220
