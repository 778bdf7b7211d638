#!/usr/bin/env python3
"""floor.py - lab: how fast can anything read a decode step's K/V bytes on this
GPU, timed exactly as bench_decode.py times fajit? Puts a floor under the issue's goals.

Per shape (batch x keys; bf16, 8 KV heads, head_dim 128, q_len 1, page size 16), in one
process, every call after the bench's 256 MiB read flush (bench_decode.Timer):
  copy      dst.copy_(src) of the K+V bytes (the goals' "copy bandwidth", read + write)
  sum       torch's read-only reduction of the same bytes
  flat      a Triton streaming read (grid-stride over the flat bytes; best of a few
            block sizes and grids): the best a kernel that only reads reaches
  gather    a Triton read in decode's pattern: one program per (split, KV head, sequence)
            reading its key tiles page by page through the block table, K and V, nothing
            computed; "inorder" with the pages in order (the contiguous layout), "shuffled"
            with them in random order (bench_decode.make_paged's); best over tile sizes,
            pipeline depths and split counts
  fajit     ps16 shuffled and contiguous, fajit's own choice (as bench_decode.py)
  CUDNN     SDPA's cuDNN backend on the contiguous tensors (32 query heads, GQA)
Latency-bound shapes (< 32 MiB) are also timed as 100-call CUDA graphs (warm L2).

usage: floor.py --lib build/libfajit.so [--shapes 16x8192,...] [--out floor.md]
"""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import bench_decode as bd  # noqa: E402

torch = None      # imported in main(): the kernels compile without it (a check here)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def flat_read(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in tl.range(pid, tl.cdiv(n, BLOCK), nprog, num_stages=STAGES):
        offs = i.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0, cache_modifier=".cg")
    tl.store(out_ptr + pid, tl.sum(acc))


