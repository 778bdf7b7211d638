#!/bin/sh
# Stages the kernel sources into bench/fa2_dev/src_stage for the dev tools. Works around
# __builtin_offsetof in fajit_params.h, which NVRTC 13.0 rejects (reported to the lead).
d=$(dirname "$0"); r="$d/../../src/kernels_src"; mkdir -p "$d/src_stage"
cp "$r/attn_fwd_sm80.cu" "$r/fj_common.cuh" "$d/src_stage/"
sed 's/^static_assert(__builtin_offsetof.*$//' "$r/fajit_params.h" > "$d/src_stage/fajit_params.h"
