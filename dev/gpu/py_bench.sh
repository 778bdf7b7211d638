#!/usr/bin/env bash
# py_bench.sh - one GPU-host call after dev/gpu/run.sh: the Python package's tests (GPU part
# included), fajit-tune bench's default set, bench_attn.py on the same prefill shapes, and
# plot_results.py --compare of the two. Logs in $OUT.
set -u
B=${B:-build}
OUT=${OUT:-/tmp/fajit-out}
mkdir -p "$OUT"
t0=$(date +%s)
FAJIT_LIB=$PWD/$B/libfajit.so PYTHONPATH=python timeout 300 python3 -m pytest -q -rs \
    python/tests >"$OUT/pytest.log" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - t0 )) s)"; tail -15 "$OUT/pytest.log"
t0=$(date +%s)
timeout 300 "$B/fajit-tune" bench --json "$OUT/bench.json" >"$OUT/bench.txt" 2>"$OUT/bench.err"
echo "fajit-tune bench rc=$? ($(( $(date +%s) - t0 )) s)"; cat "$OUT/bench.txt" | tail -40
t0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench_attn.py --lib "$B/libfajit.so" \
    --seqlens ${ATTN_SEQLENS:-1024,4096,16384} --out "$OUT/attn.md" >"$OUT/attn.log" 2>&1
echo "bench_attn rc=$? ($(( $(date +%s) - t0 )) s)"
python3 bench/plot_results.py --compare "$OUT/bench.json" "$OUT/attn.md" 2>&1 | tail -30
