#!/usr/bin/env python3
"""fp8_decode.py - paged decode over an FP8 (e4m3) KV cache against the same cache in bf16,
in one process on the same data: fajit's decode kernels (through the Python package) and,
when importable, FlashInfer's CUDA-core decode (BatchDecodeWithPagedKVCacheWrapper, the
kernel vLLM's FlashInfer backend runs over an fp8 cache), with a device-to-device copy of
the FP8 K/V bytes as the bandwidth floor.

Per shape (batch x keys; 32/8 heads, head_dim 128, pages of --page-size, q_len 1):
  * accuracy: each output against a float64 reference over the bf16 K/V (what quantizing
    the cache costs: the RMSE and the max error, relative to the reference's RMS), and
    fajit's FP8 output against a float64 reference over the exact dequantized FP8 values
    (the kernel's own error, which should be bf16 rounding only);
  * time: CUDA events, the L2 flushed before each call, interleaved rounds (bench_decode.py's
    Timer); TB/s counts the K/V bytes each call reads.
K and V are quantized per tensor (one scale each: vLLM's k_scale / v_scale), scale =
amax / 448.

usage: PYTHONPATH=python python3 bench/fp8_decode.py [--shapes 1x8192,64x8192]
                                                      [--page-size 16] [--out r.md]
"""
import argparse
import datetime
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402 - its Timer and flashinfer helpers

import fajit  # noqa: E402

HQ, HKV, HD = 32, 8, 128
E4M3 = torch.float8_e4m3fn


def quantize(x):
    """x (bf16) -> (e4m3 tensor, float32 descale [1]): one scale for the whole tensor."""
    s = (x.abs().amax().float() / 448.0).clamp(min=1e-12)
    return (x.float() / s).to(E4M3), s.reshape(1)


def reference(q, kp, vp, bt, n, ks=1.0, vs=1.0):
    """float64 attention of q [b, 1, hq, d] over pages kp/vp [P, ps, hkv, d] (bf16 or e4m3,
    times ks / vs), every sequence n keys through block table bt; 8 sequences at a time."""
    b, ps, g = q.shape[0], kp.shape[1], HQ // HKV
    pages = (n + ps - 1) // ps
    out = torch.empty(b, HKV, g, HD, dtype=torch.float64, device=q.device)
    for i in range(0, b, 8):
        t = bt[i:i + 8, :pages]
        k = kp[t].double().reshape(t.shape[0], pages * ps, HKV, HD)[:, :n] * ks
        v = vp[t].double().reshape(t.shape[0], pages * ps, HKV, HD)[:, :n] * vs
        qq = q[i:i + 8, 0].double().reshape(t.shape[0], HKV, g, HD)
        s = torch.einsum("bhgd,bkhd->bhgk", qq, k) / math.sqrt(HD)
        out[i:i + 8] = torch.einsum("bhgk,bkhd->bhgd", s.softmax(-1), v)
    return out.reshape(b, 1, HQ, HD)


def errors(o, ref):
    """(RMSE, max abs error), both relative to the reference's RMS."""
    d = o.double().reshape(ref.shape) - ref
    rms = ref.pow(2).mean().sqrt().item()
    return d.pow(2).mean().sqrt().item() / rms, d.abs().max().item() / rms


def fi_fn(fi, q, k, v, bt, ps, n, ks=None, vs=None):
    """FlashInfer's CUDA-core paged decode; plan() once here, the callable runs run()."""
    b = q.shape[0]
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
    w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=False, backend="fa2")
    pps = (n + ps - 1) // ps
    indptr = torch.arange(0, b + 1, dtype=torch.int32, device="cuda") * pps
    indices = bt[:, :pps].reshape(-1).contiguous()
    last = torch.full((b,), n - (pps - 1) * ps, dtype=torch.int32, device="cuda")
    w.plan(indptr, indices, last, HQ, HKV, HD, ps, q_data_type=torch.bfloat16,
           kv_data_type=k.dtype, sm_scale=1.0 / math.sqrt(HD))
    q3 = q[:, 0].contiguous()
    o = torch.empty_like(q3)
    kw = {} if ks is None else {"k_scale": ks, "v_scale": vs}
    return o, lambda: w.run(q3, (k, v), out=o, **kw)


