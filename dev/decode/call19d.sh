#!/usr/bin/env bash
# call19d.sh - lab (2026-12-03, session 19): fourth device call. The C timing harnesses
# (fajit-tune tune, fajit-tune bench) flush the L2 with a read kernel (l2_flush.cu) instead
# of cuMemsetD8: their times against bench_decode.py's on the same shapes; the gpu-decode
# suite with plans_per_class; the whole gpu suite (bench_spec, tune tests).
set -u
export FAJIT_CACHE_DIR=$PWD/.fjcache/c19d
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "warm|rc=|decode sweep: [0-9]|Checks|plans_per_class|:F:|:E:" | cut -c1-200
t0=$(date +%s)
FAJIT_TEST_CACHE_DIR=$FAJIT_CACHE_DIR timeout 400 build/tests/test_gpu >"$OUT/gpu.log" 2>&1
echo "gpu suite rc=$? $(( $(date +%s) - t0 )) s"
grep -E "sweep:|second process|graph|tune:|Checks|:F:|:E:" "$OUT/gpu.log" | tail -12 | cut -c1-200
cat > /tmp/t19.spec <<'S'
[model b16]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
shapes = 1:8k
batch = 16

[model b128]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
shapes = 1:2k
batch = 128

[model b1]
dtype = bf16
head_dim = 128
heads_q = 32
heads_kv = 8
mask = none
page_size = 16
shapes = 1:32k, 1:4k
batch = 1
S
timeout 200 build/fajit-tune tune --spec /tmp/t19.spec --reps 10 --force >"$OUT/tune.log" 2>&1
echo "tune rc=$?"; grep -v "^\[" "$OUT/tune.log" | head -6 | cut -c1-200
python3 dev/decode/tune_table.py "$FAJIT_CACHE_DIR/kernels.db" 2>&1 | cut -c1-400
sqlite3() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); [print(*x) for x in r]" "$@"; }
sqlite3 "$FAJIT_CACHE_DIR/kernels.db" "delete from tuning"
timeout 200 build/fajit-tune bench --spec /tmp/t19.spec --reps 20 >"$OUT/cbench.log" 2>&1
echo "fajit-tune bench rc=$?"; grep -v "^\[" "$OUT/cbench.log" | head -12 | cut -c1-200
timeout 120 python3 bench/bench_decode.py --lib build/libfajit.so \
    --shapes 16x8192,128x2048,1x32768,1x4096 --q-lens 1 --page-sizes 16 --no-mixed --no-peers \
    --rounds 1 --reps 15 --out "$OUT/py.md" >"$OUT/py.log" 2>&1
echo "bench_decode rc=$?"; grep -E '^\| [0-9]+x[0-9]+ \| 1 \|' "$OUT/py.md" | cut -d'|' -f2-5
