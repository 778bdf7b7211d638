"""The shim's translation without a GPU: flash-attn's arguments as fajit receives them (the
fajit functions replaced by recorders), and, through fajit's own CPU-side checks with the
launch replaced by a recorder (as python/tests do), the descriptor fields a translated
call gives. Run: PYTHONPATH=dev/fa_tests/common:python FAJIT_LIB=build/libfajit.so
python3 -m pytest -q dev/fa_tests/test_shim.py"""
import importlib
import os
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "common"), os.path.join(HERE, "fa3"), os.path.join(HERE, "fa2")):
    if p not in sys.path:
        sys.path.insert(0, p)
os.environ.setdefault("FAJIT_MODEL_FEATURES", "on")

import fajit  # noqa: E402
from fajit import _torch as T  # noqa: E402
from fajit._lib import AttnDesc  # noqa: E402

import fa_shim as S  # noqa: E402

fa3 = importlib.import_module("flash_attn_interface")
fa2 = importlib.import_module("flash_attn.flash_attn_interface")
BF = torch.bfloat16


@pytest.fixture
def calls(monkeypatch):
    """fajit's three functions replaced by recorders that return (out, lse) of q's shape."""
    seen = []

    def rec(name):
        def f(q, *args, **kwargs):
            seen.append((name, q, args, kwargs))
            lse = torch.zeros(1)
            out = torch.zeros_like(q)
            ret = kwargs.get("return_lse", kwargs.get("return_softmax_lse"))
            return (out, lse) if ret else out
        return f
    for name in ("attention", "attention_with_kvcache", "flash_attn_varlen_func"):
        monkeypatch.setattr(fajit, name, rec(name))
    return seen


@pytest.fixture
def launches(monkeypatch):
    seen = []
    monkeypatch.setattr(T, "_submit", lambda dev, ptr: seen.append(
        AttnDesc.from_buffer_copy(ptr.contents)))
    monkeypatch.setattr(T, "_on_cuda", lambda *a, **kw: None)
    T._descs().clear()
    yield seen
    T._descs().clear()


def qkv(b=2, sq=8, sk=16, hq=4, hkv=2, d=64, dv=None):
    return (torch.randn(b, sq, hq, d, dtype=BF), torch.randn(b, sk, hkv, d, dtype=BF),
            torch.randn(b, sk, hkv, dv or d, dtype=BF))


def test_window():
    assert S.window(False, (-1, -1)) == (False, None)
    assert S.window(True, (-1, -1)) == (True, None)
    assert S.window(True, (5, 7)) == (False, (5, 0))            # causal: right side 0
    assert S.window(False, torch.tensor([3, 4])) == (False, (3, 4))
    assert S.window(False, [-1, 0]) == (True, None)
    assert S.window(False, (-1, 2)) == (False, (1 << 30, 2))
    assert S.window(False, None) == (False, None)


def test_fa3_dense(calls):
    q, k, v = qkv()
    out, lse = fa3.flash_attn_func(q, k, v, causal=True, window_size=torch.tensor([4, 9]),
                                   softcap=15.0, num_splits=3, pack_gqa=True,
                                   return_attn_probs=True)
    name, _, _, kw = calls[-1]
    assert name == "attention" and kw["window"] == (4, 0) and not kw["causal"]
    assert kw["softcap"] == 15.0 and kw["k_descale"] is None and out.shape == q.shape


@pytest.mark.parametrize("bad, what", [
    (dict(qv=torch.zeros(1)), "qv"), (dict(attention_chunk=7), "attention_chunk")])
def test_fa3_unsupported(calls, bad, what):
    q, k, v = qkv()
    with pytest.raises(S.ShimUnsupported, match=what):
        fa3.flash_attn_func(q, k, v, **bad)
    assert not calls


def test_head_dim_v_passes_and_fp8_q_unsupported(calls):
    q, k, v = qkv(d=192, dv=128)   # DeepSeek's 192 / 128: v as given, fajit takes it
    fa3.flash_attn_func(q, k, v)
    assert calls[-1][0] == "attention" and calls[-1][2][1] is v
    if hasattr(torch, "float8_e4m3fn"):
        q, k, v = (t.to(torch.float8_e4m3fn) for t in qkv())
        with pytest.raises(S.ShimUnsupported, match="FP8 q"):
            fa3.flash_attn_func(q, k, v)


