#!/usr/bin/env python3
"""compile_check.py - compile attn_decode.cu with NVRTC (as src/jit/nvrtc.c does) for a matrix of
configs x targets and print a table: registers, spill bytes, stack frame, static smem, the
dynamic smem of the formula in the file's opening comment, and LDL/STL counts in the SASS.

usage: dev/decode/compile_check.py [--quick] [--fp8] [--jobs N] [--out table.md]
--fp8: FP8 K/V (FJ_KV_FP8 1 e4m3 and 2 e5m2; rows tagged) over the FP8 list below (with
--quick: the quick list's cp.async configs). --arch sm_XX (repeatable): only those targets.
Builds dev/decode/nvrtc_cc.c into $TMPDIR (needs /usr/local/cuda/{include,lib64}). LDL/STL
counts need nvdisasm: $NVDISASM, PATH, $CUDA_HOME/bin or a pip wheel's.
No GPU needed: compile checks only.
"""
import argparse, os, re, shutil, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(ROOT, "src", "kernels_src")
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
TMP = tempfile.mkdtemp(prefix="fj_decode_cc_")
TOOL = os.path.join(TMP, "nvrtc_cc")
ARCHS = ["sm_80", "sm_86", "sm_90a", "sm_100a"]

# (name, hd, bn, stages, wm, wn, checked): the recommended defaults and their neighbours
CONFIGS = [
    # decode, q_len*G <= 16
    ("dec", 64, 64, 4, 1, 4, 0),
    ("dec", 128, 64, 3, 1, 4, 0),
    ("dec", 128, 64, 4, 1, 4, 0),
    ("dec", 128, 128, 2, 1, 4, 0),   # not recommended: 4 B spill on sm_100a
    ("dec", 128, 64, 2, 1, 4, 0),
    ("dec", 256, 32, 2, 1, 2, 0),
    ("dec", 256, 32, 3, 1, 2, 0),
    ("dec", 256, 64, 2, 1, 4, 0),
    ("dec", 96, 64, 3, 1, 4, 0),
    ("dec", 80, 64, 3, 1, 4, 0),
    ("dec", 72, 64, 3, 1, 4, 0),
    ("dec+chk", 128, 64, 3, 1, 4, 1),
    # speculative, q_len*G <= 32
    ("spec", 128, 64, 3, 2, 2, 0),
    ("spec", 256, 32, 3, 2, 1, 0),   # not recommended: spills on sm_100a
    ("spec", 256, 32, 3, 2, 2, 0),
    # chunked prefill
    ("prefill", 64, 64, 3, 4, 1, 0),
    ("prefill", 128, 64, 3, 4, 1, 0),
    ("prefill", 128, 64, 2, 4, 1, 0),
    ("prefill", 256, 32, 3, 4, 1, 0),  # not recommended: spills on sm_100a
    ("prefill", 256, 16, 4, 4, 1, 0),
    ("prefill", 256, 32, 3, 2, 2, 0),
    ("prefill+chk", 128, 64, 3, 4, 1, 1),
    # TMA loads (FJ_DEC_TMA 1, sm_90a and sm_100a only; head_dim a multiple of 64)
    ("dec+tma", 64, 64, 4, 1, 4, 0),
    ("dec+tma", 128, 64, 3, 1, 4, 0),
    ("dec+tma", 128, 64, 5, 1, 4, 0),
    ("dec+tma", 256, 32, 3, 1, 2, 0),
    ("dec+tma+chk", 128, 64, 3, 1, 4, 1),
    ("spec+tma", 128, 64, 3, 2, 2, 0),
    ("prefill+tma", 128, 64, 3, 4, 1, 0),
    ("dec", 128, 64, 5, 1, 4, 0),
    # the sm_90 latency-bound defaults (session 18)
    ("dec", 128, 128, 2, 1, 8, 0),
    ("dec+chk", 128, 128, 2, 1, 8, 1),
    ("spec", 128, 64, 2, 2, 2, 0),
    ("dec", 96, 128, 2, 1, 8, 0),
    ("dec", 80, 128, 2, 1, 8, 0),
]
QUICK = [c for c in CONFIGS if c in (("dec", 128, 64, 3, 1, 4, 0), ("dec", 256, 32, 3, 1, 2, 0),
                                    ("spec", 128, 64, 3, 2, 2, 0), ("prefill", 128, 64, 3, 4, 1, 0),
                                    ("dec+tma", 128, 64, 3, 1, 4, 0))]
NEW18 = CONFIGS[-5:]
# FP8 K/V (--fp8): the tiles its problems get (decode.c: cp.async, one KV head per CTA)
FP8 = [c for c in CONFIGS if c in (("dec", 64, 64, 4, 1, 4, 0), ("dec", 128, 64, 3, 1, 4, 0),
                                  ("dec", 256, 32, 3, 1, 2, 0), ("dec", 96, 64, 3, 1, 4, 0),
                                  ("spec", 128, 64, 3, 2, 2, 0), ("prefill", 128, 64, 3, 4, 1, 0),
                                  ("dec", 128, 128, 2, 1, 8, 0))] + [("dec", 128, 128, 3, 1, 8, 0)]


def smem_formula(hd, bn, st, wm, wn):
    dp = (hd + 15) // 16 * 16
    ldb = 2 * dp if dp % 64 == 0 else 2 * dp + 16
    main = 16 * wm * ldb + 2 * st * bn * ldb
    red = wm * wn * 16 * (dp + 8) * 4 + wm * wn * 16 * 8
    return max(main, red)


