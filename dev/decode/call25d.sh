#!/usr/bin/env bash
# call25d.sh - lab (2026-12-04, session 25): head_dim 64 tiles. call25c found fajit at head_dim
# 64 at 0.81-0.98x CUDNN bandwidth-bound and 0.79-0.96x latency-bound: the sm_90 split-class
# rules cover head_dim 72..128 only, and 64x4m1n4 (67.5 KB, 3 CTAs per SM) runs 64x16k's 512
# CTAs in 1.3 waves. Forced tiles for <= 16 packed rows (lib_cfg.so, FJ_LAB_CFG1/4), q_len 1
# and 4, ps16 shuffled, no peers (they ran in call25c), two turns of the default.
set -u
LAB_PREFIX=d
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
S=64x16384,128x2048,16x8192,1x32768,1x131072,1x1024,1x2048,1x4096
run() {   # $1 tag, $2 cfg or -
    if [ "$2" != - ]; then export FJ_LAB_CFG1=$2 FJ_LAB_CFG4=$2; fi
    LAB_FIELDS=2,3,5 bench dev/decode/lib_cfg.so $1 1,4 $S 8 --page-sizes 16 --head-dim 64
    unset FJ_LAB_CFG1 FJ_LAB_CFG4
}
run def_1 -
run c64x3n4 64,3,1,4
run c128x3n8 128,3,1,8
run c128x2n8 128,2,1,8
run c128x4n8 128,4,1,8
run c256x3n8 256,3,1,8
run c256x2n8 256,2,1,8
run c128x2n4 128,2,1,4
run def_2 -
