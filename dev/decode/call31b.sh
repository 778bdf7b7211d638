#!/usr/bin/env bash
# call31b.sh - lab (session 31): SDPA FLASH and CUDNN beside main (head packing's rule) at
# head_dim 32, 48, 64 on the H200, q_len 1 and 4, ps16: the tables call30a made on an H100.
# About 5-7 minutes. Carry build/.
set -u
LAB_PREFIX=b
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
T0=$(date +%s)
for hd in 32 48 64; do
    peers build/libfajit.so peers_h$hd 170 --head-dim $hd --q-lens 1,4 \
        --shapes 64x16384,128x2048,16x8192,1x32768,1x131072,1x4096
    echo "t=$(( $(date +%s) - T0 ))"
done
