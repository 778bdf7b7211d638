#!/usr/bin/env bash
# call20b.sh - lab (2026-12-03, session 20): call 20a's floor says a plain read of the same
# pages is 6-16% faster than fajit where the keys stream (1x32k, 1x128k, 16x8k). Is it the
# bytes in flight per SM (128x2: one 64 KiB tile while the other is used)? Forced decode
# configurations (tuning rows made by fajit-tune, their config rewritten, as lat_cfg.sh),
# page size 16 shuffled, q_len 1, per call with the read flush.
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c20b
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
S
timeout 200 $B/fajit-tune tune --spec /tmp/bw.spec --reps 2 --force >$OUT/bw_tune.log 2>&1
echo "tune rc=$?"
sqlite3() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); [print(*x) for x in r]" "$@"; }
sqlite3 $FAJIT_CACHE_DIR/kernels.db "select signature, bucket, config from tuning"
for c in ${CFGS:-dec:128x2m1n4s0 dec:128x3m1n4s0 dec:64x4m1n4s0 dec:64x5m1n4s0 dec:64x6m1n4s0 \
         dec:128x2m1n4s0t dec:128x3m1n4s0t dec:64x5m1n4s0t dec:128x3m1n8s0 dec:128x2m1n4s0}; do
    sqlite3 $FAJIT_CACHE_DIR/kernels.db "update tuning set config='$c' where signature like '%paged%'"
    timeout 90 python3 bench/bench_decode.py --lib $B/libfajit.so \
        --shapes ${SHAPES:-16x8192,1x32768,1x131072} --q-lens 1 --page-sizes 16 --no-mixed \
        --no-peers --rounds 3 --reps 10 --out /tmp/bw.md >/tmp/bw.log 2>&1
    echo "== $c rc=$? $(grep -c 'dispatch' /tmp/bw.log)"
    grep -E '^\| [0-9]+x[0-9]+ \| 1 ' /tmp/bw.md | cut -d'|' -f2,5,8,9
done
