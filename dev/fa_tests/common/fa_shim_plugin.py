"""fa_shim_plugin - pytest plugin for flash-attention's tests run through fa_shim
(`pytest -p fa_shim_plugin`):

- a test that raised fa_shim.ShimUnsupported or fajit.Error FAJIT_UNSUPPORTED is reported
  skipped, with the message as the reason (each reason's count is in the summary);
- FA_SUMMARY=path: passed / failed / skipped counts, the skip reasons by count, and the
  failures' first lines, written there at the end (markdown);
- FA_SELECT: a Python expression over a test's parameters (their names in the test's
  signature; torch too), e.g. "d in (64, 128) and dtype == torch.bfloat16": the items for
  which it is false are deselected (a name the test lacks reads as None);
- FA_LIMIT=N: at most N items of each test function, evenly spaced over its
  parametrizations (after FA_SELECT and -k), so a short run still spans the grid;
- FA_COLLECT_ONLY_CPU=1 (collection without a GPU): torch.cuda's device queries that the
  test modules make at import answer as an H100 (sm_90, 80 GB), so `--collect-only` shows
  the parametrizations a Hopper run gets.
"""
import collections
import os
import re

import pytest

if os.environ.get("FA_COLLECT_ONLY_CPU") == "1":
    import torch

    if not torch.cuda.is_available():
        class _Props:
            total_memory = 80 * 2**30
            major, minor = 9, 0
            name = "collect-only (no GPU)"

        torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
        torch.cuda.get_device_properties = lambda *a, **k: _Props()

_counts = collections.Counter()
_reasons = collections.Counter()
_failures = []


def _reason(text):
    """A skip reason with its numbers masked, so that alike reasons count together."""
    return re.sub(r"-?\d+(\.\d+)?", "N", text)[:160]


def _selected(item, expr):
    import torch
    params = _Params(getattr(getattr(item, "callspec", None), "params", {}))
    params.setdefault("torch", torch)
    return bool(eval(expr, {}, params))


class _Params(dict):
    """A test's parameters; a name it lacks reads as None (one FA_SELECT for several test
    functions)."""

    def __missing__(self, name):
        return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    expr, limit = os.environ.get("FA_SELECT"), int(os.environ.get("FA_LIMIT", "0") or 0)
    if not expr and not limit:
        return
    keep = [it for it in items if _selected(it, expr)] if expr else list(items)
    if limit:
        by_fn = collections.OrderedDict()
        for it in keep:
            by_fn.setdefault(it.originalname, []).append(it)
        keep = []
        for group in by_fn.values():
            step = max(1, len(group) / limit)
            keep += [group[int(i * step)] for i in range(min(limit, len(group)))]
    kept = set(map(id, keep))
    dropped = [it for it in items if id(it) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is None or rep.when != "call":
        return
    import fa_shim
    exc = call.excinfo.value
    if fa_shim.is_unsupported(exc):
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        rep.outcome = "skipped"
        rep.longrepr = (str(item.path), item.location[1] or 0, f"unsupported: {msg}")


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _counts[report.outcome] += 1
        if report.outcome == "skipped":
            lr = report.longrepr
            text = lr[2] if isinstance(lr, tuple) else str(lr)
            _reasons[_reason(text)] += 1
        elif report.outcome == "failed":
            lines = str(report.longrepr).strip().splitlines()
            msg = next((ln for ln in lines if ln.startswith("E ")), lines[-1] if lines else "")
            _failures.append((report.nodeid, str(msg)[:200]))


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.section("fajit shim summary")
    tr.write_line(", ".join(f"{k} {v}" for k, v in sorted(_counts.items())) or "no tests ran")
    for r, n in _reasons.most_common(25):
        tr.write_line(f"  skipped {n:6d}  {r}")
    path = os.environ.get("FA_SUMMARY")
    if not path:
        return
    with open(path, "w") as f:
        f.write("| outcome | tests |\n|---|---|\n")
        for k, v in sorted(_counts.items()):
            f.write(f"| {k} | {v} |\n")
        f.write("\n| skipped | reason |\n|---|---|\n")
        for r, n in _reasons.most_common():
            f.write(f"| {n} | {r.replace('|', '/')} |\n")
        if _failures:
            f.write("\nfailures (first 200):\n\n")
            for nodeid, msg in _failures[:200]:
                f.write(f"- `{nodeid}`: {msg}\n")