def one_shape(b, n, ps, timer, fi, rows, notes):
    gen = torch.Generator(device="cuda").manual_seed(b * 7919 + n)
    pps = (n + ps - 1) // ps
    P = b * pps
    q = torch.randn(b, 1, HQ, HD, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(P, ps, HKV, HD, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(P, ps, HKV, HD, device="cuda", dtype=torch.bfloat16, generator=gen)
    bt = torch.randperm(P, device="cuda", generator=gen).to(torch.int32).reshape(b, pps)
    k8, ks = quantize(k)
    v8, vs = quantize(v)
    used = torch.full((b,), n, dtype=torch.int32, device="cuda")
    o16, o8 = torch.empty_like(q), torch.empty_like(q)
    fns = {
        "fajit bf16": lambda: fajit.attention_with_kvcache(q, k, v, block_table=bt,
                                                           seqused_k=used, out=o16),
        "fajit e4m3": lambda: fajit.attention_with_kvcache(q, k8, v8, block_table=bt,
                                                           seqused_k=used, out=o8,
                                                           k_descale=ks, v_descale=vs),
    }
    outs = {"fajit bf16": o16, "fajit e4m3": o8}
    if fi is not None:
        try:
            outs["FI bf16"], fns["FI bf16"] = fi_fn(fi, q, k, v, bt, ps, n)
            outs["FI e4m3"], fns["FI e4m3"] = fi_fn(fi, q, k8, v8, bt, ps, n, ks.item(),
                                                    vs.item())
        except Exception as ex:   # noqa: BLE001 - a missing module must not stop the run
            notes.append(f"{b}x{n}: FlashInfer not timed: {str(ex).splitlines()[0][:160]}")
    bytes8 = 2 * b * n * HKV * HD
    flat8 = torch.empty(bytes8, dtype=torch.uint8, device="cuda")
    copy8 = torch.empty_like(flat8)
    fns["copy e4m3 bytes"] = lambda: copy8.copy_(flat8)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    ref16 = reference(q, k, v, bt, n)
    ref8 = reference(q, k8, v8, bt, n, ks.double(), vs.double())
    t = timer.interleaved(fns, notes, f"{b}x{n}")
    for name in fns:
        if name not in t:
            continue
        fp8 = "e4m3" in name
        by = bytes8 * (1 if fp8 else 2)
        row = {"shape": f"{b}x{n}", "name": name, "us": t[name], "tbs": by / t[name] / 1e6}
        if name in outs:
            row["rmse"], row["maxe"] = errors(outs[name], ref16)
            if fp8:
                row["kern"] = errors(outs[name], ref8)[1]
        rows.append(row)


def report(args, rows, notes, fi_status):
    g = torch.cuda.get_device_name()
    out = [f"# FP8 paged decode, {datetime.date.today()}, {g}", "",
           f"`{' '.join(sys.argv)}`; {HQ}/{HKV} heads, head_dim {HD}, pages of "
           f"{args.page_size}, q_len 1; fajit {fajit.__version__ if hasattr(fajit, '__version__') else ''}"
           f"; FlashInfer: {fi_status}; torch {torch.__version__}.", "",
           "Errors relative to the float64 reference's RMS over the bf16 cache (`rmse`, "
           "`max`); `kernel` = fajit e4m3 against the reference over the dequantized FP8 "
           "values (max). `x bf16` = that runner's bf16 time over its e4m3 time.", "",
           "| shape | runner | us | TB/s | x bf16 | rmse | max | kernel |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    by = {(r["shape"], r["name"]): r for r in rows}
    for r in rows:
        base = by.get((r["shape"], r["name"].replace("e4m3", "bf16")))
        x = base["us"] / r["us"] if base and "e4m3" in r["name"] and "copy" not in r["name"] \
            else None
        out.append(f"| {r['shape']} | {r['name']} | {r['us']:.1f} | {r['tbs']:.2f} | "
                   f"{'' if x is None else f'{x:.2f}'} | "
                   f"{r['rmse']:.2e} | {r['maxe']:.2e} | {r.get('kern', float('nan')):.1e} |"
                   if "rmse" in r else
                   f"| {r['shape']} | {r['name']} | {r['us']:.1f} | {r['tbs']:.2f} | | | | |")
    out += [""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="1x8192,16x8192,64x16384,128x2048")
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args()
    bd.torch, bd.DEV = torch, "cuda"
    peers = bd.optional_peers()
    fi, fi_status = peers["flashinfer"]
    timer = bd.Timer(256, args.reps, args.rounds)
    rows, notes = [], []
    for s in args.shapes.split(","):
        b, n = (int(x) for x in s.split("x"))
        one_shape(b, n, args.page_size, timer, fi, rows, notes)
    text = report(args, rows, notes, fi_status)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
