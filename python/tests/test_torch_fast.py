"""fajit's eager path without a GPU: the per-thread descriptor cache (a hit on the same
layout, a new entry on another, the pointers and max lengths written per call, the checks run
once per layout) and flash_attn_varlen_func's mapping onto fajit's options. The C launch
(_torch._submit) is replaced by a recorder of the descriptor it would get, and the CUDA
device rule by nothing, so CPU tensors stand in for CUDA ones; every descriptor the eager path
records is compared with the one the traced path (the custom ops) builds for the same call."""
import ctypes as C
import threading

import pytest

from conftest import needs_torch

torch = pytest.importorskip("torch")
import fajit  # noqa: E402
from fajit import _torch as T  # noqa: E402
from fajit._lib import AttnDesc  # noqa: E402

pytestmark = needs_torch
BF = torch.bfloat16
FIELDS = [name for name, _ in AttnDesc._fields_]


def fields(d, skip=()):
    return {n: getattr(d, n) for n in FIELDS if n not in skip}


def traced(monkeypatch, launches, fn, *args, **kwargs):
    """The descriptor the custom-op path builds for the same call (the eager path off)."""
    monkeypatch.setattr(T, "_FAST", False)
    n, cached = len(launches), len(T._descs())
    r = fn(*args, **kwargs)
    monkeypatch.setattr(T, "_FAST", True)
    assert len(launches) == n + 1 and len(T._descs()) == cached
    return launches.pop(), r


def decode(b=1, hq=32, hkv=8, d=128, pages=16, page=16, max_pages=16):
    q = torch.randn(b, 1, hq, d).to(BF)
    kv = torch.randn(2, pages, page, hkv, d).to(BF)
    bt = torch.randperm(pages)[:b * max_pages].to(torch.int32).view(b, max_pages)
    used = torch.full((b,), 200, dtype=torch.int32)
    return q, kv[0], kv[1], bt, used


def test_a_hit_writes_only_pointers_and_lengths(monkeypatch, launches):
    q, k, v, bt, used = decode()
    out = torch.empty_like(q)
    kw = dict(block_table=bt, seqused_k=used, causal=True, out=out)
    fajit.attention_with_kvcache(q, k, v, **kw)
    assert len(T._descs()) == 1
    q2, k2, v2, bt2, used2 = decode()   # the same layout, other storage
    out2 = torch.empty_like(q2)
    kw2 = dict(block_table=bt2, seqused_k=used2, causal=True, out=out2)
    calls, check = [], T._check_qkv
    monkeypatch.setattr(T, "_check_qkv", lambda *a: (calls.append(a), check(*a)))
    fajit.attention_with_kvcache(q2, k2, v2, **kw2)
    assert calls == [] and len(T._descs()) == 1   # a hit: no checks, no new entry
    hit = launches[-1]
    assert (hit.q, hit.k, hit.v, hit.o) == (q2.data_ptr(), k2.data_ptr(), v2.data_ptr(),
                                            out2.data_ptr())
    assert (hit.block_table, hit.seqused_k) == (bt2.data_ptr(), used2.data_ptr())
    slow, _ = traced(monkeypatch, launches, fajit.attention_with_kvcache, q2, k2, v2, **kw2)
    assert fields(hit) == fields(slow)
    # max_seqlen_k is written per call, in the same entry
    fajit.attention_with_kvcache(q2, k2, v2, max_seqlen_k=208, **kw2)
    assert len(T._descs()) == 1 and launches[-1].seqlen_k == 208
    fajit.attention_with_kvcache(q2, k2, v2, **kw2)
    assert launches[-1].seqlen_k == 16 * 16   # the default again: max_pages x page_size