@triton.jit
def gather_read(kv_ptr, bt_ptr, out_ptr, s_kv, s_page, s_tok, s_head, bt_stride, per_split,
                n_tiles, PS: tl.constexpr, T: tl.constexpr, D: tl.constexpr,
                STAGES: tl.constexpr):
    sp = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    t_off = tl.arange(0, T)
    d_off = tl.arange(0, D)
    acc = tl.zeros([T, D], dtype=tl.int32)
    start = sp * per_split
    end = tl.minimum(start + per_split, n_tiles)
    for t in tl.range(start, end, num_stages=STAGES):
        tok = t * T + t_off
        page = tl.load(bt_ptr + b * bt_stride + tok // PS)
        base = page.to(tl.int64) * s_page + (tok % PS) * s_tok + h * s_head
        ptrs = kv_ptr + base[:, None] + d_off[None, :]
        acc += tl.load(ptrs) ^ tl.load(ptrs + s_kv)
    tl.store(out_ptr + (b * tl.num_programs(1) + h) * tl.num_programs(0) + sp, tl.sum(acc))


@triton.jit
def empty(out_ptr):
    tl.store(out_ptr + tl.program_id(0), 0)


def best(timer, fns):
    """{name: fn} -> (best name, its us, all us), interleaved as the bench does."""
    t = timer.interleaved(fns)
    k = min(t, key=t.get)
    return k, t[k], t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--shapes", default="16x8192,1x32768,1x131072,128x2048,64x16384,"
                                        "1x1024,1x2048,1x4096")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    global torch
    import torch as _torch
    torch = _torch
    bd.torch = torch
    import torch.nn.functional as F
    bd.F = F
    from torch.nn.attention import SDPBackend
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    fj = bd.Fajit(a.lib, torch.cuda.current_device())
    timer = bd.Timer(256, a.reps, a.rounds, "read")
    cudnn = bd.SdpaPeer("CUDNN", SDPBackend.CUDNN_ATTENTION)
    hq, hkv, hd, ps = 32, 8, 128, 16
    D = hd * 2 // 4                      # a row in int32 words
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scale = 1 / math.sqrt(hd)
    lines = [f"# floor.py, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "", f"Command: `python3 dev/decode/floor.py --lib {a.lib} --shapes {a.shapes}`; "
             f"torch {torch.__version__}, triton {triton.__version__}, cuDNN "
             f"{torch.backends.cudnn.version()}. us per call (L2 read-flushed; median of "
             f"{a.rounds} interleaved rounds of {a.reps}); %rw: K+V bytes / time over the "
             "copy's (read + write) rate.", "",
             "| shape | MiB | copy | sum | flat read | gather inorder | gather shuffled | "
             "shuffled/inorder | fajit ps16 | fajit contig | CUDNN | best gather cfg |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    glines = ["", "CUDA graph of 100 calls, us per call (warm L2):", "",
              "| shape | empty kernel | gather shuffled | fajit ps16 | CUDNN |", "|---|---|---|---|---|"]
    for shape in a.shapes.split(","):
        b, N = (int(x) for x in shape.split("x"))
        kv = torch.randn(2, b, N, hkv, hd, dtype=torch.bfloat16, device="cuda")
        kv_bytes = kv.numel() * 2
        kvp, bt = bd.make_paged(kv, ps, gen)
        bt_in = torch.arange(bt.numel(), dtype=torch.int32, device="cuda").view_as(bt)
        kv_in = kv.view(2, -1, ps, hkv, hd)            # pages in order: the same bytes
        flat = kv.view(-1)
        flat32 = flat.view(torch.int32)
        dst = torch.empty_like(flat)
        out = torch.empty(1 << 16, dtype=torch.int32, device="cuda")
        copy_t = timer.interleaved({"copy": lambda: dst.copy_(flat),
                                    "sum": lambda: flat.sum(dtype=torch.float32)})
        del dst
        rw = 2 * kv_bytes / copy_t["copy"]              # bytes per us
        n = flat32.numel()
        flat_fns = {}
        for blk in (2048, 4096, 8192):
            for g in (sms * 2, sms * 4, sms * 8):
                for st in (2, 4):
                    flat_fns[f"b{blk}g{g // sms}s{st}"] = (
                        lambda blk=blk, g=g, st=st: flat_read[(g,)](flat32, out, n, BLOCK=blk,
                                                                     STAGES=st, num_warps=8))
        fk, ft, _ = best(timer, flat_fns)
        # decode-pattern gather: split counts near fajit's wave rule
        pairs = b * hkv
        cands = sorted({1} | {s for s in (2, 4, 8, 16, 32)
                              if pairs * s <= 4 * sms and pairs * s > sms // 2})
        res = {}
        for order, (pk, tab) in (("inorder", (kv_in, bt_in)), ("shuffled", (kvp, bt))):
            pk32 = pk.view(torch.int32)
            fns = {}
            for T in (64, 128):
                n_tiles = N // T
                for s in cands:
                    per = -(-n_tiles // s)
                    for st, w in ((3, 4), (4, 4), (3, 8)):
                        grid = (-(-n_tiles // per), hkv, b)
                        fns[f"T{T}s{s}st{st}w{w}"] = (
                            lambda pk32=pk32, tab=tab, per=per, n_tiles=n_tiles, T=T, st=st,
                            w=w, grid=grid: gather_read[grid](
                                pk32, tab, out, pk32.stride(0), pk32.stride(1), pk32.stride(2),
                                pk32.stride(3), tab.stride(0), per, n_tiles, PS=ps, T=T, D=D,
                                STAGES=st, num_warps=w))
            res[order] = best(timer, fns)
            res[order] = res[order] + (fns,)
        # fajit and CUDNN on the same problem
        q = torch.randn(b, 1, hq, hd, dtype=torch.bfloat16, device="cuda")
        used = torch.full((b,), N, dtype=torch.int32, device="cuda")
        o1, o2 = torch.empty_like(q), torch.empty_like(q)
        keep = []
        d1 = bd.fajit_desc(fj, q, kvp[0], kvp[1], o1, N, False, (bt, used), 0)
        d2 = bd.fajit_desc(fj, q, kv[0], kv[1], o2, N, False, None, 0)
        fj.prepare(d1, keep)
        fj.prepare(d2, keep)
        ref = bd.reference(q, kv[0], kv[1], scale)
        fns = {"ps16": lambda: fj.fwd(d1), "contig": lambda: fj.fwd(d2)}
        cfn, _exp, cbuf = cudnn.setup(q, kv[0], kv[1], ref, 2e-2, 1)
        if cfn:
            fns["cudnn"] = cfn
        t = timer.interleaved(fns)
        for nm, o in (("ps16", o1), ("contig", o2)):
            e = bd.max_err(o, ref)
            assert e < 2e-2, f"{shape} fajit {nm} error {e}"

        def c(us):
            return f"{us:.1f} ({100 * kv_bytes / us / rw:.0f}%)"
        gi, gs = res["inorder"], res["shuffled"]
        lines.append(f"| {shape} | {kv_bytes / 2**20:.0f} | {copy_t['copy']:.1f} | "
                     f"{c(copy_t['sum'])} | {c(ft)} {fk} | {c(gi[1])} | {c(gs[1])} | "
                     f"{gs[1] / gi[1]:.3f} | {c(t['ps16'])} | {c(t['contig'])} | "
                     f"{c(t['cudnn']) if 'cudnn' in t else '-'} | in {gi[0]}, sh {gs[0]} |")
        print(lines[-1], flush=True)
        if kv_bytes < 32 << 20:
            ge = bd.graph_time(lambda: empty[(1,)](out), 100, 10)
            gg = min(bd.graph_time(gs[3][k], 100, 10) for k in sorted(gs[2], key=gs[2].get)[:4])
            gf = bd.graph_time(fns["ps16"], 100, 10)
            gc = bd.graph_time(fns["cudnn"], 100, 10) if "cudnn" in fns else float("nan")
            glines.append(f"| {shape} | {ge:.1f} | {gg:.1f} | {gf:.1f} | {gc:.1f} |")
            print(glines[-1], flush=True)
        del kv, kvp, kv_in, flat, flat32, q, keep, fns, cbuf, ref, res
        torch.cuda.empty_cache()
    text = "\n".join(lines + glines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")
    fj.close()


if __name__ == "__main__":
    main()
