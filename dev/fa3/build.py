#!/usr/bin/env python3
"""build.py - compile the sm_90a cubins the GPU harness (run_fa3.py) needs, here, with NVRTC
(nvrtc_build), into dev/fa3/cubins/ plus manifest.json, and check each compile log
(no spills, no local memory, no C75xx warnings) and its SASS (HGMMA present, no LDL/STL).

  check: fj_fa3_default of each (dtype, head_dim, mask) + diagnostic variants (FJ_FA3_HANG_TRAP=1)
  bench: candidate tiles for bf16, head_dim 64/128/256, mask none/causal
Usage: python3 build.py [-j N]      (needs ./nvrtc_build and ./libfa3cfg.so, see README)
"""
import ctypes, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
OUT = os.environ.get("FA3_CUBINS", os.path.join(HERE, "cubins"))  # FA3_CUBINS: another build (run_fa3.py reads it too)
STAGE = os.path.join(HERE, "src_stage")
NVDISASM = os.environ.get("NVDISASM", "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/bin/nvdisasm")
CHECK_HD = [64, 96, 128, 192, 256]


class Cfg(ctypes.Structure):
    _fields_ = [("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("overlap", ctypes.c_int),
                ("pingpong", ctypes.c_int), ("persistent", ctypes.c_int)]


lib = ctypes.CDLL(os.path.join(HERE, "libfa3cfg.so"))
lib.fj_fa3_default.restype = Cfg
lib.fj_fa3_smem_bytes.restype = ctypes.c_size_t


def smem(c, hd):
    return lib.fj_fa3_smem_bytes(ctypes.byref(c), hd)


def ok_cfg(c, hd):
    return check_cfg(c, hd)[0]


def check_cfg(c, hd):
    why = ctypes.create_string_buffer(256)
    return lib.fj_fa3_check(ctypes.byref(c), hd, 90, why, 256) == 0, why.value.decode()


def build(v):
    dt, hd, mask, bm, bn, ov, pp, ps, extra, role = v
    tag = "".join(f"_{k.replace('FJ_FA3_', '').lower()}{val}" for k, val in extra)
    name = f"d{dt}_h{hd}_m{mask}_{bm}x{bn}_o{ov}p{pp}s{ps}{tag}{'_t' if role == 'check' else ''}.cubin"
    # persistent 2: the dynamic tile schedule (FJ_FA3_SCHED 1), as fj_fa3_preamble writes it
    defs = [f"FJ_DTYPE={dt}", f"FJ_HEAD_DIM={hd}", f"FJ_MASK={mask}", f"FJ_BLOCK_M={bm}", f"FJ_BLOCK_N={bn}",
            f"FJ_FA3_OVERLAP={ov}", f"FJ_FA3_PINGPONG={pp}", f"FJ_FA3_PERSISTENT={int(ps != 0)}",
            f"FJ_FA3_SCHED={int(ps == 2)}",
            f"FJ_FA3_HANG_TRAP={1 if role == 'check' else 0}"]
    defs += [f"{k}={val}" for k, val in extra]
    if role == "check" and ps and dict(extra).get("FJ_FA3_CLUSTER") == 2:
        # the trap loops spill the persistent cluster producer's 24 registers (36-68 bytes): these
        # check builds are the bench code exactly, and a hang is caught by device.sh's timeout
        defs = [d for d in defs if not d.startswith("FJ_FA3_HANG_TRAP=")] + ["FJ_FA3_HANG_TRAP=0"]
    base = dict(extra).get("BASE", 0)  # the kernel of git HEAD before this work (results/*.run3.cu)
    defs = [d for d in defs if not d.startswith("BASE=")]
    path = os.path.join(OUT, name)
    r = subprocess.run([os.path.join(HERE, "nvrtc_build"), os.path.join(STAGE, "base") if base else STAGE,
                        "sm_90a", path] + defs,
                       capture_output=True, text=True)
    info = dict(kv.split("=", 1) for kv in r.stdout.split() if "=" in kv and not kv.startswith("FJ_"))
    rec = dict(file=name, dtype=dt, hd=hd, mask=mask, bm=bm, bn=bn, overlap=ov, pingpong=pp, persistent=ps,
               extra=dict(extra), role=role, ok=r.returncode == 0, regs=int(info.get("regs", -1)),
               spill=int(info.get("spill_st", -1)) + int(info.get("spill_ld", -1)),
               stack=int(info.get("stack", -1)), warn=info.get("warn", "?"), ms=float(info.get("ms", -1)),
               smem=smem(Cfg(bm, bn, ov, pp, ps), hd),  # HEAD (the BASE) reserves the same
               threads=128 * (bm // 64 + 1))
    if not rec["ok"]:
        rec["log"] = r.stderr[-2000:]
        return rec
    sass = subprocess.run([NVDISASM, "-c", path], capture_output=True, text=True).stdout
    rec["hgmma"] = sass.count("HGMMA")
    rec["local"] = sum(sass.count(x) for x in ("LDL", "STL"))
    rec["maxreg"] = max((int(t) for t in __import__("re").findall(r"\bR(\d+)\b", sass)), default=-1) + 1
    return rec


def main():
    jobs = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else os.cpu_count()
    os.makedirs(STAGE, exist_ok=True)
    for f in ("attn_fwd_sm90.cu", "fj_common.cuh", "fajit_params.h"):
        subprocess.check_call(["cp", os.path.join(ROOT, "src/kernels_src", f), STAGE])
    os.makedirs(os.path.join(STAGE, "base"), exist_ok=True)
    for f in ("fj_common.cuh", "fajit_params.h"):
        subprocess.check_call(["cp", os.path.join(ROOT, "src/kernels_src", f), os.path.join(STAGE, "base")])
    subprocess.check_call(["cp", os.path.join(HERE, "results/attn_fwd_sm90.run3.cu"),
                           os.path.join(STAGE, "base", "attn_fwd_sm90.cu")])
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    variants = []
    # every (dtype, head_dim, mask): the default tile without and with persistence, and (xt) the
    # tile that had two Q buffers for the cross-tile stream (FJ_FA3_XTILE, removed in session 10)
    xt = {64: (192, 128, 0), 96: (128, 128, 1), 128: (128, 128, 1), 192: (128, 80, 1), 256: (128, 64, 1)}
    for ps in (0, 1):
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    c = lib.fj_fa3_default(hd, mask, 0)
                    variants.append((dt, hd, mask, c.block_m, c.block_n, c.overlap, c.pingpong, ps, (), "check"))
                    if ps:
                        variants.append((dt, hd, mask, xt[hd][0], xt[hd][1], 1, xt[hd][2], 1, (), "check"))
    # diagnostic variants: serial schedule, no ping-pong, P V split per 64 columns, 3 consumers
    for mask in (0, 1):
        for ps in (0, 1):
            variants.append((1, 128, mask, 128, 128, 0, 0, ps, (), "check"))
            variants.append((1, 128, mask, 128, 128, 1, 0, ps, (), "check"))
            variants.append((1, 64, mask, 192, 128, 1, 0, ps, (), "check"))
        variants.append((1, 128, mask, 128, 128, 1, 1, 0, (("FJ_FA3_PV_SPLIT", 1),), "check"))
    variants.append((1, 96, 1, 128, 128, 1, 1, 0, (("FJ_FA3_PV_SPLIT", 1),), "check"))
    # bench (run 6, FA3_BENCH=all for the old wide set): per (head_dim, mask) the library
    # default, HEAD's kernel with HEAD's default (BASE: the before of the A/B), then the
    # candidates whose code changed, with the new macros set both ways
    head_default = {(64, 0): (192, 128, 1, 0, 1), (64, 1): (192, 128, 1, 0, 0), (128, 0): (128, 176, 1, 1, 1),
                    (128, 1): (128, 128, 1, 1, 0), (256, 0): (128, 80, 1, 1, 0), (256, 1): (128, 80, 1, 1, 0)}
    P128, P80 = (128, 128, 1, 1, 1), (128, 80, 1, 1, 1)
    O0, G0 = ("FJ_FA3_OSMEM", 0), ("FJ_FA3_L2GROUP", 0)  # (O0: removed with the cross-tile stream)
    bench = {(64, 1): [(P128, ()), (P128, (("BASE", 1),)), (P128, (G0,))],
             (128, 1): [(P128, ()), (P128, (("BASE", 1),)), (P128, (G0,))],
             (128, 0): [(P128, ())],
             (256, 1): [(P80, ()), (P80, (G0,))],
             (256, 0): []}
    if os.environ.get("FA3_BENCH") == "all":
        wide = {64: [(192, 128, 1, 0, 1), (192, 128, 1, 0, 0), (128, 128, 1, 1, 1), (128, 128, 1, 1, 0)],
                128: [(128, 128, 1, 1, 1), (128, 176, 1, 1, 1), (128, 176, 1, 1, 0), (128, 128, 1, 1, 0),
                      (128, 192, 1, 1, 0)],
                256: [(128, 64, 1, 1, 1), (128, 80, 1, 1, 1), (128, 80, 1, 1, 0)]}
        bench = {(hd, mask): [(c, ()) for c in cs] for hd, cs in wide.items() for mask in (0, 1)}
    for (hd, mask), cands in bench.items():
        d = lib.fj_fa3_default(hd, mask, 0)
        variants.append((1, hd, mask, d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent, (), "bench"))
        variants.append((1, hd, mask) + head_default[(hd, mask)] + ((("BASE", 1),), "bench"))
        for c, extra in cands:
            ok, why = check_cfg(Cfg(*c), hd)
            if ok:
                variants.append((1, hd, mask) + c + (extra, "bench"))
    # L2 groups forced on with a tiny budget, so the check cases cross group boundaries
    for hd, mask, c in ((128, 1, P128), (64, 2, P128), (256, 1, P80)):
        variants.append((1, hd, mask) + c + ((("FJ_FA3_L2GROUP", 2), ("FJ_FA3_L2_BYTES", 300000),
                                              ("FJ_FA3_L2_BYTES_SHORT", 300000)), "check"))
    def distinct_defaults(hd, mask, seqlens):
        """(seqlen, config tuple) of the library default for each length, once per config."""
        seen = []
        for sl in seqlens:
            d = lib.fj_fa3_default(hd, mask, sl)
            c = (d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent)
            if c not in seen:
                seen.append(c)
                yield sl, c

    if os.environ.get("FA3_SET") == "pf":
        # run 7 (short sequences, L2 prefetch cursor FJ_FA3_L2PF): per (head_dim, mask) the library
        # default for 512 and for 2k tokens, each without (= HEAD, SASS-identical) and with the
        # cursor; bench role only (checked with the short case set, plus "many" when persistent)
        variants = []
        for hd in (64, 128, 256):
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 2048)):
                    pfs = (0, 4) if (hd, mask) != (128, 0) or sl != 512 else (0, 2, 4, 8)
                    for pf in pfs:
                        variants.append((1, hd, mask) + c + (((("FJ_FA3_L2PF", pf),) if pf else ()), "bench"))
        # and the full check set of two shipped defaults with the cursor on
        for hd, mask, sl in ((128, 0, 512), (128, 1, 512)):
            d = lib.fj_fa3_default(hd, mask, sl)
            variants.append((1, hd, mask, d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent,
                             (("FJ_FA3_L2PF", 4),), "check"))
    if os.environ.get("FA3_SET") == "epi":
        # run 8: every check-role variant above (the defaults: O slot + fast epilogue math on),
        # and the A/B bench: per (head_dim, mask) each default for 512 and 2k tokens with the
        # new macros off (= HEAD, SASS-identical) and on, and the cross-tile stream unmasked
        off = (("FJ_FA3_OBUF", 0), ("FJ_FA3_FASTEPI", 0))
        variants = [v for v in variants if v[-1] == "check"]
        for hd in (64, 128, 256):
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 2048)):
                    ex = [off, (("FJ_FA3_OBUF", 0), ("FJ_FA3_FASTEPI", 1))]
                    slot = ((hd + 63) // 64) * 128 * (2 * c[0] + 4 * c[1]) + 1344 <= 227 * 1024
                    if c[4] and mask == 0 and slot:  # persistent without the stream: the O slot
                        ex += [(("FJ_FA3_OBUF", 1), ("FJ_FA3_FASTEPI", 0)), (("FJ_FA3_OBUF", 1), ("FJ_FA3_FASTEPI", 1))]
                    if (hd, mask, c) == (128, 0, (128, 128, 1, 1, 1)):
                        ex += [(("FJ_FA3_XTILE", 1), ("FJ_FA3_FASTEPI", 0)), (("FJ_FA3_XTILE", 1), ("FJ_FA3_FASTEPI", 1))]
                    for e in ex:
                        variants.append((1, hd, mask) + c + (e, "bench"))

    def dynamic_checks():
        """The dynamic schedule (persistent 2) for every (dtype, head_dim, mask), with the default
        tile and the two-Q-buffer tile; 192-row tiles with a mask spill one register there."""
        out = []
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    c = lib.fj_fa3_default(hd, mask, 0)
                    for bm, bn, pp in ((c.block_m, c.block_n, c.pingpong), xt[hd]):
                        if not (bm == 192 and mask):
                            out.append((dt, hd, mask, bm, bn, 1, pp, 2, (), "check"))
        return out

    if os.environ.get("FA3_SET") == "sched":
        # run 9: the dynamic tile schedule (persistent 2). Checks: every check-role variant above
        # (the static order's code moved too: fa3_sched) plus the dynamic schedule for every
        # (dtype, head_dim, mask) with the default tile and the two-Q-buffer tile. Bench, causal
        # hd 64/128/256: the library default, the non-persistent long default, the static
        # persistent and the dynamic one (L2 groups always, G2 = its default, and never, G0).
        variants = [v for v in variants if v[-1] == "check"] + dynamic_checks()
        for hd, mask, c in ((128, 1, P128), (64, 2, P128), (256, 1, P80)):  # groups crossed
            variants.append((1, hd, mask) + c[:4] + (2, (("FJ_FA3_L2_BYTES", 300000),
                                                         ("FJ_FA3_L2_BYTES_SHORT", 300000)), "check"))
        sets = {64: [(128, 128, 1, 1)], 128: [(128, 128, 1, 1), (128, 176, 1, 1)], 256: [(128, 80, 1, 1)]}
        for hd, tiles in sets.items():
            mask = 1
            for sl in (512, 2048):
                d = lib.fj_fa3_default(hd, mask, sl)
                variants.append((1, hd, mask, d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent, (), "bench"))
            for t in tiles:
                variants.append((1, hd, mask) + t + (1, (), "bench"))
                variants.append((1, hd, mask) + t + (2, (), "bench"))
                variants.append((1, hd, mask) + t + (2, (G0,), "bench"))
    def dynamic_of_defaults(dt, hd, mask):
        """check variants: the short- and long-class default tiles with the dynamic order"""
        return [(dt, hd, mask, c.block_m, c.block_n, 1, c.pingpong, 2, (), "check")
                for c in (lib.fj_fa3_default(hd, mask, sl) for sl in (512, 0))]

    def oq_x0_checks(xtile_hd64=False):
        """check variants of run 10's OQ (O through the Q buffer) and X0 (dynamic order without
        the cross-tile stream) configs, per mask; xtile_hd64: also hd64 128x128D with XTILE 1"""
        OQ, X0, X1 = ("FJ_FA3_OQ", 1), ("FJ_FA3_XTILE", 0), ("FJ_FA3_XTILE", 1)
        out = []
        for mask in (0, 1, 2):
            for ps in (1, 2):
                out.append((1, 256, mask, 128, 80, 1, 1, ps, (OQ,), "check"))
                out.append((1, 128, mask, 128, 176, 1, 1, ps, (OQ,), "check"))
                out.append((0, 192, mask, 128, 112, 1, 1, ps, (OQ,), "check"))
            out.append((1, 64, mask, 192, 128, 1, 0, 2, (X0,), "check"))
            out.append((1, 128, mask, 128, 128, 1, 1, 2, (X0,), "check"))
            if xtile_hd64:
                out.append((1, 64, mask, 128, 128, 1, 1, 2, (X1,), "check"))
        return out

    if os.environ.get("FA3_SET") == "oq":
        # run 10: checks as run 9 (sched) plus the new variants; bench: O staged in the tile's own
        # Q buffer in persistent kernels without an O slot (FJ_FA3_OQ: hd256 128x80, hd128 128x176)
        # and the dynamic order without the cross-tile stream (X0: one Q buffer + the O slot)
        variants = [v for v in variants if v[-1] == "check"] + dynamic_checks() + oq_x0_checks()
        OQ, X0 = ("FJ_FA3_OQ", 1), ("FJ_FA3_XTILE", 0)
        bench = [(64, 1, (192, 128, 1, 0, 0), ()), (64, 1, (128, 128, 1, 1, 2), ()),
                 (64, 1, (192, 128, 1, 0, 2), (X0,)), (64, 1, (128, 128, 1, 1, 2), (X0,)),
                 (128, 1, (128, 128, 1, 1, 2), ()), (128, 1, (128, 128, 1, 1, 0), ()),
                 (128, 1, (128, 128, 1, 1, 2), (X0,)),
                 (256, 1, (128, 80, 1, 1, 0), ()), (256, 1, (128, 80, 1, 1, 2), ()),
                 (256, 1, (128, 80, 1, 1, 2), (OQ,)),
                 (128, 0, (128, 128, 1, 1, 1), ()), (128, 0, (128, 176, 1, 1, 1), ()),
                 (128, 0, (128, 176, 1, 1, 1), (OQ,)),
                 (256, 0, (128, 80, 1, 1, 0), ()), (256, 0, (128, 80, 1, 1, 1), (OQ,))]
        for hd, mask, c, extra in bench:
            variants.append((1, hd, mask) + c + (extra, "bench"))
    if os.environ.get("FA3_SET") == "final":
        # run 11: the check set of run 10 with the new kernel defaults (no cross-tile stream for
        # the dynamic order at hd <= 64, O through the Q buffer for it at hd > 128), and the bench
        # of the library defaults (both length classes, causal and not) against the previous
        # causal defaults, plus a few causal tiles with the dynamic order
        variants = [v for v in variants if v[-1] == "check"]
        OQ, X0 = ("FJ_FA3_OQ", 1), ("FJ_FA3_XTILE", 0)
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    variants += dynamic_of_defaults(dt, hd, mask)
                    variants.append((dt, hd, mask, xt[hd][0], xt[hd][1], 1, xt[hd][2], 2, (), "check"))
        for mask in (0, 1, 2):
            for ps in (1, 2):
                variants.append((1, 256, mask, 128, 80, 1, 1, ps, (OQ,), "check"))
            variants.append((1, 128, mask, 128, 128, 1, 1, 2, (X0,), "check"))
            variants.append((1, 64, mask, 128, 128, 1, 1, 2, (("FJ_FA3_XTILE", 1),), "check"))
        for hd in (64, 128, 256):
            for mask in (0, 1):
                for sl in (512, 0):
                    d = lib.fj_fa3_default(hd, mask, sl)
                    variants.append((1, hd, mask, d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent, (), "bench"))
        for hd, c in ((64, (192, 128, 1, 0, 0)), (64, (128, 128, 1, 1, 1)), (64, (128, 96, 1, 1, 2)),
                      (64, (128, 176, 1, 1, 2)), (128, (128, 128, 1, 1, 0)), (128, (128, 64, 1, 1, 2)),
                      (128, (128, 96, 1, 1, 2)), (256, (128, 80, 1, 1, 0)), (256, (128, 64, 1, 1, 2))):
            variants.append((1, hd, 1) + c + ((), "bench"))
    if os.environ.get("FA3_SET") == "polyexp":
        # run 12: part of the softmax exponentials in software on the FMA pipe (FJ_FA3_POLYEXP n
        # of 16). Checks: the library default of every (dtype, head_dim, mask) and length class
        # with n = 4, and n = 16 (every exponential by the polynomial) for hd 64/128; bench: the
        # hd64 defaults (unmasked, causal of each length class) with n = 0/2/4/6, hd128 unmasked
        # defaults with n = 0/4
        variants = []
        PE = lambda n: ((("FJ_FA3_POLYEXP", n),) if n else ())
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    for sl in (512, 2048, 16384):
                        c = lib.fj_fa3_default(hd, mask, sl)
                        cc = (c.block_m, c.block_n, c.overlap, c.pingpong, c.persistent)
                        variants.append((dt, hd, mask) + cc + (PE(4), "check"))
                        if hd in (64, 128) and mask < 2:
                            variants.append((dt, hd, mask) + cc + (PE(16), "check"))
        for hd, mask, ns in ((64, 0, (0, 2, 4, 6)), (64, 1, (0, 2, 4, 6)), (128, 0, (0, 4))):
            for sl, cc in distinct_defaults(hd, mask, (512, 2048, 16384)):
                for n in ns:
                    variants.append((1, hd, mask) + cc + (PE(n), "bench"))
    if os.environ.get("FA3_SET") == "polyexp2":
        # run 52: FJ_FA3_POLYEXP again on today's kernel (lazy rescaling, uniform warpgroup index,
        # O slot...): the profile of run 52a has hd64 unmasked 192x128P at 8k with the XU pipe
        # (MUFU) 63.5% and the tensor pipe 61.5% busy, issue 50.7%, FMA pipe 18%. Checks: the hd64
        # defaults of every mask and length class with n = 4 and n = 16 (every exponential by
        # the polynomial, with lazy rescaling's P up to 2^8), bf16 + f16; bench: hd64 none
        # 192x128P n = 0/2/4, hd64 causal 128x128D and 192x128D n = 0/2, hd128 none 128x128P n =
        # 0/2 (PE_REV=1: each set in the other order)
        PE = lambda n: ((("FJ_FA3_POLYEXP", n),) if n else ())
        variants = []
        for dt in (1, 0):
            for mask in (0, 1, 2):
                for sl in (512, 2048, 16384):
                    c = lib.fj_fa3_default(64, mask, sl)
                    cc = (c.block_m, c.block_n, c.overlap, c.pingpong, c.persistent)
                    for n in (4, 16):
                        variants.append((dt, 64, mask) + cc + (PE(n), "check"))
        rev = os.environ.get("PE_REV") == "1"
        for hd, mask, cc, ns in ((64, 0, (192, 128, 1, 0, 1), (0, 2, 4)), (64, 1, (128, 128, 1, 1, 2), (0, 2)),
                                 (64, 1, (192, 128, 1, 0, 2), (0, 2)), (128, 0, (128, 128, 1, 1, 1), (0, 2))):
            for n in (ns[::-1] if rev else ns):
                variants.append((1, hd, mask) + cc + (PE(n), "bench"))

    if os.environ.get("FA3_SET") == "l2":
        # run 17: the L2 group size of the masked persistent order (FJ_FA3_L2_BYTES, default 32 MB
        # of K+V per group of heads): ncu (session 6) saw hd64 causal 512 read 225 MB from DRAM
        # where Q+K+V is 201 MB (cuDNN: 201). The dynamic-order causal defaults with 32/16/8 MB;
        # checks: the 16 and 8 MB variants (bf16, f16)
        variants = []
        L2 = lambda mb: ((("FJ_FA3_L2_BYTES", mb << 20),) if mb else ())
        for hd, sl in ((64, 512), (64, 2048), (128, 512), (256, 2048)):
            d = lib.fj_fa3_default(hd, 1, sl)
            cc = (d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent)
            for mb in (0, 16, 8):
                variants.append((1, hd, 1) + cc + (L2(mb), "bench"))
                if mb:
                    for dt in (1, 0):
                        variants.append((dt, hd, 1) + cc + (L2(mb), "check"))
    if os.environ.get("FA3_SET") == "l2b":
        # run 29: smaller L2 groups than run 17 for the dynamic order: 4 MB, 1 MB and 1 byte (one
        # head per group: a head's query blocks back to back, longest first, as CTAs claim them:
        # the K/V of a head shared through L2 by CTAs that run at the same time). Checks: 1 byte
        # and 1 MB (bf16, f16; causal and window); bench: the dynamic-order causal defaults
        variants = []
        L2 = lambda b: ((("FJ_FA3_L2_BYTES", b),) if b else ())
        for hd, sl in ((64, 512), (64, 2048), (128, 512), (256, 2048)):
            d = lib.fj_fa3_default(hd, 1, sl)
            cc = (d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent)
            for b in (0, 4 << 20, 1 << 20, 1):
                variants.append((1, hd, 1) + cc + (L2(b), "bench"))
                if b in (1, 1 << 20):
                    for dt in (1, 0):
                        for mask in (1, 2):
                            variants.append((dt, hd, mask) + cc + (L2(b), "check"))

    if os.environ.get("FA3_SET") == "l2short":
        # run 30: the dynamic order's 4 MB groups at <= 1k keys (FJ_FA3_L2_BYTES_SHORT, now the
        # kernel default) against 32 MB there (the kernel before it): the causal dynamic defaults
        # at 512..2k; checks: the defaults with it (bf16, f16; causal, window) and with tiny
        # groups both ways (group boundaries inside the check cases)
        variants = []
        for hd, sl in ((64, 512), (64, 2048), (128, 512), (256, 2048)):
            d = lib.fj_fa3_default(hd, 1, sl)
            cc = (d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent)
            variants += [(1, hd, 1) + cc + (x, "bench") for x in ((), (("FJ_FA3_L2_BYTES_SHORT", 32 << 20),))]
            for dt in (1, 0):
                for mask in (1, 2):
                    variants.append((dt, hd, mask) + cc + ((), "check"))
                    variants.append((dt, hd, mask) + cc + ((("FJ_FA3_L2_BYTES", 300000),
                                                            ("FJ_FA3_L2_BYTES_SHORT", 200000)), "check"))

    if os.environ.get("FA3_SET") == "l2long":
        # run 31: larger L2 groups (64 MB) and none at all (FJ_FA3_L2GROUP 0: longest first over
        # every head) for the dynamic order from 2k keys, against 32 MB: the long-class causal
        # dynamic defaults; checks: both (bf16, f16; causal, window)
        variants = []
        for hd, sl in ((64, 2048), (128, 2048), (256, 2048)):
            d = lib.fj_fa3_default(hd, 1, sl)
            cc = (d.block_m, d.block_n, d.overlap, d.pingpong, d.persistent)
            for x in ((), (("FJ_FA3_L2_BYTES", 64 << 20),), (("FJ_FA3_L2GROUP", 0),)):
                variants.append((1, hd, 1) + cc + (x, "bench"))
                if x:
                    variants += [(dt, hd, mask) + cc + (x, "check") for dt in (1, 0) for mask in (1, 2)]

    if os.environ.get("FA3_SET") == "endskip":
        # run 32: without a mask, a consumer warpgroup with no row inside the sequence skips every
        # block (FJ_FA3_ENDSKIP 1; 192-row tiles: every bench length leaves 64 or 128 rows in the
        # last query tile). Checks with it: hd 32/48/64 unmasked 192x128 and 192x96, grid and
        # static persistent, bf16 + f16; bench: hd64 unmasked 192x128P (the default) without /
        # with. Refuted and removed from the kernel (NOTES.md run 32)
        ES = lambda v: (("FJ_FA3_ENDSKIP", v),)
        variants = [(dt, hd, 0, 192, bn, 1, 0, ps, ES(1), "check")
                    for dt in (1, 0) for hd in (32, 48, 64) for bn in (128, 96) for ps in (0, 1)]
        variants += [(1, 64, 0, 192, 128, 1, 0, 1, ES(v), "bench") for v in (0, 1)]

    def cluster_ab(configs):
        """bf16 unmasked bench pairs, cluster 1 and 2, of (head_dim, (bm, bn, ov, pp, ps))"""
        return [(1, hd, 0) + c + (extra, "bench") for hd, c in configs
                for extra in ((), (("FJ_FA3_CLUSTER", 2),))]

    def cluster_checks():
        """cluster 2 checks: every (dtype, head_dim) unmasked default tile, grid and persistent"""
        out = []
        for dt in (1, 0):
            for hd in CHECK_HD:
                c = lib.fj_fa3_default(hd, 0, 0)
                for ps in (0, 1):
                    out.append((dt, hd, 0, c.block_m, c.block_n, 1, c.pingpong, ps, (("FJ_FA3_CLUSTER", 2),), "check"))
        return out

    if os.environ.get("FA3_SET") == "cluster":
        # run h3-1: clusters of two CTAs with K/V multicast (FJ_FA3_CLUSTER 2), unmasked, grid and
        # static persistent. Checks: every (dtype, head_dim) unmasked default tile both ways (hd 64
        # and 192: K from rank 0, V from rank 1; 96/128/256: the chunks split by parity) and
        # hd128 128x128 both ways. Cluster 1 is SASS-identical to HEAD for every bench variant
        # below (compared with nvdisasm before the run), so not re-checked. Bench: cluster 2 vs 1,
        # same tile and order: hd128 128x128 / 128x176, hd256 128x80, hd64 192x128 (persistent).
        variants = cluster_checks()
        variants += [(dt, 128, 0, 128, 128, 1, 1, ps, (("FJ_FA3_CLUSTER", 2),), "check")
                     for dt in (1, 0) for ps in (0, 1)]
        variants += cluster_ab(((128, (128, 128, 1, 1, 0)), (128, (128, 128, 1, 1, 1)),
                                (128, (128, 176, 1, 1, 0)), (128, (128, 176, 1, 1, 1)),
                                (256, (128, 80, 1, 1, 0)), (256, (128, 80, 1, 1, 1)),
                                (64, (192, 128, 1, 0, 1))))
    if os.environ.get("FA3_SET") == "cluster2":
        # run h3-2: the hd128 unmasked A/B of run h3-1 again with 5 rounds and 4k, plus 128x192
        # (fits with one Q buffer; run 1's best hd128 tile at 16k) and the hd256 unmasked default
        # (128x80 grid); bench role only (the kernel source is run h3-1's, whose
        # check set passed; the bench role still runs its short checks)
        variants = cluster_ab(((128, (128, 128, 1, 1, 0)), (128, (128, 128, 1, 1, 1)),
                               (128, (128, 176, 1, 1, 0)), (128, (128, 176, 1, 1, 1)),
                               (128, (128, 192, 1, 1, 0)), (128, (128, 192, 1, 1, 1)),
                               (256, (128, 80, 1, 1, 0))))
    if os.environ.get("FA3_SET") == "clpow":
        # run 51: FJ_FA3_CLUSTER 2 (K/V multicast: half the L2 -> SM traffic) again, now timed at
        # the power cap (FA3_REP_MS 300, as run 43's QREG), on the unmasked persistent defaults of
        # hd 64/128/256. Checks: every unmasked default tile with it (grid and persistent, bf16 +
        # f16); CL_REV=1: each pair in the other order
        variants = cluster_checks()
        pairs = cluster_ab(((64, (192, 128, 1, 0, 1)), (128, (128, 128, 1, 1, 1)), (256, (128, 80, 1, 1, 1))))
        if os.environ.get("CL_REV") == "1":
            pairs = [pairs[i ^ 1] for i in range(len(pairs))]
        variants += pairs

    if os.environ.get("FA3_SET") == "onesum":
        # run 13: the row sums on the tensor cores (FJ_FA3_ONESUM 1; the kernel part is not in the
        # tree: `git apply dev/fa3/results/onesum.patch` first, refuted in runs 13-14). Checks: the hd64 library
        # defaults of every length class and mask (bf16, f16) with it on, the serial schedule and
        # the P V split with it, and the hd128 unmasked long default; bench: the hd64 defaults
        # (unmasked; causal of each length class) and hd128 unmasked 128x176P, off / on
        variants = []
        U = lambda n: (("FJ_FA3_ONESUM", n),)
        for dt in (1, 0):
            for mask in (0, 1, 2):
                for sl, cc in distinct_defaults(64, mask, (512, 2048, 16384)):
                    variants.append((dt, 64, mask) + cc + (U(1), "check"))
            variants.append((dt, 128, 0, 128, 176, 1, 1, 1, U(1), "check"))
        variants.append((1, 64, 1, 192, 128, 0, 0, 0, U(1), "check"))  # serial schedule
        variants.append((1, 128, 1, 128, 128, 1, 1, 0, U(1) + (("FJ_FA3_PV_SPLIT", 1),), "check"))
        for hd, mask in ((64, 0), (64, 1)):
            for sl, cc in distinct_defaults(hd, mask, (512, 2048, 16384)):
                for n in (0, 1):
                    variants.append((1, hd, mask) + cc + (U(n), "bench"))
        for n in (0, 1):
            variants.append((1, 128, 0, 128, 176, 1, 1, 1, U(n), "bench"))
    if os.environ.get("FA3_SET") == "onesum2":
        # run 14: where run 13's time went. Bench, hd64 unmasked 192x128P and causal 192x128 D /
        # 128x128 D: ONESUM 0 / 1 / 2 (no row sums: the softmax saving alone, wrong output,
        # benched unchecked) / 3 (FADD sums + the n8 wgmmas: their cost alone), and 1 with the
        # n8 wgmmas after P V's (ORDER 1); checks: 3 and ORDER 1 of each
        variants = []
        U = lambda n: (("FJ_FA3_ONESUM", n),)
        R1 = U(1) + (("FJ_FA3_ONESUM_ORDER", 1),)
        for hd, mask, cc in ((64, 0, (192, 128, 1, 0, 1)), (64, 1, (192, 128, 1, 0, 2)), (64, 1, (128, 128, 1, 1, 2))):
            u3 = cc[0] == 128 or mask == 0  # (192x128 D with 3: 24 bytes of spill, not built)
            for dt in (1, 0):
                if u3:
                    variants.append((dt, hd, mask) + cc + (U(3), "check"))
                variants.append((dt, hd, mask) + cc + (R1, "check"))
            for e in ((U(0), U(1), U(2)) + ((U(3),) if u3 else ()) + (R1,)):
                variants.append((1, hd, mask) + cc + (e, "bench"))
    if os.environ.get("FA3_SET") == "ocopy":
        # run 15: the O copy by the producer warpgroup's idle warps (FJ_FA3_OCOPY 1). Checks: with
        # it on, every variant above and of the dynamic order / OQ / X0 sets where it takes effect
        # (a persistent kernel that stages O: the O slot, OQ, the cross-tile stream); bench: the
        # library defaults for 512/1k/2k/8k, each staging one without (A, = HEAD) and with it (B),
        # plus unmasked persistent hd256 128x80 and hd128 128x176 with O through the Q buffer (OQ)
        OC, OQ, X0 = ("FJ_FA3_OCOPY", 1), ("FJ_FA3_OQ", 1), ("FJ_FA3_XTILE", 0)

        def applies(v):
            """FA3_OCOPY of the kernel for variant v (the O slot / OQ / XTILE tests of the kernel)"""
            dt, hd, mask, bm, bn, ov, pp, ps, extra, role = v
            e = dict(extra)
            q2 = ((hd + 63) // 64) * 128 * (2 * bm + 4 * bn) + 1344 <= 227 * 1024
            xt = e.get("FJ_FA3_XTILE", -1)
            if xt < 0:
                xt = int(bool(ps and ov and mask and q2 and not (ps == 2 and hd <= 64)))
            oslot = e.get("FJ_FA3_OBUF", 1) and ps and not xt and q2
            oq = e.get("FJ_FA3_OQ", int(ps == 2 and hd > 128)) and ps and not xt and not oslot
            return bool(ps and ((xt and e.get("FJ_FA3_OSMEM", 1)) or oslot or oq))

        cands = [v for v in variants if v[-1] == "check"] + dynamic_checks()
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    cands += dynamic_of_defaults(dt, hd, mask)
        cands += oq_x0_checks(xtile_hd64=True)
        variants = []
        for v in dict.fromkeys(cands):
            if v[-1] == "check" and v[7] and applies(v):
                variants.append(v[:8] + (tuple(v[8]) + (OC,), "check"))
        for hd in (64, 128, 256):
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 1024, 2048, 8192)):
                    a = (1, hd, mask) + c + ((), "bench")
                    variants.append(a)
                    if applies(a):
                        variants.append((1, hd, mask) + c + ((OC,), "bench"))
        if os.environ.get("OCOPY_EXTRAS", "1") == "1":  # run 15 only (run 16: OCOPY_EXTRAS=0)
            variants.append((1, 256, 0, 128, 80, 1, 1, 1, (OQ,), "bench"))
            variants.append((1, 256, 0, 128, 80, 1, 1, 1, (OQ, OC), "bench"))
            variants.append((1, 128, 0, 128, 176, 1, 1, 1, (OQ, OC), "bench"))
        else:  # run 16: no unmasked variant that does not stage O (nothing to compare)
            variants = [v for v in variants if v[-1] == "check" or applies(v) or v[2] == 1]
    def defaults_of(masks):
        """(dt, hd, mask, bm, bn, ov, pp, ps) of the library default of every dtype x CHECK_HD x
        mask x length class, each (dt, hd, mask) followed by its dynamic-order variants"""
        out = []
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in masks:
                    for sl in (512, 2048, 16384):
                        c = lib.fj_fa3_default(hd, mask, sl)
                        out.append((dt, hd, mask, c.block_m, c.block_n, c.overlap, c.pingpong, c.persistent))
                    out += [v[:8] for v in dynamic_of_defaults(dt, hd, mask)]
        return out

    def ab_variants(knob, va, vb, checks):
        """one knob both ways on the library defaults: checks of every default of dtype x hd x mask
        x length class (and their dynamic-order variants, the diagnostic schedules) with vb (when
        checks); bench: the bf16 defaults of hd 64/128/256 none/causal for 512..16k with va and vb"""
        cands = [c + ((), "check") for c in defaults_of((0, 1, 2))]
        cands += [v for v in variants if v[-1] == "check" and v[8] == () and (v[5] == 0 or v[6] == 0)]
        out = [v[:8] + (((knob, vb),), "check") for v in dict.fromkeys(cands)] if checks else []
        for hd in (64, 128, 256):
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 1024, 2048, 8192, 16384)):
                    for val in (va, vb):
                        out.append((1, hd, mask) + c + (((knob, val),), "bench"))
        return out

    if os.environ.get("FA3_SET") == "splitsm":
        # run 54: FJ_FA3_SPLITSM 1 (S = Q K^T in two column halves, the first half's softmax under
        # the second's GEMM). Checks with it: unmasked 192x128 (hd 32/64), 128x128 and 128x64 (hd
        # 64/96/128/256 where they fit), grid and static persistent, bf16 + f16, and every default
        # (it is off there); bench: the unmasked defaults it reaches (hd64 192x128P, hd128
        # 128x128P, hd256 128x64P) with 0 / 1 (SP_REV=1: the other order)
        SP = lambda v: (("FJ_FA3_SPLITSM", v),)
        variants = [(dt, hd, 0, 192, 128, 1, 0, ps, SP(1), "check") for dt in (1, 0) for hd in (32, 64) for ps in (0, 1)]
        variants += [(dt, hd, 0, 128, bn, 1, 1, ps, SP(1), "check") for dt in (1, 0) for hd in (64, 96, 128, 256)
                     for bn in (128, 64) for ps in (0, 1) if ok_cfg(Cfg(128, bn, 1, 1, ps), hd)]
        variants += [c + ((), "check") for c in defaults_of((0, 1, 2))]
        vals = (1, 0) if os.environ.get("SP_REV") == "1" else (0, 1)
        for hd, cc in ((64, (192, 128, 1, 0, 1)), (128, (128, 128, 1, 1, 1)), (256, (128, 64, 1, 1, 1))):
            variants += [(1, hd, 0) + cc + (SP(v), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "splitsm2":
        # run 55: FJ_FA3_SPLITSM with Q in registers (FJ_FA3_QREG: run 54's m64n64 SS halves read
        # Q from shared memory twice per k-step, 128 B/clk). Checks: hd128 / hd64 unmasked with
        # both, grid and persistent, bf16 + f16; bench: hd128 128x128P QREG 16 with SPLITSM 0 / 1
        # beside the default, hd64 192x128P QREG 1 both ways (SP_REV=1: the other order)
        X = lambda v, q: (("FJ_FA3_QREG", q), ("FJ_FA3_SPLITSM", v))
        variants = [(dt, 128, 0, 128, 128, 1, 1, ps, X(1, 16), "check") for dt in (1, 0) for ps in (0, 1)]
        variants += [(dt, 64, 0, 192, 128, 1, 0, ps, X(1, 1), "check") for dt in (1, 0) for ps in (0, 1)]
        vals = (1, 0) if os.environ.get("SP_REV") == "1" else (0, 1)
        variants += [(1, 128, 0, 128, 128, 1, 1, 1, X(v, 16), "bench") for v in vals]
        variants += [(1, 128, 0, 128, 128, 1, 1, 1, (), "bench")]
        variants += [(1, 64, 0, 192, 128, 1, 0, 1, X(v, 1), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "tail":
        # run 49 (needs results/tail.patch; refuted): FJ_FA3_TAIL 1 (unmasked, no ping-pong: a
        # warpgroup with no row in the sequence skips its blocks through a uniform branch around
        # the loop, and the static persistent order puts the short last query blocks after the
        # full ones). Checks with it: hd 32/48/64
        # unmasked 192x128 and 192x96, grid and static persistent, bf16 + f16, the 128-row
        # schedules without ping-pong (serial, overlap), and every default; bench: hd64 unmasked
        # 192x128P with 0 / 1 (TAIL_REV=1: the other order) beside 128x128P
        T = lambda v: (("FJ_FA3_TAIL", v),)
        variants = [(dt, hd, 0, 192, bn, 1, 0, ps, T(1), "check")
                    for dt in (1, 0) for hd in (32, 48, 64) for bn in (128, 96) for ps in (0, 1)]
        variants += [(dt, 128, 0, 128, 128, ov, 0, ps, T(1), "check") for dt in (1, 0) for ov in (0, 1) for ps in (0, 1)]
        variants += [c + ((), "check") for c in defaults_of((0, 1, 2))]
        vals = (1, 0) if os.environ.get("TAIL_REV") == "1" else (0, 1)
        variants += [(1, 64, 0, 192, 128, 1, 0, 1, T(v), "bench") for v in vals]
        variants += [(1, 64, 0, 128, 128, 1, 1, 1, (), "bench")]
        # hd128 unmasked with 3 consumer warpgroups (192x80, the widest that fits) beside the default
        variants += [(1, 128, 0, 192, 80, 1, 0, 1, T(1), "bench"), (1, 128, 0, 128, 128, 1, 1, 1, (), "bench")]

    if os.environ.get("FA3_SET") == "qhalf":
        # run 50 (needs results/qhalf.patch; refuted): FJ_FA3_QHALF 1 (OQ: each consumer
        # warpgroup's Q rows on barriers of their own; the turns run on across tiles). Checks
        # with it: every OQ variant (hd 192 / 256 persistent: static unmasked, dynamic causal and window; bf16 + f16), and every default
        # without it (Q's tensor map box is 64 rows now, for all); bench: hd256 unmasked 128x80P
        # and 128x64P, causal 128x80D with 0 / 1 (QHALF_REV=1: the other order)
        QH = lambda v: (("FJ_FA3_QHALF", v),)
        variants = [(dt, hd, mask, 128, bn, 1, 1, ps, QH(1), "check") for dt in (1, 0)
                    for hd, bns in ((192, (112,)), (256, (80, 64))) for bn in bns
                    for mask in (0, 1, 2) for ps in (1, 2) if not (mask == 0 and ps == 2)]
        variants += [c + ((), "check") for c in defaults_of((0, 1, 2))]
        vals = (1, 0) if os.environ.get("QHALF_REV") == "1" else (0, 1)
        for mask, bn, ps in ((0, 80, 1), (0, 64, 1), (1, 80, 2)):
            variants += [(1, 256, mask, 128, bn, 1, 1, ps, QH(v), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "qreg":
        # run 33: S = Q K^T with Q in registers (FJ_FA3_QREG 1: ldmatrix once per tile, wgmma RS with
        # a K-major B). Checks with it: every default of dtype x hd x mask x length class with
        # block_m 128 and hd <= 128 (and their dynamic-order variants), plus 128x128 grid / static
        # / dynamic for hd 64/96/128, bf16 + f16, none/causal/window; bench: hd128 none 128x128P,
        # hd128 causal 128x128D, hd64 causal 128x128D, hd64 none 128x128P without / with it, and
        # the hd64 unmasked default 192x128P (no QREG: 192-row tiles spill with it)
        QR = lambda v: (("FJ_FA3_QREG", v),)
        cands = [c for c in defaults_of((0, 1, 2)) if c[3] == 128 and c[1] <= 128]
        cands += [(dt, hd, mask, 128, 128, 1, 1, ps) for dt in (1, 0) for hd in (64, 96, 128)
                  for mask in (0, 1, 2) for ps in (0, 1, 2) if not (mask == 0 and ps == 2)]
        variants = [c + (QR(1), "check") for c in dict.fromkeys(cands)]
        for hd, mask, ps in ((128, 0, 1), (128, 1, 2), (64, 1, 2), (64, 0, 1)):
            variants += [(1, hd, mask, 128, 128, 1, 1, ps, QR(v), "bench") for v in (0, 1)]
        variants += [(1, 64, 0, 192, 128, 1, 0, 1, (), "bench")]

    if os.environ.get("FA3_SET") == "qregpow":
        # run 43: Q in registers (FJ_FA3_QREG n) again, now timed as bench_attn.py does (FA3_REP_MS
        # 300: the GPU at its power cap), on the defaults where it fits: whether fewer shared-memory
        # reads pay where the clock is power-bound. QREG_REV=1: each pair in the other order.
        QR = lambda v: (("FJ_FA3_QREG", v),)
        variants = []
        for hd, mask, bm, bn, pp, ps, n in ((128, 0, 128, 128, 1, 1, 8), (128, 1, 128, 128, 1, 2, 8),
                                             (256, 0, 128, 80, 1, 1, 4), (64, 0, 192, 128, 0, 1, 1)):
            vals = (n, 0) if os.environ.get("QREG_REV") == "1" else (0, n)
            variants += [(1, hd, mask, bm, bn, 1, pp, ps, QR(v), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "libdev":
        # run 44 (libvsdev.py): the library defaults (long class) of hd 64/128/256 none/causal as
        # this harness's cubins, to time beside the library's own launch of the same kernel
        variants = []
        for hd in (64, 128, 256):
            for mask in (0, 1):
                c = lib.fj_fa3_default(hd, mask, 8192)
                variants.append((1, hd, mask, c.block_m, c.block_n, c.overlap, c.pingpong, c.persistent, (), "bench"))

    if os.environ.get("FA3_SET") == "qregpow2":
        # run 46: FJ_FA3_QREG at the power cap (FA3_REP_MS 300) on the tiles run 43 left out: hd64
        # causal 128x128D (all 4 steps) and 192x128D (n = 1), hd64 unmasked 128x128P (all) beside
        # its 192x128P default, hd256 causal 128x80D and unmasked 128x80P (n = 4). QREG_REV=1: each
        # pair in the other order. (Explicit n = 0 where the kernel's default would put it on.)
        QR = lambda v: (("FJ_FA3_QREG", v),)
        variants = [(1, 64, 0, 192, 128, 1, 0, 1, (), "bench")]
        for hd, mask, bm, bn, pp, ps, n in ((64, 1, 128, 128, 1, 2, 4), (64, 1, 192, 128, 0, 2, 1),
                                             (64, 0, 128, 128, 1, 1, 4), (256, 1, 128, 80, 1, 2, 4),
                                             (256, 0, 128, 80, 1, 1, 4)):
            vals = (n, 0) if os.environ.get("QREG_REV") == "1" else (0, n)
            variants += [(1, hd, mask, bm, bn, 1, pp, ps, QR(v), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "ahead2":
        # run 48: FJ_FA3_AHEAD 2 (the next tile's first two K/V blocks ahead; run 47's profile of
        # hd256 128x80P at 2k: the consumers' K and V waits in the loop, 4% of the samples, and
        # the Q wait, 3%). Needs results/ahead2.patch (not kept: neutral). Checks: the hd > 128 persistent variants (static and dynamic order,
        # bf16 + f16, none / causal / window) with 2; bench: hd256 128x80P, 128x64P and causal
        # 128x80D with 1 and 2 (AHEAD_REV=1: the other order)
        A = lambda v: (("FJ_FA3_AHEAD", v),)
        variants = [(dt, hd, mask, 128, bn, 1, 1, ps, A(2), "check") for dt in (1, 0) for hd in (192, 256)
                    for bn in ((80,) if hd == 256 else (112,)) for mask in (0, 1, 2) for ps in (1, 2)
                    if not (mask == 0 and ps == 2)]
        vals = (2, 1) if os.environ.get("AHEAD_REV") == "1" else (1, 2)
        for mask, bn, ps in ((0, 80, 1), (0, 64, 1), (1, 80, 2)):
            variants += [(1, 256, mask, 128, bn, 1, 1, ps, A(v), "bench") for v in vals]

    if os.environ.get("FA3_SET") == "qreg2":
        # run 34: FJ_FA3_QREG on 192-row tiles (192x128 spills 96 bytes with every step from
        # registers, 192x112 and 192x96 compile clean at hd 64). Checks with it: hd 32/48/64 192x112 and
        # 192x96, none/causal/window, grid / static / dynamic, bf16 + f16; bench: hd64 unmasked
        # 192x128P (default), 192x112P and 192x96P without / with, 128x128P with; hd64 causal
        # 128x128D (default <= 1k), 192x128D (default from 2k), 192x112D and 192x96D without / with
        QA = (("FJ_FA3_QREG", 4),)
        variants = [(dt, hd, mask, 192, bn, 1, 0, ps, QA, "check") for dt in (1, 0) for hd in (32, 48, 64)
                    for bn in (112, 96) for mask in (0, 1, 2) for ps in (0, 1, 2) if not (mask == 0 and ps == 2)]
        ps_of = {0: 1, 1: 2}
        for mask in (0, 1):
            ps = ps_of[mask]
            variants += [(1, 64, mask, 192, 128, 1, 0, ps, (), "bench"),
                         (1, 64, mask, 128, 128, 1, 1, ps, (), "bench"),
                         (1, 64, mask, 128, 128, 1, 1, ps, (("FJ_FA3_QREG", 4),), "bench")]
            variants += [(1, 64, mask, 192, bn, 1, 0, ps, ex, "bench") for bn in (112, 96) for ex in ((), QA)]
    if os.environ.get("FA3_SET") == "qreg3":
        # run 35: FJ_FA3_QREG 1 (the first k16 step of S from registers: what 192x128 at hd64 fits
        # without spilling) on the hd64 192x128 defaults, and all steps on hd128 128x128P again
        # (run 33: +-5% noise). Checks: every default of dtype x hd x mask x length class with it
        # (QREG 1 on 192-row tiles, 16 = every step on 128-row tiles, hd <= 128) and their
        # dynamic-order variants; bench: hd64 none 192x128P, causal 192x128D, hd128 none
        # 128x128P without / with
        QR = lambda v: (("FJ_FA3_QREG", v),)
        cands = [c for c in defaults_of((0, 1, 2)) if c[1] <= 128]
        variants = [c + (QR(1 if c[3] == 192 else 16), "check") for c in dict.fromkeys(cands)]
        for hd, mask, bm, pp, ps, q in ((64, 0, 192, 0, 1, 1), (64, 1, 192, 0, 2, 1), (128, 0, 128, 1, 1, 16)):
            variants += [(1, hd, mask, bm, 128, 1, pp, ps, QR(v), "bench") for v in (0, q)]
    if os.environ.get("FA3_SET") == "pp3":
        # run 36: three-way ping-pong for 192-row tiles (FJ_FA3_PP3 1). Checks with it: hd 32/64
        # 192x128 and 192x96, none/causal/window, grid / static / dynamic, bf16 + f16, and every
        # 192-row default; bench: hd64 none 192x128P, hd64 causal 192x128D and grid without /
        # with, and the 128x128D default of <= 1k. Refuted and not in the kernel:
        # `git apply dev/fa3/results/pp3.patch` on 86c9651's kernel brings it back
        PP = lambda v: (("FJ_FA3_PP3", v),)
        cands = [c for c in defaults_of((0, 1, 2)) if c[3] == 192]
        cands += [(dt, hd, mask, 192, bn, 1, 0, ps) for dt in (1, 0) for hd in (32, 64) for bn in (128, 96)
                  for mask in (0, 1, 2) for ps in (0, 1, 2) if not (mask == 0 and ps == 2)]
        variants = [c + (PP(1), "check") for c in dict.fromkeys(cands)]
        for mask, ps in ((0, 1), (1, 2), (1, 0)):
            variants += [(1, 64, mask, 192, 128, 1, 0, ps, PP(v), "bench") for v in (0, 1)]
        variants += [(1, 64, 1, 128, 128, 1, 1, 2, (), "bench")]
    if os.environ.get("FA3_SET") == "qreg4":
        # run 37: FJ_FA3_QREG at hd256, where S = Q K^T with 80- or 64-key blocks reads A 2 KB + B
        # 2.5 / 2 KB from shared memory per 40 / 32 tensor clocks (112 / 128 B/clk: at the port).
        # Checks: every default with hd > 128 with n = 4, the hd256 128x64 grid / persistent with
        # n = 8, bf16 + f16, none/causal/window; bench: hd256 none 128x80P n = 0/4/6, 128x64P 0/8;
        # causal 128x80D 0/2/4, 128x64 grid 0/8
        QR = lambda v: (("FJ_FA3_QREG", v),) if v else ()
        cands = [c for c in defaults_of((0, 1, 2)) if c[1] > 128]
        variants = [c + (QR(4), "check") for c in dict.fromkeys(cands)]
        variants += [(dt, 256, mask, 128, 64, 1, 1, ps, QR(8), "check") for dt in (1, 0) for mask in (0, 1, 2)
                     for ps in (0, 1)]
        for mask, bn, ps, ns in ((0, 80, 1, (0, 4, 6)), (0, 64, 1, (0, 8)), (1, 80, 2, (0, 2, 4)), (1, 64, 0, (0, 8))):
            variants += [(1, 256, mask, 128, bn, 1, 1, ps, QR(v), "bench") for v in ns]
    if os.environ.get("FA3_SET") == "prof64":
        # run 38 (ncu source-level profile, run7.sh PROF=1): the hd64 defaults at 512, causal
        # 128x128D and unmasked 192x128P
        variants = [(1, 64, 1, 128, 128, 1, 1, 2, (), "bench"), (1, 64, 0, 192, 128, 1, 0, 1, (), "bench")]
    if os.environ.get("FA3_SET") == "place":
        # run 40: the harness's position effect (runs 38b, 39). Three copies of one kernel (the
        # extras FJ_FA3_QREG 0 / FJ_FA3_FASTDIV 0 are no-ops: identical SASS, other modules and
        # tags) for the shapes where it showed (hd256 causal 128x80 and 128x64 grids) and three
        # defaults; PLACE_REV=1 builds them in the reverse order
        copies = [(), (("FJ_FA3_QREG", 0),), (("FJ_FA3_FASTDIV", 0),)]
        if os.environ.get("PLACE_REV") == "1":
            copies = copies[::-1]
        variants = [(1, hd, mask, bm, bn, 1, pp, ps, ex, "bench") for hd, mask, bm, bn, pp, ps in
                    ((256, 1, 128, 80, 1, 0), (256, 1, 128, 64, 1, 0), (64, 1, 128, 128, 1, 2),
                     (128, 0, 128, 128, 1, 1), (64, 0, 192, 128, 0, 1)) for ex in copies]
    if os.environ.get("FA3_SET") == "lazy":
        # runs 18-19: lazy rescaling (FJ_FA3_LAZY 8: the base moves only when a row's maximum grows
        # by more than 2^8, O rescaled only when some row of the warp moved), 0 against LAZY_T
        # (run 19's A was the kernel default then, 0; it is 8 now: named explicitly);
        # LAZY_CHECKS=0 (run 19): the bench cubins only
        variants = ab_variants("FJ_FA3_LAZY", 0, int(os.environ.get("LAZY_T", "8")),
                               os.environ.get("LAZY_CHECKS", "1") != "0")
    if os.environ.get("FA3_SET") == "lazy2":
        # run 20 (lazy rescaling now the kernel default): tiles that may gain from it. hd128
        # unmasked 128x144P / 128x160P (an O slot still fits) against the 128x128P default; hd128
        # causal 128x128D without the cross-tile stream (X0: the O slot and its copy) against the
        # default; hd256 unmasked 128x80 persistent with O through the Q buffer against the grid;
        # hd64 causal 128x128D without ping-pong against the default (lazy off at hd64 masked)
        X0, OQ = ("FJ_FA3_XTILE", 0), ("FJ_FA3_OQ", 1)
        variants = [(1, 128, 0, 128, 128, 1, 1, 1, (), "bench"), (1, 128, 0, 128, 144, 1, 1, 1, (), "bench"),
                    (1, 128, 0, 128, 160, 1, 1, 1, (), "bench"),
                    (1, 128, 1, 128, 128, 1, 1, 2, (), "bench"), (1, 128, 1, 128, 128, 1, 1, 2, (X0,), "bench"),
                    (1, 256, 0, 128, 80, 1, 1, 0, (), "bench"), (1, 256, 0, 128, 80, 1, 1, 1, (OQ,), "bench"),
                    (1, 64, 1, 128, 128, 1, 1, 2, (), "bench"), (1, 64, 1, 128, 128, 1, 0, 2, (), "bench")]
        variants += [(dt,) + v[1:9] + ("check",) for v in variants[1:3] + variants[4:5] + variants[8:9]
                     for dt in (1, 0)]
    if os.environ.get("FA3_SET") == "ab":
        # one knob both ways (AB_KNOB, AB_VALS "a,b"; run 21: FJ_FA3_UCW 0,1, run 22: FJ_FA3_LAZY
        # 0,8 with AB_CHECKS=0 AB_EXTRA=22), see ab_variants
        knob, (va, vb) = os.environ["AB_KNOB"], [int(x) for x in os.environ["AB_VALS"].split(",")]
        variants = ab_variants(knob, va, vb, os.environ.get("AB_CHECKS", "1") != "0")
    if os.environ.get("FA3_SET") == "wgskip":
        # run 23: a consumer warpgroup skips the top blocks none of its rows sees (FJ_FA3_WGSKIP 1;
        # 192-row tiles, masked, no ping-pong). Checks: 192x128 causal and window, grid / static
        # persistent / dynamic order, bf16 + f16, hd 64 and 32, with it; bench: hd64 causal
        # 192x128 dynamic and grid without and with it, and the 128x128 dynamic default of <= 1k
        WS = lambda v: (("FJ_FA3_WGSKIP", v),)
        variants = [(dt, hd, mask, 192, 128, 1, 0, ps, WS(1), "check")
                    for dt in (1, 0) for hd in (64, 32) for mask in (1, 2) for ps in (0, 1, 2)]
        variants += [(1, 64, 1, 192, 128, 1, 0, ps, WS(v), "bench") for ps in (2, 0) for v in (0, 1)]
        variants += [(1, 64, 1, 128, 128, 1, 1, 2, (), "bench")]
    if os.environ.get("FA3_SET") == "wgskip2":
        # run 24: the skip with ping-pong (FJ_FA3_WGSKIP_PP 1: a warpgroup takes an empty turn per
        # skipped block). Checks: the ping-pong masked tiles of every head_dim, causal and window,
        # grid and dynamic, bf16 + f16; bench: hd256 causal 128x64 grid, 128x80 dynamic and grid,
        # hd128 and hd64 causal 128x128 dynamic (nothing to skip there: the cost of the code)
        PP = lambda v: (("FJ_FA3_WGSKIP_PP", v),)
        tiles = {256: [(128, 80), (128, 64)], 192: [(128, 112)], 128: [(128, 128)], 96: [(128, 128)], 64: [(128, 128)]}
        variants = [(dt, hd, mask, bm, bn, 1, 1, ps, PP(1), "check")
                    for dt in (1, 0) for hd, ts in tiles.items() for bm, bn in ts for mask in (1, 2) for ps in (0, 2)]
        for hd, bm, bn, ps in ((256, 128, 64, 0), (256, 128, 80, 2), (256, 128, 80, 0), (128, 128, 128, 2), (64, 128, 128, 2)):
            variants += [(1, hd, 1, bm, bn, 1, 1, ps, PP(v), "bench") for v in (0, 1)]
    if os.environ.get("FA3_SET") == "half":
        # run 25: the first block's upper half skipped by a warpgroup none of whose rows sees it
        # (FJ_FA3_HALF 1: S on the lower half only). Checks with it: every masked (causal, window)
        # default of dtype x hd x length class, their dynamic-order variants, and grids /
        # no-ping-pong tiles with block_n % 32 == 0; bench: the causal defaults of hd64 and hd128
        # for 512..16k without and with it
        HF = lambda v: (("FJ_FA3_HALF", v),)
        cands = defaults_of((1, 2))
        cands += [(dt, hd, mask, bm, bn, 1, pp, ps) for dt in (1, 0)
                  for hd, bm, bn, pp, ps in ((64, 128, 128, 0, 2), (64, 192, 128, 0, 0), (128, 128, 128, 1, 0),
                                             (128, 128, 64, 1, 0), (96, 128, 96, 1, 2), (64, 192, 64, 0, 2))
                  for mask in (1, 2)]
        variants = [c + (HF(1), "check") for c in dict.fromkeys(cands) if c[4] % 32 == 0]
        for hd in (64, 128):
            for sl, c in distinct_defaults(hd, 1, (512, 1024, 2048, 8192, 16384)):
                variants += [(1, hd, 1) + c + (HF(v), "bench") for v in (0, 1)]
    if os.environ.get("FA3_SET") == "m64":
        # run 26: tile M 64 (block_m 64: one consumer warpgroup per CTA, two CTAs per SM, each with
        # its own K/V ring: the SM's two consumers on independent tiles, as cuDNN's 64x128xD
        # kernels name it). Checks: each 64-row tile of the bench, none/causal/window, grid /
        # static / dynamic, bf16 + f16; bench: against the defaults of hd64 and hd128. Refuted
        # and removed from the kernel and fa3_config.c (NOTES.md run 26 says what it took): this
        # set builds nothing without that support
        m64 = {64: [(64, 128), (64, 176), (64, 192)], 128: [(64, 64), (64, 80)]}
        variants = []
        for hd, tiles in m64.items():
            for bm, bn in tiles:
                for dt in (1, 0):
                    for mask in (0, 1, 2):
                        for ps in (0, 1, 2):
                            if ok_cfg(Cfg(bm, bn, 1, 0, ps), hd):
                                variants.append((dt, hd, mask, bm, bn, 1, 0, ps, (), "check"))
                for mask in (0, 1):
                    variants.append((1, hd, mask, bm, bn, 1, 0, 2 if mask else 1, (), "bench"))
                variants.append((1, hd, 1, bm, bn, 1, 0, 0, (), "bench"))
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 1024, 2048, 8192, 16384)):
                    variants.append((1, hd, mask) + c + ((), "bench"))
    if os.environ.get("FA3_SET") == "qbuf2":
        # run 27: two Q buffers in the persistent per-tile path (FJ_FA3_QBUF2 1): the next tile's
        # Q loads during the whole current tile. Checks with it: every persistent default of
        # dtype x hd x mask x length class and their dynamic-order variants (unmasked: static);
        # bench: the defaults of hd64 and hd128 (none, causal) without and with it, and hd64
        # causal 128x128D / 192x128D with the cross-tile stream (last measured in run 10)
        QB = lambda v: (("FJ_FA3_QBUF2", v),)
        cands = []
        for dt in (1, 0):
            for hd in CHECK_HD:
                for mask in (0, 1, 2):
                    for sl in (512, 2048, 16384):
                        c = lib.fj_fa3_default(hd, mask, sl)
                        cands.append((dt, hd, mask, c.block_m, c.block_n, c.overlap, c.pingpong,
                                      max(c.persistent, 1 if mask == 0 else 2)))
        variants = [c + (QB(1), "check") for c in dict.fromkeys(cands)]
        for hd in (64, 128):
            for mask in (0, 1):
                for sl, c in distinct_defaults(hd, mask, (512, 1024, 2048, 8192, 16384)):
                    variants += [(1, hd, mask) + c + (QB(v), "bench") for v in (0, 1)]
        variants += [(1, 64, 1, 128, 128, 1, 1, 2, (("FJ_FA3_XTILE", 1),), "bench"),
                     (1, 64, 1, 192, 128, 1, 0, 2, (("FJ_FA3_XTILE", 1),), "bench")]
    if os.environ.get("FA3_SET") == "visexp":
        # run 28: the first block's softmax skips the 32-key chunks no row of the warp sees
        # (FJ_FA3_VISEXP 1; refuted and removed from the kernel, NOTES.md run 28: this set now
        # builds the defaults twice). Checks with it: every masked default (causal, window) of dtype x hd
        # x length class, their dynamic-order variants, grids with block_n 80/112/64, with and
        # without HALF; bench: the causal defaults of hd 64/128/256 with 0 / VISEXP / VISEXP+HALF
        VX = (("FJ_FA3_VISEXP", 1),)
        variants = [c + (VX, "check") for c in dict.fromkeys(defaults_of((1, 2)))]
        variants += [(dt, 128, m, 128, 128, 1, 1, 2, VX + (("FJ_FA3_HALF", 1),), "check") for dt in (1, 0) for m in (1, 2)]
        variants += [(dt, 64, m, 128, 128, 1, 1, 2, VX + (("FJ_FA3_HALF", 1),), "check") for dt in (1, 0) for m in (1, 2)]
        for hd in (64, 128, 256):
            for sl, c in distinct_defaults(hd, 1, (512, 1024, 2048, 8192, 16384)):
                variants += [(1, hd, 1) + c + (x, "bench") for x in ((), VX)]
                if c[1] % 32 == 0:
                    variants.append((1, hd, 1) + c + (VX + (("FJ_FA3_HALF", 1),), "bench"))
    if os.environ.get("AB_EXTRA") == "22":
        # run 22: short-sequence tiles with the current kernel (lazy rescaling, uniform warpgroup
        # index): hd64 unmasked 128x128P (ping-pong), hd256 unmasked 128x64 grid and 128x80P OQ
        variants += [(1, 64, 0, 128, 128, 1, 1, 1, (), "bench"), (1, 256, 0, 128, 64, 1, 1, 0, (), "bench"),
                     (1, 256, 0, 128, 80, 1, 1, 1, (("FJ_FA3_OQ", 1),), "bench")]
    # The cross-tile stream is gone from the kernel (session 10; it #errors on FJ_FA3_XTILE and
    # FJ_FA3_OSMEM): the older sets' variants with it on are dropped, "off" is every variant now.
    gone = [v for v in variants if dict(v[8]).get("FJ_FA3_XTILE", 0) or "FJ_FA3_OSMEM" in dict(v[8])]
    if gone:
        print(f"dropped {len(gone)} variants with the removed cross-tile stream (FJ_FA3_XTILE / OSMEM)")
    variants = [v[:8] + (tuple(kv for kv in v[8] if kv[0] != "FJ_FA3_XTILE"),) + v[9:]
                for v in variants if v not in gone]
    variants = list(dict.fromkeys(variants))  # a diagnostic variant may be a default too
    with ThreadPoolExecutor(jobs) as ex:
        res = list(ex.map(build, variants))
    bad = 0
    for r in res:
        flag = (not r["ok"] or r["spill"] != 0 or r["stack"] != 0 or r["warn"] != "none" or r.get("hgmma", 0) == 0
                or r.get("local", 0) != 0)
        bad += flag
        print(("BAD  " if flag else "     ") + f"{r['file']:48s} regs={r['regs']} maxreg={r.get('maxreg')} "
              f"spill={r['spill']} stack={r['stack']} warn={r['warn']} hgmma={r.get('hgmma')} "
              f"local={r.get('local')} smem={r['smem']} ms={r['ms']:.0f}")
        if not r["ok"]:
            print(r["log"])
    json.dump(res, open(os.path.join(OUT, "manifest.json"), "w"), indent=0)
    print(len(res), "cubins;", len(res) - bad, "clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
