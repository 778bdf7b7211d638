#!/usr/bin/env python3
"""ncu_regions.py - warp-stall samples summed over code regions: python3 ncu_regions.py FILE.csv
CUT1,CUT2,... NAME1,NAME2,... (hex offsets from ncu_ann.py; the part before CUT1 is "pre")
"""
import csv, sys
f=sys.argv[1]; cuts=[int(x,16) for x in sys.argv[2].split(',')]; names=sys.argv[3].split(',')
lines=open(f).read().splitlines()
start=next(i for i,l in enumerate(lines) if l.startswith('"Address"'))
rows=list(csv.reader(lines[start:])); hdr=rows[0]; rows=[r for r in rows[1:] if len(r)==len(hdr)]
H={h:i for i,h in enumerate(hdr)}
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
base=int(rows[0][0],16)
tot=sum(num(r[H['Warp Stall Sampling (All Samples)']]) for r in rows)
acc=[0.0]*(len(cuts)+1); accni=[0.0]*(len(cuts)+1)
for r in rows:
    o=int(r[0],16)-base; k=sum(o>=c for c in cuts)
    acc[k]+=num(r[H['Warp Stall Sampling (All Samples)']]); accni[k]+=num(r[H['Warp Stall Sampling (Not-issued Samples)']])
for n,a,b in zip(['pre']+names,acc,accni): print(f"  {n:28s} {100*a/tot:6.2f}%  (not issued {100*b/tot:5.2f}%)")
