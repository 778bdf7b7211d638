#!/bin/bash
# device.sh - everything one GPU call does for the sm90 kernel: build the host helper
# (fa3_config.c), check every cubin (restarting after a crash or hang, skipping what ran),
# then time against SDPA FLASH/CUDNN. Needs dev/fa3/cubins (build.py, here) carried.
# Logs under $OUT; the summary and the table are printed last.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa3out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
cc -O2 -fPIC -shared -I../../src/kernels_src ../../src/autotune/fa3_config.c -o libfa3cfg.so || exit 1
rm -f "$OUT/check_progress.json"
for i in 1 2 3 4 5 6; do
    timeout "${CHECK_T:-120}" python3 run_fa3.py check --resume >>"$OUT/check.log" 2>&1
    rc=$?
    echo "check pass $i rc=$rc"
    [ $rc -eq 0 ] || [ $rc -eq 1 ] && break
done
grep -E "^(FAIL|ERROR)" "$OUT/check.log" | cut -c1-400 | head -${NFAIL:-25}
grep -A3 "^check:" "$OUT/check.log" | tail -4
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    timeout "${BENCH_T:-300}" python3 run_fa3.py bench >"$OUT/bench.log" 2>&1
    echo "bench rc=$?"
    grep -E "^hd" "$OUT/bench.log" | cut -c1-250
    sed -n '/^TFLOP/,$p' "$OUT/bench.log"
    tail -3 "$OUT/bench.log" | grep -i error
fi
# compute-sanitizer on one small case of each cubin named in SAN (space separated)
for f in ${SAN:-}; do
    for tool in racecheck memcheck; do
        timeout "${SAN_T:-90}" compute-sanitizer --tool $tool --print-limit 20 python3 run_fa3.py one "$f" \
            >/tmp/san1.log 2>&1
        rc=$?
        { echo "=== $tool $f rc=$rc"; cat /tmp/san1.log; } >>"$OUT/san.log"
        echo "sanitizer $tool $f rc=$rc: $(grep -E '^one:|ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san1.log | cut -c1-160 | tr '\n' ' ')"
    done
done
