#!/usr/bin/env bash
# call23e.sh - lab (2026-12-04, session 23): epilogue 2 with a thread per (row, 2 chunks):
# the row's weights once, both chunks' loads in flight (call23d's timeline: q_len 8's
# second item per thread cost another 0.6 us at 1x1k) against main 1270001 (lib_main.so):
# graph replay batch 1-4 in two turns, per call on the bandwidth-bound shapes, then the
# gpu-decode suite + memcheck on the candidate.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/ab_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
}
lat() { sed -n '/^Latency-bound/,$p' "$OUT/ab_$1.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '; echo; }
per() { grep -E '^\| [0-9]+x[0-9]+ \| [0-9] \|' "$OUT/ab_$1.md" | head -12 | cut -d'|' -f2,3,5 | tr '\n' ' '; echo; }
mkdir -p .fjcache
S=1x1024,1x2048,1x4096,2x2048,2x4096,4x2048,4x4096
for turn in 1 2; do
    bench dev/decode/lib_main.so main$turn 1,4,8 $S; lat main$turn
    bench build/libfajit.so new$turn 1,4,8 $S; lat new$turn
done
B=64x16384,128x2048,16x8192,1x32768,1x131072
bench dev/decode/lib_main.so bmain 1,8 $B; per bmain
bench build/libfajit.so bnew 1,8 $B; per bnew
export FAJIT_CACHE_DIR=$PWD/.fjcache/new1
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
