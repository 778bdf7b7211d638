#!/usr/bin/env bash
# call18c.sh - lab (2026-12-03, session 18): third device call (made twice: the first run's
# grep of the graph rows printed nothing). Graph-replay time of forced decode configurations
# at 1 x 1k, 2k, 4k keys (page size 16, q_len 1 and 8; fajit only: fajit-tune makes the
# tuning rows, each run rewrites their config, as lat_cfg.sh), then the gpu-decode suite
# and the whole bench with FlashInfer (the final figures; tuning rows deleted first). The
# first run also ran the whole gpu suite (tests/test_gpu + quickstart).
set -u
B=build
export FAJIT_CACHE_DIR=$PWD/.fjcache/c18c
mkdir -p "$FAJIT_CACHE_DIR"
timeout 200 $B/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
cat > /tmp/lat.spec <<'S'
[model lat1]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
decode = 1k, 2k, 4k
batch = 1

[model lat8]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = causal
page_size = 16
shapes = 8:1k, 8:2k, 8:4k
batch = 1
S
timeout 200 $B/fajit-tune tune --spec /tmp/lat.spec --reps 3 --force >$OUT/lat_tune.log 2>&1
echo "tune rc=$?"
sqlite3() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); [print(*x) for x in r]" "$@"; }
run() {   # $1 bucket pattern, $2 config, $3 q_len: the markdown rows of shapes 1x*
    sqlite3 $FAJIT_CACHE_DIR/kernels.db "update tuning set config='$2' where signature like '%paged%' and bucket like '$1'"
    timeout 60 python3 bench/bench_decode.py --lib $B/libfajit.so --shapes 1x1024,1x2048,1x4096 \
        --q-lens $3 --page-sizes 16 --no-mixed --no-peers --rounds 1 --reps 5 --graph-replays 10 \
        --out /tmp/lat.md >/tmp/lat.log 2>&1
    echo "== q$3 $2 rc=$?"
    grep -E '^\| 1x' /tmp/lat.md | cut -c1-60
}
for c in dec:64x3m1n4s0 dec:128x2m1n8s0 dec:64x2m1n4s0 dec:128x3m1n8s0 dec:64x3m1n4s0; do
    run 'sq=1,%' $c 1
done
for c in dec:64x3m2n2s0 dec:64x2m2n2s0 dec:128x2m2n4s0 dec:64x2m2n4s0 dec:64x3m2n2s0; do
    run 'sq<=8,%' $c 8
done
sqlite3 $FAJIT_CACHE_DIR/kernels.db "delete from tuning"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "rc=|decode sweep: [0-9]|Checks|combine_paths: .*ok|graph_replay: cluster" | cut -c1-200
source dev/decode/fi_setup.sh
PYTHONUNBUFFERED=1 timeout 240 python3 bench/bench_decode.py --lib build/libfajit.so \
    --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/bench.log" 2>&1
echo "bench full rc=$?"; sed -n '/^Latency-bound/,/^Mixed/p' "$OUT/decode.md" | cut -c1-120