def test_fa3_varlen_goes_to_fajits_varlen(calls):
    q, k, v = (t.flatten(0, 1) for t in qkv())
    cu = torch.tensor([0, 8, 16], dtype=torch.int32)
    cuk = torch.tensor([0, 16, 32], dtype=torch.int32)
    fa3.flash_attn_varlen_func(q, k, v, cu, cuk, 8, 16, softmax_scale=0.5,
                               window_size=[2, 3], num_splits=3)
    name, _, args, kw = calls[-1]
    assert name == "flash_attn_varlen_func" and args[2] is cu and args[3] is cuk
    assert args[4:] == (8, 16) and kw["window_size"] == (2, 3) and kw["num_splits"] == 3
    assert kw["softmax_scale"] == 0.5 and kw["return_softmax_lse"]
    with pytest.raises(S.ShimUnsupported, match="seqused_q"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cuk, 8, 16, seqused_q=cu[1:] - 1)
    with pytest.raises(S.ShimUnsupported, match="seqused_k"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cuk, 8, 16, seqused_k=cu[1:])
    # the whole lengths (FA3's tests pass them always) say nothing more: dropped
    fa3.flash_attn_varlen_func(q, k, v, cu, cuk, 8, 16, seqused_q=cu.diff(), seqused_k=cuk.diff())
    assert calls[-1][3]["seqused_k"] is None


def test_kvcache_contiguous_cache_is_one_page_per_sequence(calls):
    q, k, v = qkv(b=3, sq=1, sk=40)
    seqlens = torch.tensor([5, 40, 17], dtype=torch.int32)
    fa3.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, causal=True, num_splits=3,
                                scheduler_metadata=fa3.get_scheduler_metadata(3, 1, 40, 4, 2,
                                                                              64, seqlens))
    _, _, args, kw = calls[-1]
    assert args[0] is k and args[1] is v
    assert kw["block_table"].tolist() == [[0], [1], [2]] and kw["seqused_k"].tolist() == [5, 40, 17]
    assert kw["num_splits"] == 3 and kw["causal"] and kw["window"] is None
    idx = torch.tensor([2, 0, 1], dtype=torch.int32)
    fa2.flash_attn_with_kvcache(q, k, v, cache_seqlens=7, cache_batch_idx=idx)
    kw = calls[-1][3]
    assert kw["block_table"].tolist() == [[2], [0], [1]] and kw["seqused_k"].tolist() == [7] * 3


def test_kvcache_paged_rows_by_cache_batch_idx(calls):
    q = torch.randn(2, 1, 4, 64, dtype=BF)
    pages = torch.randn(8, 16, 2, 64, dtype=BF)
    table = torch.arange(8, dtype=torch.int32).reshape(4, 2)
    idx = torch.tensor([3, 1], dtype=torch.int32)
    fa3.flash_attn_with_kvcache(q, pages, pages, page_table=table, cache_batch_idx=idx,
                                cache_seqlens=torch.tensor([3, 30], dtype=torch.int32))
    assert calls[-1][3]["block_table"].tolist() == [[6, 7], [2, 3]]


@pytest.mark.parametrize("bad, what", [
    (dict(k=torch.zeros(1), v=torch.zeros(1)), "appending"),
    (dict(rotary_cos=torch.zeros(1), rotary_sin=torch.zeros(1)), "rotary"),
    (dict(cache_leftpad=torch.zeros(2, dtype=torch.int32)), "leftpad")])
def test_kvcache_unsupported(calls, bad, what):
    q, k, v = qkv(sq=1)
    with pytest.raises(S.ShimUnsupported, match=what):
        fa3.flash_attn_with_kvcache(q, k, v, **bad)