CASES = {
    "dense": lambda: ((torch.randn(2, 40, 8, 64).to(BF), torch.randn(2, 56, 2, 64).to(BF),
                       torch.randn(2, 56, 2, 64).to(BF)), dict(causal=True), "attention"),
    "dense window lse scale": lambda: (
        (torch.randn(1, 33, 4, 128).to(torch.float16),) +
        tuple(torch.randn(2, 1, 70, 4, 128).to(torch.float16).unbind(0)),
        dict(window=(16, 0), return_lse=True, scale=0.25), "attention"),
    "varlen": lambda: ((torch.randn(30, 8, 64).to(BF), torch.randn(50, 2, 64).to(BF),
                        torch.randn(50, 2, 64).to(BF)),
                       dict(cu_seqlens_q=torch.tensor([0, 10, 30], dtype=torch.int32),
                            cu_seqlens_k=torch.tensor([0, 20, 50], dtype=torch.int32),
                            max_seqlen_q=20, max_seqlen_k=30, return_lse=True), "attention"),
    "paged mixed batch": lambda: (
        (torch.randn(9, 32, 128).to(BF),) + tuple(torch.randn(2, 40, 16, 8, 128).to(BF)),
        dict(block_table=torch.arange(40, dtype=torch.int32).view(4, 10).flip(1),
             seqused_k=torch.tensor([5, 100, 160, 1], dtype=torch.int32),
             cu_seqlens_q=torch.tensor([0, 5, 6, 8, 9], dtype=torch.int32), max_seqlen_q=5,
             causal=True, num_splits=3, return_lse=True), "attention_with_kvcache"),
    "paged split bound": lambda: (
        (torch.randn(2, 1, 32, 128).to(BF),) + tuple(torch.randn(2, 40, 16, 8, 128).to(BF)),
        dict(block_table=torch.arange(40, dtype=torch.int32).view(2, 20),
             seqused_k=torch.tensor([300, 17], dtype=torch.int32), num_splits=2,
             num_splits_max=6), "attention_with_kvcache"),
    "contiguous cache": lambda: ((torch.randn(3, 2, 16, 64).to(BF),
                                  torch.randn(3, 300, 4, 64).to(BF),
                                  torch.randn(3, 300, 4, 64).to(BF)), dict(max_seqlen_k=250),
                                 "attention_with_kvcache"),
    # the model features: every pointer is the call's own tensor's (a hit writes them)
    "dense softcap sinks alibi": lambda: (
        (torch.randn(2, 40, 8, 64).to(BF), torch.randn(2, 56, 2, 64).to(BF),
         torch.randn(2, 56, 2, 64).to(BF)),
        dict(causal=True, softcap=30.0, sinks=torch.randn(8),
             alibi_slopes=torch.rand(2, 16)[:, :8]), "attention"),
    "varlen alibi per head": lambda: (
        (torch.randn(30, 8, 64).to(BF), torch.randn(50, 2, 64).to(BF),
         torch.randn(50, 2, 64).to(BF)),
        dict(cu_seqlens_q=torch.tensor([0, 10, 30], dtype=torch.int32),
             cu_seqlens_k=torch.tensor([0, 20, 50], dtype=torch.int32), max_seqlen_q=20,
             max_seqlen_k=30, alibi_slopes=torch.rand(8), softcap=5), "attention"),
    "paged fp8 e4m3 per-tensor descale": lambda: (
        (torch.randn(2, 1, 32, 128).to(BF),) +
        tuple(torch.randn(2, 40, 16, 8, 128).to(torch.float8_e4m3fn)),
        dict(block_table=torch.arange(40, dtype=torch.int32).view(2, 20),
             seqused_k=torch.tensor([300, 17], dtype=torch.int32), causal=True,
             k_descale=torch.tensor([0.5]), v_descale=torch.tensor([2.0]),
             sinks=torch.randn(32), softcap=50.0), "attention_with_kvcache"),
    "paged fp8 e5m2 [batch, heads_kv] descales": lambda: (
        (torch.randn(9, 32, 128).to(BF),) +
        tuple(torch.randn(2, 40, 16, 8, 128).to(torch.float8_e5m2)),
        dict(block_table=torch.arange(40, dtype=torch.int32).view(4, 10),
             cu_seqlens_q=torch.tensor([0, 5, 6, 8, 9], dtype=torch.int32), max_seqlen_q=5,
             k_descale=torch.rand(8, 4).t(), v_descale=torch.rand(8, 4).t(),
             alibi_slopes=torch.rand(4, 32), return_lse=True), "attention_with_kvcache"),
}
HAS_FP8 = hasattr(torch, "float8_e5m2")
CASES = {name: case for name, case in CASES.items() if HAS_FP8 or "fp8" not in name}


@pytest.mark.parametrize("case", list(CASES))
def test_eager_descriptors_equal_the_traced_ones(monkeypatch, launches, case):
    """Miss, then hit with other tensors of the same layout: both descriptors equal the
    custom-op path's for the same call, but for the buffers each call allocates (O, LSE)."""
    for i in range(2):
        args, kw, fn = CASES[case]()
        r = getattr(fajit, fn)(*args, **kw)
        assert len(T._descs()) == 1, i
        eager = launches[-1]
        slow, rs = traced(monkeypatch, launches, getattr(fajit, fn), *args, **kw)
        assert fields(eager, ("o", "lse")) == fields(slow, ("o", "lse")), (case, i)
        o, lse = r if kw.get("return_lse") else (r, None)
        assert eager.o == o.data_ptr() and o.shape == args[0].shape
        assert o.dtype == args[0].dtype and o.is_contiguous()
        if lse is None:
            assert eager.lse is None
        else:
            assert eager.lse == lse.data_ptr() and lse.shape == rs[1].shape
            assert lse.dtype == torch.float32


