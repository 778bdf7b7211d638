#!/usr/bin/env bash
# call23c.sh - lab (2026-12-04, session 23): the candidate defaults (q_len 4 latency-bound:
# 128x2m1n4; q_len 8 where the keys split: 128x2m2n4) against main (lib_main.so): graph
# replay batch 1-4 in two turns, then per call on the bandwidth-bound shapes at q_len 4 and
# 8 (plus q_len 4 over 128x2m1n8 through lib_lab.so), then the gpu-decode suite + memcheck.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/ab_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
}
lat() { sed -n '/^Latency-bound/,$p' "$OUT/ab_$1.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '; echo; }
per() { grep -E '^\| [0-9]+x[0-9]+ \| [48] \|' "$OUT/ab_$1.md" | head -12 | cut -d'|' -f2,3,5 | tr '\n' ' '; echo; }
mkdir -p .fjcache
S=1x1024,1x2048,1x4096,2x2048,2x4096,4x2048,4x4096
for turn in 1 2; do
    bench dev/decode/lib_main.so main$turn 1,4,8 $S; lat main$turn
    bench build/libfajit.so new$turn 1,4,8 $S; lat new$turn
done
B=64x16384,128x2048,16x8192,1x32768,1x131072
bench dev/decode/lib_main.so bmain 4,8 $B; per bmain
bench build/libfajit.so bnew 4,8 $B; per bnew
FJ_LAB_CFG4=128,2,1,8 bench dev/decode/lib_lab.so blab4 4 $B; per blab4
export FAJIT_CACHE_DIR=$PWD/.fjcache/new1
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
