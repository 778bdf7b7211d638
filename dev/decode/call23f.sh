#!/usr/bin/env bash
# call23f.sh - lab (2026-12-04, session 23): the committed kernels (128-key tiles for q_len
# 4/8, the row-wise epilogue 2): (1) the decode bench with SDPA FLASH and CUDNN and the mixed
# batch (the session's table); (2) the TMA loader against cp.async on the latency-bound
# shapes (FAJIT_DECODE_LOADER=tma / auto, same library, two turns): the prologue's issue of a
# tile's cp.asyncs took ~1 us of 1x4k's chain in call23d.
set -u
mkdir -p .fjcache
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 300 python3 bench/bench_decode.py \
    --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/decode.md" | cut -c1-150
sed -n '/^Latency-bound/,/^SDPA/p' "$OUT/decode.md" | grep -E '^\| [0-9]x' | cut -c1-120
grep -iE "mixed" -A4 "$OUT/decode.md" | grep -E "^\|" | head -6 | cut -c1-160
bench() {   # $1 loader, $2 tag
    FAJIT_DECODE_LOADER=$1 FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 150 python3 \
        bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 \
        --shapes 1x1024,1x2048,1x4096,2x2048,2x4096 --page-sizes 16 --no-mixed --no-peers \
        --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 --out "$OUT/ld_$2.md" \
        > /dev/null 2>&1
    echo "== $2 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/ld_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
for turn in 1 2; do
    bench auto auto$turn
    bench tma tma$turn
done
