#!/usr/bin/env bash
# lat_cfg.sh - lab: graph-replay time at 1x4k (q_len 1 and 8, page size 16) of forced decode
# configurations: fajit-tune makes the tuning rows, each run rewrites their config.
set -u
B=${B:-build}
export FAJIT_CACHE_DIR=${FAJIT_CACHE_DIR:-/tmp/fjc}
cat > /tmp/lat.spec <<'S'
[model lat1]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
decode = 4k
batch = 1

[model lat8]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = causal
page_size = 16
shapes = 8:4k
batch = 1
S
timeout 200 $B/fajit-tune tune --spec /tmp/lat.spec --reps 5 --force >/tmp/lat_tune.log 2>&1
echo "tune rc=$?"
sqlite3() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); [print(*x) for x in r]" "$@"; }
sqlite3 $FAJIT_CACHE_DIR/kernels.db "select signature, bucket, config from tuning"
run() {   # $1 bucket pattern, $2 config, $3 q_len
    sqlite3 $FAJIT_CACHE_DIR/kernels.db "update tuning set config='$2' where signature like '%paged%' and bucket like '$1'"
    timeout 60 python3 bench/bench_decode.py --lib $B/libfajit.so --shapes 1x4096 --q-lens $3 \
        --page-sizes 16 --no-mixed --no-peers --rounds 1 --reps 5 --graph-replays 10 >/tmp/lat.log 2>&1
    echo "q$3 $2: $(grep -E '^\| 1x4096 \| '$3' ' /tmp/lat.log | tail -1 | cut -d'|' -f4)  rc=$?"
}
for c in dec:64x3m1n4s0 dec:64x4m1n4s0 dec:128x2m1n4s0 dec:64x2m1n4s0 dec:128x2m1n8s0 \
         dec:64x3m1n4s8 dec:64x3m1n4s32 dec:64x4m1n4s32 dec:32x3m1n2s0 dec:64x3m2n2s0; do
    run 'sq=1,%' $c 1
done
for c in dec:64x3m2n2s0 dec:64x3m1n4s0 dec:64x4m2n2s0 dec:128x2m2n2s0 dec:64x3m2n4s0 \
         dec:64x3m2n2s8 dec:64x3m2n2s32 dec:64x2m2n2s0; do
    run 'sq<=8,%' $c 8
done
tail -5 /tmp/lat.log
