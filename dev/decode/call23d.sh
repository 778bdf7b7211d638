#!/usr/bin/env bash
# call23d.sh - lab (2026-12-04, session 23): where q_len 8's time goes against q_len 1's, CTA
# by CTA (dev/decode/timeline.py on lib_tl.so: main 1270001 + timeline_apply.py, whose
# stamps now cover the cluster merge), 1x1k/2k/4k, cold call and graph replay; then q_len 4
# and 8 with 8 splits forced (clusters of 8 instead of 16 splits and the combine kernel).
set -u
for ql in 1 4 8; do
    FAJIT_CACHE_DIR=$PWD/.fjcache/tl timeout 150 python3 dev/decode/timeline.py \
        --lib dev/decode/lib_tl.so --shapes 1x1024,1x2048,1x4096 --q-len $ql --calls 1 \
        > "$OUT/tl_q$ql.txt" 2>&1
    echo "timeline q$ql rc=$?"
done
grep -E "^1x|graph \(|last group" "$OUT/tl_q1.txt" "$OUT/tl_q8.txt" | cut -c1-230
for ns in 0 8; do
    FAJIT_CACHE_DIR=$PWD/.fjcache/ns timeout 150 python3 bench/bench_decode.py \
        --lib build/libfajit.so --q-lens 4,8 --shapes 1x2048,1x4096,2x2048,2x4096 \
        --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 \
        --graph-max-mib 80 --num-splits $ns --out "$OUT/ns$ns.md" > /dev/null 2>&1
    echo "== num_splits $ns rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ns$ns.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
done
