#!/usr/bin/env python3
"""plot_results.py - PNG charts from committed benchmark result files (bench/results/*.md):
fajit and its peers as measured in the same run.

  prefill: bench_attn.py's table (hdim | mask | seqlen | ... | fajit | FLASH | CUDNN | ...):
           TFLOP/s by sequence length per head_dim and mask, and fajit's ratio to cuDNN
           (and to FlashAttention-2);
  decode:  bench_decode.py's main table (shape | q | K+V MiB | fajit ps16 us | ...): TB/s of
           K+V read per shape at q_len 1, and fajit's speed-up over cuDNN and FLASH per q_len.

usage: plot_results.py [--prefill FILE.md] [--decode FILE.md] --out DIR
       plot_results.py --compare BENCH.json FILE.md
--compare prints `fajit-tune bench --json`'s prefill medians next to bench_attn.py's fajit
column for the same shapes (do the two timings agree?). The table parsing and --compare need
only the standard library; the charts need matplotlib.
"""
import argparse
import json
import os
import sys


def tables(path):
    """Every markdown table of the file: a list of (header, rows), each row a dict."""
    with open(path, encoding="utf-8") as f:
        return tables_of_lines(f)


def tables_of_lines(lines):
    """tables() over an iterable of lines (a report's text split, an open file)."""
    out, header, rows = [], None, []
    for line in lines:
        line = line.strip()
        cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            if header:
                out.append((header, rows))
            header, rows = None, []
        elif header is None:
            header = cells
        elif set("".join(cells)) <= set("-: "):
            continue   # the separator row
        else:
            rows.append(dict(zip(header, cells)))
    if header:
        out.append((header, rows))
    return out


def find_table(path, *columns):
    """The first table whose header has every one of `columns`."""
    for header, rows in tables(path):
        if all(c in header for c in columns):
            return rows
    sys.exit(f"plot_results.py: {path} has no table with columns {', '.join(columns)}")


def number(cell):
    """'366.6' -> 366.6; '1550.5*' (a peer run another way) -> 1550.5; '-' or 'nan' -> None."""
    try:
        v = float(cell.rstrip("*").strip())
    except ValueError:
        return None
    return None if v != v else v


def prefill_rows(path):
    """[(hdim, mask, seqlen, {'fajit': TF, 'FLASH': TF, 'CUDNN': TF})] in file order."""
    rows = find_table(path, "hdim", "mask", "seqlen", "fajit", "FLASH", "CUDNN")
    return [(int(r["hdim"]), r["mask"], int(r["seqlen"]),
             {n: number(r[n]) for n in ("fajit", "FLASH", "CUDNN")}) for r in rows]


def decode_rows(path):
    """[(shape 'BxN', q_len, K+V MiB, {'fajit ps16': us, 'fajit contig': us, 'FLASH': us,
    'CUDNN': us})] in file order."""
    rows = find_table(path, "shape", "q", "K+V MiB", "fajit ps16 us", "contig us", "FLASH us",
                      "CUDNN us")
    return [(r["shape"], int(r["q"]), number(r["K+V MiB"]),
             {"fajit ps16": number(r["fajit ps16 us"]), "fajit contig": number(r["contig us"]),
              "FLASH": number(r["FLASH us"]), "CUDNN": number(r["CUDNN us"])}) for r in rows]


COLORS = {"fajit": "C0", "fajit ps16": "C0", "fajit contig": "C9", "FLASH": "C1", "CUDNN": "C2"}
LABELS = {"FLASH": "FlashAttention-2 (SDPA FLASH)", "CUDNN": "cuDNN (SDPA CUDNN)",
          "fajit ps16": "fajit, paged (16)", "fajit contig": "fajit, contiguous"}


