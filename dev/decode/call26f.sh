#!/usr/bin/env bash
# call26f.sh - lab (session 26, prepared without a GPU): tests/gpu_sanitize.sh whole on main
# (memcheck, synccheck, racecheck over test_gpu's san case, the paged sweep, the combine
# paths and the decode defaults per class), not run since session 25 changed the defaults
# and session 26 the cluster launches' parameters. Its logs come back under $OUT/san even
# when the call runs out of time. Carry build/.
set -u
s0=$(date +%s)
FAJIT_SAN_CACHE_DIR=$PWD/.fjcache/san timeout 580 bash tests/gpu_sanitize.sh build "$OUT/san" \
    > "$OUT/san.log" 2>&1
echo "gpu_sanitize rc=$? $(( $(date +%s) - s0 )) s"
tail -15 "$OUT/san.log"
