#!/usr/bin/env python3
"""probe_peers.py - what the peers run and what the GPU gives, on the shapes of bench_attn.py:
the kernels PyTorch SDPA CUDNN launches (name, grid, block, registers, shared memory, time,
from the torch profiler's trace), and a bf16 GEMM ceiling (torch.matmul 8192^3, do_bench
median) measured in the same process.

usage: probe_peers.py [--shapes 128:none:512,64:causal:512,...] [--json out.json]
       probe_peers.py --ncu-pairs LIB [--shapes ...]
  --ncu-pairs: no profiler, no timing: per shape two fajit launches (LIB, through
  bench_attn.Fajit) then two CUDNN launches on the same tensors, for Nsight Compute to profile
  side by side (ncu --kernel-name regex:'fj_attn|flash_fprop' ...).
"""
import argparse, json, os, tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing


def attn_inputs(hd, seqlen, tokens=16384, hidden=2048):
    b, h = tokens // seqlen, hidden // hd
    mk = lambda: torch.randn(b, h, seqlen, hd, device="cuda", dtype=torch.bfloat16)
    return mk(), mk(), mk()


def kernels_of(fn):
    """(name, grid, block, regs, smem, us) of every kernel one call of fn launches."""
    fn(); torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(); torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    out = []
    for e in json.load(open(path)).get("traceEvents", []):
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            out.append(dict(name=e["name"][:160], grid=a.get("grid"), block=a.get("block"),
                            regs=a.get("registers per thread"), smem=a.get("shared memory"),
                            us=e.get("dur")))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="128:none:512,128:none:16384,64:causal:512,256:none:512")
    ap.add_argument("--json")
    ap.add_argument("--ncu-pairs", metavar="LIB")
    args = ap.parse_args()
    if args.ncu_pairs:
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
        from bench_attn import Fajit
        fj = Fajit(args.ncu_pairs)
        for s in args.shapes.split(","):
            hd, mask, n = s.split(":")
            q, k, v = attn_inputs(int(hd), int(n))
            causal = mask == "causal"
            qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # fajit: (b, s, h, d)
            o = torch.empty_like(qt)
            d = fj.desc(qt, kt, vt, o, causal)
            for _ in range(2):
                fj.fwd(d)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                for _ in range(2):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            print(f"ncu pairs: hd{hd} {mask} {n}", flush=True)
        fj.close()
        return
    res = {"gpu": torch.cuda.get_device_name(), "shapes": []}
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = triton.testing.do_bench(lambda: a @ a)
    res["gemm_8192_tflops"] = 2 * 8192 ** 3 / ms / 1e9
    print(f"bf16 GEMM 8192^3: {res['gemm_8192_tflops']:.0f} TFLOP/s")
    del a
    for s in args.shapes.split(","):
        hd, mask, n = s.split(":")
        q, k, v = attn_inputs(int(hd), int(n))
        causal = mask == "causal"
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            ks = kernels_of(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        res["shapes"].append(dict(hd=int(hd), mask=mask, seqlen=int(n), kernels=ks))
        for kk in ks:
            print(f"hd{hd} {mask} {n}: {kk['name']} grid {kk['grid']} block {kk['block']} "
                  f"regs {kk['regs']} smem {kk['smem']} {kk['us']} us")
    if args.json:
        json.dump(res, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
