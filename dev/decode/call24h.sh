#!/usr/bin/env bash
# call24h.sh - lab (2026-12-04, session 24): the combine kernel instead of the last CTA's
# merge wherever a group's splits do not merge in a cluster (lib_nofuse.so: decode.c's
# DEC_STAGE_MAX 0, so no fused counters) against main 8ff9d8e (lib_s24d.so), two turns. The
# idea: after the flush the last CTA's merge code comes cold from DRAM at the end of the
# chain (session 21: merge 1.4 + 1.8 us cold at 1x32k), while the combine kernel's CTAs are
# launched early by PDL (the split step triggers at its start) on SMs with room to spare.
set -u
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv, $6.. extra
    local lib=$1 tag=$2 q=$3 sh=$4 hk=$5; shift 5
    FAJIT_CACHE_DIR=$PWD/.fjcache/$tag timeout 200 python3 \
        bench/bench_decode.py --lib $lib --q-lens $q --shapes $sh --heads-kv $hk \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "/tmp/h_$tag.md" "$@" > /tmp/h_$tag.log 2>&1
    echo "== $tag rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "/tmp/h_$tag.md" | cut -d'|' -f2,3,5,9 | tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "/tmp/h_$tag.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}
mkdir -p .fjcache
S=1x32768,1x131072,2x32768,4x16384,1x8192,2x4096
L=1x1024,1x2048,1x4096,2x2048
for turn in 1 2; do
    bench dev/decode/lib_s24d.so m_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_nofuse.so n_$turn 1 $S 8 --page-sizes 16
    bench dev/decode/lib_s24d.so ml_$turn 1,4 $L 8 --page-sizes 16
    bench dev/decode/lib_nofuse.so nl_$turn 1,4 $L 8 --page-sizes 16
done
grep "^- " /tmp/h_n_1.md | cut -c1-180
