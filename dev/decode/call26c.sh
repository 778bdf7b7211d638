#!/usr/bin/env bash
# call26c.sh - lab (session 26, prepared without a GPU): head_dim 64 where the batch fills
# the SMs (SPLIT_NONE, default 64x3m1n4: 4 CTAs per SM). call25d found 256x3m1n8 (one CTA per
# SM, 192 KB in flight) at 64x16k 481 us against 486-501, but 128x2k 147 against 129: which
# key length turns it? Forced tiles through lib_cfg26.so (FJ_LAB_CFG1/4), q_len 1 and 4, ps16
# shuffled, two turns of the default.
set -u
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
