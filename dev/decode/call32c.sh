#!/usr/bin/env bash
# call32c.sh - lab (session 32): why FAJIT_DECODE_SPECULATE=auto measured slower than off in
# call32a (H100: q_len 1 +0.5-1.9 us; q_len 4/8 are causal, which does not speculate, and
# stayed level). If auto takes as long as check (every CTA redoes), the check misses when
# it should not; if it sits between off and check, the cost is the check itself.
# lib_s32nocheck.so (the branch with the check skipped unless spec == 2: unsafe, lab
# only) times the early reads alone. Two turns, ps16, q_len 1. About 3 minutes. Carry
# ["build-spec", "dev/decode/lib_s32nocheck.so"].
# Build: branch lab/s32-spec (`git worktree add /tmp/s32 lab/s32-spec && cd /tmp/s32 &&
# meson setup /work/main/build-spec && ninja -C /work/main/build-spec`), carried as
# build-spec; the nocheck library is that source with the check's `if (spec)` made
# `if (spec && p.spec == 2)`. Ran in session 32 inside call32d (NOTES.md).
set -u
B=${SPEC_BUILD:-build-spec}
LAB_PREFIX=c
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
S=1x1024,1x4096,2x4096,16x8192,1x32768
for turn in 1 2; do
    for sp in off auto check; do
        FAJIT_DECODE_SPECULATE=$sp bench $B/libfajit.so ${sp}_$turn 1 $S 8 --page-sizes 16
    done
    bench dev/decode/lib_s32nocheck.so nocheck_$turn 1 $S 8 --page-sizes 16
done
