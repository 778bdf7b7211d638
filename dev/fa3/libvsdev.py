#!/usr/bin/env python3
"""libvsdev.py - the same kernel launched two ways in one process, on the same tensors: through
the library (libfajit.so: fajit_attn_fwd, as bench_attn.py calls it) and from this harness's
cubin (run_fa3.py's Kernel: cuModuleLoadData + cuLaunchKernel), and CUDNN beside them, each
timed with triton's do_bench (rep FA3_REP_MS, default 300 as bench_attn.py) in FA3_REPS rounds,
odd rounds reversed; medians (MORE=1: three more launches of the harness's cubin that
change one thing each: no LSE, the library's output buffer, a second module). Why (run 44 of NOTES.md): bench_attn.py read the library 3-6%
below the harness's figures for SASS-identical kernels while CUDNN read the same in both.

usage: python3 libvsdev.py LIBFAJIT   (cubins: FA3_CUBINS / cubins, role "bench", default tiles)
"""
import ctypes, json, os, statistics, sys

import torch
import triton.testing as tt
from torch.nn.attention import SDPBackend

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))  # bench_attn
import run_fa3 as R  # noqa: E402
from bench_attn import Fajit, sdpa  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    fj = Fajit(sys.argv[1])
    try:
        reps, rep_ms = int(os.environ.get("FA3_REPS", "5")), int(os.environ.get("FA3_REP_MS", "300"))
        shapes = [tuple(int(f) for f in x.split(":"))
                  for x in os.environ.get("SHAPES", "128:0:2048,128:0:16384").split(",")]
    except ValueError as e:
        sys.exit(f"libvsdev.py: FA3_REPS, FA3_REP_MS are integers, SHAPES hd:causal:seqlen,...: {e}")
    if reps < 1 or rep_ms < 1 or any(len(x) != 3 or x[0] < 16 or x[1] not in (0, 1) or x[2] < 1
                                     or 16384 % x[2] or 2048 % x[0] for x in shapes):
        sys.exit("libvsdev.py: FA3_REPS and FA3_REP_MS >= 1; SHAPES hd:causal:seqlen with causal 0 or 1, "
                 "seqlen dividing 16384 and hd dividing 2048")
    man = [m for m in json.load(open(os.path.join(R.CUBINS, "manifest.json"))) if m["ok"] and m["role"] == "bench"]
    torch.manual_seed(0)
    for hd, causal, S in shapes:
        cands = [m for m in man if m["hd"] == hd and m["mask"] == causal and not m.get("extra")]
        if len(cands) != 1:
            print(f"hd{hd} causal {causal}: {len(cands)} default cubins, need 1", flush=True)
            continue
        kern = R.Kernel(cands[0])
        B, H = 16384 // S, 2048 // hd
        flops = 4 * B * H * S * S * hd / (2 if causal else 1)
        q, k, v = (torch.randn(B, S, H, hd, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o_lib, o_dev = torch.full_like(q, float("nan")), torch.full_like(q, float("nan"))
        lse = torch.empty(B, H, S, device="cuda")
        d = fj.desc(q, k, v, o_lib, causal)
        st = [q.stride(0), q.stride(1), q.stride(2)] * 3 + [o_dev.stride(0), o_dev.stride(1), o_dev.stride(2)]

        def dev_with(o_ptr, lse_ptr, k2=kern):
            """a launch of the harness's cubin (module k2) into o_ptr / lse_ptr (0: no LSE)"""
            return k2.prepare(R.pack_params(q.data_ptr(), k.data_ptr(), v.data_ptr(), o_ptr, lse_ptr, 0, 0,
                                            st, B, H, H, hd, S, S, -1, 0 if causal else -1, hd ** -0.5), 0, 0)
        go = dev_with(o_dev.data_ptr(), lse.data_ptr())
        fj.fwd(d)
        R.ck(go(), "launch")
        torch.cuda.synchronize()
        diff = (o_lib.float() - o_dev.float()).abs().max().item()
        fns = {"lib": lambda: fj.fwd(d), "dev": go,
               "cudnn": lambda: sdpa(q, k, v, bool(causal), SDPBackend.CUDNN_ATTENTION)}
        if os.environ.get("MORE") == "1":
            # what differs between the two launches, one thing at a time: the LSE (the library's
            # call writes none), the output buffer (the library's), the module (a second copy)
            fns["dev_nolse"] = dev_with(o_dev.data_ptr(), 0)
            fns["dev_olib"] = dev_with(o_lib.data_ptr(), 0)
            fns["dev_mod2"] = dev_with(o_dev.data_ptr(), lse.data_ptr(), R.Kernel(cands[0]))
        order = list(fns)
        samples = {n: [] for n in order}
        for rnd in range(reps):
            for n in (order if rnd % 2 == 0 else order[::-1]):
                samples[n].append(flops / tt.do_bench(fns[n], warmup=50, rep=rep_ms, return_mode="median") / 1e9)
        med = {n: statistics.median(x) for n, x in samples.items()}
        print(f"hd{hd} {'causal' if causal else 'none  '} S={S:5d} {cands[0]['file']}: "
              + " ".join(f"{n} {med[n]:.0f}" for n in order)
              + f" TFLOP/s | lib/dev {med['lib'] / med['dev']:.3f} | max|o_lib-o_dev| {diff:.2e} | "
              + " ".join(f"{n} {[round(x) for x in samples[n]]}" for n in order if n != "cudnn"), flush=True)
        del q, k, v, o_lib, o_dev, lse
    fj.close()


if __name__ == "__main__":
    main()