def test_another_layout_is_another_entry(launches):
    q, k, v, bt, used = decode()
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    q2, k2, v2, bt2, used2 = decode(b=2, pages=64)   # another batch and pool size
    fajit.attention_with_kvcache(q2, k2, v2, block_table=bt2, seqused_k=used2)
    assert len(T._descs()) == 2 and launches[-1].batch == 2 and launches[-1].num_pages == 64
    qs = torch.randn(1, 1, 64, 128).to(BF)[:, :, ::2]   # other strides
    fajit.attention_with_kvcache(qs, k, v, block_table=bt, seqused_k=used)
    assert len(T._descs()) == 3 and launches[-1].q_head_stride == 256
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used, causal=True)
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used, scale=0.5)
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used, return_lse=True)
    fajit.attention_with_kvcache(q, k, v, block_table=bt)
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used, num_splits_max=8)
    assert len(T._descs()) == 8
    assert launches[-5].mask == T.CAUSAL and launches[-4].softmax_scale == 0.5
    assert launches[-3].lse is not None and launches[-2].seqused_k is None
    assert launches[-1].num_splits_max == 8
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert len(T._descs()) == 8 and launches[-1].num_splits_max == 0   # the first: a hit


def test_the_cache_is_bounded_and_per_thread(monkeypatch, launches):
    monkeypatch.setattr(T, "_CACHE_MAX", 3)
    first = None
    for b in range(1, 6):
        q, k, v, bt, used = decode(b=b, pages=80)
        fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
        first = first or next(iter(T._descs()))
    assert len(T._descs()) == 3 and first not in T._descs()   # the oldest went first
    other = []
    t = threading.Thread(target=lambda: (fajit.attention_with_kvcache(
        q, k, v, block_table=bt, seqused_k=used), other.append(len(T._descs()))))
    t.start()
    t.join()
    assert other == [1] and len(T._descs()) == 3


def test_failed_checks_are_not_cached(launches):
    q, k, v, bt, used = decode()
    for _ in range(2):
        with pytest.raises(fajit.Error, match="block_table must be torch.int32"):
            fajit.attention_with_kvcache(q, k, v, block_table=bt.long(), seqused_k=used)
    assert len(T._descs()) == 0 and launches == []
    with pytest.raises(fajit.Error, match="q must be a torch.Tensor, got int"):
        fajit.attention(1, k, v)
    with pytest.raises(fajit.Error, match="causal=True allows window right 0 or -1"):
        fajit.attention(q, k, v, causal=True, window=[4, 2])   # a list: not hashable


def test_cpu_tensors_still_refused_on_the_eager_path():
    q, k, v, bt, used = decode()
    T._descs().clear()
    for _ in range(2):
        with pytest.raises(fajit.Error, match="q must be a CUDA tensor, got one on cpu"):
            fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert len(T._descs()) == 0


def test_eager_is_off_for_fake_tensors_and_under_compile(monkeypatch):
    q = torch.zeros(1)
    assert T._eager(q)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        assert not T._eager(torch.zeros(1))
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Ops():
        assert not T._eager(q)
    monkeypatch.setattr(T, "_compiling", lambda: True)
    assert not T._eager(q)


def test_a_dispatch_mode_sees_the_custom_op(launches):
    """Under a TorchDispatchMode (a FLOP counter, say) a call goes through fajit::fwd_out,
    which the mode records; without one it takes the eager path, which no mode sees."""
    from torch.utils._python_dispatch import TorchDispatchMode
    seen = []

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v, bt, used = decode()
    out = torch.empty_like(q)
    with Ops():
        fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used, out=out)
    assert "fajit.fwd_out.default" in seen and len(launches) == 1
    assert len(T._descs()) == 0


def test_the_profiler_names_the_eager_call(launches):
    q, k, v, bt, used = decode()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert "fajit::attn_fwd" in {e.name for e in prof.events()}
    assert len(launches) == 1


# ------ flash_attn_varlen_func ------

def vllm_decode(n=3, hq=32, hkv=8, d=128, page=16, max_pages=8):
    q = torch.randn(n, hq, d).to(BF)
    kv = torch.randn(2, n * max_pages, page, hkv, d).to(BF)
    bt = torch.arange(n * max_pages, dtype=torch.int32).view(n, max_pages)
    return dict(q=q, k=kv[0], v=kv[1], cu_seqlens_q=torch.arange(n + 1, dtype=torch.int32),
                max_seqlen_q=1, seqused_k=torch.tensor([100, 5, 128][:n], dtype=torch.int32),
                max_seqlen_k=128, block_table=bt)


