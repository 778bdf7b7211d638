#!/usr/bin/env bash
# call27c.sh - lab (session 27): the latency-bound goals still short at head_dim 128 (graph
# replay, ps16): 1 x 4k q_len 1 8.2 us (goal 8.0) and q_len 8 10.5 (goal 1.2 x q_len 1; the
# latf class runs two q tiles of 16 rows, each over 8 splits of 4 x 128 keys: 128 CTAs that
# read K/V twice from the L2). Tiles forced through lib_cfg27.so (main with
# dev/decode/lab_cfg27.patch): FJ_LAB_CFG1 for q_len 1, FJ_LAB_CFG8 for q_len 8; two turns
# of the default. Carry build/ and dev/decode/lib_cfg27.so.
set -u
LAB_PREFIX=c
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg27.so
S=1x1024,1x2048,1x4096,2x4096
for c in - 128,2,2,4 64,2,1,4 64,3,1,4 128,3,1,4 128,2,1,8 64,2,2,4 -; do
    t=q8_${c//,/_}
    [ "$c" != - ] && export FJ_LAB_CFG8=$c
    LAB_FIELDS=2,3,5 bench $L $t 8 $S 8 --page-sizes 16
    unset FJ_LAB_CFG8
done
for c in - 64,2,1,8 64,3,1,8 256,2,1,8 128,3,1,8 64,2,1,4 -; do
    t=q1_${c//,/_}
    [ "$c" != - ] && export FJ_LAB_CFG1=$c
    LAB_FIELDS=2,3,5 bench $L $t 1 $S 8 --page-sizes 16
    unset FJ_LAB_CFG1
done
# head_dim 32 full batches run at ~2.9 TB/s (64 x 16k 366 us for 1.07 GB; call26d): wider
# tiles over 4 warps (fewer per-tile waits per byte), q_len 1
for c in - 128,3,1,4 128,4,1,4 256,2,1,4 64,6,1,4 -; do
    t=h32_${c//,/_}
    [ "$c" != - ] && export FJ_LAB_CFG1=$c
    LAB_FIELDS=2,3,5 bench $L $t 1 64x16384,128x2048 8 --page-sizes 16 --head-dim 32
    unset FJ_LAB_CFG1
done
