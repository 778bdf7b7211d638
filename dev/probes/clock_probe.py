#!/usr/bin/env python3
"""clock_probe.py - the SM clock, board power and clock-event reasons while fajit and PyTorch
SDPA's CUDNN backend run the same attention, in alternating bursts (fajit, CUDNN, CUDNN, fajit,
...: neither always follows the other). --flush: each call after an L2 flush, as do_bench.

Why: under ncu (clocks locked) some short shapes take as many cycles as cuDNN's kernel, yet
do_bench at the GPU's own clocks has them slower. A burst is N calls back to back (no L2 flush)
for about --burst seconds, timed with CUDA events; nvidia-smi samples every --ms milliseconds,
each line stamped on arrival here, and the samples of a burst's second half are its clock and
power. Per shape and backend the table gives the median time per call, the mean SM clock, the
mean instantaneous power, the clock-event reasons seen (nvidia-smi's bitmask: 0x1 idle,
0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake) and
time x clock (kilocycles per call): level kilocycles with unequal times mean the clocks differ.

usage: clock_probe.py --lib build/libfajit.so [--out probe.md] [--shapes 128:causal:512,...]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_attn import ClockSampler, Fajit, sdpa  # noqa: E402

FIELDS = ["clocks.sm", "power.draw.instant", "clocks_event_reasons.active", "temperature.gpu"]
OLD_FIELDS = ["clocks.sm", "power.draw", "clocks_throttle_reasons.active", "temperature.gpu"]


def sampler(ms):
    """bench_attn's ClockSampler over FIELDS (an older driver's names where those fail)"""
    fields = FIELDS
    try:
        probe = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                                "--format=csv,noheader,nounits"], capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit("clock_probe.py: nvidia-smi not found (it samples the clocks)")
    if probe.returncode != 0 or "not a valid field" in probe.stdout + probe.stderr:
        fields = OLD_FIELDS
    return ClockSampler(ms, fields)


def burst_flushed(fn, seconds, cache):
    """(median ms per call, start, end): as triton's do_bench times: the L2 flushed (256 MB
    written) before each call, events around the call alone"""
    fn()
    torch.cuda.synchronize()
    ev = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            cache.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            ev.append((s, e))
        ev[-1][1].synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev), t0, time.monotonic()


def burst(fn, seconds):
    """(ms per call, start, end): calls back to back for about `seconds`"""
    n, t_call = 1, None
    fn()
    torch.cuda.synchronize()
    while True:  # calibrate: how many calls fill the burst
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        e.synchronize()
        t_call = s.elapsed_time(e) / n
        if n * t_call > 20:
            break
        n *= 4
    n = max(1, int(seconds * 1e3 / t_call))
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.monotonic()
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / n, t0, time.monotonic()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--shapes", default="64:none:512,64:causal:512,128:none:512,128:causal:512,"
                                        "256:none:512,256:causal:512,128:causal:1024,64:causal:1024",
                    help="head_dim:mask:seqlen, comma separated (bf16, 16k tokens, hidden 2048)")
    ap.add_argument("--burst", type=float, default=0.4, help="seconds per burst")
    ap.add_argument("--rounds", type=int, default=4, help="fajit/CUDNN pairs per shape (ABBA)")
    ap.add_argument("--ms", type=int, default=10, help="nvidia-smi sampling period")
    ap.add_argument("--flush", action="store_true",
                    help="flush L2 before each call and time calls one by one (do_bench's way)")
    args = ap.parse_args()
    if args.burst <= 0 or args.rounds < 1 or args.ms < 1:
        ap.error("--burst must be > 0 s, --rounds >= 1, --ms >= 1")
    shapes = []
    for spec in args.shapes.split(","):
        f = spec.split(":")
        if (len(f) != 3 or not f[0].isdigit() or not f[2].isdigit() or f[1] not in ("none", "causal")
                or int(f[0]) not in (64, 128, 256) or not 0 < int(f[2]) <= 16384):
            ap.error(f"--shapes: {spec!r} is not head_dim:none|causal:seqlen (head_dim 64/128/256, "
                     "seqlen 1..16384)")
        shapes.append((int(f[0]), f[1], int(f[2])))
    cache = torch.empty(256 << 20, dtype=torch.int8, device="cuda") if args.flush else None

    fj = Fajit(args.lib)
    smp = sampler(args.ms)
    time.sleep(0.5)
    if not smp.samples:
        sys.exit("clock_probe.py: no samples from nvidia-smi")
    torch.manual_seed(0)
    rows = []
    for hd, mask, s in shapes:
        causal = mask == "causal"
        b, h = 16384 // s, 2048 // hd
        q, k, v = (torch.randn(b, s, h, hd, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        d = fj.desc(q, k, v, o, causal)
        fns = {"fajit": lambda: fj.fwd(d),
               "cudnn": lambda: sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)}
        res = {n: [] for n in fns}
        for r in range(args.rounds):
            for name in (("fajit", "cudnn") if r % 2 == 0 else ("cudnn", "fajit")):
                ms, t0, t1 = (burst_flushed(fns[name], args.burst, cache) if args.flush
                              else burst(fns[name], args.burst))
                res[name].append((ms, smp.between(t0 + (t1 - t0) / 2, t1)))
        row = [hd, mask, s]
        for name in fns:
            ms = statistics.median(x[0] for x in res[name])
            w = [y for x in res[name] for y in x[1]]
            mhz = statistics.mean(y[1] for y in w) if w else float("nan")
            watt = statistics.mean(y[2] for y in w) if w else float("nan")
            reasons = 0
            for y in w:
                reasons |= y[3]
            row += [ms * 1e3, mhz, watt, reasons, ms * 1e3 * mhz / 1e3, len(w)]
        rows.append(row)
        print("hd %d %s %d: fajit %.1f us %.0f MHz %.0f W 0x%x %.1f kcyc (%d) | cudnn %.1f us %.0f MHz "
              "%.0f W 0x%x %.1f kcyc (%d)" % tuple(row), flush=True)
        del q, k, v, o
    smp.close()
    cmd = "python3 dev/probes/clock_probe.py " + " ".join(sys.argv[1:])
    lines = [f"# Clocks while fajit and CUDNN run, {torch.cuda.get_device_name()}", "",
             f"Command: `{cmd}`  ", f"nvidia-smi fields: {', '.join(smp.fields)}; bursts of "
             f"{args.burst} s " + ("of calls each after an L2 flush (median per call)" if args.flush
                                   else "back to back") +
             f", {args.rounds} per backend (ABBA), samples of each burst's second half.", "",
             "| hdim | mask | seqlen | fajit us | MHz | W | reasons | kcycles | CUDNN us | MHz | W | "
             "reasons | kcycles | time ratio | kcycle ratio |", "|" + "---|" * 15]
    for r in rows:
        lines.append("| %d | %s | %d | %.1f | %.0f | %.0f | 0x%x | %.1f | %.1f | %.0f | %.0f | 0x%x | "
                     "%.1f | %.3f | %.3f |" % (tuple(r[:8]) + tuple(r[9:14]) + (r[9] / r[3], r[13] / r[7])))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        open(args.out, "w").write(text)
    fj.close()


if __name__ == "__main__":
    main()
