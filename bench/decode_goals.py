#!/usr/bin/env python3
"""decode_goals.py - the serving path's performance goals (issue 18) checked against a
bench_decode.py report: which are met, which are not, by how much, and which the report did
not measure. bench_decode.py appends this table to its own report; run alone it reads a
committed report (the raw output of one run, not a hand-made summary).

The goals hold for bf16, 32 query heads over 8 KV heads, head_dim 128, the H200, paged K/V
at page size 16 (the report's headline column), peers in the same run:

  bandwidth  64x16k, 128x2k, 16x8k, q_len 1: >= 1.0x CUDNN and >= 90% of the copy's
             read+write rate (K+V bytes over fajit's time)
  long       1x32k, 1x128k, q_len 1: >= 85% of the copy's read+write rate
  latency    1x1k, 1x2k, 1x4k, q_len 1: <= 8 us per call in CUDA-graph replay of 100 calls
  paged      every shape and q_len, per call and in graph replay: page size 16 >= 0.95x and
             page size 1 >= 0.8x the same problem contiguous (contiguous time / paged time)
  mixed      the mixed batch in one call >= 0.9x the speed of the better of the separate calls
             (their sum, or both back to back)
  spec       q_len 4 and 8 within 1.2x the q_len 1 time, per call and in graph replay

usage: decode_goals.py REPORT.md [REPORT.md ...]
Standard library only (the table reading of plot_results.py).
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_results import number, tables_of_lines  # noqa: E402

HEADLINE = "# fajit decode vs PyTorch SDPA"
CONFIG = "bf16, heads 32 query / 8 KV, head_dim 128;"
BANDWIDTH = ("64x16384", "128x2048", "16x8192")
LONG = ("1x32768", "1x131072")
LATENCY = ("1x1024", "1x2048", "1x4096")


def _find(tabs, *cols):
    for header, rows in tabs:
        if all(c in header for c in cols):
            return rows
    return None


def _row(rows, shape, q):
    for r in rows or ():
        if r.get("shape") == shape and r.get("q") == str(q):
            return r
    return None


def _goal(name, what, target, measured, met, fmt="%.2f"):
    """One line of the verdict: met is True, False or None (not measured)."""
    return dict(goal=name, what=what, target=target, measured=measured, met=met, fmt=fmt)


def evaluate(text):
    """The goals' verdicts for a report's text: a list of dicts (goal, what, target, measured,
    met). Raises ValueError when the report is not of the goals' configuration."""
    if CONFIG not in text:
        raise ValueError("not the goals' configuration (" + CONFIG.rstrip(";") + ")")
    tabs = tables_of_lines(text.splitlines())
    main = _find(tabs, "shape", "q", "fajit ps16 us", "%copy rw", "ps16/contig")
    graph = _find(tabs, "shape", "q", "fajit ps16", "fajit contig")
    mixed = _find(tabs, "one call us", "prefill us", "decode us", "both us")
    m = re.search(r"us per call of (\d+) back-to-back calls", text)
    graph_calls = int(m.group(1)) if m else None
    out = []

    def pct(cell):
        return number(cell.rstrip("%")) if cell else None

    for s in BANDWIDTH:
        r = _row(main, s, 1)
        x = number(r.get("x CUDNN", "-")) if r else None
        rw = pct(r["%copy rw"]) if r else None
        out.append(_goal("bandwidth", f"{s} q1 x CUDNN", ">= 1.00", x,
                         None if x is None else x >= 1.0))
        out.append(_goal("bandwidth", f"{s} q1 % of copy rw", ">= 90%", rw,
                         None if rw is None else rw >= 90, "%.0f%%"))
    for s in LONG:
        r = _row(main, s, 1)
        rw = pct(r["%copy rw"]) if r else None
        out.append(_goal("long", f"{s} q1 % of copy rw", ">= 85%", rw,
                         None if rw is None else rw >= 85, "%.0f%%"))
    for s in LATENCY:
        r = _row(graph, s, 1)
        us = number(r["fajit ps16"]) if r else None
        what = f"{s} q1 us, graph of {graph_calls or '?'} calls"
        ok = None if us is None or graph_calls != 100 else us <= 8.0
        out.append(_goal("latency", what, "<= 8.0", us, ok, "%.1f"))
    for label, rows, cols in (("per call", main, ("fajit ps16 us", "ps1 us", "contig us")),
                              ("graph", graph, ("fajit ps16", "fajit ps1", "fajit contig"))):
        for col, ps, floor in ((cols[0], "ps16", 0.95), (cols[1], "ps1", 0.8)):
            worst = None
            for r in rows or ():
                t, c = number(r.get(col, "-")), number(r.get(cols[2], "-"))
                if t and c and (worst is None or c / t < worst[0]):
                    worst = (c / t, f"{r['shape']} q{r['q']}")
            out.append(_goal("paged", f"contig/{ps} {label}, worst of the report"
                             + (f" ({worst[1]})" if worst else ""), f">= {floor:.2f}",
                             worst and worst[0], None if worst is None else worst[0] >= floor))
    if mixed:
        r = mixed[0]
        one, both = number(r["one call us"]), number(r["both us"])
        sep = number(r["prefill+decode us"])
        best = min(v for v in (sep, both) if v) if (sep or both) else None
        speed = best / one if best and one else None
        out.append(_goal("mixed", "best separate calls / one call", ">= 0.90",
                         speed, None if speed is None else speed >= 0.9))
    else:
        out.append(_goal("mixed", "best separate calls / one call", ">= 0.90", None, None))
    for label, rows, col in (("per call", main, "fajit ps16 us"), ("graph", graph, "fajit ps16")):
        for q in (4, 8):
            worst = None
            for r in rows or ():
                if r.get("q") != str(q):
                    continue
                base = _row(rows, r["shape"], 1)
                t, t1 = number(r[col]), base and number(base[col])
                if t and t1 and (worst is None or t / t1 > worst[0]):
                    worst = (t / t1, r["shape"])
            out.append(_goal("spec", f"q{q}/q1 {label}, worst of the report"
                             + (f" ({worst[1]})" if worst else ""), "<= 1.20",
                             worst and worst[0],
                             None if worst is None else worst[0] <= 1.2))
    return out


