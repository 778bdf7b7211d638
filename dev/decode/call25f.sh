#!/usr/bin/env bash
# call25f.sh - lab (2026-12-04, session 25): the final head_dim 49..64 rules (17..32 rows take
# 128-key tiles only where the keys stream) on the product build: (1) the decode bench at
# head_dim 64 with SDPA FLASH/CUDNN, q_len 1/4/8, ps16 shuffled; (2) the gpu-decode suite;
# (3) its defaults_per_class test (every default of each split class, head_dim 64 and 128)
# under memcheck, synccheck and racecheck (the sweep and combine paths ran under them in
# call24f on unchanged kernels).
set -u
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
for hd in 64; do
    PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/f$hd timeout 200 python3 bench/bench_decode.py \
        --lib build/libfajit.so --head-dim $hd --q-lens 1,4,8 --page-sizes 16 --no-mixed \
        --out "$OUT/decode_hd$hd.md" > "$OUT/bench_hd$hd.log" 2>&1
    echo "hd $hd bench rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/decode_hd$hd.md" | cut -d'|' -f2,3,5,9,11,12,13 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/decode_hd$hd.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4,7,9 | tr '\n' ' '
    echo
done
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
timeout 240 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-220
for tool in memcheck synccheck racecheck; do
    extra=(); [ $tool = racecheck ] && extra=(--racecheck-report analysis)
    CK_RUN_CASE=defaults_per_class timeout 200 compute-sanitizer --tool $tool "${extra[@]}" \
        build/tests/test_gpu_decode > /tmp/f_$tool.log 2>&1
    echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/f_$tool.log | tail -1)"
done
