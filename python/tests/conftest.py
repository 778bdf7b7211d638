"""Shared by the fajit tests: the repository root, and whether a GPU and torch are here."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The model features a family has not yet run with on a GPU serve only when asked for:
# the tests of them ask, before any context is made.
os.environ.setdefault("FAJIT_MODEL_FEATURES", "on")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def cuda_ok():
    if not HAS_TORCH:
        return False
    import torch
    return torch.cuda.is_available()


needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
needs_gpu = pytest.mark.skipif(not cuda_ok(), reason="needs torch with a CUDA GPU")


@pytest.fixture
def launches(monkeypatch):
    """The descriptors that would reach fajit_attn_fwd, in order, with the C launch replaced
    by a recorder and the CUDA device rule by nothing (CPU tensors stand in for CUDA ones);
    a fresh eager cache per test. For the torch tests without a GPU."""
    from fajit import _torch as T
    from fajit._lib import AttnDesc
    seen = []
    monkeypatch.setattr(T, "_submit", lambda dev, ptr: seen.append(
        AttnDesc.from_buffer_copy(ptr.contents)))
    monkeypatch.setattr(T, "_on_cuda", lambda *a, **kw: None)
    T._descs().clear()
    yield seen
    T._descs().clear()
