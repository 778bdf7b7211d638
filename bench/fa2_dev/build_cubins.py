#!/usr/bin/env python3
"""build_cubins.py - compile the sm_90 cubins the GPU harness (run_gpu.py) needs, here,
with NVRTC (nvrtc_build), into bench/fa2_dev/cubins/ plus manifest.json.

  check: the default config (fa2_config.c) of each head_dim in CHECK_HD x dtype x mask
  alt:   ALT for each head_dim > 128 in CHECK_HD x dtype x mask (checked like the defaults)
  bench: candidate tiles for bf16, head_dim 256/192, mask none/causal (a short check)
  perf:  measurement-only variants (timed, never checked)
Usage: python3 build_cubins.py [-j N]
"""
import json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cubins")
ARCH = "sm_90"
CHECK_HD = [8, 16, 24, 32, 40, 48, 56, 64, 72, 96, 104, 112, 120, 128, 136, 152, 160, 184, 192, 200, 224,
            256]
U, S0, E0 = "-DFA2_QK_UNROLL=", "-DFA2_RESCALE_SLACK=0.0f", "-DFA2_EARLY_K=0"
SP0 = "-DFA2_SPLIT=0"
BENCH = {  # hd: [(bm, bn, warps, stages, extra)]: extra tiles to time next to the defaults
    # (runs 1 and 2 timed 128x64, 128x32, 64x64 and 8-warp tiles and the knobs; see README)
    256: [(64, 64, 4, 1, SP0), (64, 64, 4, 1, "-DFA2_P_STORE_LATE=0"), (128, 64, 8, 2, ""),
          (128, 64, 8, 1, ""), (64, 64, 4, 1, "-DFA2_NO_KV_LOAD=1")],
    192: [(64, 64, 4, 1, SP0)],
}
PERF_ONLY = ("NO_KV_LOAD",)  # knobs that give wrong results: timed, never checked
ALT = (128, 64, 8, 2)  # a tile checked fully for every head_dim > 128 (role "alt")


def default_cfg(hd, mask):
    o = subprocess.check_output([os.path.join(HERE, "cfgtool"), "default", "90", str(hd), str(mask)])
    bm, bn, w, s, smem = map(int, o.split())
    assert smem == smem_bytes(hd, bm, bn, s, w), (hd, mask, smem)
    return bm, bn, w, s


def smem_bytes(hd, bm, bn, s, w):  # fj_fa2_smem_bytes
    dp = (hd + 15) // 16 * 16
    split = dp > 128 and dp % 32 == 0 and bm == 16 * w and w % 2 == 0 and bn % 32 == 0
    return (bm + 2 * s * bn) * (((hd + 15) // 16 * 2) | 1) * 16 + (w * 32 * (bn // 16 + 1) * 16 if split else 0)


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
                smem=smem_bytes(hd, bm, bn, s, w), regs=int(info.get("regs", -1)),
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
    for dt in (0, 1):  # alternative default for head_dim > 128 on sm_90, fully checked
        for hd in CHECK_HD:
            for mask in (0, 1, 2):
                if hd > 128:
                    variants.setdefault((dt, hd, mask) + ALT + ("",), "alt")
    for hd, cands in BENCH.items():
        for mask in (0, 1):
            if hd not in CHECK_HD:  # its default, timed as the first candidate
                variants.setdefault((1, hd, mask) + default_cfg(hd, mask) + ("",), "bench")
            for c in cands:
                variants.setdefault((1, hd, mask) + c,
                                    "perf" if any(k in c[4] for k in PERF_ONLY) else "bench")
    with ThreadPoolExecutor(jobs) as ex:
        res = list(ex.map(build, variants.keys()))
    for r, role in zip(res, variants.values()):
        r["role"] = role
        if not r["ok"] or r["spill"] != 0 or r["regs"] > 255:
            print("WARN", r)
    json.dump(res, open(os.path.join(OUT, "manifest.json"), "w"), indent=0)
    print(len(res), "cubins;", sum(r["ok"] for r in res), "ok")


if __name__ == "__main__":
    main()
