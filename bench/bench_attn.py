#!/usr/bin/env python3
"""bench_attn.py - fajit against PyTorch SDPA (FLASH = FlashAttention-2, CUDNN) in one run,
on the same tensors, FA3-paper shapes: batch * seqlen = 16k tokens, hidden 2048, bf16.

fajit is called through ctypes over libfajit.so (the public C API only). Each shape is
checked first (fajit vs the FLASH backend, max abs difference), then timed with
triton.testing.do_bench (median; it flushes L2 between repetitions).

usage: bench_attn.py --lib build/libfajit.so [--out results.md] [--hdims 64,128,256]
                     [--seqlens 512,...,16384] [--masks none,causal]
"""
import argparse
import ctypes as C
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing


# These two mirror fajit_ctx_opts and fajit_attn_desc of include/fajit.h field by field.
# They are filled by the *_init_sized functions with their own size (struct_size, first),
# so a library built from a newer header still reads them right; check_layout() checks
# the fields' places against what the C init functions write.
class CtxOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("device", C.c_int), ("cache_dir", C.c_char_p), ("policy", C.c_int),
                ("log", C.c_void_p), ("log_user", C.c_void_p), ("log_level", C.c_int),
                ("progress", C.c_void_p), ("progress_user", C.c_void_p), ("family", C.c_int),
                ("cache_max_bytes", C.c_int64)]


class AttnDesc(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("q", C.c_void_p), ("k", C.c_void_p), ("v", C.c_void_p), ("o", C.c_void_p)] + \
        [(f"{t}_{s}_stride", C.c_int64) for t in "qkvo" for s in ("batch", "row", "head")] + \
        [(n, C.c_int) for n in ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k",
                                "head_dim", "dtype", "mask", "window_left", "window_right")] + \
        [("softmax_scale", C.c_float), ("cu_seqlens_q", C.c_void_p),
         ("cu_seqlens_k", C.c_void_p), ("total_q", C.c_int), ("total_k", C.c_int),
         ("lse", C.c_void_p), ("op", C.c_int), ("workspace", C.c_void_p),
         ("workspace_bytes", C.c_size_t)]


class Fajit:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        L = self.lib
        L.fajit_ctx_create.argtypes = [C.POINTER(C.c_void_p), C.POINTER(CtxOpts)]
        L.fajit_ctx_opts_init_sized.argtypes = [C.POINTER(CtxOpts), C.c_size_t]
        L.fajit_errmsg.restype = C.c_char_p
        L.fajit_errmsg.argtypes = [C.c_void_p]
        L.fajit_attn_desc_init_sized.argtypes = [C.POINTER(AttnDesc), C.c_size_t] + \
            [C.c_void_p] * 4 + [C.c_int] * 7
        L.fajit_attn_fwd.argtypes = [C.c_void_p, C.POINTER(AttnDesc), C.c_void_p]
        L.fajit_version_string.restype = C.c_char_p
        L.fajit_ctx_destroy.argtypes = [C.c_void_p]
        self.check_layout()
        opts = CtxOpts()
        L.fajit_ctx_opts_init_sized(C.byref(opts), C.sizeof(opts))
        opts.device = torch.cuda.current_device()
        self.ctx = C.c_void_p()
        st = L.fajit_ctx_create(C.byref(self.ctx), C.byref(opts))
        if st != 0:
            sys.exit(f"fajit_ctx_create: {L.fajit_errmsg(self.ctx).decode()}")

    def desc(self, q, k, v, o, causal):
        """q, o: [b, s, hq, d]; k, v: [b, s, hkv, d]; bf16, last dim contiguous."""
        d = AttnDesc()
        b, s, hq, hd = q.shape
        self.lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                      o.data_ptr(), b, hq, k.shape[2], s, k.shape[1], hd, 1)
        for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            st = t.stride()
            setattr(d, f"{name}_batch_stride", st[0])
            setattr(d, f"{name}_row_stride", st[1])
            setattr(d, f"{name}_head_stride", st[2])
        d.mask = 1 if causal else 0
        return d

    def check_layout(self):
        """The C init functions write struct_size bytes and known defaults: a mirror whose
        fields are out of place reads them back wrong. Refuse to run then."""
        o = CtxOpts()
        self.lib.fajit_ctx_opts_init_sized(C.byref(o), C.sizeof(o))
        d = AttnDesc()
        self.lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), *(0,) * 4, 3, 8, 2, 16,
                                            32, 64, 1)
        ok = (o.struct_size == C.sizeof(o) and o.log_level == 1 and o.device == 0 and
              d.struct_size == C.sizeof(d) and d.window_left == -1 and d.dtype == 1 and
              d.head_dim == 64 and d.k_batch_stride == 64 * 2 * 32 and
              abs(d.softmax_scale - 0.125) < 1e-7 and d.op == 0 and d.workspace_bytes == 0)
        if not ok:
            sys.exit("bench_attn.py: CtxOpts/AttnDesc do not match include/fajit.h")

    def close(self):
        """Destroys the context (kernels unloaded, cache closed) before Python tears down."""
        if self.ctx:
            self.lib.fajit_ctx_destroy(self.ctx)
            self.ctx = C.c_void_p()

    def fwd(self, d):
        st = self.lib.fajit_attn_fwd(self.ctx, C.byref(d), torch.cuda.current_stream().cuda_stream)
        if st != 0:
            raise RuntimeError(self.lib.fajit_errmsg(self.ctx).decode())


