#!/usr/bin/env bash
# call31c.sh - lab (session 31): head_dim 32/48/64 where the keys stream (1 x 32k, 1 x 128k,
# 16 x 8k, q_len 1, ps16) run 5-7% behind cuDNN (H100, session 30): deeper tiles, more
# splits, packing at 48. lib_cfg31.so = main + lab_cfg31.patch (FJ_LAB_CFG1 = "bn,stages,
# wm,wn" replaces the default tile of <= 8 packed rows, in the packed view: head_dim 32 is
# packed x2 there, so its tiles are head_dim 64's). Every tile here compiles for sm_90a
# without spills (fajit-tune warm with the lab library, offline). About 5 minutes.
# Carry build/ and dev/decode/lib_cfg31.so.
set -u
LAB_PREFIX=c
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg31.so
T0=$(date +%s)
run() {   # $1 head_dim, $2 tile or -, $3 splits, $4 pack (auto|2|4)
    local t=h$1_${2//,/_}_$3_p$4 sh=1x32768,1x131072
    [ "$3" = 0 ] && sh=$sh,16x8192
    [ "$2" != - ] && export FJ_LAB_CFG1=$2
    FAJIT_DECODE_HEAD_PACK=$4 LAB_FIELDS=2,3,5 bench $L $t 1 $sh 8 --head-dim $1 \
        --page-sizes 16 --num-splits $3
    unset FJ_LAB_CFG1
}
mark() {   # the time so far; the reports so far into $OUT (the call may end early)
    echo "t=$(( $(date +%s) - T0 ))"
    tar czf "$OUT/c_md.tgz" -C /tmp $(cd /tmp && ls c_*.md 2>/dev/null)
}
for ns in 0 32 64; do run 32 - $ns auto; done
for c in 128,4,1,8 128,6,1,8 64,6,1,4; do for ns in 0 32; do run 32 $c $ns auto; done; done
run 32 - 0 4
mark
for ns in 0 32 64; do run 48 - $ns auto; done
for c in 128,4,1,8 128,6,1,8 256,3,1,8 256,4,1,8; do for ns in 0 32; do run 48 $c $ns auto; done; done
run 48 - 0 2
run 48 - 0 4
mark
for ns in 0 32 64; do run 64 - $ns auto; done
for c in 128,4,1,8 128,6,1,8 64,6,1,4; do for ns in 0 32; do run 64 $c $ns auto; done; done
for c in 128,3,1,8 128,2,1,8; do for ns in 32 48; do run 64 $c $ns auto; done; done
mark
