#!/usr/bin/env python3
"""host_overhead.py - the host time of one eager attention call from Python: fajit's entry
points against PyTorch SDPA (cuDNN backend) and the C call itself, on a tiny decode problem
(batch 1, 32 query / 8 KV heads, head_dim 128, 1 query row, 256 keys in pages of 16 in
random order; bf16) where the GPU work is a few microseconds and the host's share shows.

Each variant runs --calls eager calls, each timed alone with time.perf_counter_ns (the host
time until the call returns, its launch queued); the stream is synchronized every --sync
calls outside the timed region, so the launch queue never fills and a call never waits for
the GPU. Reports p50 and p90 per call (us) and the p50 over the C floor, as a markdown table:

- fajit.attention_with_kvcache  the eager path, out= given (as a server passes it), and
                                without out (O allocated per call)
- fajit.flash_attn_varlen_func  vLLM's call: packed q, cu_seqlens_q, seqused_k, out=
- prepared                      fajit.prepare_kvcache(...) once, then .run(...) per call
                                (a server's layers within a step), the plain call and
                                vLLM's
- custom-op path                the same call through torch.ops.fajit.fwd_out with the
                                argument checks and a new descriptor every call (the path
                                before the descriptor cache; the one torch.compile traces)
- SDPA cuDNN                    F.scaled_dot_product_attention, backend CUDNN_ATTENTION,
                                contiguous K/V [1, 32, 256, 128] (the KV heads expanded:
                                cuDNN takes no GQA through SDPA); and SDPA's default choice
- launch wrapper                _torch._submit on the prebuilt descriptor: the C call with
                                the eager path's per-call context, CUDA-graph capture and
                                stream queries (its distance to the C floor is theirs)
- C floor, vLLM's descriptor    the C call on the varlen descriptor of vLLM's call (its plan
                                may differ from the plain decode one)
- C floor                       fajit_attn_fwd through ctypes with a prebuilt descriptor and
                                stream (no torch per call)

fajit's output is checked against SDPA's first. The first calls compile or load the kernel
(warm-up, not timed).

--no-gpu measures the Python side alone on a machine without a GPU: CPU tensors of the same
shapes, fajit's launch (_torch._submit) and its CUDA-device rule (_torch._on_cuda) replaced by
no-ops, as python/tests/test_torch_fast.py does; the SDPA rows are left out and the floor row
is a ctypes call of fajit_attn_check with the prebuilt descriptor (the shape of the C call,
no GPU). Its numbers are the binding's own cost per call, before the launch.

usage: FAJIT_LIB=build/libfajit.so PYTHONPATH=python python3 bench/host_overhead.py
           [--calls 2000] [--sync 128] [--out host.md] [--no-gpu]
"""
import argparse
import ctypes as C
import datetime
import os
import platform
import sys
import time

DEV = "cuda"   # a dry run of the script's logic on CPU sets "cpu"


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def _synchronize():
    if DEV == "cuda":
        import torch
        torch.cuda.synchronize()


