#!/usr/bin/env python3
"""build_cubins.py - compile the sm_90 cubins the GPU harness (run_gpu.py) needs, here,
with NVRTC (nvrtc_build), into dev/fa2/cubins/ plus manifest.json.

  check: the default config (fa2_config.c) of each head_dim in CHECK_HD x dtype x mask
  alt:   ALT for each head_dim > 128 in CHECK_HD x dtype x mask (checked like the defaults)
  bench: candidate tiles for bf16, head_dim 256/128, mask none/causal (a short check); extra
         OLD builds the committed kernel (git HEAD) for an old-vs-new A/B in the same call
  perf:  measurement-only variants (timed, never checked)
Usage: python3 build_cubins.py [-j N] [--only-bench]
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
OLD = "-DFA2_OLD"  # extra of a variant built from git HEAD's kernel (src_old/): old vs new
BENCH = {  # hd: [(bm, bn, warps, stages, extra)]: extra tiles to time next to the defaults
    # (runs 1 and 2 timed 128x64, 128x32, 64x64 and 8-warp tiles and the knobs; see README)
    # (session 5, results/h200_run5b_*: swizzle A/B -DFA2_SWIZZLE=0, SPLIT=0, hd128 SWIZZLE=2)
    # (session 5 final, results/h200_run5c_*: hd256 OLD = padded rows, SWZ_WHOLE=0)
    # (session 5, head_dim <= 128: OLD = git HEAD's kernel, padded rows at 64/128; the other
    #  stage count swizzled next to the default)
    64: [(128, 128, 4, 1, OLD)],
    128: [(128, 64, 4, 1, OLD), (128, 64, 4, 2, OLD), (128, 64, 4, 1, ""), (128, 64, 4, 2, "")],
}
PERF_ONLY = ("NO_KV_LOAD",)  # knobs that give wrong results: timed, never checked
ALT = (128, 64, 8, 2)  # a tile checked fully for every head_dim > 128 (role "alt")


def default_cfg(hd, mask):
    o = subprocess.check_output([os.path.join(HERE, "cfgtool"), "default", "90", str(hd), str(mask)])
    bm, bn, w, s, smem = map(int, o.split())
    assert smem == smem_bytes(hd, bm, bn, s, w), (hd, mask, smem)
    return bm, bn, w, s


def smem_bytes(hd, bm, bn, s, w, extra=""):  # fj_fa2_smem_bytes (knobs in extra: A/B only)
    dp = (hd + 15) // 16 * 16
    split = (dp > 128 and dp % 32 == 0 and bm == 16 * w and w % 2 == 0 and bn % 32 == 0
             and "SPLIT=0" not in extra)
    small = dp == 128 and s == 1 and "SWZ_SMALL=0" not in extra  # FA2_SWZ_SMALL
    swz = (dp % 64 == 0 and (dp > 128 or "SWIZZLE=2" in extra or small)
           and (not split or dp % 128 == 0) and "SWIZZLE=0" not in extra)
    row = dp * 2 if swz else ((dp // 8) | 1) * 16
    return ((bm + 2 * s * bn) * row + (w * 32 * (bn // 16 + 1) * 16 if split else 0)
            + (w * 32 * 4 if swz else 0))


def build(v):
    dt, hd, mask, bm, bn, w, s, extra = v
    tag = extra.replace("-DFA2_", "").replace("=", "").replace(".0f", "")
    name = f"d{dt}_h{hd}_m{mask}_{bm}x{bn}w{w}s{s}{'_' + tag if tag else ''}.cubin"
    old = extra == OLD  # the committed kernel (src_old/, git HEAD), for same-call A/B
    env = dict(os.environ, FA2_EXTRA="" if old else extra)
    src = os.path.join(HERE, "src_old" if old else "src_stage")
    line = subprocess.run([os.path.join(HERE, "nvrtc_build"), src, ARCH,
                           str(dt), str(hd), str(mask), str(bm), str(bn), str(w), str(s),
                           os.path.join(OUT, name)], capture_output=True, text=True, env=env)
    info = dict(kv.split("=") for kv in line.stdout.split() if "=" in kv)
    return dict(file=name, dtype=dt, hd=hd, mask=mask, bm=bm, bn=bn, warps=w, stages=s, extra=extra,
                smem=smem_bytes(hd, bm, bn, s, w, "SWIZZLE=0" if old else extra), regs=int(info.get("regs", -1)),
                spill=int(info.get("spill_st", -1)), ok=line.returncode == 0)


def main():
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else os.cpu_count()
    subprocess.check_call([os.path.join(HERE, "stage.sh")])
    old = os.path.join(HERE, "src_old")
    os.makedirs(old, exist_ok=True)
    for f in ("attn_fwd_sm80.cu", "fj_common.cuh", "fajit_params.h"):
        with open(os.path.join(old, f), "wb") as fh:
            fh.write(subprocess.check_output(["git", "show", "HEAD:src/kernels_src/" + f], cwd=HERE))
    os.makedirs(OUT, exist_ok=True)
    variants = {}
    only_bench = "--only-bench" in sys.argv  # just the bench/perf set (no check cubins)
    for dt in () if only_bench else (0, 1):
        for hd in CHECK_HD:
            for mask in (0, 1, 2):
                variants[(dt, hd, mask) + default_cfg(hd, mask) + ("",)] = "check"
    for dt in () if only_bench else (0, 1):  # alternative default for head_dim > 128 on sm_90, fully checked
        for hd in CHECK_HD:
            for mask in (0, 1, 2):
                if hd > 128:
                    variants.setdefault((dt, hd, mask) + ALT + ("",), "alt")
    for hd, cands in BENCH.items():
        for mask in (0, 1):
            if hd not in CHECK_HD or only_bench:  # its default, timed as the first candidate
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
