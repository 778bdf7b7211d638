#!/usr/bin/env bash
# variant_libs.sh SOURCE DEFINE VALUES... - libfajit builds that differ in one kernel define,
# for an A/B sweep on the GPU host in one call: for each value, SOURCE (a file of
# src/kernels_src) gets `#define DEFINE VALUE` as its first line, libfajit is rebuilt in a
# scratch worktree of HEAD, and the library lands in carry/libs/DEFINE-VALUE.so (git-ignored;
# carry it, then point FAJIT_LIB at each, each with its own FAJIT_CACHE_DIR). The source must
# take the define with #ifndef (or !defined) around its default.
#   dev/gpu/variant_libs.sh attn_fwd_sm90.cu FJ_FA3_EX2_POLY 0 4 8
set -euo pipefail
src=$1 def=$2
shift 2
root=$(git rev-parse --show-toplevel)
wt=$(mktemp -d /tmp/fajit-variant-XXXXXX)
git -C "$root" worktree add -q --detach "$wt" HEAD
trap 'git -C "$root" worktree remove --force "$wt"' EXIT
meson setup "$wt/build" "$wt" >/dev/null
mkdir -p "$root/carry/libs"
for v in "$@"; do
    git -C "$wt" checkout -q -- "src/kernels_src/$src"
    sed -i "1i #define $def $v" "$wt/src/kernels_src/$src"
    ninja -C "$wt/build" libfajit.so.0.1.0 >/dev/null
    cp "$wt/build/libfajit.so.0.1.0" "$root/carry/libs/$def-$v.so"
    echo "carry/libs/$def-$v.so"
done