def test_fa2_packed_are_views_and_return_three(calls):
    q = torch.randn(2, 8, 4, 64, dtype=BF)
    kv = torch.randn(2, 16, 2, 2, 64, dtype=BF)
    slopes = torch.rand(2, 4)
    out, lse, s = fa2.flash_attn_kvpacked_func(q, kv, 0.0, causal=True, alibi_slopes=slopes,
                                               softcap=50.0, return_attn_probs=True)
    _, _, args, kw = calls[-1]
    assert s is None and args[0].data_ptr() == kv.data_ptr()
    assert args[1].data_ptr() == kv[:, :, 1].data_ptr() and kw["alibi_slopes"] is slopes
    qkv_ = torch.randn(16, 3, 4, 64, dtype=BF)
    cu = torch.tensor([0, 8, 16], dtype=torch.int32)
    fa2.flash_attn_varlen_qkvpacked_func(qkv_, cu, 8, window_size=(3, 3))
    name, q_, args, kw = calls[-1]
    assert name == "flash_attn_varlen_func" and q_.data_ptr() == qkv_.data_ptr()
    assert args[2] is cu and args[3] is cu and kw["window_size"] == (3, 3)
    with pytest.raises(S.ShimUnsupported, match="dropout"):
        fa2.flash_attn_func(q, kv[:, :, 0], kv[:, :, 1], 0.1)


def test_backward_is_unsupported(calls):
    q, k, v = (t.requires_grad_() for t in qkv())
    out = fa3.flash_attn_func(q, k, v)
    assert out.requires_grad
    with pytest.raises(S.ShimUnsupported, match="backward"):
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    with torch.no_grad():
        assert not fa3.flash_attn_func(q, k, v).requires_grad


def test_narrow():
    assert S.narrow([(256, 7), (256, 0), (64, 9), (64, 0)], 64) == [(64, 0)]
    assert S.narrow([(128, 0), (192, 0), (128, 5)], 192) == [(128, 0), (192, 0)]
    assert S.narrow([(120, 0), (192, 0)], 192) == [(192, 0)]   # dv: multiples of 16
    with pytest.raises(S.ShimUnsupported, match="dv"):
        S.narrow([(256, 0), (512, 0)], 64)


def test_is_unsupported():
    assert S.is_unsupported(S.ShimUnsupported("x"))
    assert S.is_unsupported(fajit._lib.Unsupported("x"))
    assert not S.is_unsupported(fajit._lib.invalid("x"))
    assert not S.is_unsupported(AssertionError())


# ------ through fajit's checks, the launch recorded ------

def test_fa3_kvcache_descriptor(launches):
    q, k, v = qkv(b=3, sq=4, sk=40)
    seqlens = torch.tensor([5, 40, 17], dtype=torch.int32)
    fa3.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, causal=True, softcap=30.0,
                                window_size=(8, -1), return_softmax_lse=True)
    d = launches[-1]
    assert (d.page_size, d.num_pages, d.block_table_stride) == (40, 3, 1)
    assert d.k_page_stride == k.stride(0) and d.seqused_k == seqlens.data_ptr()
    assert (d.mask, d.window_left, d.window_right) == (T.WINDOW, 8, 0)
    assert d.softcap == pytest.approx(30.0) and d.batch == 3 and d.seqlen_q == 4


def test_fa2_alibi_descriptor(launches):
    q, k, v = qkv()
    slopes = torch.rand(2, 4)
    out, lse, _ = fa2.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes,
                                      return_attn_probs=True)
    d = launches[-1]
    assert d.alibi_slopes == slopes.data_ptr() and d.alibi_batch_stride == 4
    assert d.mask == T.CAUSAL and lse.shape == (2, 4, 8)


def test_fa3_varlen_descriptor(launches):
    q, k, v = (t.flatten(0, 1) for t in qkv())
    cu = torch.tensor([0, 3, 16], dtype=torch.int32)
    cuk = torch.tensor([0, 20, 32], dtype=torch.int32)
    out, lse = fa3.flash_attn_varlen_func(q, k, v, cu, cuk, 13, 20, causal=True, softcap=15.0,
                                          return_attn_probs=True)
    d = launches[-1]
    assert d.cu_seqlens_q == cu.data_ptr() and d.cu_seqlens_k == cuk.data_ptr()
    assert (d.seqlen_q, d.seqlen_k, d.total_q, d.total_k) == (13, 20, 16, 32)
    assert lse.shape == (4, 16) and d.mask == T.CAUSAL
