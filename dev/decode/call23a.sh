#!/usr/bin/env bash
# call23a.sh - lab (2026-12-04, session 23): epilogue 2 with up to 4 items per thread in
# flight (loads and math of every item, then the stores) against main (lib_main.so), graph
# replay at batch 1-2, two turns; q_len 8 tile layouts forced through a lab library
# (lib_lab.so: FJ_LAB_CFG8="bn,stages,wm,wn", with the new epilogue); gpu-decode suite and
# memcheck on the candidate.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 150 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/ab_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ab_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
S=1x1024,1x2048,1x4096,2x2048,2x4096
mkdir -p .fjcache
bench dev/decode/lib_main.so main1 1,4,8 $S
bench build/libfajit.so new1 1,4,8 $S
bench dev/decode/lib_main.so main2 1,4,8 $S
bench build/libfajit.so new2 1,4,8 $S
for c in 64,2,2,2 128,2,2,4 64,2,2,4 128,2,2,2 64,3,2,4; do
    FJ_LAB_CFG8=$c bench dev/decode/lib_lab.so "c8_$c" 8 1x1024,1x2048,1x4096
done
export FAJIT_CACHE_DIR=$PWD/.fjcache/new1
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
