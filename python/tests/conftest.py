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