def reports(text):
    """The bench_decode.py reports of the goals' configuration in a file's text (results
    files may hold several, after a hand-written summary), each from its headline."""
    parts = re.split(r"(?m)^(?=" + re.escape(HEADLINE) + ")", text)
    return [p for p in parts if p.startswith(HEADLINE) and CONFIG in p]


def markdown(goals):
    """The verdicts as a markdown table plus a count line."""
    lines = ["| goal | what | target | measured | met |", "|---|---|---|---|---|"]
    for g in goals:
        m = g["measured"]
        cell = "-" if m is None else g["fmt"] % m
        verdict = {True: "yes", False: "**no**", None: "not measured"}[g["met"]]
        lines.append(f"| {g['goal']} | {g['what']} | {g['target']} | {cell} | {verdict} |")
    met = sum(g["met"] is True for g in goals)
    missed = sum(g["met"] is False for g in goals)
    lines += ["", f"{met} met, {missed} not met, {len(goals) - met - missed} not measured."]
    return "\n".join(lines)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    rc = 0
    for path in argv[1:]:
        try:
            with open(path, encoding="utf-8") as f:
                parts = reports(f.read())
        except (OSError, UnicodeDecodeError) as ex:
            print(f"decode_goals.py: {path}: cannot read it: {ex}\n")
            rc = 1
            continue
        if not parts:
            print(f"decode_goals.py: {path}: no bench_decode.py report of the goals' "
                  f"configuration ({CONFIG.rstrip(';')})\n")
            rc = 1
        for i, text in enumerate(parts):
            print(f"## {path}" + (f", report {i + 1}" if len(parts) > 1 else "") + "\n")
            print(markdown(evaluate(text)) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
