#!/usr/bin/env bash
# run_prof.sh - device call: bench (hd256 only, FA2_BENCH_HD) then Nsight Compute on FLASH
# and our kernels on the same tensors (run_gpu.py prof). Logs and ncu text under $OUT
# (ncu.tgz: details pages, source-page CSVs, summaries). Set SKIP_BENCH=1 / SKIP_CHECK=0;
# SAN_RACE / SAN_MEM: run_gpu.py mini arguments for racecheck / memcheck (during the check),
# SAN_T_RACE / SAN_T_MEM their time limits in seconds (150 / 100).
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa2out}
mkdir -p "$OUT" /tmp/ncu
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
if [ -n "${SAN_RACE:-}" ]; then  # compute-sanitizer next to the check (timing unaffected)
    (timeout ${SAN_T_RACE:-150} compute-sanitizer --tool racecheck python3 run_gpu.py mini $SAN_RACE >"$OUT/san.log" 2>&1
     echo "racecheck rc=$?" >>"$OUT/san.log"
     timeout ${SAN_T_MEM:-100} compute-sanitizer --tool memcheck python3 run_gpu.py mini ${SAN_MEM:-} >>"$OUT/san.log" 2>&1
     echo "memcheck rc=$?" >>"$OUT/san.log") &
    san=$!
fi
if [ "${SKIP_CHECK:-1}" != 1 ]; then
    timeout 200 python3 run_gpu.py check >"$OUT/check.log" 2>&1; echo "check rc=$?"; tail -4 "$OUT/check.log"
fi
if [ -n "${SAN_RACE:-}" ]; then
    wait $san; grep -E "ERROR SUMMARY|hazard|mini:|rc=" "$OUT/san.log" | head -20
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    FA2_BENCH_HD=${BENCH_HD:-256} timeout 200 python3 run_gpu.py bench >"$OUT/bench.log" 2>&1; echo "bench rc=$?"
fi
n=0
for spec in ${PROF_SPECS:-}; do
    n=$((n + 1)); tag=p${n}_$(echo "${spec%%:*}_$(echo "$spec" | cut -d: -f2)")
    timeout "${NCU_T:-100}" ncu --clock-control none --kernel-name regex:'flash_fwd|fj_attn' \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
        --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
        --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum \
        -f -o /tmp/ncu/$tag python3 run_gpu.py prof "$spec" >/tmp/ncu/$tag.app 2>&1
    echo "ncu $tag ($spec) rc=$?"; grep -E "^prof|rror" /tmp/ncu/$tag.app | head
    ncu -i /tmp/ncu/$tag.ncu-rep --page details >/tmp/ncu/$tag.details.txt 2>&1
    ncu -i /tmp/ncu/$tag.ncu-rep --page source --csv --print-source sass >/tmp/ncu/$tag.src.csv 2>&1
    python3 ncu_sum.py details /tmp/ncu/$tag.details.txt >/tmp/ncu/$tag.sum.txt 2>&1
    python3 ncu_sum.py source /tmp/ncu/$tag.src.csv 25 >>/tmp/ncu/$tag.sum.txt 2>&1
done
if [ $n -gt 0 ]; then
    cat /tmp/ncu/*.sum.txt >"$OUT/ncu_summary.txt"
    rm -f /tmp/ncu/*.ncu-rep; gzip /tmp/ncu/*.csv; tar czf "$OUT/ncu.tgz" -C /tmp ncu
fi
for f in cubins/*.cubin; do case $f in *h256*OLD*|*h256*64x64w4s1.cubin|*h256*128x64w8s2.cubin) echo "== $f"; cuobjdump -sass "$f" | grep -cE '^\s+/\*[0-9a-f]{4}\*/';; esac; done 2>/dev/null | paste - - | head -20
grep -A40 "^mean ratio" "$OUT/bench.log" 2>/dev/null | grep -E "^hd|TFLOP|hdim|^\| "
