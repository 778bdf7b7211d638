#!/usr/bin/env bash
# call21b.sh - lab (2026-12-04, session 21): finer per-CTA timelines (13 stamps, the ones
# timeline_apply.py puts in, then a patch on main 83d3df4), with and without the parameters
# read into the constant cache before griddepcontrol.wait (FJ_LAB_PWARM: a preamble define
# from an environment variable, each its own cache; not kept).
set -u
cp dev/decode/lib_tl.so /tmp/libfajit_tl.so
for w in 0 1; do
    echo "=== PWARM $w"
    if [ $w = 1 ]; then export FJ_LAB_PWARM=1; else unset FJ_LAB_PWARM; fi
    export FAJIT_CACHE_DIR=$PWD/.fjcache/c21b_$w
    mkdir -p "$FAJIT_CACHE_DIR"
    timeout 150 python3 dev/decode/timeline.py --lib /tmp/libfajit_tl.so --calls 2 \
        --shapes 1x4096,1x1024,1x32768,16x8192 2>&1 | grep -v "^1x\|^16x" | cut -c1-400
done
