#!/usr/bin/env bash
# ncu_peers.sh - Nsight Compute on fajit's kernel and cuDNN's on the same tensors, side by side
# (dev/probes/probe_peers.py --ncu-pairs: 2 fajit launches, then 2 CUDNN launches per shape).
# usage: [B=build] [OUT=dir] [SHAPES=64:causal:512,128:none:512] bash dev/probes/ncu_peers.sh
set -u
B=${B:-build}
OUT=${OUT:-/tmp/fajit-out}
Q=$(timeout 60 ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
M=$( (echo "$Q" | grep -E '^sm__pipe_tensor[a-z_]*_cycles_active$' |
      sed 's/$/.avg.pct_of_peak_sustained_active/'
      echo "$Q" | grep -E '^(lts__t_bytes|dram__bytes_read|dram__bytes_write)$' | sed 's/$/.sum/'
      echo "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed") | paste -sd, -)
timeout "${NCU_T:-150}" ncu --kernel-name regex:'fj_attn|flash_fprop' --section SpeedOfLight \
    --section LaunchStats --section Occupancy ${M:+--metrics $M} --log-file "$OUT/ncu_peers.txt" \
    python3 dev/probes/probe_peers.py --ncu-pairs "$B/libfajit.so" --shapes "${SHAPES:-64:causal:512,128:none:512}" \
    >"$OUT/ncu_peers_app.log" 2>&1
echo "ncu peers rc=$?"
grep -E "^  (fj_attn|cudnn)|Duration|SM Frequency|Memory Throughput|DRAM Throughput|pipe_tensor|lts__t_bytes|dram__bytes|Registers Per|Dynamic Shared|Grid Size|Block Size" \
    "$OUT/ncu_peers.txt" | cut -c1-120 | head -120
