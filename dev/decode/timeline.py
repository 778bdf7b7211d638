#!/usr/bin/env python3
"""timeline.py - lab: where a decode call's time goes, CTA by CTA.

Needs a library built from a worktree that dev/decode/timeline_apply.py edited (stamps in
the u64 buffer whose address is in the environment variable FJ_LAB_TL, [cta][16]; the list
of stamps is in that script).
Per shape (bf16, 32/8 heads, head_dim 128, q_len 1 or --q-len; pages of --page-size in random order
or contiguous), cold calls after the bench's 256 MiB read flush and the last call of a
100-call CUDA graph (warm L2). Prints, in us from the first CTA's entry: the entry spread,
the prologue, the stream (loop) time and rate per CTA, the tail (epilogue, arrival, merge),
the last stamp against the call's event time, and CTAs per SM.

usage: timeline.py --lib LIB [--shapes 1x32768,16x8192] [--page-size 16] [--csv DIR]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import bench_decode as bd  # noqa: E402

torch = None


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))] if v else float("nan")


STAMPS = ["entry", "wait", "ids", "len", "Q", "issued", "tile0", "loop", "epi1", "parts",
          "merger", "staged", "merged", "left"]   # 13: the cluster's second barrier (or --twice)


def summarize(tag, raw, ev_us, kv_bytes, ctas):
    """raw: [cta][16] u64 stamps (STAMPS, 15: smid | ntiles << 16). Per step, the time from
    the previous stamp: min/median/max over the CTAs that have it."""
    t = raw.view(-1, 16)[:ctas].cpu().tolist()
    rows = [r for r in t if r[0] != 0]
    t0 = min(r[0] for r in rows)
    tiles = [r[15] >> 16 for r in rows]
    sms = {r[15] & 0xffff for r in rows}
    merged = [r for r in rows if r[12] and r[12] >= r[10] >= r[9]]   # this call's mergers
    ends = [(max(r[9], r[12] if r in merged else 0, r[13]) - t0) / 1e3 for r in rows]
    f = lambda v: "%.2f/%.2f/%.2f" % (min(v), statistics.median(v), max(v)) if v else "-"  # noqa
    print(f"  {tag}: event {ev_us:.1f} us, last stamp {max(ends):.1f}, CTAs {len(rows)} on "
          f"{len(sms)} SMs, tiles/CTA {min(tiles)}-{max(tiles)}")
    print(f"    entry (from the first) {f([(r[0] - t0) / 1e3 for r in rows])}")
    parts = []
    for k in range(1, 14):   # from the latest earlier stamp the CTA has
        src = merged if k >= 11 else rows
        v = []
        for r in src:
            j = max((j for j in range(k) if r[j] and r[j] <= r[k]), default=None)
            if r[k] and j is not None:
                v.append((r[k] - r[j]) / 1e3)
        parts.append(f"{STAMPS[k]} {f(v)}")
    for i in range(0, len(parts), 4):
        print("    " + "; ".join(parts[i:i + 4]))
    loop = [(r[7] - r[5]) / 1e3 for r in rows]
    rate = [x * kv_bytes / max(1, sum(tiles)) / (y * 1e-6) / 1e9 for x, y in zip(tiles, loop)
            if y > 0]
    print(f"    loop (issued -> loop end) {f(loop)} us, {f(rate)} GB/s per CTA; loop end "
          f"{f([(r[7] - t0) / 1e3 for r in rows])}; mergers {len(merged)}")
    seen = [r for r in merged if r[14] >= r[10]]
    if seen:
        print(f"    merger waits for the others' partials (10 -> 14) "
              f"{f([(r[14] - r[10]) / 1e3 for r in seen])}, then stages (14 -> 11) "
              f"{f([(r[11] - r[14]) / 1e3 for r in seen if r[11] >= r[14]])}")
    again = [r for r in merged if r[13] > r[12]]   # --twice: the second merge
    if again:
        print(f"    merge, first pass (arrive -> 12) {f([(r[12] - r[10]) / 1e3 for r in again])};"
              f" second pass (12 -> 13) {f([(r[13] - r[12]) / 1e3 for r in again])}, its "
              f"staging {f([(r[11] - r[12]) / 1e3 for r in again if r[11] > r[12]])}")
    if merged:   # the critical path: the group that finished last
        r = max(merged, key=lambda x: x[12])
        print("    last group's merger: " + ", ".join(
            f"{STAMPS[k]} {(r[k] - t0) / 1e3:.2f}" for k in range(14) if r[k]))
    return rows


def main():
    global torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--shapes", default="1x32768,16x8192,1x131072,1x4096,128x2048")
    ap.add_argument("--page-size", type=int, default=16, help="0: contiguous K/V")
    ap.add_argument("--num-splits", type=int, default=0)
    ap.add_argument("--calls", type=int, default=3, help="cold calls recorded per shape")
    ap.add_argument("--q-len", type=int, default=1, help="query rows per sequence (> 1: "
                    "bottom-right causal, as bench_decode.py)")
    ap.add_argument("--csv", help="write per-CTA stamps here (raw, not for the repo)")
    args = ap.parse_args()
    import torch as _t
    torch = _t
    bd.torch = torch
    bd.DEV = "cuda"
    fj = bd.Fajit(args.lib, 0)
    timer = bd.Timer(256, 1, 1)
    gen = torch.Generator(device="cpu").manual_seed(0)
    hq, hkv, hd = 32, 8, 128
    buf = torch.zeros(1 << 21, dtype=torch.int64, device="cuda")
    for s in args.shapes.split(","):
        b, N = (int(x) for x in s.split("x"))
        qq = torch.randn(b, args.q_len, hq, hd, dtype=torch.bfloat16, generator=gen).cuda()
        kv = torch.randn(2, b, N, hkv, hd, dtype=torch.bfloat16, generator=gen).cuda()
        o = torch.empty_like(qq)
        keep = []
        if args.page_size:
            kvp, bt = bd.make_paged(kv, args.page_size, gen)
            used = torch.full((b,), N, dtype=torch.int32, device="cuda")
            d = bd.fajit_desc(fj, qq, kvp[0], kvp[1], o, N, args.q_len > 1, (bt, used),
                              num_splits=args.num_splits)
        else:
            d = bd.fajit_desc(fj, qq, kv[0], kv[1], o, N, args.q_len > 1,
                              num_splits=args.num_splits)
        desc = fj.prepare(d, keep)
        kv_bytes = 2 * b * N * hkv * hd * 2
        print(f"{s} q{args.q_len} ps{args.page_size}: {desc}")
        for _ in range(5):
            fj.fwd(d)
        torch.cuda.synchronize()
        ev = timer.once(lambda: fj.fwd(d))   # the untimed-stamp baseline (median of 1)
        ctas = 1 << 17
        for c in range(args.calls):
            buf.zero_()
            os.environ["FJ_LAB_TL"] = str(buf.data_ptr())
            timer.do_flush()
            s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record()
            fj.fwd(d)
            e0.record()
            torch.cuda.synchronize()
            del os.environ["FJ_LAB_TL"]
            rows = summarize(f"cold {c}", buf, s0.elapsed_time(e0) * 1e3, kv_bytes, ctas)
            if args.csv:
                os.makedirs(args.csv, exist_ok=True)
                with open(os.path.join(args.csv, f"{s}_ps{args.page_size}_cold{c}.csv"),
                          "w") as fh:
                    for r in rows:
                        fh.write(",".join(str(x) for x in r) + "\n")
        print(f"  (without stamps: {ev:.1f} us cold)")
        if kv_bytes < (32 << 20):
            buf.zero_()
            os.environ["FJ_LAB_TL"] = str(buf.data_ptr())
            us = bd.graph_time(lambda: fj.fwd(d), 100, 10)
            del os.environ["FJ_LAB_TL"]
            summarize(f"graph (last of 100; {us:.2f} us/call)", buf, us, kv_bytes, ctas)
            us0 = bd.graph_time(lambda: fj.fwd(d), 100, 10)
            print(f"  (graph without stamps: {us0:.2f} us/call)")
        del keep
    fj.close()


if __name__ == "__main__":
    main()
