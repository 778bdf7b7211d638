#!/usr/bin/env bash
# call26d.sh - lab (session 26, prepared without a GPU): head_dim 32 and 48 have no sm_90 rule
# (64x4m1n4 everywhere, as head_dim 64 before 56101b0). The head_dim 64 rules' tiles forced
# through lib_cfg26.so (FJ_LAB_CFG1/4), q_len 1 and 4, ps16 shuffled, on the standard shapes.
set -u
LAB_PREFIX=d
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg26.so
run() {   # $1 tag, $2 cfg or -, $3 shapes, $4 head_dim
    if [ "$2" != - ]; then export FJ_LAB_CFG1=$2 FJ_LAB_CFG4=$2; fi
    LAB_FIELDS=2,3,5 bench $L $1 1,4 $3 8 --page-sizes 16 --head-dim $4
    unset FJ_LAB_CFG1 FJ_LAB_CFG4
}
T=64x16384,128x2048,16x8192,1x32768,1x131072,1x1024,1x2048,1x4096
for hd in 32 48; do
    run d${hd} - $T $hd
    run d${hd}_64x3n4 64,3,1,4 $T $hd
    run d${hd}_256x3n8 256,3,1,8 $T $hd
    run d${hd}_128x2n8 128,2,1,8 $T $hd
done
