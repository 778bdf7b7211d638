#!/usr/bin/env bash
# call28d.sh - lab (session 28): head_dim 32/48 long single sequences behind cuDNN in call28c
# (q_len 1, ps16: hd32 1x32k 27.6 us against 20.7, 1x128k 56.6 against 49.9; hd48 27.4
# against 24.0, 75.0 against 63.5). hd32 takes 128x2m1n8 over 16 splits at 1x32k: 128 CTAs
# of 16 tiles of 16 KB (K+V), two deep: 32 KB in flight per SM. Deeper tiles and more
# splits (more CTAs per SM) through lib_cfg27.so's FJ_LAB_CFG1 and --num-splits. Then the
# other stream-class shapes (16 x 8k, 4 x 16k) with the same tiles; the 128 x 2k full
# batch at head_dim 32 (0.84x cuDNN) with narrower CTAs (more per SM). About 4-5 minutes.
# Every tile here compiles for sm_90a without spills or stack (dev/decode/compile_check.py's
# one() over them, offline; 32x4m1n2 at head_dim 32 spills 4/16 B and is left out).
# Carry build/ and dev/decode/lib_cfg27.so.
set -u
LAB_PREFIX=d
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg27.so
S=1x32768,1x131072
for hd in 32 48; do
    for c in - 128,4,1,8 128,6,1,8 256,3,1,8 256,4,1,8 64,6,1,4; do
        for ns in 0 32 64; do
            [ $ns != 0 ] && [ "$c" = 256,4,1,8 -o "$c" = 64,6,1,4 ] && continue
            t=h${hd}_${c//,/_}_$ns
            [ "$c" != - ] && export FJ_LAB_CFG1=$c
            LAB_FIELDS=2,3,5 bench $L $t 1 $S 8 --head-dim $hd --page-sizes 16 --num-splits $ns
            unset FJ_LAB_CFG1
        done
    done
done
# the same tiles on the other stream-class shapes (16 and 4 sequences), splits chosen
for hd in 32 48; do
    for c in - 128,4,1,8 128,6,1,8 256,3,1,8; do
        t=b${hd}_${c//,/_}
        [ "$c" != - ] && export FJ_LAB_CFG1=$c
        LAB_FIELDS=2,3,5 bench $L $t 1 16x8192,4x16384 8 --head-dim $hd --page-sizes 16
        unset FJ_LAB_CFG1
    done
done
for c in - 64,4,1,2 32,6,1,2 64,6,1,2 128,4,1,8; do
    t=f32_${c//,/_}
    [ "$c" != - ] && export FJ_LAB_CFG1=$c
    LAB_FIELDS=2,3,5 bench $L $t 1 128x2048 8 --head-dim 32 --page-sizes 16
    unset FJ_LAB_CFG1
done
