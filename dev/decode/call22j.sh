#!/usr/bin/env bash
# call22j.sh - lab (2026-12-04, session 22): does the last CTA staging 66 KB of partials cost
# batch 2-4 (2x2k q_len 4 13.2 us against 14.4 at 2x4k; 4x2k q_len 8 21.4 against 15.0 at
# 2x4k)? Main's rule (stage up to 100 KiB) against lib_s48.so (stage up to 48 KiB, the
# direct merge from L2 above) and lib_k48.so (up to 48 KiB, the combine kernel above), each
# in turns with its own cache.
set -u
cp dev/decode/lib_s48.so /tmp/lib_s48.so; cp dev/decode/lib_k48.so /tmp/lib_k48.so
bench() {   # $1 library, $2 tag
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 150 python3 bench/bench_decode.py --lib $1 \
        --q-lens 1,4,8 --shapes 1x1024,1x2048,1x4096,2x2048,4x2048,2x4096,4x4096 \
        --page-sizes 16 --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 \
        --graph-max-mib 80 --out "$OUT/$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache/main .fjcache/s48 .fjcache/k48
for t in 1 2; do
    bench build/libfajit.so main
    bench /tmp/lib_s48.so s48
    bench /tmp/lib_k48.so k48
done
