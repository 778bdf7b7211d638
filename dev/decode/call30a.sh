#!/usr/bin/env bash
# call30a.sh - lab (session 30): head packing's default rule (branch lab/s29-hpack, decode.c
# pack_rule: sm_90, head_dim <= 64, the batch fills the SMs -> as many KV heads as keep
# head_dim x heads <= 192 and 32 rows; keys streaming at head_dim <= 32 -> 2). The gpu-decode
# suite with the rule (defaults_per_class meets it at head_dim 32 and 64), then main's
# library (build/) against the branch's (build-hp/) at head_dim 32, 48, 64, q_len 1 and 4,
# then SDPA FLASH/CUDNN beside the branch at head_dim 32, 48, 64. Carry build/ and build-hp/.
set -u
LAB_PREFIX=d
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
H=build-hp
timeout 300 $H/tests/test_gpu_decode > "$OUT/gpu_decode.log" 2>&1
echo "== gpu-decode rc=$?"
grep -E "decode sweep: [0-9]|FAILED|Checks|:F:|:E:|defaults_per_class: .*(32|64), q_len" \
    "$OUT/gpu_decode.log" | cut -c1-200 | head -40
S=64x16384,128x2048,16x8192,1x32768,1x131072,1x4096
for hd in 32 48 64; do
    LAB_FIELDS=2,3,5,6,9,10,11 bench build/libfajit.so m_h$hd 1,4 $S 8 --head-dim $hd --page-sizes 16
    LAB_FIELDS=2,3,5,6,9,10,11 bench $H/libfajit.so r_h$hd 1,4 $S 8 --head-dim $hd --page-sizes 16
done
for hd in 32 48 64; do
    peers $H/libfajit.so peers_h$hd 150 --head-dim $hd --q-lens 1,4 \
        --shapes 64x16384,128x2048,16x8192,1x32768,1x131072,1x4096
done
cp /tmp/d_*.md "$OUT/" 2>/dev/null
