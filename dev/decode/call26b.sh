#!/usr/bin/env bash
# call26b.sh - lab (session 26, prepared without a GPU): fill_splits (6803f0f) beyond what
# call25g measured (q_len 1 at 1.2-3 waves, head_dim 128): q_len 4 and 8 at the same batches,
# many waves (200 x 4k: 3 splits over 6.06 waves; 300 x 4k), and head_dim 64 (4 CTAs per SM:
# 100 x 8k). lib_cfg26.so is main 77255b3 with dev/decode/lab_cfg.patch: FJ_LAB_NOFILL=1
# gives the wave rule alone (no fill) in the same library. ps16 shuffled, two turns, no peers
# (the ratio to CUDNN comes from call25g's peer run where the shapes overlap).
set -u
LAB_PREFIX=b
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg26.so
S=40x8192,100x8192,200x4096,300x4096,64x8192
for turn in 1 2; do
    FJ_LAB_NOFILL=1 LAB_FIELDS=2,3,5 bench $L nofill_$turn 1,4,8 $S 8 --page-sizes 16
    LAB_FIELDS=2,3,5 bench $L fill_$turn 1,4,8 $S 8 --page-sizes 16
done
S64=100x8192,200x8192,300x4096
FJ_LAB_NOFILL=1 LAB_FIELDS=2,3,5 bench $L nofill64 1,8 $S64 8 --page-sizes 16 --head-dim 64
LAB_FIELDS=2,3,5 bench $L fill64 1,8 $S64 8 --page-sizes 16 --head-dim 64