def plot_prefill(plt, rows, source, out):
    hdims = sorted({r[0] for r in rows})
    masks = [m for m in ("none", "causal") if any(r[1] == m for r in rows)]
    fig, axes = plt.subplots(len(masks), len(hdims), figsize=(4.2 * len(hdims), 3.4 * len(masks)),
                             squeeze=False, sharey=True)
    for i, m in enumerate(masks):
        for j, hd in enumerate(hdims):
            ax = axes[i][j]
            sel = [r for r in rows if r[0] == hd and r[1] == m]
            for name in ("fajit", "FLASH", "CUDNN"):
                pts = [(s, t[name]) for _, _, s, t in sel if t[name] is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3.5,
                        color=COLORS[name], label=LABELS.get(name, name))
            ax.set_xscale("log", base=2)
            ax.set_title(f"head_dim {hd}, {'causal' if m == 'causal' else 'no mask'}", fontsize=10)
            ax.grid(alpha=0.3)
            if i == len(masks) - 1:
                ax.set_xlabel("sequence length (16k tokens per call)")
            if j == 0:
                ax.set_ylabel("TFLOP/s")
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Prefill forward, bf16, H200 - {os.path.basename(source)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "prefill-tflops.png"), dpi=90)

    fig, axes = plt.subplots(1, len(masks), figsize=(5.2 * len(masks), 3.6), squeeze=False,
                             sharey=True)
    for i, m in enumerate(masks):
        ax = axes[0][i]
        for j, hd in enumerate(hdims):
            sel = [r for r in rows if r[0] == hd and r[1] == m]
            for peer, style in (("CUDNN", "o-"), ("FLASH", "s:")):
                pts = [(s, t["fajit"] / t[peer]) for _, _, s, t in sel if t["fajit"] and t[peer]]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=3.5, color=f"C{j}",
                        label=f"hd{hd} / {'cuDNN' if peer == 'CUDNN' else 'FA2'}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"fajit / peer, {'causal' if m == 'causal' else 'no mask'}", fontsize=10)
        ax.set_xlabel("sequence length")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("ratio of TFLOP/s (>1: fajit faster)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle(f"Prefill: fajit vs cuDNN and FlashAttention-2 - {os.path.basename(source)}",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.savefig(os.path.join(out, "prefill-ratio.png"), dpi=90)


def plot_decode(plt, rows, source, out):
    shapes = list(dict.fromkeys(r[0] for r in rows))
    names = ("fajit ps16", "fajit contig", "FLASH", "CUDNN")
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.2
    for k, name in enumerate(names):
        tb = [next((mib * 2 ** 20 / (t[name] * 1e-6) / 1e12 for s, q, mib, t in rows
                    if s == shape and q == 1 and t[name]), 0) for shape in shapes]
        a.bar([x + (k - 1.5) * width for x in range(len(shapes))], tb, width,
              color=COLORS[name], label=LABELS.get(name, name))
    a.set_xticks(range(len(shapes)), [f"{s}" for s in shapes], fontsize=8, rotation=30)
    a.set_ylabel("TB/s of K+V read")
    a.set_title("q_len 1: bandwidth (batch x keys)", fontsize=10)
    a.legend(fontsize=8)
    a.grid(axis="y", alpha=0.3)
    qs = sorted({r[1] for r in rows})
    for k, q in enumerate(qs):
        sp = [next((t["CUDNN"] / t["fajit ps16"] for s, qq, _, t in rows
                    if s == shape and qq == q and t["CUDNN"] and t["fajit ps16"]), 0)
              for shape in shapes]
        b.bar([x + (k - (len(qs) - 1) / 2) * 0.25 for x in range(len(shapes))], sp, 0.25,
              color=f"C{k + 3}", label=f"q_len {q}")
    b.axhline(1.0, color="k", lw=0.8)
    b.set_yscale("log")
    b.set_xticks(range(len(shapes)), shapes, fontsize=8, rotation=30)
    b.set_ylabel("cuDNN time / fajit paged time")
    b.set_title("speed-up over cuDNN (>1: fajit faster)", fontsize=10)
    b.legend(fontsize=8)
    b.grid(axis="y", alpha=0.3)
    fig.suptitle("Decode, bf16, 32 query / 8 KV heads, head_dim 128, H200 - "
                 f"{os.path.basename(source)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "decode.png"), dpi=90)


def compare(bench_json, md):
    """Lines: hdim, mask, seqlen, fajit-tune bench TFLOP/s (p10..p90), bench_attn.py's, ratio."""
    attn = {(h, m, s): t["fajit"] for h, m, s, t in prefill_rows(md)}
    lines = ["| hdim | mask | seqlen | fajit-tune bench TFLOP/s (p10..p90) | bench_attn.py | "
             "ratio |", "|---|---|---|---|---|---|"]
    for r in json.load(open(bench_json))["results"]:
        key = (r["head_dim"], r["mask"], r["seqlen_q"])
        if r["seqlen_q"] != r["seqlen_k"] or key not in attn or not attn[key]:
            continue
        tf = lambda ms: r["flops"] / (ms * 1e-3) / 1e12   # noqa: E731
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {tf(r['median_ms']):.1f} "
                     f"({tf(r['p90_ms']):.1f}..{tf(r['p10_ms']):.1f}) | {attn[key]:.1f} | "
                     f"{tf(r['median_ms']) / attn[key]:.3f} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prefill", help="a result file with bench_attn.py's table")
    ap.add_argument("--decode", help="a result file with bench_decode.py's main table")
    ap.add_argument("--out", help="directory for the PNG files")
    ap.add_argument("--compare", nargs=2, metavar=("BENCH_JSON", "ATTN_MD"),
                    help="print fajit-tune bench's numbers next to bench_attn.py's")
    args = ap.parse_args()
    if args.compare:
        print("\n".join(compare(*args.compare)))
        return
    if not args.out or not (args.prefill or args.decode):
        ap.error("name --out and --prefill and/or --decode (or --compare)")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "fajit"   # no random ids in the output
    os.makedirs(args.out, exist_ok=True)
    if args.prefill:
        plot_prefill(plt, prefill_rows(args.prefill), args.prefill, args.out)
    if args.decode:
        plot_decode(plt, decode_rows(args.decode), args.decode, args.out)
    for f in sorted(os.listdir(args.out)):
        if f.endswith(".png"):
            print(f"{os.path.join(args.out, f)}: {os.path.getsize(os.path.join(args.out, f))} B")


if __name__ == "__main__":
    main()
