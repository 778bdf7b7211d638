#!/usr/bin/env python3
"""ncu_sum.py - summaries of Nsight Compute output for run_gpu.py prof (several kernels).

  python3 ncu_sum.py details FILE   key lines of `ncu -i R --page details` per kernel
  python3 ncu_sum.py source FILE [TOP]
      `ncu -i R --page source --csv --print-source sass` (one or more kernels): warp-stall
      samples by instruction kind (HMMA, LDSM, LDGSTS, barriers, ...) and the top lines.
"""
import csv, re, sys
from collections import defaultdict

KEYS = ("Duration", "Elapsed Cycles", "SM Busy", "Issue Slots Busy", "Executed Ipc Active",
        "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy", "Block Limit",
        "Memory Throughput", "L2 Hit Rate", "L1/TEX Hit Rate", "DRAM Throughput",
        "Max Bandwidth", "L2 Cache Throughput", "Mem Busy", "Warp Cycles Per Issued",
        "Executed Instructions", "No Eligible", "Eligible Warps", "Active Warps Per Scheduler",
        "Dynamic Shared Memory", "Bank Conflicts", "pipe_tensor", "hit_rate", "dram__bytes",
        "stalled", "Shared Memory", "Avg. Executed Instructions Per Scheduler")


def details(path):
    for line in open(path, errors="replace"):
        s = line.rstrip()
        if re.match(r"^\s*\S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", s) or s.startswith("  flash") or \
                s.startswith("  fj_attn"):
            print(s[:150])
        elif any(k in s for k in KEYS) and not s.strip().startswith(("WRN", "OPT", "INF")):
            print("   ", re.sub(r"\s{2,}", "  ", s.strip())[:140])


def kind(sass):
    t = sass.split()
    op = (t[1] if sass.startswith("@") and len(t) > 1 else t[0]) if t else ""
    for pat, k in (("HMMA", "HMMA"), ("LDSM", "ldmatrix"), ("LDGSTS", "cp.async (LDGSTS)"),
                   ("LDGDEPBAR", "cp.async commit"), ("DEPBAR", "cp.async wait (DEPBAR)"),
                   ("BAR.SYNC", "barrier sync"), ("BAR", "barrier other"), ("MUFU", "MUFU"),
                   ("STG", "global store"), ("LDG", "global load"), ("LDS", "shared load"),
                   ("STS", "shared store"), ("SHFL", "shuffle"), ("F2FP", "pack (F2FP)"),
                   ("FMNMX", "max"), ("FFMA", "FFMA"), ("FMUL", "FMUL"), ("FADD", "FADD"),
                   ("IMAD", "IMAD"), ("IADD", "IADD"), ("LEA", "LEA"), ("LOP", "LOP"),
                   ("MOV", "MOV"), ("BRA", "branch"), ("VOTE", "vote"), ("ISETP", "ISETP"),
                   ("FSETP", "FSETP"), ("SEL", "SEL"), ("FSEL", "FSEL")):
        if op.startswith(pat):
            return k
    return "other (" + op.split(".")[0] + ")"


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def one(hdr, rows, top):
    src = next(i for i, h in enumerate(hdr) if h.strip() == "Source")
    addr = next((i for i, h in enumerate(hdr) if h.strip() == "Address"), None)
    samp = next((i for i, h in enumerate(hdr) if "Sampling (All" in h), None)
    nis = next((i for i, h in enumerate(hdr) if "Sampling (Not" in h), None)
    ex = next((i for i, h in enumerate(hdr) if h.strip() == "Instructions Executed"), None)
    if samp is None:
        print("no sampling column; columns:", " | ".join(hdr)[:600])
        return
    stall_cols = [i for i, h in enumerate(hdr) if re.search(r"stall|Stall", h) and i not in (samp, nis)]
    tot = sum(num(r[samp]) for r in rows) or 1.0
    tex = sum(num(r[ex]) for r in rows) if ex is not None else 0
    by = defaultdict(lambda: [0.0, 0.0, 0, 0.0])
    reason = defaultdict(float)
    for r in rows:
        k = kind(r[src].strip())
        by[k][0] += num(r[samp])
        by[k][1] += num(r[nis]) if nis is not None else 0
        by[k][2] += 1
        by[k][3] += num(r[ex]) if ex is not None else 0
        for i in stall_cols:
            reason[hdr[i]] += num(r[i])
    print(f"{len(rows)} SASS lines, {tot:.0f} samples, {tex:.4g} warp instructions executed")
    print("stall reasons (% of samples):", ", ".join(
        f"{h.replace('Warp Stall Sampling', '').replace('(All Samples)', '').strip()[:26]}={100 * v / tot:.1f}"
        for h, v in sorted(reason.items(), key=lambda kv: -kv[1])[:14] if v > 0))
    print("by kind: samples %, not-issued %, #SASS, executed %:")
    for k, (a, b, n, e) in sorted(by.items(), key=lambda kv: -kv[1][0])[:20]:
        print(f"  {k:26s} {100 * a / tot:6.2f}% {100 * b / tot:6.2f}%  {n:5d}  {100 * e / (tex or 1):6.2f}%")
    print(f"top {top} instructions (samples %, largest stall columns):")
    for r in sorted(rows, key=lambda r: -num(r[samp]))[:top]:
        rs = sorted(((num(r[i]), hdr[i]) for i in stall_cols), reverse=True)[:3]
        rs = ", ".join(f"{h.replace('Warp Stall Sampling', '').strip()[:24]}={v:.0f}" for v, h in rs if v > 0)
        print(f"  {r[addr] if addr is not None else '':>8s} {100 * num(r[samp]) / tot:5.2f}%  "
              f"{r[src].strip()[:64]:64s} {rs}")


def source(path, top):
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith('"') and '"Source"' in l]
    if not starts:
        print("no source table in", path)
        return
    for n, st in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        rows = list(csv.reader(lines[st:end]))
        hdr = rows[0]
        rows = [r for r in rows[1:] if len(r) == len(hdr)]
        print(f"== kernel {n} (preceding line: {lines[st - 1][:100] if st else ''})")
        one(hdr, rows, top)


if __name__ == "__main__":
    if sys.argv[1] == "details":
        details(sys.argv[2])
    else:
        source(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20)
