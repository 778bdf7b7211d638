#!/usr/bin/env bash
# call24b.sh - lab (2026-12-04, session 24): the five split classes (lib_s24b.so: 9..16
# rows on 8 warps in STREAM_MID, 27..65 pairs; 17..32 rows on two q tiles of 1 x 4 warps in
# LATENCY_FEW up to 2k keys) against main 52220c5 (lib_main.so), two turns; then forced
# layouts through lib_lab.so (FJ_LAB_CFG8) for the LATENCY_FEW threshold (1 x 4k, 2 x 1k;
# 4 KV heads x q_len 4 = 32 rows); then the gpu-decode suite on the candidate build.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv
    FAJIT_CACHE_DIR=$PWD/.fjcache/$2 timeout 200 python3 \
        bench/bench_decode.py --lib $1 --q-lens $3 --shapes $4 --heads-kv $5 --page-sizes 16 \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "/tmp/b_$2.md" > /dev/null 2>&1
    echo "== $2 rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "/tmp/b_$2.md" | cut -d'|' -f2,3,5 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "/tmp/b_$2.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
L=1x1024,1x2048,1x4096,2x1024,2x2048
S=4x2048,4x4096,8x4096,16x8192
for turn in 1 2; do
    bench dev/decode/lib_main.so ml_$turn 1,4,8 $L 8
    bench dev/decode/lib_s24b.so nl_$turn 1,4,8 $L 8
    bench dev/decode/lib_main.so ms_$turn 4 $S 8
    bench dev/decode/lib_s24b.so ns_$turn 4 $S 8
done
grep "^- " /tmp/b_nl_1.md | cut -c1-230
bench dev/decode/lib_s24b.so g8def 4 1x1024,1x2048,1x4096,1x8192 4
FJ_LAB_CFG8=128,2,2,4 bench dev/decode/lib_lab.so g8m2 4 1x1024,1x2048,1x4096,1x8192 4
FJ_LAB_CFG8=128,2,1,4 bench dev/decode/lib_lab.so g8m1 4 1x1024,1x2048,1x4096,1x8192 4
FJ_LAB_CFG8=128,2,1,4 bench dev/decode/lib_lab.so q8m1 8 1x4096,2x1024 8
export FAJIT_CACHE_DIR=$PWD/.fjcache/t FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/t
timeout 240 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1; echo "gpu_decode rc=$?"
grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-220
