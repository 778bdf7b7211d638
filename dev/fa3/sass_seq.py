#!/usr/bin/env python3
"""sass_seq.py - compress the SASS of a cubin (nvdisasm -c output on stdin) into the
sequence of events that matter for the wgmma pipeline: HGMMA runs, WARPGROUP.ARRIVE/DEPBAR,
MUFU.EX2 runs, SHFL, BAR, SYNCS (mbarrier), labels/branches. Usage: nvdisasm -c x.cubin | sass_seq.py"""
import re, sys
out, last, cnt = [], None, 0
for line in sys.stdin:
    m = re.search(r"/\*[0-9a-f]+\*/\s+(.*?);", line)
    if line.startswith(".L_x"):
        tok = line.strip()
    elif m:
        ins = m.group(1).strip()
        op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
        if op.startswith("HGMMA"):
            tok = "HGMMA" + (".RS" if "tnspB" in ins else ".SS")
        elif op.startswith("WARPGROUP"):
            tok = ins.replace("WARPGROUP.", "WG.")
        elif op == "MUFU.EX2":
            tok = "EX2"
        elif op.startswith("SHFL"):
            tok = "SHFL"
        elif op.startswith("BAR") or op.startswith("SYNCS") or op.startswith("UTMALDG") or op.startswith("BRA") or op.startswith("EXIT") or op.startswith("USETMAXREG"):
            tok = op
        elif op in ("LDL", "STL") or op.startswith("LDL") or op.startswith("STL"):
            tok = "LOCAL!" + op
        else:
            continue
    else:
        continue
    if tok == last:
        cnt += 1
    else:
        if last is not None:
            out.append(last + (f"x{cnt}" if cnt > 1 else ""))
        last, cnt = tok, 1
out.append(last + (f"x{cnt}" if cnt > 1 else ""))
print(" ".join(out))
