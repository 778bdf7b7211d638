#!/usr/bin/env bash
# call29b.sh - lab (session 29, prepared without a device, not run): is head packing right?
# Branch lab/s29-hpack: attn_decode.cu's FJ_DEC_HP (a CTA takes 2 or 4 KV heads, their K/V
# rows side by side as one wide row; Q rows zero outside their head's columns) and, in
# decode.c, FJ_LAB_HP=2|4 packing wherever check() allows (heads_kv a multiple, heads side
# by side), tiles from the packed view. The gpu-decode suite against the float64 oracle with
# packing on: the whole suite at 2 (the sweep's default head_dims: a third of its cases
# pack), the sweep over head_dim 32-128 at 2 and 32-64 at 4 (its summary counts the packed
# cases). defaults_per_class and plans_per_class name the default tiles: with packing on
# they may fail on a name, not on numbers (read the log). About 3-4 minutes.
# Build (here): in a worktree of lab/s29-hpack, `meson setup <main>/build-hp && ninja -C
# <main>/build-hp`. Carry build-hp/.
set -u
H=build-hp
gd() {   # $1 tag, then VAR=value ... for the run
    local tag=$1
    shift
    env "$@" timeout 280 $H/tests/test_gpu_decode > "$OUT/$tag.log" 2>&1
    echo "== $tag rc=$?"
    grep -E "decode sweep: [0-9]|FAILED|Checks|:F:|:E:" "$OUT/$tag.log" | cut -c1-240 | head -14
}
gd hp2_all FJ_LAB_HP=2
gd hp2_small FJ_LAB_HP=2 CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_HDS=32,48,64,96,128
gd hp4_small FJ_LAB_HP=4 CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_HDS=32,48,64
