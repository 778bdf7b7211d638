#!/usr/bin/env bash
# sass_same.sh - does an edit of the decode kernel's sources change compiled code? Compiles
# every variant of attn_decode.cu that the library makes (dec_variants.c: warm set, tuning
# candidates and defaults over a grid of problems, checked mode, both loaders, head packing,
# the mixed plan's FJ_DEC_QMAX steps) from BASE's src/kernels_src and from the working tree's,
# and compares the CUBINs: byte-identical, else the SASS (cuobjdump -sass; only instructions
# and their order count). Exit 0 when every variant is byte-identical or has identical SASS.
#
# usage: dev/decode/sass_same.sh [BASE_REF] [ARCH...]     (defaults: HEAD, sm_80 sm_90a)
#   QUICK=1  one variant per family of code paths (dec_variants.c), for iterations
#   JOBS=N   parallel compiles (default: CPU count)
# Needs `meson compile -C build` (libfajit_internal.a) and NVRTC; cuobjdump ($CUOBJDUMP, else
# $CUDA_HOME/bin or PATH; a pip wheel's, such as triton's, serves) only where bytes differ.
# No GPU. The BASE side is kept in $TMPDIR/fj_sass_same/ under its commit and the variant
# list, so a second run compiles only the working tree (each side: ~1,000 variants, about
# 25 minutes on 2 cores; QUICK=1 about 330, 4 minutes).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
base_ref=${1:-HEAD}
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(sm_80 sm_90a)
cuda=${CUDA_HOME:-/usr/local/cuda}
quick=${QUICK:-0}
export QUICK=$quick

tool=build/dec_variants
cc -O1 -std=c11 -o "$tool" dev/decode/dec_variants.c -Iinclude -Isrc/kernels_src \
   -Isrc/cache -Ibuild build/libfajit_internal.a -lsqlite3 -lxxhash -ldl -lpthread -lm

base=$(git rev-parse --verify "$base_ref^{commit}")
list=$("$tool" list "${archs[@]}" 2>/dev/null | md5sum | cut -c1-12)
cache=${TMPDIR:-/tmp}/fj_sass_same/$base-$list
if [ ! -f "$cache/done" ]; then
    rm -rf "$cache"
    mkdir -p "$cache/src" "$cache/out"
    git archive "$base" src/kernels_src | tar -x -C "$cache/src"
    "$tool" build "$cache/src/src/kernels_src" "$cache/out" "${archs[@]}"
    touch "$cache/done"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fj_sass_same_XXXXXX")
trap 'rm -rf "$work"' EXIT
"$tool" build src/kernels_src "$work" "${archs[@]}"

if ! cmp -s "$cache/out/index.tsv" "$work/index.tsv"; then
    echo "the variant lists differ (the library's decode family changed?)" >&2
    diff "$cache/out/index.tsv" "$work/index.tsv" | head >&2
    exit 1
fi
cuobjdump=${CUOBJDUMP:-$cuda/bin/cuobjdump}
[ -x "$cuobjdump" ] || cuobjdump=$(command -v cuobjdump || true)
sass() { "$cuobjdump" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' |
         sed -E 's@^\s+/\*[0-9a-f]{4}\*/\s*@@; s@\s*/\*.*@@; s@ +@ @g'; }
n=0 same=0 sass_same=0 differ=0
while IFS=$'\t' read -r file entry name _; do
    n=$((n + 1))
    if cmp -s "$cache/out/$file" "$work/$file"; then
        same=$((same + 1))
    elif [ -z "$cuobjdump" ]; then   # (in sass's subshell an exit would compare two empty texts)
        echo "no cuobjdump: set CUOBJDUMP ($file differs in bytes)" >&2
        exit 2
    elif [ "$(sass "$cache/out/$file" | md5sum)" = "$(sass "$work/$file" | md5sum)" ]; then
        sass_same=$((sass_same + 1))
    else
        differ=$((differ + 1))
        echo "DIFFERENT: $file $entry ($name)"
    fi
done < "$work/index.tsv"
[ "$quick" = 0 ] && set_name="all" || set_name="QUICK"
echo "sass_same: $n variants ($set_name, ${archs[*]}) against $base:" \
     "$same byte-identical, $sass_same identical SASS, $differ different"
[ "$differ" -eq 0 ]
