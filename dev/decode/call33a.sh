#!/usr/bin/env bash
# call33a.sh - lab (session 33): three questions before issue 18's head_dim 128 account.
# Carry build/ and dev/decode/lib_tl33.so (main 0a6dfb9 with dev/decode/timeline_apply.py's
# stamps, built debugoptimized in a scratch worktree). About 5 minutes.
# (1) The whole decode benchmark on main (q_len 1/4/8, SDPA FLASH and CUDNN, the goals
#     table): where the seven missed goals stand on main after sessions 29-32.
# (2) Where 1 x 4k q_len 8's ps16 loses 0.7 us to contiguous in graph replay (and q_len 1's
#     0.2): the per-CTA timeline, ps16 against contiguous, cold and in a graph.
# (3) Is 16 x 8k bound by its 4 idle SMs or by DRAM (stream-K's premise)? 128 against 132
#     pairs of 8k keys, one split each: 32 vs 33 sequences x 4 KV heads (16 query heads).
#     SM-bound: 132 pairs take 128's time; DRAM-bound: 3% longer. CUDNN beside it.
set -u
LAB_PREFIX=a
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
full_report
for q in 8 1; do
    for ps in 16 0; do
        echo "== timeline 1x4096 q$q ps$ps"
        FAJIT_CACHE_DIR=$PWD/.fjcache/tl timeout 120 python3 dev/decode/timeline.py \
            --lib dev/decode/lib_tl33.so --shapes 1x4096 --q-len $q --page-size $ps \
            --calls 2 2>&1 | tail -40
    done
done
for turn in 1 2; do
    LAB_FIELDS=2,3,5,9,10 bench build/libfajit.so p4_$turn 1 32x8192,33x8192 4 \
        --heads-q 16 --page-sizes 16 --num-splits 1
    LAB_FIELDS=2,3,5,9,10 bench build/libfajit.so p4a_$turn 1 32x8192,33x8192 4 \
        --heads-q 16 --page-sizes 16
done
grep -h "^- \`dec" /tmp/a_p4_1.md /tmp/a_p4a_1.md | cut -c1-170
peers build/libfajit.so peers_p4 120 --heads-q 16 --heads-kv 4 --q-lens 1 \
    --shapes 32x8192,33x8192