def test_vllm_call_maps_onto_the_kvcache_entry(monkeypatch, launches):
    a = vllm_decode()
    out = torch.empty_like(a["q"])
    ones = torch.ones(3, 8)
    r = fajit.flash_attn_varlen_func(**a, out=out, softmax_scale=0.1, causal=True,
                                     window_size=[-1, -1], alibi_slopes=None, softcap=0,
                                     scheduler_metadata=None, fa_version=3, q_descale=ones,
                                     k_descale=ones, v_descale=ones, num_splits=0, s_aux=None)
    assert r is out
    d = launches[-1]
    assert (d.batch, d.heads_q, d.heads_kv, d.seqlen_q, d.seqlen_k, d.head_dim) == \
        (3, 32, 8, 1, 128, 128)
    assert d.mask == T.CAUSAL and abs(d.softmax_scale - 0.1) < 1e-7
    assert (d.num_splits, d.num_splits_max) == (0, 0)
    assert d.cu_seqlens_q == a["cu_seqlens_q"].data_ptr() and d.total_q == 3
    assert d.seqused_k == a["seqused_k"].data_ptr() and d.page_size == 16
    assert d.block_table == a["block_table"].data_ptr() and d.block_table_stride == 8
    slow, _ = traced(monkeypatch, launches, fajit.attention_with_kvcache, a["q"], a["k"],
                     a["v"], block_table=a["block_table"], seqused_k=a["seqused_k"],
                     cu_seqlens_q=a["cu_seqlens_q"], max_seqlen_q=1, max_seqlen_k=128,
                     causal=True, scale=0.1, out=out)
    assert fields(d) == fields(slow)
    o, lse = fajit.flash_attn_varlen_func(**a, causal=True, return_softmax_lse=True,
                                          num_splits=4)
    assert o.shape == a["q"].shape and lse.shape == (32, 3) and lse.dtype == torch.float32
    assert launches[-1].lse == lse.data_ptr()
    # vLLM's num_splits is an upper bound (its CUDA graphs' buffers): num_splits_max
    assert (launches[-1].num_splits, launches[-1].num_splits_max) == (0, 4)
    slow, _ = traced(monkeypatch, launches, fajit.attention_with_kvcache, a["q"], a["k"],
                     a["v"], block_table=a["block_table"], seqused_k=a["seqused_k"],
                     cu_seqlens_q=a["cu_seqlens_q"], max_seqlen_q=1, max_seqlen_k=128,
                     causal=True, num_splits_max=4, return_lse=True)
    assert fields(launches[-1], ("o", "lse")) == fields(slow, ("o", "lse"))
    for n, bound in ((-1, 0), (128, 128), (256, 128)):   # FA3: <= 0 picks; 128 is fajit's most
        fajit.flash_attn_varlen_func(**a, causal=True, num_splits=n)
        assert (launches[-1].num_splits, launches[-1].num_splits_max) == (0, bound), n


def test_positional_orders_fa2_and_vllm(launches):
    a = vllm_decode()
    q, k, v, cu, bt = a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["block_table"]
    fajit.flash_attn_varlen_func(q, k, v, cu, None, 1, 128, 0.0, None, True,
                                 block_table=bt, seqused_k=a["seqused_k"])   # FA2's
    fa2 = fields(launches[-1], ("o",))
    fajit.flash_attn_varlen_func(q, k, v, 1, cu, 128, None, block_table=bt,
                                 seqused_k=a["seqused_k"], causal=True)       # vLLM's
    assert fields(launches[-1], ("o",)) == fa2
    assert fa2["seqlen_k"] == 128 and fa2["cu_seqlens_q"] == cu.data_ptr()


def test_fa2_paged_lengths_from_cu_seqlens_k(monkeypatch, launches):
    a = vllm_decode()
    cu_k = torch.tensor([0, 100, 105, 233], dtype=torch.int32)
    used = []   # read at launch (a CPU tensor here, alive for the call only)
    monkeypatch.setattr(T, "_submit", lambda dev, ptr: used.extend(
        C.cast(ptr.contents.seqused_k, C.POINTER(C.c_int32))[i] for i in range(3)))
    fajit.flash_attn_varlen_func(a["q"], a["k"], a["v"], a["cu_seqlens_q"], cu_k, 1, 128,
                                 block_table=a["block_table"])
    assert used == [100, 5, 128]


def test_packed_keys_map_onto_attention(launches):
    q, k = torch.randn(30, 8, 64).to(BF), torch.randn(50, 2, 64).to(BF)
    cq = torch.tensor([0, 10, 30], dtype=torch.int32)
    ck = torch.tensor([0, 20, 50], dtype=torch.int32)
    o, lse = fajit.flash_attn_varlen_func(q, k, k, cq, ck, 20, 30, causal=True,
                                          window_size=(8, 8), return_softmax_lse=True,
                                          num_splits=16)
    d = launches[-1]
    assert (d.mask, d.window_left, d.window_right) == (T.WINDOW, 8, 0)
    assert (d.cu_seqlens_k, d.total_k, d.seqlen_q, d.seqlen_k) == (ck.data_ptr(), 50, 20, 30)
    assert (d.num_splits, d.num_splits_max) == (0, 0) and lse.shape == (8, 30)


