#!/usr/bin/env bash
# call23i.sh - lab (2026-12-04, session 23): the cluster merge by pushes (every split stores
# the partials of the items rank j merges into rank j's receive area, one cluster barrier,
# then each rank merges from its own shared memory and leaves: no remote loads, no second
# barrier; call23d's timeline: 0.99 + 0.40 us of 1x1k q_len 1's 5.6 after the first
# barrier) against main 2951f80 (lib_main.so): graph replay batch 1-4, two turns; per call
# on the bandwidth-bound shapes; gpu-decode suite and memcheck on the candidate. The
# candidate: main 2951f80 with call23i_push.patch applied (kernel, decode.c, dispatch.c,
# a unit test).
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
S=1x1024,1x2048,1x4096,2x2048,2x4096,4x2048
for turn in 1 2; do
    bench dev/decode/lib_main.so main$turn 1,4,8 $S; lat main$turn
    bench build/libfajit.so new$turn 1,4,8 $S; lat new$turn
done
B=128x2048,16x8192,1x32768,1x131072
bench dev/decode/lib_main.so bmain 1 $B; per bmain
bench build/libfajit.so bnew 1 $B; per bnew
export FAJIT_CACHE_DIR=$PWD/.fjcache/new1
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
