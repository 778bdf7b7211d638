#!/usr/bin/env python3
"""ncu_src.py - summarise `ncu -i R --page source --csv --print-source sass` output (one kernel):
warp-stall samples per SASS instruction, grouped by what the instruction is (mbarrier wait,
named barrier, wgmma wait, HGMMA, MUFU, ...), then the top lines.

  python3 ncu_src.py FILE.csv [TOP]
"""
import csv, re, sys
from collections import defaultdict


def kind(sass):
    op = sass.split()[0] if sass.split() else ""
    if sass.startswith("@"):
        op = sass.split()[1] if len(sass.split()) > 1 else ""
    for pat, k in (("SYNCS.PHASECHK", "mbarrier try_wait"), ("SYNCS.ARRIVE", "mbarrier arrive"),
                   ("BAR.SYNC", "named barrier sync"), ("BAR.ARV", "named barrier arrive"),
                   ("BAR", "barrier other"), ("WARPGROUP.DEPBAR", "wgmma wait_group"),
                   ("WARPGROUP.ARRIVE", "wgmma fence/arrive"), ("HGMMA", "HGMMA issue"),
                   ("MUFU", "MUFU (ex2/rcp)"), ("UTMA", "TMA issue"), ("STSM", "stmatrix"),
                   ("STG", "global store"), ("LDG", "global load"), ("LDS", "shared load"),
                   ("STS", "shared store"), ("SHFL", "shuffle"), ("F2FP", "pack (F2FP)"),
                   ("FMNMX", "max"), ("FFMA", "FFMA"), ("FMUL", "FMUL"), ("FADD", "FADD"),
                   ("BRA", "branch"), ("NANOSLEEP", "nanosleep"), ("USETMAXREG", "setmaxnreg")):
        if op.startswith(pat):
            return k
    return "other (" + op.split(".")[0] + ")"


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    # skip any preamble before the header row
    start = next(i for i, l in enumerate(lines) if l.startswith('"') and ("Address" in l or "Source" in l))
    rows = list(csv.reader(lines[start:]))
    hdr, rows = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    print("columns:", " | ".join(hdr)[:1500])
    src = next(i for i, h in enumerate(hdr) if h.strip() == "Source")
    addr = next((i for i, h in enumerate(hdr) if h.strip() == "Address"), None)
    samp = next((i for i, h in enumerate(hdr) if "Sampling (All" in h), None)
    nis = next((i for i, h in enumerate(hdr) if "Sampling (Not" in h), None)
    if samp is None:
        print("no sampling column")
        return

    def num(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0

    stall_cols = [i for i, h in enumerate(hdr) if re.search(r"stall|Stall", h) and i not in (samp, nis)]
    tot = sum(num(r[samp]) for r in rows) or 1.0
    by = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        k = kind(r[src].strip())
        by[k][0] += num(r[samp])
        by[k][1] += num(r[nis]) if nis is not None else 0
        by[k][2] += 1
    print(f"total samples {tot:.0f}; by instruction kind (all samples %, not-issued %, #instr):")
    for k, (a, b, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:22]:
        print(f"  {k:26s} {100 * a / tot:6.2f}% {100 * b / tot:6.2f}%  {n}")
    print(f"top {top} instructions (samples %, then the largest stall-reason columns):")
    for r in sorted(rows, key=lambda r: -num(r[samp]))[:top]:
        reasons = sorted(((num(r[i]), hdr[i]) for i in stall_cols), reverse=True)[:3]
        rs = ", ".join(f"{h.replace('Warp Stall Sampling', '').strip()[:28]}={v:.0f}" for v, h in reasons if v > 0)
        print(f"  {r[addr] if addr is not None else '':>8s} {100 * num(r[samp]) / tot:5.2f}%  "
              f"{r[src].strip()[:70]:70s} {rs}")


if __name__ == "__main__":
    main()