class ClockSampler:
    """SM clock and board power while each kernel is timed: nvidia-smi samples `fields` every
    `ms` milliseconds, each line stamped on arrival here (a sample: (time, *values); hex values,
    the clock-event reasons, as ints); timed(name, fn) records the window of one timing,
    mean(name) averages the samples that arrived inside the name's windows. The GPU's own clocks
    move with power and temperature, so two kernels level per cycle (ncu locks the clocks) can
    differ in time at the clocks they run at. Also dev/probes/clock_probe.py's sampler."""

    def __init__(self, ms, fields=("clocks.sm", "power.draw", "temperature.gpu")):
        self.fields, self.samples, self.windows = list(fields), [], {}
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=" + ",".join(self.fields),
             "--format=csv,noheader,nounits", f"--loop-ms={ms}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            f = [x.strip() for x in line.split(",")]
            try:
                v = [int(x, 16) if x.startswith("0x") else float(x) for x in f]
            except ValueError:
                continue
            if len(v) == len(self.fields):
                self.samples.append((time.monotonic(), *v))

    def between(self, t0, t1):
        return [x for x in self.samples if t0 <= x[0] <= t1]

    def timed(self, name, fn):
        t0 = time.monotonic()
        r = fn()
        self.windows.setdefault(name, []).append((t0, time.monotonic()))
        return r

    def mean(self, name):
        """(mean SM MHz, mean W, max deg C, samples) over its windows (the default fields), or
        None; then forgets them (the next shape's windows start afresh)"""
        w = [x for t0, t1 in self.windows.pop(name, []) for x in self.between(t0, t1)]
        if not w:
            return None
        return (sum(x[1] for x in w) / len(w), sum(x[2] for x in w) / len(w), max(x[3] for x in w),
                len(w))

    def close(self):
        self.proc.terminate()


