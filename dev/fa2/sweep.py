#!/usr/bin/env python3
"""sweep.py - compile the default config of every head_dim (8..256 step 8) x dtype x mask
for each target with NVRTC and report registers, spills and stack (no GPU needed).
Usage: python3 sweep.py [archs...]   (default: sm_80 sm_86 sm_89 sm_90 sm_100 sm_120)"""
import os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def one(v):
    arch, dt, hd, mask = v
    sm = arch[3:]
    bm, bn, w, s, _ = subprocess.check_output([os.path.join(HERE, "cfgtool"), "default", sm, str(hd),
                                               str(mask)]).split()
    r = subprocess.run([os.path.join(HERE, "nvrtc_build"), os.path.join(HERE, "src_stage"), arch, str(dt),
                        str(hd), str(mask), bm, bn, w, s, "-"], capture_output=True, text=True)
    info = dict(kv.split("=") for kv in r.stdout.split() if "=" in kv)
    return (arch, dt, hd, mask, f"{bm.decode()}x{bn.decode()}w{w.decode()}s{s.decode()}", r.returncode,
            int(info.get("regs", -1)), int(info.get("spill_st", -1)), int(info.get("spill_ld", -1)),
            int(info.get("stack", -1)))


archs = sys.argv[1:] or ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
subprocess.check_call([os.path.join(HERE, "stage.sh")])
vs = [(a, dt, hd, m) for a in archs for dt in (0, 1) for hd in range(8, 257, 8) for m in (0, 1, 2)]
with ThreadPoolExecutor(os.cpu_count()) as ex:
    res = list(ex.map(one, vs))
bad = [r for r in res if r[5] != 0 or r[7] != 0 or r[8] != 0 or r[9] != 0 or r[6] > 255]
for r in res:
    print(*r)
print(f"# {len(res)} variants, {len(bad)} with failures/spills/stack")
for r in bad:
    print("# BAD", *r)
