#!/usr/bin/env bash
# call28c.sh - lab (session 28): the decode bench at head_dim 32 and 48 with SDPA FLASH and
# CUDNN in the same run (every earlier table at these head dims had fajit alone): q_len 1/4,
# ps16 shuffled, the default shapes. Carry build/. About 2 x 2.5 minutes. (Ran in session
# 28 as the same bench_decode.py commands written out; peers() in lab_bench.sh since.)
set -u
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
for hd in 32 48; do
    peers build/libfajit.so decode_hd$hd 270 --head-dim $hd --q-lens 1,4
done
