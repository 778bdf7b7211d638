#!/usr/bin/env bash
# call25b.sh - lab (2026-12-04, session 25): latency-bound shapes with 8 splits merged in
# clusters and deeper tiles (lib_cfg.so: decode.c's default_cfg takes FJ_LAB_CFG1/4/8 =
# "bn,stages,wm,wn" for <= 8 / 9..16 / 17..32 packed rows; a temporary edit, not committed).
# Idea: at 1x4k a split's loop reads from the L2 and is bounded by the bytes one SM has in
# flight; with 3 stages 8 splits (4 tiles each) may stream as fast per SM as 16 splits of 2
# tiles, and the cluster merge saves ~1 us over the last CTA's merge (session 22).
set -u
LAB_PREFIX=b
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
L=1x2048,1x4096,1x8192
run() {   # $1 tag, $2 cfg var, $3 cfg, $4 q_lens, $5.. extra
    local tag=$1 var=$2 cfg=$3 q=$4; shift 4
    if [ "$var" != - ]; then export "$var=$cfg"; fi
    bench dev/decode/lib_cfg.so $tag $q $L 8 --page-sizes 16 "$@"
    unset FJ_LAB_CFG1 FJ_LAB_CFG4 FJ_LAB_CFG8
}
for turn in 1 2; do
    run m_$turn - - 1,4,8
    run a_$turn FJ_LAB_CFG1 128,2,1,8 1 --num-splits 8
    run b_$turn FJ_LAB_CFG1 128,3,1,8 1 --num-splits 8
    run c_$turn FJ_LAB_CFG1 64,6,1,4 1 --num-splits 8
    run d_$turn FJ_LAB_CFG1 64,5,1,4 1 --num-splits 8
    run e_$turn FJ_LAB_CFG1 128,3,1,8 1
    run f_$turn FJ_LAB_CFG4 128,3,1,8 4 --num-splits 8
    run g_$turn FJ_LAB_CFG8 128,3,2,4 8 --num-splits 8
done
