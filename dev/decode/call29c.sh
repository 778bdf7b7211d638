#!/usr/bin/env bash
# call29c.sh - lab (session 29, prepared without a device, not run): is head packing faster?
# (After call29b says it is right.) main's library (build/) against the branch's
# (build-hp/, lab/s29-hpack) with FJ_LAB_HP=2 (and 4 at head_dim 32, 48), head_dim 32, 64, 48,
# q_len 1 and 4, ps16 shuffled and contiguous, max err vs torch; then SDPA FLASH/CUDNN beside
# the packed library at q_len 1. Expected where a head's row is under 256 bytes: head_dim
# 32 full batches 2.9 -> 4+ TB/s, head_dim 64 4.0-4.3 -> ~4.5 (hd128's rate: same bytes per
# CTA row); a probe of head_dim 128 x 2. About 6-7 minutes. Carry build/ and build-hp/.
set -u
LAB_PREFIX=c
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache
H=build-hp
S=64x16384,128x2048,16x8192,1x32768,1x131072,1x4096
for hd in 32 64 48; do
    LAB_FIELDS=2,3,5,6,9,10,11 bench build/libfajit.so m_h$hd 1,4 $S 8 --head-dim $hd --page-sizes 16
    for hp in 2 4; do
        [ $hp = 4 ] && [ $hd = 64 ] && continue   # (hd48 x 4: hd192's 32x3m1n2, no spills)
        export FJ_LAB_HP=$hp
        LAB_FIELDS=2,3,5,6,9,10,11 bench $H/libfajit.so p${hp}_h$hd 1,4 $S 8 --head-dim $hd \
            --page-sizes 16
        unset FJ_LAB_HP
    done
done
# head_dim 128 x 2 (512-byte rows; the view takes head_dim 256's 32x3m1n2: no spills on the
# three targets): hd256 streams 16x8k at 4.39 TB/s against hd128's 4.27 (session 25/28)
B=64x16384,128x2048,16x8192,1x32768,1x131072
LAB_FIELDS=2,3,5,6,9,10,11 bench build/libfajit.so m_h128 1 $B 8 --page-sizes 16
export FJ_LAB_HP=2
LAB_FIELDS=2,3,5,6,9,10,11 bench $H/libfajit.so p2_h128 1 $B 8 --page-sizes 16
for hd in 32 64; do
    peers $H/libfajit.so peers_h$hd 150 --head-dim $hd --q-lens 1 \
        --shapes 64x16384,128x2048,16x8192,1x32768,1x131072
done
unset FJ_LAB_HP
cp /tmp/c_*.md "$OUT/" 2>/dev/null
# tables: python3 dev/decode/ab_table.py <files_at>/c_m_h32.md <files_at>/c_p2_h32.md ...