def sdpa(q, k, v, causal, backend):
    # SDPA wants [b, h, s, d]: transposed views of the same storage.
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=causal)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--masks", default="none,causal")
    ap.add_argument("--family", choices=["auto", "fa2", "fa3"], default="auto",
                    help="kernel family fajit uses (FAJIT_FAMILY)")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--fajit-only", type=int, metavar="N", default=0,
                    help="run fajit N times per shape, no peers, no timing (for ncu)")
    ap.add_argument("--clocks", type=int, metavar="MS", default=0,
                    help="sample SM clock and power every MS ms (nvidia-smi) while each kernel "
                         "is timed; a second table gives the means")
    ap.add_argument("--order", default="fajit,flash,cudnn",
                    help="the order the three are timed in for each shape; fajit,cudnn (either "
                         "order) leaves FLASH out of the timing (its column reads nan; it still "
                         "gives the reference output)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time the three this many times per shape, even rounds in --order, odd "
                         "rounds in reverse (none always first or last), the median kept")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.clocks < 0:
        ap.error("--clocks takes a sampling period in ms (0: off)")
    order = args.order.split(",")
    if sorted(order) not in (["cudnn", "fajit", "flash"], ["cudnn", "fajit"]):
        ap.error("--order names fajit, flash and cudnn once each, or fajit and cudnn")

    os.environ["FAJIT_FAMILY"] = args.family   # read when the context is created
    fj = Fajit(args.lib)
    torch.manual_seed(0)
    rows, clock_rows = [], []
    try:
        clk = ClockSampler(args.clocks) if args.clocks > 0 and not args.fajit_only else None
    except FileNotFoundError:
        sys.exit("bench_attn.py: --clocks needs nvidia-smi")
    for hd in map(int, args.hdims.split(",")):
        for causal in [m == "causal" for m in args.masks.split(",")]:
            for s in map(int, args.seqlens.split(",")):
                b, h = args.tokens // s, args.hidden // hd
                q, k, v = (torch.randn(b, s, h, hd, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                o = torch.full_like(q, float("nan"))
                d = fj.desc(q, k, v, o, causal)
                fj.fwd(d)  # compiles or loads; also the correctness check below
                if args.fajit_only:
                    for _ in range(args.fajit_only - 1):
                        fj.fwd(d)
                    torch.cuda.synchronize()
                    print(f"hdim {hd} {'causal' if causal else 'none'} seq {s}: "
                          f"{args.fajit_only} fajit runs", flush=True)
                    continue
                ref = sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION).transpose(1, 2)
                err = (o.float() - ref.float()).abs().max().item()
                flops = 4 * b * h * s * s * hd / (2 if causal else 1)
                fns = {"fajit": lambda: fj.fwd(d),
                       "flash": lambda: sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION),
                       "cudnn": lambda: sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)}
                samples = {n: [] for n in order}
                for rnd in range(args.rounds):
                    for name in (order if rnd % 2 == 0 else order[::-1]):
                        def timed(fn=fns[name]):
                            return triton.testing.do_bench(fn, warmup=50, rep=300,
                                                           return_mode="median")
                        samples[name].append(clk.timed(name, timed) if clk else timed())
                t = {n: statistics.median(v) for n, v in samples.items()}
                t.setdefault("flash", math.nan)  # not timed (--order fajit,cudnn)
                if clk:
                    clock_rows.append((hd, "causal" if causal else "none", s,
                                       [clk.mean(n) if n in order else None
                                        for n in ("fajit", "flash", "cudnn")]))
                tf = {n: flops / (ms * 1e-3) / 1e12 for n, ms in t.items()}
                row = (hd, "causal" if causal else "none", s, b, h, tf["fajit"], tf["flash"],
                       tf["cudnn"], tf["fajit"] / tf["flash"], tf["fajit"] / tf["cudnn"], err)
                rows.append(row)
                print("hdim %3d %-6s seq %5d (b%-2d h%-2d): fajit %6.1f  FLASH %6.1f  CUDNN %6.1f "
                      "TFLOP/s | x%.2f FLASH, x%.2f CUDNN | max|o-FLASH| %.4f" % row, flush=True)
                if not math.isfinite(err) or err > 0.05:
                    print(f"  WARNING: fajit output differs from FLASH by {err}", flush=True)
                del q, k, v, o, ref

    if args.fajit_only:
        torch.cuda.synchronize()
        fj.close()
        return
    # The GPU's bf16 GEMM ceiling in the same state (clocks, temperature) as the runs above
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    gemm = 2 * 8192 ** 3 / (triton.testing.do_bench(lambda: a @ a, warmup=50, rep=300,
                                                     return_mode="median") * 1e-3) / 1e12
    del a
    cmd = "python3 bench/bench_attn.py " + " ".join(sys.argv[1:])
    lines = [
        f"# fajit vs PyTorch SDPA, {torch.cuda.get_device_name()}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", "",
        f"Command: `{cmd}`  ",
        f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
        f"fajit {fj.lib.fajit_version_string().decode()} (kernel family: {args.family}), "
        f"python {platform.python_version()}  ",
        f"bf16, {args.tokens} tokens, hidden {args.hidden}; TFLOP/s = 4*b*h*s^2*d / time "
        "(halved for causal), median of triton.testing.do_bench" +
        (f"; median of {args.rounds} rounds, odd rounds in reverse order." if args.rounds > 1
         else "."), "",
        "| hdim | mask | seqlen | batch | heads | fajit | FLASH | CUDNN | fajit/FLASH | "
        "fajit/CUDNN | max abs diff vs FLASH |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %d | %s | %d | %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.4f |" % r)
    lines += ["", f"bf16 GEMM 8192^3 (torch.matmul) right after, same process: {gemm:.0f} TFLOP/s."]
    if clk:
        clk.close()
        fmt = lambda m: "-" if m is None else "%.0f MHz %.0f W %.0f C (%d)" % m
        lines += ["", f"While each was timed (nvidia-smi every {args.clocks} ms: mean SM clock, mean "
                  "board power, max temperature, samples; do_bench's L2 flushes between runs "
                  "included):", "",
                  "| hdim | mask | seqlen | fajit | FLASH | CUDNN |", "|---|---|---|---|---|---|"]
        lines += ["| %d | %s | %d | %s | %s | %s |" % (hd, m, s, *map(fmt, ms))
                  for hd, m, s, ms in clock_rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    torch.cuda.synchronize()
    fj.close()


if __name__ == "__main__":
    main()
