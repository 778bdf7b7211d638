#!/usr/bin/env bash
# call26c.sh - lab (session 26, prepared without a GPU): head_dim 64 where the batch fills
# the SMs (SPLIT_NONE, default 64x3m1n4: 4 CTAs per SM). call25d found 256x3m1n8 (one CTA per
# SM, 192 KB in flight) at 64x16k 481 us against 486-501, but 128x2k 147 against 129: which
# key length turns it? Forced tiles through lib_cfg26.so (FJ_LAB_CFG1/4), q_len 1 and 4, ps16
# shuffled, two turns of the default. Then head_dim 128's SPLIT_NONE (64x3m1n4, 2 CTAs per
# SM; 100 x 8k at 0.95x CUDNN and 64 x 8k at 0.98x after fill_splits, call25g): the 8-warp
# streaming tiles of SPLIT_STREAM (128x3m1n8 since session 24) were never tried there since
# session 17 measured 128x2m1n4 (980 against 960 us at 64x16k, before off16 and the shorter
# issue path). q_len 1, same library (fill_splits applies to whatever fits per SM).
set -u
n=0
LAB_PREFIX=c
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg26.so
run() {   # $1 tag, $2 cfg or -, $3 shapes, $4 head_dim
    if [ "$2" != - ]; then export FJ_LAB_CFG1=$2 FJ_LAB_CFG4=$2; fi
    LAB_FIELDS=2,3,5 bench $L $1 1,4 $3 8 --page-sizes 16 --head-dim $4
    unset FJ_LAB_CFG1 FJ_LAB_CFG4
}
S=64x4096,64x8192,64x16384,128x2048,128x4096,128x8192,32x16384
run d64_1 - $S 64
run c256x3n8 256,3,1,8 $S 64
run c128x3n8 128,3,1,8 $S 64
run c128x2n4 128,2,1,4 $S 64
run d64_2 - $S 64
S128=64x16384,128x2048,100x8192,64x8192,40x8192
for c in - 128,3,1,8 128,3,1,4 128,2,1,8 -; do
    t=d128_${c//,/_}; [ "$c" = - ] && t=d128_def$((++n))
    if [ "$c" != - ]; then export FJ_LAB_CFG1=$c; fi
    LAB_FIELDS=2,3,5 bench $L $t 1 $S128 8 --page-sizes 16
    unset FJ_LAB_CFG1
done
