#!/bin/bash
# prof.sh - ncu source-level stall sampling of the cubins in PROF_SET ("file.cubin:seqlen ...",
# default: run 7's hd128 unmasked set), the second launch of each (run_fa3.py prof). Everything
# of ncu lands in $OUT/ncu.tgz (the CSV of each source page + the details page); summaries are
# printed. PROF_CWA=1: the ComputeWorkloadAnalysis section too; PROF_METRICS: more metrics.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa3out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
mkdir -p /tmp/ncu
n=0
for fs in ${PROF_SET:-d1_h128_m0_128x128_o1p1s1.cubin:512 d1_h128_m0_128x128_o1p1s1_l2pf4.cubin:512 d1_h128_m0_128x176_o1p1s1.cubin:16384}; do
    f=${fs%%:*}; S=${fs##*:}; n=$((n + 1)); tag=p${n}_${f%.cubin}_$S
    timeout "${NCU_T:-60}" ncu --clock-control none --kernel-name fj_attn_fwd_sm90 --launch-skip 1 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
        ${PROF_CWA:+--section ComputeWorkloadAnalysis} \
        --metrics ${PROF_METRICS:+$PROF_METRICS,}sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio \
        -f -o /tmp/ncu/$tag python3 run_fa3.py prof "$f" "$S" >/tmp/ncu/$tag.app 2>&1
    echo "ncu $tag rc=$?"
    ncu -i /tmp/ncu/$tag.ncu-rep --page details > /tmp/ncu/$tag.details.txt 2>&1
    ncu -i /tmp/ncu/$tag.ncu-rep --page source --csv --print-source sass > /tmp/ncu/$tag.csv 2>&1
    grep -E "Duration|SM Frequency|pipe_|issue_active|hit_rate|dram__bytes|stalled_(long|wait|barrier)|Issue Slots Busy|Executed Ipc|Memory Throughput|L2 Hit" /tmp/ncu/$tag.details.txt | cut -c1-120
    python3 ncu_src.py /tmp/ncu/$tag.csv 22 > /tmp/ncu/$tag.summary.txt 2>&1
    cut -c1-200 /tmp/ncu/$tag.summary.txt | head -60
done
rm -f /tmp/ncu/*.ncu-rep
tar czf "$OUT/ncu.tgz" -C /tmp ncu
