#!/usr/bin/env bash
# call29d.sh - lab (session 29, prepared without a device, not run): head packing under
# compute-sanitizer (memcheck, then synccheck) on the branch's decode programs with
# FJ_LAB_HP=2 and 4: 16 sweep cases over head_dim 32-128 (a packed CTA reads hp heads' rows
# as one: the last head's row must end inside the tensor) and the merge paths. Compiled once
# outside the tools first. About 4-6 minutes. Carry build-hp/.
set -u
H=build-hp
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer)
export FAJIT_LINEINFO=1 FAJIT_TEST_CACHE_DIR=$PWD/.fjcache/san29
mkdir -p "$FAJIT_TEST_CACHE_DIR"
runs=("2|CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=16 FAJIT_TEST_DECODE_HDS=32,48,64,128"
      "4|CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=12 FAJIT_TEST_DECODE_HDS=32,64"
      "2|CK_RUN_CASE=combine_paths")
for r in "${runs[@]}"; do
    IFS="|" read -r hp envs <<<"$r"
    env FJ_LAB_HP=$hp $envs timeout 300 $H/tests/test_gpu_decode > /dev/null 2>&1
done
for tool in memcheck synccheck; do
    i=0
    for r in "${runs[@]}"; do
        IFS="|" read -r hp envs <<<"$r"
        i=$((i + 1))
        log=$OUT/$tool-$i.log
        env FJ_LAB_HP=$hp $envs timeout 400 "$san" --tool $tool --print-limit 100 \
            --error-exitcode 99 $H/tests/test_gpu_decode > "$log" 2>&1
        echo "$tool run $i (hp $hp, $envs): rc=$? $(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" |
            tail -1); $(grep -E 'decode sweep: [0-9]|Checks' "$log" | cut -c1-120 | tr '\n' ' ')"
    done
done
