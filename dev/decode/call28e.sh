#!/usr/bin/env bash
# call28e.sh - lab (session 28): the head_dim 32/48 default change from call28d's sweep,
# A/B: lib_m28.so (main 1e15f16's library) against build/ (the change), two turns, q_len 1
# and 4, ps16 shuffled, the shapes at head_dim 32 and 48 the change touches and two it must
# not; then SDPA CUDNN beside the change on the same shapes, and the gpu-decode suite.
# Carry build/ and dev/decode/lib_m28.so.
set -u
LAB_PREFIX=e
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
O=dev/decode/lib_m28.so N=build/libfajit.so
S=1x32768,1x131072,16x8192,4x16384,1x4096
for turn in 1 2; do
    for v in old new; do
        L=$O; [ $v = new ] && L=$N
        for hd in 32 48; do
            LAB_FIELDS=2,3,5 bench $L h${hd}_${v}_$turn 1,4 $S 8 --head-dim $hd --page-sizes 16
        done
    done
done
for hd in 32 48; do
    peers $N peers_hd$hd 150 --head-dim $hd --q-lens 1 --shapes 1x32768,1x131072,16x8192
done
timeout 200 build/tests/test_gpu_decode > "$OUT/gd.log" 2>&1
echo "gpu_decode rc=$?"; grep -E "decode sweep: [0-9]|Checks|:F:|:E:" "$OUT/gd.log" | cut -c1-160
