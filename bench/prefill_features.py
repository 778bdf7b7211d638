#!/usr/bin/env python3
"""prefill_features.py - what the model features cost in prefill, and the models that need
them against their peers, in one process on the same tensors (fajit through its Python
package):

  cost   softcap (cap 30), sinks ([heads_q] in [0, 2)) and ALiBi (flash-attn's slopes) each
         on and off, bf16, causal, 32/8 heads, head_dim 64 and 128, batch * seqlen = 16k
         tokens: the time with the feature over the time without it;
  gptoss GPT-OSS's attention (64/8 heads, head_dim 64, sinks, a 128-key window: window
         (127, 0)), fajit against cuDNN's SDPA with sinks (cudnn.sdpa_torch from the
         nvidia-cudnn-frontend package, when importable);
  probe  cuDNN's window and sink conventions against fajit's reference (which match);
  mla    DeepSeek's prefill (128/128 heads, head_dim 192, head_dim_v 128, causal): fajit's
         TFLOP/s (real FLOPs: 2 * (d + dv) per visible pair) against its own 192/192 and
         against cuDNN (cudnn.sdpa_torch, and torch SDPA's CUDNN backend where it takes
         d_qk != d_v).

Every fajit output is checked against a float32 PyTorch reference of the same math on a
slice of the rows (max abs error; a NaN fails the row). Times: CUDA events, L2 flushed before
each call, interleaved rounds (bench_decode.py's Timer), median.

usage: FAJIT_MODEL_FEATURES=on PYTHONPATH=python python3 bench/prefill_features.py
           [--parts cost,gptoss,mla] [--seqlens 2048,4096,8192,16384] [--out r.md]
"""
import argparse
import datetime
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_decode as bd  # noqa: E402 - its Timer

import fajit  # noqa: E402

DEV = "cuda"
TOKENS = 16384


def alibi_slopes(h):
    """flash-attn's (and BLOOM's) slopes: a geometric sequence from 2^(-8/n)."""
    n = 2 ** math.floor(math.log2(h))
    s = [2 ** (-8 * (i + 1) / n) for i in range(n)]
    if n < h:
        s += [2 ** (-4 * (2 * i + 1) / n) for i in range(h - n)]
    return torch.tensor(s, dtype=torch.float32, device=DEV)


def reference(q, k, v, causal=True, window=None, softcap=0.0, sinks=None, alibi=None, rows=256):
    """float32 attention of the last `rows` queries of batch 0 (the rows that see the most
    keys), BSHD tensors, bottom-right aligned masks as fajit's."""
    lq, lk, hq, hkv = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    g = hq // hkv
    qs = q[0, lq - rows:].float().transpose(0, 1)                          # [hq, r, d]
    kk = k[0].float().repeat_interleave(g, 1).transpose(0, 1)              # [hq, lk, d]
    vv = v[0].float().repeat_interleave(g, 1).transpose(0, 1)
    s = qs @ kk.transpose(1, 2) / math.sqrt(q.shape[-1])
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(lq - rows, lq, device=DEV)[:, None] + (lk - lq)
    j = torch.arange(lk, device=DEV)[None, :]
    if alibi is not None:
        s = s - alibi[:, None, None] * (i - j).abs()[None]
    bad = torch.zeros_like(i - j, dtype=torch.bool)
    if causal:
        bad |= j > i
    if window is not None:
        bad |= j < i - window[0]
    s = s.masked_fill(bad[None], float("-inf"))
    if sinks is not None:
        s = torch.cat([s, sinks[:, None, None].expand(-1, rows, 1)], -1)
    p = s.softmax(-1)
    if sinks is not None:
        p = p[..., :-1]
    return (p @ vv).transpose(0, 1)                                        # [r, hq, dv]


def err(o, ref):
    e = (o[0, -ref.shape[0]:].float() - ref).abs().max().item()
    return e if math.isfinite(e) else float("nan")


def pairs(L, window=None):
    """Visible (query, key) pairs of one head of one causal sequence of L queries and keys
    (a window (left, 0): each query sees at most left + 1 keys)."""
    if window is None:
        return L * (L + 1) // 2
    w = window[0] + 1
    return w * (w + 1) // 2 + (L - w) * w if L > w else L * (L + 1) // 2


def tflops(b, hq, d, dv, n_pairs, us):
    return 2.0 * b * hq * (d + dv) * n_pairs / (us * 1e-6) / 1e12


def cudnn_sdpa():
    """cudnn.sdpa_torch (nvidia-cudnn-frontend) or None, with why."""
    try:
        import cudnn  # noqa: F401
        from cudnn.sdpa.fwd.torch_op import sdpa
        return sdpa, f"cudnn-frontend {getattr(cudnn, '__version__', '?')}, " \
                     f"cuDNN {getattr(cudnn, 'backend_version', lambda: '?')()}"
    except Exception as ex:   # noqa: BLE001 - a peer that does not import is reported, not fatal
        return None, f"cudnn-frontend not importable: {str(ex).splitlines()[0][:160]}"