def build_tool():
    subprocess.check_call(["cc", "-O1", "-o", TOOL, os.path.join(ROOT, "dev", "decode", "nvrtc_cc.c"),
                           "-I" + CUDA + "/include", "-L" + CUDA + "/lib64", "-lnvrtc",
                           "-Wl,-rpath," + CUDA + "/lib64"])


def nvdisasm():
    for c in [os.environ.get("NVDISASM"), shutil.which("nvdisasm"), CUDA + "/bin/nvdisasm"]:
        if c and os.path.exists(c):
            return c
    try:
        import nvidia  # pip nvidia-cuda-nvdisasm
        for d in nvidia.__path__:
            for sub in ("cu13/bin/nvdisasm", "cuda_nvdisasm/bin/nvdisasm"):
                if os.path.exists(os.path.join(d, sub)):
                    return os.path.join(d, sub)
    except ImportError:
        pass
    return None


def parse(log):
    """per entry function: regs, spill stores, spill loads, stack, static smem"""
    out, cur = {}, None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            cur = m.group(1)
            out[cur] = {}
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            out[cur].update(stack=int(m.group(1)), sst=int(m.group(2)), sld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out[cur]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            out[cur]["smem"] = int(s.group(1)) if s else 0
    return out


def local_ops(cubin, nd):
    if not nd or not os.path.exists(cubin):
        return {}
    sass = subprocess.run([nd, cubin], capture_output=True, text=True).stdout
    res, cur = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", line)
        if m:
            cur = m.group(1)
            res[cur] = 0
        elif cur and re.search(r"\b(LDL|STL)\b", line):
            res[cur] += 1
    return res


def one(cfg, arch, nd, dt=1, kv8=0):
    name, hd, bn, st, wm, wn, chk = cfg
    pre = ("#define FJ_DTYPE %d\n#define FJ_HEAD_DIM %d\n#define FJ_DEC_BN %d\n#define FJ_DEC_STAGES %d\n"
           "#define FJ_DEC_WM %d\n#define FJ_DEC_WN %d\n#define FJ_DEC_CHECKED %d\n" % (dt, hd, bn, st, wm, wn, chk))
    if "tma" in name:
        pre += "#define FJ_DEC_TMA 1\n"
    if kv8:
        pre += "#define FJ_KV_FP8 %d\n" % kv8
    cubin = os.path.join(TMP, "%s_%d_%d_%d_%d_%d_%d_%d_%d_%s.cubin" % (name, dt, kv8, hd, bn, st, wm, wn, chk, arch))
    r = subprocess.run(["nice", TOOL, arch, os.path.join(SRC, "attn_decode.cu"), SRC, pre, cubin],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return cfg, arch, None, r.stdout + r.stderr
    return cfg, arch, (parse(r.stdout), local_ops(cubin, nd)), r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--new18", action="store_true", help="only the sm_90 latency-bound defaults of session 18")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--f16", action="store_true", help="also FJ_DTYPE f16 (rows tagged f16; default bf16 only)")
    ap.add_argument("--fp8", action="store_true", help="FP8 K/V (e4m3, e5m2) in place of 16-bit, cp.async configs")
    ap.add_argument("--arch", action="append", help="only these targets (repeatable)")
    a = ap.parse_args()
    build_tool()
    nd = nvdisasm()
    cfgs = NEW18 if a.new18 else QUICK if a.quick else CONFIGS
    dts = [1, 0] if a.f16 else [1]
    kv8s = [1, 2] if a.fp8 else [0]
    archs = a.arch or ARCHS
    if a.fp8:   # (FP8 K/V: cp.async loads, head dims of 16-byte rows)
        cfgs = [c for c in (cfgs if a.quick else FP8) if "tma" not in c[0] and c[1] % 16 == 0]
    jobs = [(c, arch, dt, k8) for dt in dts for k8 in kv8s for c in cfgs for arch in archs
            if "tma" not in c[0] or arch in ("sm_90a", "sm_100a")]
    with ThreadPoolExecutor(a.jobs) as ex:
        res = list(ex.map(lambda j: one(j[0], j[1], nd, j[2], j[3]), jobs))
    lines = ["| config (hd bn stages wm wn chk) | target | kernel | regs | spill st/ld | stack | LDL/STL | dyn smem |",
             "|---|---|---|---|---|---|---|---|"]
    bad = 0
    for (cfg, arch, r, log), job in zip(res, jobs):
        name, hd, bn, st, wm, wn, chk = cfg
        tag = "%s%s%s %d %d %d %d %d %d" % (name, "" if job[2] else " f16",
                                         ["", " e4m3", " e5m2"][job[3]], hd, bn, st, wm, wn, chk)
        if r is None:
            lines.append("| %s | %s | COMPILE ERROR | | | | | |" % (tag, arch))
            print(log, file=sys.stderr)
            bad += 1
            continue
        props, loc = r
        for k in ("fj_attn_decode", "fj_attn_decode_combine"):
            if k not in props:   # (a split-step unit holds the split step alone)
                continue
            pr = props.get(k, {})
            sm = smem_formula(hd, bn, st, wm, wn) if k == "fj_attn_decode" else 0
            if pr.get("sst", 1) or pr.get("sld", 1) or pr.get("stack", 1) or loc.get(k, 0):
                bad += 1
            lines.append("| %s | %s | %s | %s | %s/%s | %s | %s | %d |" % (
                tag, arch, "split" if k == "fj_attn_decode" else "combine", pr.get("regs"),
                pr.get("sst"), pr.get("sld"), pr.get("stack"), loc.get(k, "?"), sm))
    text = "\n".join(lines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")
    shutil.rmtree(TMP, ignore_errors=True)
    print("\n%d problem(s) (compile errors, spills, stack or local memory)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
