#!/usr/bin/env bash
# call25e.sh - lab (2026-12-04, session 25): the head_dim 49..64 sm_90 defaults (build/ and
# lib_h64.so: 256x3m1n8 where the keys stream, 128x2m1n8 latency-bound, 64x3m1n4 where the
# batch fills the SMs; 17..32 rows take head_dim 72..128's rules) against main 66cbe54
# (lib_m25.so) at head_dim 64: (1) the bench with SDPA FLASH/CUDNN, q_len 1/4/8, ps16
# shuffled; (2) A/B without peers, one turn each; (3) the gpu-decode suite with the new
# defaults_per_class test; (4) that test under memcheck and racecheck, timed.
set -u
LAB_PREFIX=e
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/p64 timeout 280 python3 bench/bench_decode.py \
    --lib build/libfajit.so --head-dim 64 --q-lens 1,4,8 --page-sizes 16 --no-mixed \
    --out "$OUT/decode_hd64.md" > "$OUT/bench_hd64.log" 2>&1
echo "bench rc=$?"
grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/decode_hd64.md" | cut -c1-170
sed -n '/^Latency-bound/,$p' "$OUT/decode_hd64.md" | grep -E '^\| [0-9]x' | cut -c1-120
S=64x16384,128x2048,16x8192,1x32768,1x131072,1x1024,1x2048,1x4096
LAB_FIELDS=2,3,5 bench dev/decode/lib_m25.so m64 1,4,8 $S 8 --page-sizes 16 --head-dim 64
LAB_FIELDS=2,3,5 bench dev/decode/lib_h64.so n64 1,4,8 $S 8 --page-sizes 16 --head-dim 64
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
s0=$(date +%s)
timeout 300 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$? $(( $(date +%s) - s0 )) s"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:|defaults_per_class" "$OUT/gd.log" | cut -c1-200
for tool in memcheck racecheck; do
    s0=$(date +%s)
    extra=(); [ $tool = racecheck ] && extra=(--racecheck-report analysis)
    CK_RUN_CASE=defaults_per_class timeout 200 compute-sanitizer --tool $tool "${extra[@]}" \
        build/tests/test_gpu_decode > /tmp/e_$tool.log 2>&1
    echo "$tool rc=$? $(( $(date +%s) - s0 )) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/e_$tool.log | tail -1)"
    grep -E "Checks" /tmp/e_$tool.log
done
