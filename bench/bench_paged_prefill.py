#!/usr/bin/env python3
"""bench_paged_prefill.py - prefill and chunked prefill over a paged K/V cache (what every
prefill of a vLLM/SGLang server is) against the same problems over contiguous K/V, PyTorch
SDPA's cuDNN backend over contiguous K/V, and FlashInfer's paged prefill where it can run
(bench/fi_prefill.py), in one process on the same tensors. bf16, 32 query / 8 KV heads.

Per problem: fajit paged (pages of --page-size in random order, vLLM's [pages][page_size]
[heads_kv][head_dim] layout) and fajit contiguous must agree (max abs difference <= --tol)
and match SDPA where SDPA runs, then every call is timed with CUDA events after an L2 flush,
in --rounds interleaved rounds (odd rounds reversed), the median of the rounds' medians kept
(bench_decode.py's Timer). Problems:
  prefill  batch x seqlen (batch = --tokens / seqlen), causal and none, per head_dim;
  chunked  --chunk-batch sequences of NEW new tokens over PREFIX cached keys (bottom-right
           causal, the keys in the cache include the new ones);
  mixed    bench_decode.py's mixed step: P chunked-prefill sequences plus D decode rows in
           one varlen call against the two calls (--mixed P,NEW,PREFIX,D,CTX).

usage: bench_paged_prefill.py --lib build/libfajit.so [--out res.md] [--head-dims 128,64]
           [--seqlens 4096,8192,16384] [--chunks 512:4096,2048:4096,512:6144,2048:6144]
"""
import argparse
import ctypes as C
import datetime
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402 - the ctypes mirror, paging, timer, mixed step


def tflops(b, hq, lq, lk, hd, causal, us):
    """Forward FLOPs (4 b hq lq lk hd, the visible half where causal) per microsecond."""
    if causal:   # bottom-right: row i sees lk - lq + i + 1 keys
        pairs = lq * (lk - lq) + lq * (lq + 1) / 2
    else:
        pairs = lq * lk
    return 4.0 * b * hq * pairs * hd / (us * 1e-6) / 1e12


def sdpa_fn(torch, F, q, k, v, causal):
    """SDPA cuDNN over contiguous [b, L, h, d] tensors (BHSD views), GQA expanded where the
    backend refuses enable_gqa; None where it refuses the problem."""
    from torch.nn.attention import sdpa_kernel, SDPBackend
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    g = q.shape[2] // k.shape[2]
    tries = [(kt, vt, dict(enable_gqa=True))] if g > 1 else [(kt, vt, {})]
    if g > 1:
        tries.append((kt.repeat_interleave(g, 1).contiguous(),
                      vt.repeat_interleave(g, 1).contiguous(), {}))
    for kk, vv, kw in tries:
        def fn(kk=kk, vv=vv, kw=kw):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(qt, kk, vv, is_causal=causal, **kw)
        try:
            out = fn()
            torch.cuda.synchronize()
            return fn, out.transpose(1, 2)
        except Exception:   # noqa: BLE001 - refused: try the next way, else no peer
            continue
    return None, None


def fi_fn(q, kvp, bt, lens_k, lens_q, ps, causal):
    try:
        import fi_prefill
    except ImportError as ex:
        return None, f"bench/fi_prefill.py: {ex}"
    torch = bd.torch
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens_q)), dtype=torch.int32,
                      device="cuda")
    used = torch.tensor(lens_k, dtype=torch.int32, device="cuda")
    qf = q.reshape(-1, q.shape[2], q.shape[3])
    for backend in ("fa3", "auto"):
        fn, why = fi_prefill.make_flashinfer_paged_prefill(qf, kvp[0], kvp[1], bt, used, cu, ps,
                                                           causal, backend)
        if fn is not None:
            return fn, why
    return None, why


