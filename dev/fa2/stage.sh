#!/bin/sh
# Stages the kernel sources into dev/fa2/src_stage for the dev tools (nvrtc_build,
# sweep.py, build_cubins.py), so that a sweep in progress never sees a half-edited file.
d=$(dirname "$0"); r="$d/../../src/kernels_src"; mkdir -p "$d/src_stage"
cp "$r/attn_fwd_sm80.cu" "$r/fj_common.cuh" "$r/fajit_params.h" "$d/src_stage/"
