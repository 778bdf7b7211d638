#!/usr/bin/env bash
# call33b.sh - lab (session 33): call33a's (3) without its confound, and call29a's lost (B).
# Carry build/ and dev/decode/lib_cfg33.so (main 0a6dfb9 + lab_cfg31.patch: FJ_LAB_CFG1/8
# force the default tile). About 3 minutes.
# (A) 16 x 8k's premise for stream-K: the same tile (128x3 m1n8, one CTA per SM, no split)
#     over 128 and 132 pairs of 8k keys, 32 vs 33 sequences x 4 KV heads (16 query heads),
#     ps16 and contiguous (call33a gave 33 pairs another tile). SM-bound: 132 pairs in 128's
#     time; DRAM-bound: 3% longer, and stream-K has nothing to gain.
# (B) q_len 8 at 1 x 2k/4k (graph 1 x 4k 1.26x q_len 1 on the H200, goal 1.2): the 32
#     packed rows in one 32-row tile (128x2 m2n4, 256 threads, K/V read once) at 8 and 16
#     splits, against the default (two 16-row tiles, 8 splits, cluster merge).
set -u
LAB_PREFIX=b
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
L=dev/decode/lib_cfg33.so
for turn in 1 2; do
    FJ_LAB_CFG1=128,3,1,8 LAB_FIELDS=2,3,5,9,10 bench $L p4_$turn 1 32x8192,33x8192 4 \
        --heads-q 16 --page-sizes 16 --num-splits 1
done
grep -h "^- \`dec" /tmp/b_p4_1.md | cut -c1-150
for turn in 1 2; do
    for c in - 128,2,2,4 64,2,2,4; do
        for ns in 0 8 16; do
            [ "$c" = - ] && [ $ns != 0 ] && continue
            t=q8_${c//,/_}_${ns}_$turn
            if [ "$c" != - ]; then export FJ_LAB_CFG8=$c; fi
            LAB_FIELDS=2,3,5,9 bench $L $t 1,8 1x2048,1x4096,2x4096 8 --page-sizes 16 \
                --num-splits $ns
            unset FJ_LAB_CFG8
        done
    done
done
grep -h "^- \`dec" /tmp/b_q8_128_2_2_4_16_1.md /tmp/b_q8_-_0_1.md | cut -c1-200