def timed(fn, calls, sync, warmup=50):
    for _ in range(warmup):
        fn()
    _synchronize()
    ns = []
    clock = time.perf_counter_ns
    for i in range(calls):
        if i % sync == 0:
            _synchronize()
        t = clock()
        fn()
        ns.append(clock() - t)
    _synchronize()
    return [x / 1000 for x in ns]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--sync", type=int, default=128, help="synchronize every N calls "
                    "(untimed), so the launch queue never fills")
    ap.add_argument("--keys", type=int, default=256)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--no-gpu", action="store_true", help="the Python side alone: CPU "
                    "tensors, the launch and the CUDA rule replaced by no-ops, no SDPA rows")
    a = ap.parse_args()

    global DEV
    import torch
    import torch.nn.functional as F
    import fajit
    from fajit import _torch as T
    from fajit._lib import lib
    if a.no_gpu:
        DEV = "cpu"
        T._submit = lambda dev, ptr: None
        T._on_cuda = lambda *args, **kwargs: None
    elif DEV == "cuda" and not torch.cuda.is_available():
        print("host_overhead.py: needs torch with a CUDA GPU (--no-gpu: the Python side "
              "alone)", file=sys.stderr)
        return 77

    torch.manual_seed(0)
    dev, bf = DEV, torch.bfloat16
    hq, hkv, d, n, ps = 32, 8, 128, a.keys, a.page_size
    pages = -(-n // ps)
    pool = 4 * pages
    q = torch.randn(1, 1, hq, d, device=dev, dtype=bf)
    kv = torch.randn(2, pool, ps, hkv, d, device=dev, dtype=bf)   # vLLM: (2, blocks, ...)
    kp, vp = kv.unbind(0)
    bt = torch.randperm(pool, device=dev)[:pages].to(torch.int32).view(1, pages)
    used = torch.tensor([n], dtype=torch.int32, device=dev)
    out = torch.empty_like(q)
    qp, outp = q.view(1, hq, d), out.view(1, hq, d)   # packed rows for the varlen call
    cu = torch.tensor([0, 1], dtype=torch.int32, device=dev)
    # contiguous twins for SDPA: [1, heads, keys, d], the KV heads expanded
    k_seq = kp[bt[0].long()].reshape(pages * ps, hkv, d)[:n]
    v_seq = vp[bt[0].long()].reshape(pages * ps, hkv, d)[:n]
    qs = q.transpose(1, 2)
    ks = k_seq.transpose(0, 1).repeat_interleave(hq // hkv, 0).unsqueeze(0).contiguous()
    vs = v_seq.transpose(0, 1).repeat_interleave(hq // hkv, 0).unsqueeze(0).contiguous()

    def fast_out():
        fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used, out=out)

    def fast_alloc():
        fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used)

    def varlen():
        fajit.flash_attn_varlen_func(q=qp, k=kp, v=vp, out=outp, cu_seqlens_q=cu,
                                     max_seqlen_q=1, seqused_k=used, max_seqlen_k=n,
                                     softmax_scale=d ** -0.5, causal=True,
                                     window_size=[-1, -1], block_table=bt, num_splits=0)

    # the prepared call (fajit.prepare_kvcache once, run per layer): the plain decode call
    # and vLLM's (packed q, cu_seqlens_q, causal)
    prep = fajit.prepare_kvcache(q, kp, vp, block_table=bt, seqused_k=used, out=out)
    vprep = fajit.prepare_kvcache(qp, kp, vp, out=outp, cu_seqlens_q=cu, max_seqlen_q=1,
                                  seqused_k=used, max_seqlen_k=n, scale=d ** -0.5,
                                  causal=True, block_table=bt)

    def prepared():
        prep.run(q, kp, vp, out=out, block_table=bt, seqused_k=used)

    def prepared_varlen():
        vprep.run(qp, kp, vp, out=outp, block_table=bt, seqused_k=used, cu_seqlens_q=cu,
                  max_seqlen_q=1, max_seqlen_k=n)

    def custom_op():
        T._FAST = False
        try:
            fast_out()
        finally:
            T._FAST = True

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        cudnn = sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    except ImportError:
        cudnn = None

    def sdpa():
        return F.scaled_dot_product_attention(qs, ks, vs)

    # the floor: fajit_attn_fwd with a prebuilt descriptor, the stream fetched once
    desc = T._build(q, kp, vp, out, None, None, bt, used, 1, n, T.NONE, -1, -1, None, 0, 0,
                    None)
    ptr = C.pointer(desc)
    # vLLM's call's descriptor (packed q, cu_seqlens_q, causal): the C side of that row
    vdesc = T._build(qp, kp, vp, outp, cu, None, bt, used, 1, n, T.CAUSAL, -1, -1, d ** -0.5,
                     0, 0, None)
    vptr = C.pointer(vdesc)
    if a.no_gpu:   # the same ctypes call shape, no GPU: fajit_attn_check(NULL, desc)
        check = lib.fajit_attn_check

        def c_floor():
            check(None, ptr)
    else:
        ctx = fajit.default_context(q.get_device())
        stream = torch.cuda.current_stream().cuda_stream if DEV == "cuda" else None
        fwd = lib.fajit_attn_fwd

        def c_floor():
            fwd(ctx._ptr, ptr, stream)

        def c_floor_varlen():
            fwd(ctx._ptr, vptr, stream)

        submit, dev_index = T._submit, q.get_device()

        def launch_wrapper():   # the eager path's launch: context, capture and stream
            submit(dev_index, ptr)   # queries, then the C call

    # correctness first: every fajit variant against SDPA (math on the same inputs)
    ref = F.scaled_dot_product_attention(qs.float(), ks.float(), vs.float()).transpose(1, 2)
    for name, fn, o in (("eager, out=", fast_out, out), ("flash_attn_varlen_func", varlen,
                                                         out), ("custom op", custom_op, out),
                        ("prepared", prepared, out), ("prepared, vLLM's call", prepared_varlen,
                                                      out),
                        ("C floor", c_floor, out)):
        out.zero_()
        fn()
        _synchronize()
        err = (o.float() - ref).abs().max().item()
        assert err < 2e-2 or DEV != "cuda", f"{name}: max error {err} against SDPA"
    o = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used)
    assert (o.float() - ref).abs().max().item() < 2e-2 or DEV != "cuda"

    rows = []
    variants = [
        ("fajit.attention_with_kvcache(..., out=) (eager path)", fast_out),
        ("fajit.attention_with_kvcache(...) (eager path, O allocated)", fast_alloc),
        ("fajit.flash_attn_varlen_func (vLLM's call, out=)", varlen),
        ("fajit.prepare_kvcache(...).run(..., out=) (prepared once)", prepared),
        ("prepared, vLLM's call (packed q, cu_seqlens_q, causal)", prepared_varlen),
        ("custom-op path (checks + new descriptor + fajit::fwd_out)", custom_op),
    ]
    for name, fn in variants:
        rows.append((name, timed(fn, a.calls, a.sync)))
    if a.no_gpu:
        pass
    elif cudnn is None:
        rows.append(("SDPA cuDNN: torch.nn.attention.sdpa_kernel missing", None))
    else:
        try:
            with cudnn:
                sdpa()
                rows.append(("SDPA cuDNN (contiguous K/V, heads expanded)",
                             timed(sdpa, a.calls, a.sync)))
        except RuntimeError as e:
            rows.append((f"SDPA cuDNN: not run ({str(e).splitlines()[0][:80]})", None))
    if not a.no_gpu:
        rows.append(("SDPA, default backend (contiguous K/V, heads expanded)",
                     timed(sdpa, a.calls, a.sync)))
        rows.append(("launch wrapper: _torch._submit, prebuilt descriptor",
                     timed(launch_wrapper, a.calls, a.sync)))
        rows.append(("C floor, vLLM's call's descriptor (varlen, causal)",
                     timed(c_floor_varlen, a.calls, a.sync)))
        rows.append(("C floor: fajit_attn_fwd via ctypes, prebuilt descriptor",
                     timed(c_floor, a.calls, a.sync)))
    else:
        rows.append(("ctypes floor: fajit_attn_check(NULL, prebuilt descriptor)",
                     timed(c_floor, a.calls, a.sync)))
    floor = percentile(rows[-1][1], 50)

    if a.no_gpu:
        name = ("no GPU (--no-gpu): CPU tensors, fajit's launch and CUDA rule replaced by "
                "no-ops, so the fajit rows are the binding's Python side alone")
    else:
        name = torch.cuda.get_device_name()
    lines = [f"# Host time per eager call, {datetime.date.today()}",
             "",
             f"{name}; torch {torch.__version__}; fajit {fajit.__version__}; Python "
             f"{platform.python_version()}; {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}). "
             f"bf16, batch 1, {hq}/{hkv} heads, head_dim {d}, 1 query row, {n} keys in pages "
             f"of {ps}; {a.calls} calls each, synchronized every {a.sync} (untimed).",
             f"Command: `python3 bench/host_overhead.py --calls {a.calls} --sync {a.sync}"
             f"{' --no-gpu' if a.no_gpu else ''}`",
             "",
             "| call | p50 us | p90 us | p50 over the C floor us |",
             "|---|---:|---:|---:|"]
    for name, us in rows:
        if us is None:
            lines.append(f"| {name} | - | - | - |")
        else:
            p50, p90 = percentile(us, 50), percentile(us, 90)
            lines.append(f"| {name} | {p50:.1f} | {p90:.1f} | {p50 - floor:+.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