@pytest.mark.parametrize("causal,window,want", [
    (False, (-1, -1), (T.NONE, -1, -1)),
    (False, None, (T.NONE, -1, -1)),
    (True, (-1, -1), (T.CAUSAL, -1, -1)),
    (False, (-1, 0), (T.CAUSAL, -1, -1)),
    (True, (128, 5), (T.WINDOW, 128, 0)),
    (False, [127, 0], (T.WINDOW, 127, 0)),
    (False, (10, 3), (T.WINDOW, 10, 3)),
    (False, (10, -1), (T.WINDOW, 10, 1 << 30)),
    (False, (-1, 4), (T.WINDOW, 1 << 30, 4)),
])
def test_window_size_as_flash_attn_means_it(launches, causal, window, want):
    a = vllm_decode()
    fajit.flash_attn_varlen_func(**a, causal=causal, window_size=window)
    d = launches[-1]
    assert (d.mask, d.window_left, d.window_right) == want


@pytest.mark.parametrize("kw,name", [
    (dict(dropout_p=0.1), "dropout_p"),
    (dict(return_attn_probs=True), "return_attn_probs"), (dict(q_v=torch.zeros(1)), "q_v"),
    (dict(cp_world_size=2), "cp_world_size"),
])
def test_missing_features_name_the_argument(kw, name):
    a = vllm_decode()
    with pytest.raises(NotImplementedError) as e:
        fajit.flash_attn_varlen_func(**a, **kw)
    assert isinstance(e.value, fajit.Error) and e.value.name == "FAJIT_UNSUPPORTED"
    assert e.value.message.startswith(f"fajit.flash_attn_varlen_func: {name}")
    assert "not supported" in str(e.value)


def test_descales_ignored_with_16_bit_kv_fp8_q_refused(launches):
    a = vllm_decode()
    ones = torch.ones(3, 8)   # vLLM passes layer._k_scale.expand((batch, heads_kv)) always
    fajit.flash_attn_varlen_func(**a, q_descale=ones, k_descale=ones, v_descale=ones)
    assert len(launches) == 1
    d = launches[-1]
    assert (d.kv_dtype, d.k_descale, d.v_descale) == (0, None, None)
    if not hasattr(torch, "float8_e4m3fn"):
        return
    a["q"] = a["q"].to(torch.float8_e4m3fn)
    for kw in (dict(q_descale=ones, k_descale=ones, v_descale=ones), {}):
        with pytest.raises(NotImplementedError) as e:
            fajit.flash_attn_varlen_func(**a, **kw)
        assert e.value.name == "FAJIT_UNSUPPORTED"
        assert "FP8 queries are not served" in e.value.message, e.value.message
    assert len(launches) == 1 and len(T._descs()) == 1


def test_varlen_argument_errors():
    a = vllm_decode()
    del a["block_table"]
    with pytest.raises(NotImplementedError, match="seqused_k without block_table"):
        fajit.flash_attn_varlen_func(**a)
    del a["seqused_k"]
    with pytest.raises(fajit.Error, match="needs cu_seqlens_k or a block_table"):
        fajit.flash_attn_varlen_func(**a)
    with pytest.raises(fajit.Error, match="needs max_seqlen_q"):
        fajit.flash_attn_varlen_func(a["q"], a["k"], a["v"], a["cu_seqlens_q"], None)
    with pytest.raises(fajit.Error, match="q must be a CUDA tensor"):   # all rules passed
        fajit.flash_attn_varlen_func(**vllm_decode())


