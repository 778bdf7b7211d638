#!/usr/bin/env bash
# call22g.sh - lab (2026-12-04, session 22): the committed candidate: the cluster merge with a
# lane pair per item where S > 4 (4 ranks' loads per thread, all in flight), one CTA per SM,
# the per-size wave rule, 8 splits in clusters where the wave rule took 16 over <= 16 tiles.
# (1) A/B against FAJIT_DECODE_CLUSTER=0 in the same library, two turns; (2) the gpu-decode
# suite and memcheck; (3) the decode bench with SDPA FLASH and CUDNN and the mixed batch.
set -u
bench() {   # $1 FAJIT_DECODE_CLUSTER, $2 tag, $3 cache
    FAJIT_DECODE_CLUSTER=$1 FAJIT_CACHE_DIR=$PWD/.fjcache/$3 timeout 150 python3 \
        bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,2x2048,2x4096 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$OUT/ab_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ab_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/on .fjcache/off
bench 0 off1 off
bench 1 on1 on
bench 0 off2 off
bench 1 on2 on
export FAJIT_CACHE_DIR=$PWD/.fjcache/on
(STEPS="decode san" OUT=/tmp/suite bash dev/gpu/run.sh) > /tmp/suite.txt 2>&1
grep -E "rc=|decode sweep: [0-9]|combine_paths: .*ok|Checks|ERROR SUMMARY|Invalid|:F:|:E:" \
    /tmp/suite.txt | cut -c1-200
PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^SDPA/p' "$OUT/decode.md" | grep -E '^\| 1x' | cut -c1-120
grep -iE "mixed" -A4 "$OUT/decode.md" | head -12
