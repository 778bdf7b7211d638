"""bench/plot_results.py's table reading on the committed result files the charts in
docs/img are made from (no matplotlib needed)."""
import importlib.util
import json
import os

import pytest

from conftest import ROOT

PREFILL = os.path.join(ROOT, "bench", "results", "2026-11-30-h200-final-i.md")
DECODE = os.path.join(ROOT, "bench", "results", "2026-12-01-h200-decode-a.md")
if not os.path.exists(PREFILL):
    pytest.skip("not run from a source tree", allow_module_level=True)
spec = importlib.util.spec_from_file_location("plot_results",
                                              os.path.join(ROOT, "bench", "plot_results.py"))
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)


def test_prefill_table():
    rows = plot.prefill_rows(PREFILL)
    assert len(rows) == 36   # 3 head_dims x 2 masks x 6 lengths
    assert rows[0] == (64, "none", 512, {"fajit": 366.6, "FLASH": 256.9, "CUDNN": 378.3})
    assert {(r[0], r[1]) for r in rows} == {(h, m) for h in (64, 128, 256)
                                           for m in ("none", "causal")}


def test_decode_table():
    rows = plot.decode_rows(DECODE)
    first = rows[0]
    assert first[:3] == ("64x16384", 1, 4096)
    assert first[3] == {"fajit ps16": 978.7, "fajit contig": 972.9, "FLASH": 1550.5,
                        "CUDNN": 972.0}
    tb = first[2] * 2 ** 20 / (first[3]["fajit ps16"] * 1e-6) / 1e12
    assert abs(tb - 4.39) < 0.01   # the file's own TB/s column
    assert {r[1] for r in rows} == {1, 4, 8}


def test_cells_and_missing_tables(tmp_path):
    assert plot.number("1550.5*") == 1550.5 and plot.number("nan") is None
    assert plot.number("-") is None
    f = tmp_path / "t.md"
    f.write_text("# x\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n| c |\n|---|\n| 3 |\n")
    assert plot.tables(str(f)) == [(["a", "b"], [{"a": "1", "b": "2"}]),
                                   (["c"], [{"c": "3"}])]
    with pytest.raises(SystemExit, match="no table with columns hdim"):
        plot.find_table(str(f), "hdim")


def test_compare_matches_shapes(tmp_path):
    """--compare pairs a fajit-tune bench JSON row with bench_attn.py's cell of its shape."""
    flops = 4 * 32 * 32 * 512 * 512 * 64   # hd64, no mask, 512 tokens, batch 32, 32 heads
    ms = flops / 366.6e12 * 1e3 * 1.02     # 2% slower than the file's 366.6 TFLOP/s
    rows = [dict(head_dim=64, mask="none", seqlen_q=512, seqlen_k=512, flops=flops,
                 median_ms=ms, p10_ms=ms * 0.99, p90_ms=ms * 1.01),
            dict(head_dim=128, mask="causal", seqlen_q=1, seqlen_k=4096, flops=1.0,
                 median_ms=1.0, p10_ms=1.0, p90_ms=1.0)]   # decode: nothing to pair with
    f = tmp_path / "b.json"
    f.write_text(json.dumps({"results": rows}))
    lines = plot.compare(str(f), PREFILL)
    assert len(lines) == 3 and lines[2].startswith("| 64 | none | 512 | 359.4 (355.9..363.0) "
                                                   "| 366.6 | 0.980 |"), lines


goals_spec = importlib.util.spec_from_file_location(
    "decode_goals", os.path.join(ROOT, "bench", "decode_goals.py"))
goals = importlib.util.module_from_spec(goals_spec)
goals_spec.loader.exec_module(goals)
DECODE_REPORT = os.path.join(ROOT, "bench", "results", "2026-12-03-h200-decode-b.md")


def verdicts(text):
    return {(g["goal"], g["what"].split(",")[0].split(" (")[0]): (g["measured"], g["met"])
            for g in goals.evaluate(text)}


def test_decode_goals_on_a_committed_report():
    """The raw report at the end of the 2026-12-03 decode file (after its hand-written summary)."""
    with open(DECODE_REPORT, encoding="utf-8") as f:
        parts = goals.reports(f.read())
    assert len(parts) == 1
    v = verdicts(parts[0])
    assert v[("bandwidth", "16x8192 q1 x CUDNN")] == (0.94, False)
    assert v[("bandwidth", "64x16384 q1 % of copy rw")] == (103, True)
    assert v[("long", "1x32768 q1 % of copy rw")] == (75, False)
    assert v[("latency", "1x4096 q1 us")] == (9.2, False)
    assert v[("latency", "1x1024 q1 us")] == (6.7, True)
    speed, met = v[("mixed", "best separate calls / one call")]
    assert abs(speed - 1783.5 / 1959.7) < 1e-9 and met
    ratio, met = v[("spec", "q8/q1 graph")]
    assert abs(ratio - 11.6 / 9.2) < 1e-9 and not met   # 1x4096 in graph replay
    ratio, met = v[("paged", "contig/ps16 per call")]
    assert abs(ratio - 14.8 / 15.9) < 1e-9 and not met  # 1x4096 q4
    assert all(g["met"] is not None for g in goals.evaluate(parts[0]))
    table = goals.markdown(goals.evaluate(parts[0]))
    assert "| long | 1x32768 q1 % of copy rw | >= 85% | 75% | **no** |" in table
    assert table.endswith("13 met, 7 not met, 0 not measured.")   # of 20