def test_eager_hit_costs_little(monkeypatch):
    """The p50 of a hit with the launch replaced by fajit_attn_check (a ctypes call of the
    same shape), CPU tensors: a loose bound (the GPU host's numbers come from
    bench/host_overhead.py)."""
    import time
    from fajit._lib import lib
    monkeypatch.setattr(T, "_submit", lambda dev, ptr: lib.fajit_attn_check(None, ptr))
    monkeypatch.setattr(T, "_on_cuda", lambda *a, **kw: None)
    q, k, v, bt, used = decode()
    out = torch.empty_like(q)
    f = fajit.attention_with_kvcache
    times = []
    for _ in range(2000):
        t = time.perf_counter()
        f(q, k, v, block_table=bt, seqused_k=used, out=out)
        times.append(time.perf_counter() - t)
    p50 = sorted(times)[len(times) // 2] * 1e6
    print(f"eager hit p50 {p50:.1f} us")
    assert p50 < 100


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch < 2.4")
def test_torch_compile_traces_flash_attn_varlen_func_to_one_op():
    """Dynamo takes the traced path (no graph break): vLLM's call becomes one fajit::fwd_out
    with the mapped options, on fake CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(q, kc, vc, out, cu, used, bt, slopes):
        return fajit.flash_attn_varlen_func(q=q, k=kc, v=vc, out=out, cu_seqlens_q=cu,
                                            max_seqlen_q=1, seqused_k=used, max_seqlen_k=128,
                                            softmax_scale=0.125, causal=True,
                                            window_size=[31, 0], block_table=bt,
                                            return_softmax_lse=True, num_splits=2,
                                            softcap=50.0, alibi_slopes=slopes)

    f = torch.compile(fn, fullgraph=True, backend=backend)
    with FakeTensorMode():
        a = {n: t.to("cuda") if isinstance(t, torch.Tensor) else t
             for n, t in vllm_decode().items()}
        o, lse = f(a["q"], a["k"], a["v"], torch.empty_like(a["q"]), a["cu_seqlens_q"],
                   a["seqused_k"], a["block_table"], torch.zeros(32, device="cuda"))
        assert o.shape == a["q"].shape and lse.shape == (32, 3)
    code = graphs[0].code
    assert code.count("torch.ops.fajit.fwd_out.default(") == 1, code
    # num_splits_max 2, softcap 50, the slopes
    assert ", 1, 128, 2, 31, 0, 0.125, True, 0, 2, 50.0, None, l_slopes_, None, None)" \
        in code, code


def test_host_overhead_bench_runs_its_logic_on_cpu(monkeypatch, launches, capsys):
    """bench/host_overhead.py end to end on CPU tensors (DEV "cpu"; the launches recorded,
    no kernel runs, so its output check is off): every row and the table come out."""
    import os
    import sys
    import types
    from conftest import ROOT
    from fajit import _lib
    bench = os.path.join(ROOT, "bench")
    if not os.path.exists(os.path.join(bench, "host_overhead.py")):
        pytest.skip("not run from a source tree")
    monkeypatch.syspath_prepend(bench)
    import host_overhead as H
    monkeypatch.setattr(H, "DEV", "cpu")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU")
    monkeypatch.setattr(fajit, "default_context", lambda i: types.SimpleNamespace(_ptr=None))
    floor, floor_descs = [], []
    monkeypatch.setattr(_lib, "lib", types.SimpleNamespace(
        fajit_attn_fwd=lambda ctx, p, s: (floor.append(p.contents.seqlen_k),
                                          floor_descs.append(fields(p.contents)))))
    monkeypatch.setattr(sys, "argv", ["host_overhead.py", "--calls", "20", "--sync", "8"])
    assert H.main() == 0
    table = capsys.readouterr().out
    for row in ("(eager path) |", "(eager path, O allocated) |", "(vLLM's call, out=) |",
                "fajit::fwd_out) |", "SDPA, default backend", "C floor"):
        assert row in table, table
    assert floor and set(floor) == {256}
    assert len(launches) > 4 * 70 and {d.seqlen_k for d in launches} == {256}
    # the varlen C row's descriptor is the one vLLM's call gets on the eager path
    varlen = [fields(d) for d in launches if d.cu_seqlens_q]
    assert varlen and varlen[-1] in floor_descs


# ------ the signature caches: exact hits, no stale entry for another layout ------

def vllm_call(a, **kw):
    """vLLM's call (keywords, as its flash-attn backend passes them) on the tensors of a."""
    base = dict(q=a["q"], k=a["k"], v=a["v"], out=a.get("out"),
                cu_seqlens_q=a["cu_seqlens_q"], max_seqlen_q=a["max_seqlen_q"],
                seqused_k=a["seqused_k"], max_seqlen_k=a["max_seqlen_k"], softmax_scale=0.125,
                causal=True, window_size=[-1, -1], block_table=a["block_table"], num_splits=0)
    base.update(kw)
    return fajit.flash_attn_varlen_func(**base)


def traced_varlen(monkeypatch, launches, **kw):
    monkeypatch.setattr(T, "_FAST", False)
    n = len(launches)
    r = vllm_call(**kw)
    monkeypatch.setattr(T, "_FAST", True)
    assert len(launches) == n + 1
    return launches.pop(), r


def test_vllm_call_hits_its_own_entry_without_checks_or_mapping(monkeypatch, launches):
    a = vllm_decode()
    a["out"] = torch.empty_like(a["q"])
    vllm_call(a)
    assert len(T._descs()) == 1 and next(iter(T._descs()))[0] == 2   # flash-attn's key
    calls = []
    for name in ("_check_qkv", "_fa_window", "_splits", "_mask", "_tensor"):
        f = getattr(T, name)
        monkeypatch.setattr(T, name, lambda *x, _f=f, **y: (calls.append(x), _f(*x, **y))[1])
    b = vllm_decode()   # the same layout, other storage
    b["out"] = torch.empty_like(b["q"])
    ones = torch.ones(3, 8)   # what vLLM passes besides: ignored, or off (all hits)
    vllm_call(b, q_descale=ones, k_descale=ones, v_descale=ones, scheduler_metadata=None,
              fa_version=3, softcap=0.0, alibi_slopes=None, s_aux=None, window_size=(-1, -1))
    vllm_call(b, max_seqlen_k=100)
    assert calls == [] and len(T._descs()) == 1
    hit = launches[-1]
    assert (hit.q, hit.k, hit.v, hit.o) == tuple(b[n].data_ptr() for n in ("q", "k", "v", "out"))
    assert (hit.cu_seqlens_q, hit.seqused_k, hit.block_table) == tuple(
        b[n].data_ptr() for n in ("cu_seqlens_q", "seqused_k", "block_table"))
    assert hit.seqlen_k == 100
    monkeypatch.undo()   # the checks back; the launch recorder again
    monkeypatch.setattr(T, "_submit", lambda dev, ptr: launches.append(
        AttnDesc.from_buffer_copy(ptr.contents)))
    monkeypatch.setattr(T, "_on_cuda", lambda *x, **y: None)
    slow, _ = traced_varlen(monkeypatch, launches, a=b, max_seqlen_k=100)
    assert fields(hit) == fields(slow)


def _variants():
    """(name, change) pairs: each gives vLLM's call another layout or option than the
    first call's; its descriptor must be the traced path's for it, never the cached one."""
    def restride_k(a):   # the same shape and dtype, other strides (a wider pool row)
        wide = torch.randn(2, *a["k"].shape[:3], 256).to(BF)[..., :128]
        a["k"], a["v"] = wide[0], wide[1]

    def restride_k_only(a):
        a["k"] = torch.randn(*a["k"].shape[:3], 256).to(BF)[..., :128]

    def restride_out(a):
        a["out"] = torch.empty(a["q"].shape[0], 64, 128).to(BF)[:, ::2]

    def f16(a):
        for n in ("q", "k", "v", "out"):
            a[n] = a[n].to(torch.float16)

    def more_rows(a):   # another batch: every index tensor's shape
        b = vllm_decode(n=2)
        b["out"] = torch.empty_like(b["q"])
        a.update(b)

    def fp8(a):   # an FP8 cache of the same shape and strides
        a["k"], a["v"] = (t.to(torch.float8_e4m3fn) for t in (a["k"], a["v"]))

    def bt_stride(a):   # a block table that is a view of a wider one
        a["block_table"] = torch.cat([a["block_table"], a["block_table"]], 1)[:, :8]

    return [
        ("k/v strides", restride_k, {}),
        ("k strides", restride_k_only, {}),
        ("out strides", restride_out, {}),
        ("dtype", f16, {}),
        ("shapes", more_rows, {}),
        ("block_table stride", bt_stride, {}),
        ("window", None, dict(window_size=(64, 0))),
        ("window list", None, dict(window_size=[32, 0])),
        ("scale", None, dict(softmax_scale=0.5)),
        ("not causal", None, dict(causal=False)),
        ("splits", None, dict(num_splits=4)),
        ("lse", None, dict(return_softmax_lse=True)),
        ("no out", None, dict(out=None)),
        ("no seqused_k", None, dict(seqused_k=None)),
        ("max_seqlen_k none", None, dict(max_seqlen_k=None)),
        ("softcap", None, dict(softcap=30.0)),
        ("s_aux", None, dict(s_aux=torch.zeros(32))),
        ("learnable_sink", None, dict(learnable_sink=torch.zeros(32))),
        ("alibi per head", None, dict(alibi_slopes=torch.zeros(32))),
        ("alibi per sequence", None, dict(alibi_slopes=torch.zeros(3, 32))),
    ] + ([
        ("fp8 k/v", fp8, dict(k_descale=torch.ones(1), v_descale=torch.ones(1))),
        ("fp8 k/v [batch, heads_kv] descales", fp8,
         dict(k_descale=torch.ones(3, 8), v_descale=torch.ones(3, 8))),
    ] if hasattr(torch, "float8_e4m3fn") else [])


@pytest.mark.parametrize("name,change,kw", _variants(), ids=[v[0] for v in _variants()])
def test_another_layout_or_option_is_never_a_stale_hit(monkeypatch, launches, name, change,
                                                        kw):
    a = vllm_decode()
    a["out"] = torch.empty_like(a["q"])
    vllm_call(a)   # the first layout, cached
    vllm_call(a)
    assert len(T._descs()) == 1
    b = dict(a)
    if change is not None:
        change(b)
    r = vllm_call(b, **kw)
    eager = launches[-1]
    fresh = name == "max_seqlen_k none"   # (a per-call length: the same entry serves it)
    assert len(T._descs()) == (1 if fresh else 2), name
    slow, rs = traced_varlen(monkeypatch, launches, a=b, **kw)
    assert fields(eager, ("o", "lse")) == fields(slow, ("o", "lse")), name
    o = r[0] if kw.get("return_softmax_lse") else r
    assert eager.o == o.data_ptr()
    vllm_call(a)   # and the first layout is still exact
    slow, _ = traced_varlen(monkeypatch, launches, a=a)
    assert fields(launches[-1]) == fields(slow)


def test_kvcache_options_and_layouts_are_in_the_key(monkeypatch, launches):
    q, k, v, bt, used = decode()
    base = dict(block_table=bt, seqused_k=used)
    calls = [
        (q, k, v, base),
        (q.to(torch.float16), k.to(torch.float16), v.to(torch.float16), base),
        (q, k, v, dict(base, window=(8, 0))),
        (q, k, v, dict(base, num_splits=2)),
        (q, k, v, dict(base, num_splits_max=2)),
        (q, k, v, dict(base, out=torch.empty_like(q))),
        (q, k, v, dict(base, out=torch.empty(1, 1, 64, 128).to(BF)[:, :, ::2])),
        (q, torch.randn(16, 16, 8, 256).to(BF)[..., :128], v, base),
        (q, k, v, dict(base, block_table=torch.cat([bt, bt], 1)[:, :16])),
    ]
    for i, (qq, kk, vv, kw) in enumerate(calls):
        for _ in range(2):   # a miss, then a hit
            fajit.attention_with_kvcache(qq, kk, vv, **kw)
            eager = launches[-1]
            slow, _ = traced(monkeypatch, launches, fajit.attention_with_kvcache, qq, kk, vv,
                             **kw)
            assert fields(eager, ("o",)) == fields(slow, ("o",)), i
        assert len(T._descs()) == i + 1


def test_metadata_changed_in_place_is_another_layout(monkeypatch, launches):
    """The signature is read from the tensors each call, not kept by object: a tensor whose
    strides change in place (as_strided_) is a new layout, checked again."""
    q, k, v, bt, used = decode()
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert launches[-1].k_row_stride == 8 * 128
    k.as_strided_(k.shape, (k.stride(0), 128, 16 * 128, 1))   # HND pages, same object
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert len(T._descs()) == 2
    assert (launches[-1].k_row_stride, launches[-1].k_head_stride) == (128, 16 * 128)
    bt.as_strided_((1, 8), (16, 1))   # fewer pages: the checks run again (a new cap)
    fajit.attention_with_kvcache(q, k, v, block_table=bt, seqused_k=used)
    assert len(T._descs()) == 3 and launches[-1].seqlen_k == 8 * 16


def test_the_last_entry_alternates_and_clears(launches):
    qa, ka, va, bta, useda = decode()
    qb, kb, vb, btb, usedb = decode(b=2, pages=64)
    for _ in range(3):   # A, B, A, B...: each launch has its own layout
        fajit.attention_with_kvcache(qa, ka, va, block_table=bta, seqused_k=useda)
        assert launches[-1].batch == 1 and launches[-1].q == qa.data_ptr()
        fajit.attention_with_kvcache(qb, kb, vb, block_table=btb, seqused_k=usedb)
        assert launches[-1].batch == 2 and launches[-1].q == qb.data_ptr()
    assert len(T._descs()) == 2
    T._descs().clear()
    assert T._descs().last is None
    fajit.attention_with_kvcache(qb, kb, vb, block_table=btb, seqused_k=usedb)
    assert len(T._descs()) == 1   # a miss after clear(), not the last entry


def test_hit_path_errors(launches):
    a = vllm_decode()
    vllm_call(a)
    n = len(launches)
    with pytest.raises(fajit.Error, match="must be int32 values"):
        vllm_call(a, max_seqlen_k=1 << 40)
    with pytest.raises(ValueError):   # flash-attn's window is (left, right)
        vllm_call(a, window_size=(-1, -1, 5))
    with pytest.raises(fajit.Error, match="needs max_seqlen_q"):
        vllm_call(a, max_seqlen_q=None)
    assert len(launches) == n and len(T._descs()) == 1   # nothing launched, nothing kept


def test_host_overhead_bench_no_gpu_mode(monkeypatch, launches, capsys):
    """bench/host_overhead.py --no-gpu: the binding's Python side alone, on CPU tensors (the
    launch and the CUDA rule replaced by no-ops in the script; restored after the test)."""
    import os
    import sys
    from conftest import ROOT
    bench = os.path.join(ROOT, "bench")
    if not os.path.exists(os.path.join(bench, "host_overhead.py")):
        pytest.skip("not run from a source tree")
    monkeypatch.syspath_prepend(bench)
    import host_overhead as H
    monkeypatch.setattr(H, "DEV", H.DEV)   # main() sets it: put back afterwards
    monkeypatch.setattr(sys, "argv", ["host_overhead.py", "--calls", "20", "--no-gpu"])
    assert H.main() == 0
    table = capsys.readouterr().out
    for row in ("(eager path) |", "(eager path, O allocated) |", "(vLLM's call, out=) |",
                "fajit::fwd_out) |", "ctypes floor"):
        assert row in table, table
    assert "SDPA" not in table and "--no-gpu`" in table
