#!/usr/bin/env python3
"""split_sweep.py - fajit's decode time per forced split count (num_splits), to set the
split heuristic of src/families/decode.c from measurements. Lab script (GPU host).

For each shape (batch x keys; bf16, 32 q heads, 8 KV heads, head_dim 128, q_len 1, paged
page size 16, pages shuffled) and each split count (0 = fajit's own choice): max error
against the float32 reference, the L2-flushed time (median of --rounds interleaved rounds
of the median of --reps calls, bench_decode.py's Timer) and, for shapes under 32 MiB of
K+V, the CUDA-graph replay time per call (100 calls per graph: warm L2, no launch gaps).
CUDNN (SDPA) in the same process for the ratio. Prints a markdown table.

usage: split_sweep.py --lib build/libfajit.so [--shapes 1x1024,...] [--splits 0,4,8,...]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import bench_decode as bd  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--shapes", default="1x1024,1x2048,1x4096,1x32768,1x131072,16x8192,4x8192")
    ap.add_argument("--splits", default="0,1,2,4,8,12,16,24,32,48,64,96,128")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch
    from torch.nn.attention import SDPBackend
    bd.torch, bd.F = torch, torch.nn.functional
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    fj = bd.Fajit(a.lib, torch.cuda.current_device())
    timer = bd.Timer(256, a.reps, a.rounds)
    hq, hkv, hd = 32, 8, 128
    scale = 1 / math.sqrt(hd)
    splits = [int(x) for x in a.splits.split(",")]
    lines = ["| shape | splits | fajit us | graph us | TB/s | x CUDNN | CUDNN us | CUDNN graph us "
             "| max err | kernel |", "|---|---|---|---|---|---|---|---|---|---|"]
    for shape in a.shapes.split(","):
        b, N = (int(x) for x in shape.split("x"))
        kv_bytes = 2 * b * N * hkv * hd * 2
        small = kv_bytes < 32 << 20
        kv = torch.randn(2, b, N, hkv, hd, dtype=torch.bfloat16, device="cuda")
        kvp, bt = bd.make_paged(kv, 16, gen)
        used = torch.full((b,), N, dtype=torch.int32, device="cuda")
        q = torch.randn(b, 1, hq, hd, dtype=torch.bfloat16, device="cuda")
        ref = bd.reference(q, kv[0], kv[1], scale)
        peer = bd.SdpaPeer("CUDNN", SDPBackend.CUDNN_ATTENTION)
        cfn, _, _ = peer.setup(q, kv[0], kv[1], ref, 2e-2, 1)
        fns, keep, desc = {}, [], {}
        tiles = -(-N // 64)
        for s in splits:
            if s > tiles or s > 128:
                continue
            o = torch.full_like(q, float("nan"))
            d = bd.fajit_desc(fj, q, kvp[0], kvp[1], o, N, False, (bt, used), s)
            desc[s] = fj.prepare(d, keep)
            fj.fwd(d)
            torch.cuda.synchronize()
            desc[s] = (desc[s], bd.max_err(o, ref))
            keep.append((d, o))
            fns[s] = (lambda d=d: fj.fwd(d))
        all_fns = {f"s{s}": f for s, f in fns.items()}
        if cfn:
            all_fns["cudnn"] = cfn
        t = timer.interleaved(all_fns)
        g = {n: bd.graph_time(f, 100, 10) for n, f in all_fns.items()} if small else {}
        ct, cg = t.get("cudnn"), g.get("cudnn")
        for s in fns:
            us = t[f"s{s}"]
            text, err = desc[s]
            grid = text.split("grid ")[1].split(")")[0] + ")" if "grid " in text else text[:60]
            lines.append(f"| {shape} | {s} | {us:.1f} | {g.get(f's{s}', float('nan')):.1f} | "
                         f"{kv_bytes / us / 1e6:.2f} | {ct / us if ct else float('nan'):.2f} | "
                         f"{ct or float('nan'):.1f} | {cg or float('nan'):.1f} | {err:.4f} | "
                         f"{grid} |")
        print("\n".join(lines[-len(fns):]), flush=True)
        del kv, kvp, bt, q, ref, keep, fns, all_fns
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")
    fj.close()


if __name__ == "__main__":
    main()
