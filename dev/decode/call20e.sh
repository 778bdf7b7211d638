#!/usr/bin/env bash
# call20e.sh - lab (2026-12-03, session 20): after the shorter issue path (call 20d), the
# split step still issues an instruction per 2.5 cycles with one warp per scheduler (ncu).
# Eight warps per CTA instead of four, forced through tuning rows (as call20b.sh) on the
# bandwidth-bound shapes and the full batches, page size 16 shuffled, q_len 1.
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20e
mkdir -p "$FAJIT_CACHE_DIR"
timeout 200 $B/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
cat > /tmp/bw.spec <<'S'
[model bw1]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
decode = 8k, 32k, 128k
batch = 1

[model full]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
decode = 2k, 16k
batch = 64
S
timeout 240 $B/fajit-tune -v tune --spec /tmp/bw.spec --reps 2 --force >$OUT/bw_tune.log 2>&1
echo "tune rc=$?"
sqlite3() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); [print(*x) for x in r]" "$@"; }
sqlite3 $FAJIT_CACHE_DIR/kernels.db "select signature, bucket, config from tuning"
for c in ${CFGS:-default dec:128x2m1n8s0 dec:128x3m1n8s0 dec:64x3m1n4s0 dec:128x2m1n4s0 default}; do
    dir=$FAJIT_CACHE_DIR
    if [ "$c" = default ]; then dir=$PWD/.fjcache/c20e_def; mkdir -p $dir   # no tuning rows
    else sqlite3 $FAJIT_CACHE_DIR/kernels.db "update tuning set config='$c' where signature like '%paged%'"; fi
    FAJIT_CACHE_DIR=$dir timeout 120 python3 bench/bench_decode.py --lib $B/libfajit.so \
        --shapes ${SHAPES:-16x8192,1x32768,1x131072,64x16384,128x2048} --q-lens 1 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --out /tmp/bw.md >/tmp/bw.log 2>&1
    echo "== $c rc=$? $(grep -c 'dispatch' /tmp/bw.log)"
    grep -E '^\| [0-9]+x[0-9]+ \| 1 ' /tmp/bw.md | cut -d'|' -f2,5,8,9
done
