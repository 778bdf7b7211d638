#!/usr/bin/env bash
# call21a.sh - lab (2026-12-04, session 21): per-CTA timelines of the decode split step
# (dev/decode/timeline.py on a library whose kernel had 8 stamps, dev/decode/lib_tl.so,
# git-ignored; that first version of the stamps was a patch, timeline_apply.py's ancestor,
# and timeline.py then read [cta][8]): cold calls and graph replays, pages of 16 shuffled
# and contiguous, and 1 x 32k at forced split counts. Kernels: main 83d3df4.
set -u
cp dev/decode/lib_tl.so /tmp/libfajit_tl.so
export FAJIT_CACHE_DIR=$PWD/.fjcache/c21a
mkdir -p "$FAJIT_CACHE_DIR"
T="timeout 120 python3 dev/decode/timeline.py --lib /tmp/libfajit_tl.so"
$T --shapes 1x32768,16x8192,1x131072,1x4096,1x1024,128x2048 --csv "$OUT/csv" 2>&1 | tail -n 80
echo "== contiguous"
$T --shapes 1x32768,16x8192 --page-size 0 --calls 2 2>&1 | tail -n 30
for s in 8 32; do
    echo "== 1x32k splits $s"
    $T --shapes 1x32768 --num-splits $s --calls 2 2>&1 | tail -n 12
done
