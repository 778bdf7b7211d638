#!/usr/bin/env python3
"""build_cubins.py - compile the sm_90 cubins the GPU harness (run_gpu.py) needs, here,
with NVRTC (nvrtc_build), into bench/fa2_dev/cubins/ plus manifest.json.

  check: the default config (fa2_config.c) of each head_dim in CHECK_HD x dtype x mask
  bench: candidate tiles for bf16, head_dim 64/128/256, mask none/causal
Usage: python3 build_cubins.py [-j N]
"""
import json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cubins")
ARCH = "sm_90"
CHECK_HD = [8, 16, 24, 32, 40, 48, 56, 64, 72, 96, 104, 112, 120, 128, 136, 160, 200, 256]
U, S0, E0 = "-DFA2_QK_UNROLL=", "-DFA2_RESCALE_SLACK=0.0f", "-DFA2_EARLY_K=0"
BENCH = {  # hd: [(bm, bn, warps, stages, extra)]: extra tiles to time next to the defaults
    # (runs 1 and 2 timed 128x64, 128x32, 64x64 and 8-warp tiles and the knobs; see README)
}


def default_cfg(hd, mask):
    o = subprocess.check_output([os.path.join(HERE, "cfgtool"), "default", "90", str(hd), str(mask)])
    bm, bn, w, s, smem = map(int, o.split())
    return bm, bn, w, s


def smem_bytes(hd, bm, bn, s):
    return (bm + 2 * s * bn) * (((hd + 15) // 16 * 2) | 1) * 16


def build(v):
    dt, hd, mask, bm, bn, w, s, extra = v
    tag = extra.replace("-DFA2_", "").replace("=", "").replace(".0f", "")
    name = f"d{dt}_h{hd}_m{mask}_{bm}x{bn}w{w}s{s}{'_' + tag if tag else ''}.cubin"
    env = dict(os.environ, FA2_EXTRA=extra)
    line = subprocess.run([os.path.join(HERE, "nvrtc_build"), os.path.join(HERE, "src_stage"), ARCH,
                           str(dt), str(hd), str(mask), str(bm), str(bn), str(w), str(s),
                           os.path.join(OUT, name)], capture_output=True, text=True, env=env)
    info = dict(kv.split("=") for kv in line.stdout.split() if "=" in kv)
    return dict(file=name, dtype=dt, hd=hd, mask=mask, bm=bm, bn=bn, warps=w, stages=s, extra=extra,
                smem=smem_bytes(hd, bm, bn, s), regs=int(info.get("regs", -1)),
                spill=int(info.get("spill_st", -1)), ok=line.returncode == 0)


def main():
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else os.cpu_count()
    subprocess.check_call([os.path.join(HERE, "stage.sh")])
    os.makedirs(OUT, exist_ok=True)
    variants = {}
    for dt in (0, 1):
        for hd in CHECK_HD:
            for mask in (0, 1, 2):
                variants[(dt, hd, mask) + default_cfg(hd, mask) + ("",)] = "check"
    for hd, cands in BENCH.items():
        for mask in (0, 1):
            for c in cands:
                variants.setdefault((1, hd, mask) + c, "bench")
    with ThreadPoolExecutor(jobs) as ex:
        res = list(ex.map(build, variants.keys()))
    for r, role in zip(res, variants.values()):
        r["role"] = role
        if not r["ok"] or r["spill"] != 0:
            print("WARN", r)
    json.dump(res, open(os.path.join(OUT, "manifest.json"), "w"), indent=0)
    print(len(res), "cubins;", sum(r["ok"] for r in res), "ok")


if __name__ == "__main__":
    main()
