#!/usr/bin/env bash
# call19a.sh - lab (2026-12-03, session 19): first device call. The candidate build (the
# tuner's shuffled pages; the fused combine counted with one acq_rel atomic instead of a
# fence per thread; the combine kernel's 16-split step): warm (validates the families on
# shuffled pages), the gpu-decode suite, memcheck on a short sweep; then graph replay of
# the latency-bound shapes with three libraries in turns (dev/decode/lib_base.so = main
# f11cd9a's kernels, lib_v1.so = + the acq_rel count, build = + the combine's 16-split
# step), then fajit-tune on paged decode shapes, now on shuffled pages.
set -u
B=build
OUT=${OUT:-/tmp/out}
export FAJIT_CACHE_DIR=$PWD/.fjcache/c19a
mkdir -p "$FAJIT_CACHE_DIR"
(STEPS="decode san" OUT=$OUT/a bash dev/gpu/run.sh) 2>&1 |
    grep -E "rc=|warm|decode sweep: [0-9]|Checks|ERROR SUMMARY|:F:|:E:" | cut -c1-220
lat() {   # $1 library, $2 tag
    FAJIT_CACHE_DIR=$PWD/.fjcache/lat_$2 timeout 120 python3 bench/bench_decode.py --lib "$1" \
        --shapes 1x1024,1x2048,1x4096,1x32768 --q-lens 1,4,8 --page-sizes 16 --no-mixed \
        --no-peers --rounds 1 --reps 7 --graph-replays 10 --out "$OUT/lat_$2_$3.md" \
        >"$OUT/lat_$2_$3.log" 2>&1
    echo "== $2 run $3 rc=$?"
    sed -n '/^Latency-bound/,$p' "$OUT/lat_$2_$3.md" | grep -E '^\| 1x' | cut -d'|' -f2-5
    grep -E '^\| 1x32768' "$OUT/lat_$2_$3.md" | head -3 | cut -d'|' -f2-6
}
cp dev/decode/lib_base.so /tmp/libfajit_base.so
cp dev/decode/lib_v1.so /tmp/libfajit_v1.so
for run in 1 2; do
    lat /tmp/libfajit_base.so base $run
    lat /tmp/libfajit_v1.so v1 $run
    lat $B/libfajit.so cand $run
done
cat > /tmp/tune19.spec <<'S'
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
shapes = 1:32k
batch = 1
S
t0=$(date +%s)
timeout 300 $B/fajit-tune tune --spec /tmp/tune19.spec --reps 10 --force >"$OUT/tune.log" 2>&1
echo "tune rc=$? $(( $(date +%s) - t0 )) s"; tail -12 "$OUT/tune.log"
python3 dev/decode/tune_table.py "$FAJIT_CACHE_DIR/kernels.db" 2>&1 | cut -c1-600
