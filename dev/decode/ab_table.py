#!/usr/bin/env python3
"""ab_table.py - lab: bench_decode.py reports side by side. The first file is the base; for
each (shape, q) row of it, every file's fajit ps16 us (per call; graph replay where the
report has it) and the time over the base's, plus ps16/contig and the largest max err.

usage: dev/decode/ab_table.py BASE.md OTHER.md [...]   (markdown table to stdout)
"""
import re
import sys


def rows(path):
    """{(shape, q): {"us": ps16 us, "tbs": TB/s, "pc": ps16/contig, "err": max err, "g": graph us}}"""
    out, hdr, graph_hdr = {}, None, None
    for line in open(path):
        if not line.startswith("|"):
            if line.strip():   # text between tables: the next table brings its header
                hdr = graph_hdr = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "shape" and len(cells) > 3 and cells[3].startswith("fajit ps"):
            hdr = cells
            continue
        if cells[0] == "shape" and len(cells) > 2 and cells[2].startswith("fajit ps"):
            graph_hdr = cells
            continue
        if not re.match(r"\d+x\d+$", cells[0]) or cells[0].startswith("---"):
            continue
        key = (cells[0], cells[1])
        if graph_hdr and len(cells) == len(graph_hdr):
            out.setdefault(key, {})["g"] = num(cells[2])
        elif hdr and len(cells) == len(hdr):
            r = out.setdefault(key, {})
            d = dict(zip(hdr, cells))
            ps = [h for h in hdr if h.startswith("fajit ps")][0]
            r["us"], r["tbs"] = num(d[ps]), num(d.get("TB/s"))
            pc = [h for h in hdr if h.endswith("/contig")]
            r["pc"] = num(d[pc[0]]) if pc else None
            errs = [float(x) for x in re.findall(r"\d+\.\d+", d.get("max err", ""))]
            r["err"] = max(errs) if errs else None
    return out


def num(s):
    try:
        return float(str(s).rstrip(" *"))
    except (TypeError, ValueError):
        return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    files = sys.argv[1:]
    tabs = [rows(f) for f in files]
    names = [re.sub(r"\.md$", "", f.rsplit("/", 1)[-1]) for f in files]
    head = ["shape", "q"]
    for i, n in enumerate(names):
        head += [f"{n} us"] + ([f"{n}/base"] if i else []) + [f"{n} TB/s", f"{n} ps16/contig"]
    head += ["graph us " + "/".join(names), "max err"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in tabs[0]:
        base = tabs[0][key]
        cells = list(key)
        for i, t in enumerate(tabs):
            r = t.get(key, {})
            cells.append(fmt(r.get("us")))
            if i:
                ok = r.get("us") and base.get("us")
                cells.append(f"{r['us'] / base['us']:.3f}" if ok else "-")
            cells += [fmt(r.get("tbs"), "%.2f"), fmt(r.get("pc"), "%.2f")]
        cells.append("/".join(fmt(t.get(key, {}).get("g")) for t in tabs))
        errs = [t.get(key, {}).get("err") for t in tabs]
        errs = [e for e in errs if e is not None]
        cells.append(fmt(max(errs) if errs else None, "%.4f"))
        print("| " + " | ".join(cells) + " |")


def fmt(x, f="%.1f"):
    return "-" if x is None else f % x


if __name__ == "__main__":
    main()
