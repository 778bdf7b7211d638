#!/usr/bin/env python3
"""ncu_ann.py - annotated SASS listing from an ncu source-page CSV: offset, share of warp-stall
samples, executions, instruction, top stall reasons; every instruction over THR % plus all
barrier / mbarrier / TMA / EXIT lines.   python3 ncu_ann.py FILE.csv [THR]
"""
import csv, sys
f=sys.argv[1]; thr=float(sys.argv[2]) if len(sys.argv)>2 else 0.3
lines=open(f).read().splitlines()
start=next(i for i,l in enumerate(lines) if l.startswith('"Address"'))
rows=list(csv.reader(lines[start:])); hdr=rows[0]; rows=[r for r in rows[1:] if len(r)==len(hdr)]
H={h:i for i,h in enumerate(hdr)}
num=lambda x: float(x.replace(',','') or 0) if x.replace(',','').replace('.','').isdigit() else 0.0
base=int(rows[0][0],16)
tot=sum(num(r[H['Warp Stall Sampling (All Samples)']]) for r in rows)
reasons=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
for r in rows:
    s=num(r[H['Warp Stall Sampling (All Samples)']]); src=r[1].strip()
    key=any(k in src for k in ('SYNCS','BAR.','DEPBAR','USETMAXREG','UTMALDG','EXIT','RET'))
    if 100*s/tot>=thr or key:
        rs=sorted(((num(r[H[h]]),h[6:]) for h in reasons),reverse=True)[:3]
        print(f"{int(r[0],16)-base:05x} {100*s/tot:5.2f}% ex={r[H['Instructions Executed']]:>8s} {src[:75]:75s} "+" ".join(f"{h}={v:.0f}" for v,h in rs if v>0))
