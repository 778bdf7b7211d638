#!/usr/bin/env bash
# call23g.sh - lab (2026-12-04, session 23): an L2 prefetch of the first row of every page of
# the tile after next (lib_pf.so) against the committed kernels (lib_main.so): is the paged
# loop's 4.6% over contiguous at 16 x 8k the shuffled pages' address translations? Per call
# on the bandwidth-bound shapes, page sizes 16 and 1 and contiguous, two turns; graph replay
# at batch 1 once. lib_pf.so: main 2951f80 with call23g_prefetch.patch applied.
set -u
bench() {   # $1 lib, $2 tag, $3 shapes, $4 page sizes
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens 1 --shapes $3 --page-sizes $4 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/pf_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
}
per() { grep -E '^\| [0-9]+x[0-9]+ \| [0-9] \|' "$OUT/pf_$1.md" | head -12 | cut -d'|' -f2,5,9,10,11,12 | tr '\n' ' '; echo; }
lat() { sed -n '/^Latency-bound/,$p' "$OUT/pf_$1.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '; echo; }
mkdir -p .fjcache
B=64x16384,128x2048,16x8192,1x32768,1x131072
for turn in 1 2; do
    bench dev/decode/lib_main.so main$turn $B 16,1; per main$turn
    bench dev/decode/lib_pf.so pf$turn $B 16,1; per pf$turn
done
L=1x1024,1x2048,1x4096,2x2048
bench dev/decode/lib_main.so lmain $L 16; lat lmain
bench dev/decode/lib_pf.so lpf $L 16; lat lpf