def run_problem(fj, timer, args, name, b, lq, lk, hd, causal, gen, rows, notes):
    torch = bd.torch
    hq, hkv = args.heads_q, args.heads_kv
    q = torch.randn(b, lq, hq, hd, dtype=torch.bfloat16, device="cuda")
    kv = torch.randn(2, b, lk, hkv, hd, dtype=torch.bfloat16, device="cuda")
    kvp, bt = bd.make_paged(kv, args.page_size, gen)
    o_c, o_p = torch.empty_like(q), torch.empty_like(q)
    keep = []
    dc = bd.fajit_desc(fj, q, kv[0], kv[1], o_c, lk, causal)
    dp = bd.fajit_desc(fj, q, kvp[0], kvp[1], o_p, lk, causal, (bt, None))
    kc, kp = fj.prepare(dc, keep), fj.prepare(dp, keep)
    fj.fwd(dc)
    fj.fwd(dp)
    torch.cuda.synchronize()
    err = bd.max_err(o_p, o_c.float())
    fns = {"paged": lambda: fj.fwd(dp), "contiguous": lambda: fj.fwd(dc)}
    sd_err = float("nan")
    if not args.no_peers:
        sfn, so = sdpa_fn(torch, bd.F, q, kv[0], kv[1], causal) if lq == lk else (None, None)
        if sfn is not None:
            sd_err = bd.max_err(o_c, so.float())
            fns["cudnn"] = sfn
        ffn, why = fi_fn(q, kvp, bt, [lk] * b, [lq] * b, args.page_size, causal)
        if ffn is not None:
            fo = ffn()
            torch.cuda.synchronize()
            fe = bd.max_err(fo.view_as(o_c), o_c.float())
            if fe <= args.tol:
                fns["flashinfer"] = ffn
            else:
                notes.append(f"{name}: flashinfer differs by {fe:.3g}: not timed")
        notes.append(f"{name}: flashinfer: {why}")
    if err > args.tol or (sd_err == sd_err and sd_err > args.tol):
        notes.append(f"{name}: aborted, paged vs contiguous {err:.3g}, contiguous vs cudnn "
                     f"{sd_err:.3g}")
        print(notes[-1], flush=True)
        return
    t = timer.interleaved(fns, notes, name)
    tf = {k: tflops(b, hq, lq, lk, hd, causal, v) for k, v in t.items()}
    rows.append(dict(name=name, t=t, tf=tf, kernel_p=kp, kernel_c=kc, err=err))
    print(f"{name}: " + "  ".join(f"{k} {v:.0f} us {tf[k]:.0f} TF" for k, v in t.items()) +
          f" | paged/contig {t['contiguous'] / t['paged']:.3f}" +
          (f" x cudnn {t['cudnn'] / t['paged']:.3f}" if "cudnn" in t else "") +
          f"\n   paged: {kp}\n   contiguous: {kc}", flush=True)
    del q, kv, kvp, o_c, o_p, keep
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    ap.add_argument("--head-dims", default="128,64")
    ap.add_argument("--seqlens", default="4096,8192,16384")
    ap.add_argument("--masks", default="causal,none")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--chunks", default="512:4096,2048:4096,512:6144,2048:6144",
                    help="NEW:PREFIX chunked-prefill problems ('' for none)")
    ap.add_argument("--chunk-batch", type=int, default=8)
    ap.add_argument("--mixed", default="8,512,4096,120,4096", help="P,NEW,PREFIX,D,CTX ('')")
    ap.add_argument("--heads-q", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--flush-mib", type=int, default=256)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    bd.torch, bd.F = torch, F
    # paged prefill takes the Hopper kernel unless FAJIT_PAGED_PREFILL=decode (docs/usage.md):
    # this bench times that path unless the caller set the variable otherwise
    os.environ.setdefault("FAJIT_PAGED_PREFILL", "hopper")
    fj = bd.Fajit(args.lib, 0)
    gen = torch.Generator().manual_seed(0)
    timer = bd.Timer(args.flush_mib, args.reps, args.rounds)
    rows, notes = [], []
    for hd in map(int, args.head_dims.split(",")):
        for L in map(int, args.seqlens.split(",")):
            for m in args.masks.split(","):
                b = max(1, args.tokens // L)
                run_problem(fj, timer, args, f"prefill hd{hd} {b}x{L} {m}", b, L, L, hd,
                            m == "causal", gen, rows, notes)
        for spec in filter(None, args.chunks.split(",")):
            new, prefix = map(int, spec.split(":"))
            run_problem(fj, timer, args, f"chunked hd{hd} {args.chunk_batch}x({new} over "
                        f"{prefix})", args.chunk_batch, new, prefix + new, hd, True, gen, rows,
                        notes)
    mixed = None
    if args.mixed:
        class A:   # what run_mixed reads of bench_decode's arguments
            num_splits, pages_in_order, tol = 0, False, args.tol
        kernels = {}
        mixed = bd.run_mixed(fj, timer, tuple(map(int, args.mixed.split(","))), args.page_size,
                             args.heads_q, args.heads_kv, 128, 128 ** -0.5, gen, A, notes, kernels)
    dev = torch.cuda.get_device_name()
    lines = [f"# Paged prefill, {datetime.date.today()} on {dev}", "",
             f"`python3 bench/bench_paged_prefill.py {' '.join(sys.argv[1:])}` (fajit "
             f"{fj.lib.fajit_version_string().decode()}, FAJIT_PAGED_PREFILL="
             f"{os.environ['FAJIT_PAGED_PREFILL']}, torch {torch.__version__}, "
             f"{platform.node()}); bf16, {args.heads_q}/{args.heads_kv} heads, pages of "
             f"{args.page_size} in random order; medians of {args.rounds} interleaved rounds of "
             f"{args.reps} calls, L2 flushed before each.", "",
             "| problem | paged us | contiguous us | cudnn us | flashinfer us | paged TFLOP/s | "
             "paged / contiguous | x cudnn | x flashinfer |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["t"]
        g = lambda k: f"{t[k]:.1f}" if k in t else "-"   # noqa: E731
        x = lambda k: f"{t[k] / t['paged']:.3f}" if k in t else "-"   # noqa: E731
        lines.append(f"| {r['name']} | {g('paged')} | {g('contiguous')} | {g('cudnn')} | "
                     f"{g('flashinfer')} | {r['tf']['paged']:.0f} | {x('contiguous')} | "
                     f"{x('cudnn')} | {x('flashinfer')} |")
    if mixed:
        t = mixed["t"]
        lines += ["", f"Mixed step ({mixed['desc']}): one call {t['one call']:.1f} us, prefill "
                  f"{t['prefill']:.1f} + decode {t['decode']:.1f} us, one / sum "
                  f"{t['one call'] / (t['prefill'] + t['decode']):.3f}"]
        lines += [f"- {k[1]}: {v}" for k, v in kernels.items()]
    lines += ["", "Kernels:"] + [f"- {r['name']}: paged `{r['kernel_p']}`; contiguous "
                                 f"`{r['kernel_c']}`" for r in rows]
    if notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    fj.close()


if __name__ == "__main__":
    main()
