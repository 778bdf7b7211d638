#!/usr/bin/env bash
# call23m.sh - lab (2026-12-04, session 23): the epilogue-2 tidy (build) against 2951f80
# (lib_main.so) at q_len 4, graph replay, two turns (call23l alone read 0.2-0.3 us higher
# than call23e: a machine start, or the tidy?).
set -u
for t in 1 2; do for x in dev/decode/lib_main.so:main build/libfajit.so:tidy; do
    FAJIT_CACHE_DIR=$PWD/.fjcache/${x#*:} timeout 60 python3 bench/bench_decode.py --lib ${x%%:*} \
        --q-lens 4 --shapes 1x1024,1x4096,2x2048 --page-sizes 16 --no-mixed --no-peers --rounds 3 \
        --reps 10 --graph-replays 10 --out "$OUT/m.md" > /dev/null 2>&1
    echo "${x#*:}$t: $(sed -n '/^Latency-bound/,$p' "$OUT/m.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2,4 | tr '\n' ' ')"
done; done
