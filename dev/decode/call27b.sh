#!/usr/bin/env bash
# call27b.sh - lab (session 27): tests/gpu_sanitize.sh on main with the session-27 rules,
# split over two calls by FAJIT_SAN_TOOLS (the kernels' cache shared): $1 = the tools.
# Logs come back under $OUT/san. Carry build/.
set -u
s0=$(date +%s)
FAJIT_SAN_TOOLS="$1" FAJIT_SAN_CACHE_DIR=$PWD/.fjcache/san timeout 585 \
    bash tests/gpu_sanitize.sh build "$OUT/san" > "$OUT/san.log" 2>&1
echo "gpu_sanitize ($1) rc=$? $(( $(date +%s) - s0 )) s"
tail -15 "$OUT/san.log"
