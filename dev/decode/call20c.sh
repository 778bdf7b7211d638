#!/usr/bin/env bash
# call20c.sh - lab (2026-12-03, session 20): why fajit's paged decode streams 5-9% below a
# plain gather read (call 20a) where deeper pipelines do not help (call 20b). ncu of the
# split kernel at 16x8k (page size 16 shuffled, then contiguous) and 1x32k, stall reasons
# and source counters (FAJIT_LINEINFO); the bench at page sizes 16 and 128 (one page id
# per 128-key tile) against contiguous.
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20c FAJIT_LINEINFO=1
mkdir -p "$FAJIT_CACHE_DIR"
timeout 200 $B/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
for shape in 16x8192 1x32768; do
    timeout 240 ncu --target-processes all -k regex:fj_attn_decode$ -c 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section SourceCounters --section Occupancy \
        --import-source yes -o "$OUT/ncu_$shape" -f \
        python3 bench/bench_decode.py --lib $B/libfajit.so --shapes $shape --q-lens 1 \
        --page-sizes 16 --no-peers --no-mixed --rounds 1 --reps 1 > "$OUT/ncu_$shape.log" 2>&1
    echo "ncu $shape rc=$?"; tail -3 "$OUT/ncu_$shape.log" | cut -c1-200
    ncu -i "$OUT/ncu_$shape.ncu-rep" --page details > "$OUT/ncu_$shape.txt" 2>&1
    ncu -i "$OUT/ncu_$shape.ncu-rep" --page source --csv --print-source sass \
        > "$OUT/ncu_${shape}_sass.csv" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall" \
        "$OUT/ncu_$shape.txt" | head -30
done
timeout 120 python3 bench/bench_decode.py --lib $B/libfajit.so \
    --shapes 16x8192,1x32768,1x131072 --q-lens 1 --page-sizes 16,128,1 --no-mixed --no-peers \
    --rounds 3 --reps 10 --out "$OUT/ps.md" > "$OUT/ps.log" 2>&1
echo "bench rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 ' "$OUT/ps.md" | cut -c1-200
