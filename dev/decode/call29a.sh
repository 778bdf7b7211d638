#!/usr/bin/env bash
# call29a.sh - lab (session 29, no device lent: prepared for the next session). Two questions
# that decide whether the stream-K split (NOTES "Session 27", not built) is worth building,
# and one for the q_len 8 latency goal. About 2-3 minutes. Carry build/ and
# dev/decode/lib_cfg27.so.
# (A) Is 16 x 8k bound by the SMs it leaves idle or by DRAM? The same tile (128x3m1n8, one
#     CTA per SM, no split) over 128 and 132 pairs of 8k keys: 32 vs 33 sequences x 4 KV
#     heads (16 query heads), 64 vs 66 x 2 KV heads (8). SM-bound: 132 pairs take the time of
#     128 (3% more bytes, the same us); DRAM-bound: 3% more us, and stream-K gains nothing.
#     cuDNN beside it on the 4-KV-head pair.
# (B) q_len 8 at 1 x 2k/4k and 2 x 4k (graph 1 x 4k: 1.28x q_len 1, goal 1.2): the 32
#     packed rows in one q tile (WM 2) at 8 and 16 splits against the default 2 q tiles x 8
#     splits (call27c measured 128x2m2n4 only at the rule's split count).
# (C) Do bytes per K/V row and head set the read rate (head_dim 32: 2.9 TB/s, 64: 4.0-4.3,
#     128: 4.4-4.5)? The same 512-byte key rows read as 8 heads x 32, 4 x 64 and 2 x 128
#     (4 query heads each), defaults, ps16 and contiguous, cuDNN beside each: if the rate
#     follows the head's bytes, packing 2-4 KV heads per CTA (lab/s29-hpack) is the lever.
set -u
LAB_PREFIX=a
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=dev/decode/lib_cfg27.so
export FJ_LAB_CFG1=128,3,1,8
for turn in 1 2; do
    LAB_FIELDS=2,3,5,9,10 bench $L p4_$turn 1 32x8192,33x8192 4 --heads-q 16 \
        --page-sizes 16 --num-splits 1
    LAB_FIELDS=2,3,5,9,10 bench $L p2_$turn 1 64x8192,66x8192 2 --heads-q 8 \
        --page-sizes 16 --num-splits 1
done
unset FJ_LAB_CFG1
peers build/libfajit.so peers_p4 120 --heads-q 16 --heads-kv 4 --q-lens 1 \
    --shapes 32x8192,33x8192
for c in - 128,2,2,4 64,2,2,4 128,2,2,2 128,3,2,4; do
    for ns in 0 8 16; do
        [ "$c" = - ] && [ $ns != 0 ] && continue
        t=q8_${c//,/_}_$ns
        [ "$c" != - ] && export FJ_LAB_CFG8=$c
        LAB_FIELDS=2,3,5 bench $L $t 1,8 1x2048,1x4096,2x4096 8 --page-sizes 16 --num-splits $ns
        unset FJ_LAB_CFG8
    done
done
for hd in 32 64 128; do
    hk=$((256 / hd))
    LAB_FIELDS=2,3,5,6,9,10 bench build/libfajit.so fp$hd 1 128x2048,64x16384,16x8192 $hk \
        --heads-q $((4 * hk)) --head-dim $hd --page-sizes 16
    peers build/libfajit.so peers_fp$hd 150 --heads-q $((4 * hk)) --heads-kv $hk \
        --head-dim $hd --q-lens 1 --shapes 128x2048,64x16384,16x8192
done
