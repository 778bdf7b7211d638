"""bench/plot_results.py's table reading on the committed result files the charts in
docs/img are made from (no matplotlib needed)."""
import importlib.util
import json
import os

import pytest

from conftest import ROOT

PREFILL = os.path.join(ROOT, "bench", "results", "2026-11-30-h200-session12-final.md")
DECODE = os.path.join(ROOT, "bench", "results", "2026-12-01-h200-session13-decode.md")
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