def bhsd(t):
    return t.transpose(1, 2)


def part_cost(timer, args, rows, notes):
    hq, hkv = 32, 8
    for d in args.hdims:
        for L in args.seqlens:
            b = max(1, TOKENS // L)
            g = torch.Generator(device=DEV).manual_seed(L + d)
            q, k, v = (torch.randn(b, L, h, d, generator=g, device=DEV, dtype=torch.bfloat16)
                       for h in (hq, hkv, hkv))
            sinks = torch.rand(hq, generator=g, device=DEV) * 2
            slopes = alibi_slopes(hq)
            feats = {"base": {}, "softcap": {"softcap": 30.0}, "sinks": {"sinks": sinks},
                     "alibi": {"alibi_slopes": slopes}}
            fns, errs = {}, {}
            for name, kw in feats.items():
                fns[name] = (lambda kw=kw: fajit.attention(q, k, v, causal=True, **kw))
                ref = reference(q, k, v, softcap=kw.get("softcap", 0.0), sinks=kw.get("sinks"),
                                alibi=kw.get("alibi_slopes"))
                errs[name] = err(fns[name](), ref)
            t = timer.interleaved(fns, notes, f"d{d} {b}x{L}")
            base = t.get("base")
            for name in feats:
                if name not in t:
                    continue
                rows.append(("cost", f"d{d} {b}x{L}", name, t[name],
                             f"{t[name] / base:.3f}" if base else "-", "", f"{errs[name]:.1e}"))
            print(rows[-4:], flush=True)


def part_gptoss(timer, args, rows, notes, peer):
    hq, hkv, d, win = 64, 8, 64, (127, 0)
    sdpa, _ = peer
    for L in args.seqlens:
        b = max(1, TOKENS // L)
        g = torch.Generator(device=DEV).manual_seed(7 * L)
        q, k, v = (torch.randn(b, L, h, d, generator=g, device=DEV, dtype=torch.bfloat16)
                   for h in (hq, hkv, hkv))
        sinks = torch.rand(hq, generator=g, device=DEV) * 2
        fns = {"fajit": lambda: fajit.attention(q, k, v, causal=True, window=win, sinks=sinks)}
        ref = reference(q, k, v, window=win, sinks=sinks)
        e = {"fajit": err(fns["fajit"](), ref)}
        if sdpa is not None:
            qb, kb, vb = bhsd(q), bhsd(k), bhsd(v)
            fns["cudnn"] = lambda: sdpa(qb, kb, vb, is_causal=True, window_left=win[0],
                                        window_right=0, sinks=sinks)
            try:
                e["cudnn"] = err(bhsd(fns["cudnn"]()), ref)
            except Exception as ex:   # noqa: BLE001
                notes.append(f"gpt-oss {b}x{L} cudnn: {str(ex).splitlines()[0][:200]}")
                del fns["cudnn"]
        t = timer.interleaved(fns, notes, f"gpt-oss {b}x{L}")
        n = pairs(L, win)
        for name in fns:
            if name in t:
                rows.append(("gpt-oss", f"{b}x{L}", name, t[name],
                             f"{t.get('cudnn', float('nan')) / t[name]:.3f}" if name == "fajit" else "",
                             f"{tflops(b, hq, d, d, n, t[name]):.0f}", f"{e.get(name, float('nan')):.1e}"))
        print(rows[-len(t):], flush=True)


def part_cudnn_probe(rows, notes, peer):
    """Which of cuDNN's window and sink conventions match fajit's (and flash-attn's): the
    max error of cudnn.sdpa_torch against the reference for each variant, GPT-OSS's heads,
    one 2k sequence."""
    sdpa, _ = peer
    if sdpa is None:
        return
    hq, hkv, d, L = 64, 8, 64, 2048
    g = torch.Generator(device=DEV).manual_seed(5)
    q, k, v = (torch.randn(1, L, h, d, generator=g, device=DEV, dtype=torch.bfloat16)
               for h in (hq, hkv, hkv))
    sinks = torch.rand(hq, generator=g, device=DEV) * 2
    qb, kb, vb = bhsd(q), bhsd(k), bhsd(v)
    cases = [("causal", {}, {}), ("causal sinks", {"sinks": sinks}, {"sinks": sinks}),
             ("window 127", {"window": (127, 0)}, {"window_left": 127, "window_right": 0}),
             ("window 127 as left 128", {"window": (127, 0)},
              {"window_left": 128, "window_right": 0}),
             ("window 127 sinks", {"window": (127, 0), "sinks": sinks},
              {"window_left": 127, "window_right": 0, "sinks": sinks}),
             ("window 127 sinks [1,h,1,1]", {"window": (127, 0), "sinks": sinks},
              {"window_left": 127, "window_right": 0, "sinks": sinks.view(1, hq, 1, 1)})]
    for name, rk, ck in cases:
        ref = reference(q, k, v, **rk)
        try:
            e = err(bhsd(sdpa(qb, kb, vb, is_causal=True, **ck)), ref)
        except Exception as ex:   # noqa: BLE001
            e = float("nan")
            notes.append(f"cudnn probe {name}: {str(ex).splitlines()[0][:160]}")
        rows.append(("cudnn-probe", f"1x{L}", name, 0.0, "", "", f"{e:.1e}"))


def part_mla(timer, args, rows, notes, peer):
    h, d, dv = 128, 192, 128
    sdpa, _ = peer
    for L in args.seqlens:
        b = max(1, TOKENS // L)
        g = torch.Generator(device=DEV).manual_seed(11 * L)
        q, k = (torch.randn(b, L, h, d, generator=g, device=DEV, dtype=torch.bfloat16) for _ in "qk")
        v = torch.randn(b, L, h, dv, generator=g, device=DEV, dtype=torch.bfloat16)
        v192 = torch.randn(b, L, h, d, generator=g, device=DEV, dtype=torch.bfloat16)
        fns = {"fajit 192/128": lambda: fajit.attention(q, k, v, causal=True),
               "fajit 192/192": lambda: fajit.attention(q, k, v192, causal=True)}
        e = {"fajit 192/128": err(fns["fajit 192/128"](), reference(q, k, v, rows=128))}
        qb, kb, vb = bhsd(q), bhsd(k), bhsd(v)
        if sdpa is not None:
            fns["cudnn-fe 192/128"] = lambda: sdpa(qb, kb, vb, is_causal=True)
        fns["torch-cudnn 192/128"] = lambda: bd_sdpa_cudnn(qb, kb, vb)
        for name in [n for n in fns if not n.startswith("fajit")]:
            try:
                e[name] = err(bhsd(fns[name]()), reference(q, k, v, rows=128))
            except Exception as ex:   # noqa: BLE001
                notes.append(f"mla {b}x{L} {name}: {str(ex).splitlines()[0][:200]}")
                del fns[name]
        t = timer.interleaved(fns, notes, f"mla {b}x{L}")
        n = pairs(L)
        tf = {name: tflops(b, h, d, dv if "/128" in name else d, n, t[name]) for name in t}
        for name in t:
            ratio = ""
            if name == "fajit 192/128":
                ratio = " ".join(f"{tf[name] / tf[o]:.3f}x {o.split()[0]}"
                                 for o in tf if o != name)
            rows.append(("mla", f"{b}x{L}", name, t[name], ratio, f"{tf[name]:.0f}",
                         f"{e.get(name, float('nan')):.1e}" if name in e else ""))
        print(rows[-len(t):], flush=True)


def bd_sdpa_cudnn(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="cost,gptoss,mla,probe")
    ap.add_argument("--seqlens", default="2048,4096,8192,16384")
    ap.add_argument("--hdims", default="64,128")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out")
    args = ap.parse_args()
    args.seqlens = [int(x) for x in args.seqlens.split(",")]
    args.hdims = [int(x) for x in args.hdims.split(",")]
    parts = args.parts.split(",")
    bd.torch, bd.F = torch, F   # bench_decode imports them in its own main()
    timer = bd.Timer(64, args.reps, args.rounds)
    peer = cudnn_sdpa()
    rows, notes = [], [peer[1]]
    if "cost" in parts:
        part_cost(timer, args, rows, notes)
    if "gptoss" in parts:
        part_gptoss(timer, args, rows, notes, peer)
    if "mla" in parts:
        part_mla(timer, args, rows, notes, peer)
    if "probe" in parts:
        part_cudnn_probe(rows, notes, peer)
    lines = [f"# prefill features, {datetime.date.today()}, {torch.cuda.get_device_name()}",
             "", f"command: `{' '.join(sys.argv)}`; torch {torch.__version__}, "
             f"cuDNN {torch.backends.cudnn.version()}", "",
             "| part | shape | kernel | us | ratio | TFLOP/s | max err |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {p} | {s} | {k} | {us:.1f} | {r} | {tf} | {e} |" for p, s, k, us, r, tf, e in rows]
    lines += ["", "cost ratio: time with the feature / time without; gpt-oss ratio: cuDNN time / "
              "fajit's; mla ratio: fajit 192/128's TFLOP/s over each other's.", ""]
    lines += [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