HEAD = (goals.HEADLINE + ", NVIDIA H200\n\n" + goals.CONFIG + " q_len 1\n\n"
        "| shape | q | K+V MiB | fajit ps16 us | TB/s | %copy rd | %copy rw | contig us | "
        "CUDNN us | x CUDNN | ps16/contig | max err |\n|---|---|---|---|---|---|---|---|---|---|"
        "---|---|\n| 16x8192 | 1 | 512 | 125.0 | 4.29 | 190% | 95% | 120.0 | 126.0 | 1.01 | "
        "1.04 | ps16 0.0003 |\n")


def test_decode_goals_unmeasured_and_refused():
    v = verdicts(HEAD)
    assert v[("bandwidth", "16x8192 q1 x CUDNN")] == (1.01, True)
    assert v[("bandwidth", "64x16384 q1 x CUDNN")] == (None, None)   # shape not in the run
    assert v[("latency", "1x1024 q1 us")] == (None, None)            # no graph table
    assert v[("mixed", "best separate calls / one call")] == (None, None)
    assert v[("paged", "contig/ps1 per call")] == (None, None)       # no page size 1 column
    assert v[("spec", "q4/q1 per call")] == (None, None)
    graph = ("\nLatency-bound shapes (K+V < 32 MiB): us per call of 50 back-to-back calls "
             "captured in one CUDA graph.\n\n| shape | q | fajit ps16 | fajit contig |\n"
             "|---|---|---|---|\n| 1x1024 | 1 | 5.0 | 4.9 |\n")
    v = verdicts(HEAD + graph)
    assert v[("latency", "1x1024 q1 us")] == (5.0, None)   # measured, but not over 100 calls
    v = verdicts(HEAD + graph.replace("of 50 back", "of 100 back"))
    assert v[("latency", "1x1024 q1 us")] == (5.0, True)
    # another configuration: no report of the goals' problems, evaluate() refuses it
    other = HEAD.replace("head_dim 128", "head_dim 64")
    assert goals.reports(other) == [] and goals.reports(HEAD + HEAD) == [HEAD, HEAD]
    with pytest.raises(ValueError, match="goals' configuration"):
        goals.evaluate(other)


def test_decode_goals_cli(capsys, tmp_path):
    f = tmp_path / "r.md"
    f.write_text("summary\n\n" + HEAD)
    assert goals.main(["decode_goals.py", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| bandwidth | 16x8192 q1 x CUDNN | >= 1.00 | 1.01 | yes |" in out
    f.write_text(HEAD.replace("head_dim 128", "head_dim 256"))
    assert goals.main(["decode_goals.py", str(f)]) == 1
    assert "no bench_decode.py report" in capsys.readouterr().out
    assert goals.main(["decode_goals.py", str(tmp_path / "missing.md")]) == 1
    assert "missing.md: cannot read it" in capsys.readouterr().out


def test_bench_decode_report_carries_the_goals(tmp_path, monkeypatch):
    """bench_decode.py's report() (no GPU: torch and the library faked) appends the goals'
    table for a run of the goals' configuration, and none for another head_dim."""
    import argparse
    import types
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    bd_spec = importlib.util.spec_from_file_location(
        "bench_decode", os.path.join(ROOT, "bench", "bench_decode.py"))
    bd = importlib.util.module_from_spec(bd_spec)
    bd_spec.loader.exec_module(bd)
    bd.torch = types.SimpleNamespace(
        __version__="0", cuda=types.SimpleNamespace(get_device_name=lambda: "Fake GPU"),
        backends=types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 0)))
    fj = types.SimpleNamespace(lib=types.SimpleNamespace(fajit_version_string=lambda: b"0"))
    cudnn = types.SimpleNamespace(name="CUDNN", notes={})
    t = {"fajit ps16": 125.0, "fajit contig": 120.0, "CUDNN": 126.0}
    rows = [(16, 8192, 1, dict(t=t, tbs=4.29, errs={"ps16": 3e-4}, expanded={},
                               copy_rd=2.1, copy_rw=4.2), None)]
    for hd in (128, 64):
        args = argparse.Namespace(heads_q=32, heads_kv=8, head_dim=hd, num_splits=0, rounds=3,
                                  reps=10, flush_mib=256, flush_mode="read", graph_max_mib=32,
                                  graph_calls=100, graph_replays=10, pages_in_order=False,
                                  out=str(tmp_path / f"r{hd}.md"))
        bd.report(args, fj, rows, [], [], None, [cudnn], {}, [], [], {}, [16], [1], 1.0)
        text = (tmp_path / f"r{hd}.md").read_text()
        assert ("| bandwidth | 16x8192 q1 x CUDNN | >= 1.00 | 1.01 | yes |" in text) == (hd == 128)
    assert goals.reports((tmp_path / "r128.md").read_text())
