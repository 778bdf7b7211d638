"""The model features on the torch entry points without a GPU: softcap, attention sinks,
ALiBi and FP8 K/V with their descales. Each argument's mapping onto fajit_attn_desc's fields
(values, strides, kv_dtype), the argument rules (raised before any launch), the eager cache
key splitting on each argument, a hit writing the call's own pointers, and the eager
descriptor equal to the traced (custom-op) one. The launch is replaced by a recorder, as in
test_torch_fast.py."""
import math

import pytest

from conftest import needs_torch

torch = pytest.importorskip("torch")
import fajit  # noqa: E402
from fajit import _torch as T  # noqa: E402
from fajit._lib import AttnDesc  # noqa: E402

pytestmark = needs_torch
BF = torch.bfloat16
E4M3 = getattr(torch, "float8_e4m3fn", None)
E5M2 = getattr(torch, "float8_e5m2", None)
needs_fp8 = pytest.mark.skipif(E4M3 is None or E5M2 is None, reason="torch without float8")
FIELDS = [name for name, _ in AttnDesc._fields_]
FEATURE_FIELDS = ("softcap", "sinks", "alibi_slopes", "alibi_batch_stride", "head_dim_v",
                  "kv_dtype", "k_descale", "v_descale", "descale_batch_stride",
                  "descale_head_stride")


def fields(d, skip=("o", "lse")):
    return {n: getattr(d, n) for n in FIELDS if n not in skip}


def feature_fields(d):
    return {n: getattr(d, n) for n in FEATURE_FIELDS}


def traced(monkeypatch, launches, fn, *args, **kwargs):
    monkeypatch.setattr(T, "_FAST", False)
    n, cached = len(launches), len(T._descs())
    fn(*args, **kwargs)
    monkeypatch.setattr(T, "_FAST", True)
    assert len(launches) == n + 1 and len(T._descs()) == cached
    return launches.pop()


def paged(b=2, hq=32, hkv=8, d=128, pages=40, page=16, max_pages=20, dtype=BF):
    q = torch.randn(b, 1, hq, d).to(BF)
    kv = torch.randn(2, pages, page, hkv, d).to(dtype)
    bt = torch.arange(b * max_pages, dtype=torch.int32).view(b, max_pages) % pages
    used = torch.full((b,), 200, dtype=torch.int32)
    return q, kv[0], kv[1], dict(block_table=bt, seqused_k=used)


def dense(b=2, sq=40, sk=56, hq=8, hkv=2, d=64):
    return (torch.randn(b, sq, hq, d).to(BF), torch.randn(b, sk, hkv, d).to(BF),
            torch.randn(b, sk, hkv, d).to(BF))


def checked_both_ways(monkeypatch, launches, fn, *args, **kw):
    """The eager descriptor (a miss, then a hit) equals the traced one; returns it."""
    fn(*args, **kw)
    miss = launches[-1]
    fn(*args, **kw)
    hit = launches[-1]
    slow = traced(monkeypatch, launches, fn, *args, **kw)
    assert fields(miss) == fields(slow) and fields(hit) == fields(slow)
    return hit


# ------ each argument onto its fields ------

def test_softcap_sinks_alibi_fields(monkeypatch, launches):
    q, k, v, kw = paged()
    sinks, slopes = torch.randn(32), torch.rand(32)
    d = checked_both_ways(monkeypatch, launches, fajit.attention_with_kvcache, q, k, v,
                          softcap=30, sinks=sinks, alibi_slopes=slopes, **kw)
    assert d.softcap == 30.0 and d.sinks == sinks.data_ptr()
    assert (d.alibi_slopes, d.alibi_batch_stride) == (slopes.data_ptr(), 0)
    assert (d.kv_dtype, d.k_descale, d.v_descale, d.head_dim_v) == (0, None, None, 0)
    # [batch, heads_q] slopes: their row stride; one row (or a broadcast one) is 0
    for t, stride in ((torch.rand(2, 32), 32), (torch.rand(2, 48)[:, 8:40], 48),
                      (torch.rand(1, 32), 0), (torch.rand(32).expand(2, 32), 0)):
        d = checked_both_ways(monkeypatch, launches, fajit.attention_with_kvcache, q, k, v,
                              alibi_slopes=t, **kw)
        assert (d.alibi_slopes, d.alibi_batch_stride) == (t.data_ptr(), stride), t.stride()
    # all off
    d = checked_both_ways(monkeypatch, launches, fajit.attention_with_kvcache, q, k, v,
                          softcap=0.0, **kw)
    assert feature_fields(d) == dict.fromkeys(FEATURE_FIELDS, 0) | dict(
        sinks=None, alibi_slopes=None, k_descale=None, v_descale=None)


def test_features_on_attention(monkeypatch, launches):
    q, k, v = dense()
    sinks, slopes = torch.randn(8), torch.rand(2, 8)
    d = checked_both_ways(monkeypatch, launches, fajit.attention, q, k, v, causal=True,
                          softcap=50.0, sinks=sinks, alibi_slopes=slopes)
    assert (d.softcap, d.sinks, d.alibi_slopes, d.alibi_batch_stride) == \
        (50.0, sinks.data_ptr(), slopes.data_ptr(), 8)


@needs_fp8
@pytest.mark.parametrize("dtype,want", [("e4m3", 1), ("e5m2", 2)])
def test_fp8_cache_kv_dtype_and_descale_strides(monkeypatch, launches, dtype, want):
    fp8 = E4M3 if dtype == "e4m3" else E5M2
    q, k, v, kw = paged(dtype=fp8)
    layouts = [
        (torch.tensor([0.5]), torch.tensor([2.0]), (0, 0)),          # vLLM's k_scale
        (torch.tensor(0.5), torch.tensor(2.0), (0, 0)),              # 0-dim
        (torch.ones(1).expand(2, 8), torch.ones(1).expand(2, 8), (0, 0)),   # vLLM's expand
        (torch.rand(2, 8), torch.rand(2, 8), (8, 1)),                # FA3's [batch, heads_kv]
        (torch.rand(8, 2).t(), torch.rand(8, 2).t(), (1, 2)),        # transposed
        (torch.rand(1, 8), torch.rand(1, 8), (0, 1)),                # one row
        (torch.rand(2, 1), torch.rand(2, 1), (1, 0)),                # one column
        (torch.rand(2, 16)[:, ::2], torch.rand(2, 16)[:, ::2], (16, 2)),
    ]
    for kd, vd, strides in layouts:
        d = checked_both_ways(monkeypatch, launches, fajit.attention_with_kvcache, q, k, v,
                              k_descale=kd, v_descale=vd, **kw)
        assert d.kv_dtype == want
        assert (d.k_descale, d.v_descale) == (kd.data_ptr(), vd.data_ptr())
        assert (d.descale_batch_stride, d.descale_head_stride) == strides, kd.stride()
        # the FP8 strides are in 1-byte elements: torch's own
        assert (d.k_row_stride, d.k_page_stride) == (k.stride(1), k.stride(0))


@needs_fp8
def test_fp8_on_attention_is_passed_to_the_library(monkeypatch, launches):
    """The prefill kernels do not serve FP8 K/V: the binding passes the fields and the C call
    says so (FAJIT_UNSUPPORTED) on a GPU; here the descriptor is what reaches it."""
    q, k, v = dense(d=128)
    k8, v8 = k.to(E5M2), v.to(E5M2)
    kd = vd = torch.ones(1)
    d = checked_both_ways(monkeypatch, launches, fajit.attention, q, k8, v8, k_descale=kd,
                          v_descale=vd)
    assert (d.kv_dtype, d.k_descale, d.descale_batch_stride) == (2, kd.data_ptr(), 0)


# ------ the cache key splits on each argument, a hit writes the call's pointers ------

def _key_calls(fp8_ok):
    sinks, slopes = torch.randn(32), torch.rand(32)
    calls = [
        dict(),
        dict(softcap=30.0),
        dict(softcap=50.0),                       # another value: another entry
        dict(sinks=sinks),
        dict(alibi_slopes=slopes),
        dict(alibi_slopes=torch.rand(2, 32)),     # another shape
        dict(alibi_slopes=torch.rand(2, 64)[:, :32]),   # another stride
        dict(sinks=sinks, alibi_slopes=slopes, softcap=30.0),
    ]
    if fp8_ok:
        calls += [
            dict(fp8=E4M3, k_descale=torch.ones(1), v_descale=torch.ones(1)),
            dict(fp8=E5M2, k_descale=torch.ones(1), v_descale=torch.ones(1)),
            dict(fp8=E4M3, k_descale=torch.ones(2, 8), v_descale=torch.ones(2, 8)),
            dict(fp8=E4M3, k_descale=torch.ones(8, 2).t(), v_descale=torch.ones(8, 2).t()),
            dict(fp8=E4M3, k_descale=torch.ones(1).expand(2, 8),
                 v_descale=torch.ones(1).expand(2, 8)),
        ]
    return calls


def test_kvcache_key_splits_on_each_feature(monkeypatch, launches):
    q, k, v, kw = paged()
    calls = _key_calls(E4M3 is not None and E5M2 is not None)
    for i, extra in enumerate(calls):
        extra = dict(extra)
        fp8 = extra.pop("fp8", None)
        kk, vv = (k, v) if fp8 is None else (k.to(fp8), v.to(fp8))
        for _ in range(2):   # a miss, then a hit
            fajit.attention_with_kvcache(q, kk, vv, **kw, **extra)
            eager = launches[-1]
            slow = traced(monkeypatch, launches, fajit.attention_with_kvcache, q, kk, vv,
                          **kw, **extra)
            assert fields(eager) == fields(slow), (i, extra)
        assert len(T._descs()) == i + 1, (i, extra)


def test_attention_key_splits_on_each_feature(monkeypatch, launches):
    q, k, v = dense()
    calls = [dict(), dict(softcap=30.0), dict(softcap=20.0), dict(sinks=torch.randn(8)),
             dict(alibi_slopes=torch.rand(8)), dict(alibi_slopes=torch.rand(2, 8))]
    for i, extra in enumerate(calls):
        for _ in range(2):
            fajit.attention(q, k, v, **extra)
            assert fields(launches[-1]) == fields(
                traced(monkeypatch, launches, fajit.attention, q, k, v, **extra))
        assert len(T._descs()) == i + 1


def test_a_hit_writes_the_feature_pointers(monkeypatch, launches):
    q, k, v, kw = paged(dtype=E4M3) if E4M3 is not None else paged()
    fp8 = E4M3 is not None

    def tensors():
        t = dict(sinks=torch.randn(32), alibi_slopes=torch.rand(2, 32))
        if fp8:
            t.update(k_descale=torch.rand(2, 8), v_descale=torch.rand(2, 8))
        return t

    first = tensors()
    fajit.attention_with_kvcache(q, k, v, softcap=30.0, **first, **kw)
    calls = []
    check = T._check_features
    monkeypatch.setattr(T, "_check_features", lambda *a: (calls.append(a), check(*a))[1])
    second = tensors()   # the same layout, other storage
    fajit.attention_with_kvcache(q, k, v, softcap=30.0, **second, **kw)
    assert calls == [] and len(T._descs()) == 1   # a hit
    d = launches[-1]
    assert d.softcap == 30.0
    assert d.sinks == second["sinks"].data_ptr()
    assert d.alibi_slopes == second["alibi_slopes"].data_ptr()
    if fp8:
        assert (d.k_descale, d.v_descale) == (second["k_descale"].data_ptr(),
                                              second["v_descale"].data_ptr())
    assert fields(d) == fields(traced(monkeypatch, launches, fajit.attention_with_kvcache, q,
                                      k, v, softcap=30.0, **second, **kw))


# ------ the rules: raised before any launch, nothing cached ------

def _bad_kvcache_cases():
    q, k, v, kw = paged()
    cases = [
        (dict(softcap=-1.0), "softcap must be finite and >= 0 (0: off), got -1.0"),
        (dict(softcap=math.nan), "softcap must be finite and >= 0"),
        (dict(softcap=math.inf), "softcap must be finite and >= 0"),
        (dict(softcap=[30.0]), "softcap must be a float (0: off), got [30.0]"),
        (dict(sinks=torch.randn(31)), "sinks must have one value per query head (32), got "
                                      "shape (31,)"),
        (dict(sinks=torch.randn(32).half()), "sinks must be torch.float32, got "
                                             "torch.float16"),
        (dict(sinks=torch.randn(1, 32)), "sinks must have 1 dimensions"),
        (dict(sinks=[0.0] * 32), "sinks must be a torch.Tensor, got list"),
        (dict(sinks=torch.randn(64)[::2]), "sinks's last dimension must be contiguous"),
        (dict(alibi_slopes=torch.rand(31)), "alibi_slopes must have shape [32] or [2, 32]"),
        (dict(alibi_slopes=torch.rand(3, 32)), "alibi_slopes must have shape [32] or [2, 32] "
                                               "([heads_q] or [batch, heads_q]), got (3, 32)"),
        (dict(alibi_slopes=torch.rand(2, 2, 32)), "alibi_slopes must be a torch.float32 "
                                                  "tensor [heads_q] or [batch, heads_q]"),
        (dict(alibi_slopes=torch.rand(32).double()), "alibi_slopes must be torch.float32, "
                                                     "got torch.float64"),
        (dict(alibi_slopes=torch.rand(32, 2).t()), "alibi_slopes's last dimension must be "
                                                   "contiguous"),
        (dict(k_descale=torch.ones(1), v_descale=torch.ones(1)),
         "k_descale and v_descale go with FP8 K/V (k_cache of torch.float8_e4m3fn or "
         "torch.float8_e5m2), got k_cache of torch.bfloat16"),
    ]
    return cases


@pytest.mark.parametrize("extra,msg", _bad_kvcache_cases(),
                         ids=[m[:40] for _, m in _bad_kvcache_cases()])
def test_bad_feature_arguments(launches, extra, msg):
    q, k, v, kw = paged()
    for _ in range(2):
        with pytest.raises(fajit.Error) as e:
            fajit.attention_with_kvcache(q, k, v, **kw, **extra)
        assert e.value.name == "FAJIT_INVALID_ARGUMENT" and msg in e.value.message, \
            e.value.message
    assert launches == [] and len(T._descs()) == 0


def test_bad_feature_arguments_on_attention(launches):
    q, k, v = dense()
    for extra, msg in ((dict(softcap=-0.5), "softcap must be finite and >= 0"),
                       (dict(sinks=torch.randn(2)), "sinks must have one value per query "
                                                    "head (8)"),
                       (dict(alibi_slopes=torch.rand(4, 8)), "got (4, 8)")):
        with pytest.raises(fajit.Error, match=msg.replace("(", r"\(").replace(")", r"\)")):
            fajit.attention(q, k, v, **extra)
    assert launches == [] and len(T._descs()) == 0


@needs_fp8
def test_bad_fp8_arguments(launches):
    q, k, v, kw = paged(dtype=E4M3)
    one = torch.ones(1)
    cases = [
        (dict(), "FP8 K/V (torch.float8_e4m3fn) needs k_descale and v_descale"),
        (dict(k_descale=one), "needs k_descale and v_descale"),
        (dict(v_descale=one), "needs k_descale and v_descale"),
        (dict(k_descale=one.half(), v_descale=one), "k_descale must be a torch.float32 "
                                                    "tensor, got torch.float16"),
        (dict(k_descale=one, v_descale=1.0), "v_descale must be a torch.float32 tensor, got "
                                             "float"),
        (dict(k_descale=torch.ones(3), v_descale=torch.ones(3)),
         "k_descale must have one element (a per-tensor scale) or shape [2, 8] ([batch, "
         "heads_kv]), got (3,)"),
        (dict(k_descale=torch.ones(2, 4), v_descale=torch.ones(2, 4)), "got (2, 4)"),
        (dict(k_descale=torch.ones(3, 8), v_descale=torch.ones(3, 8)), "got (3, 8)"),
        (dict(k_descale=torch.ones(2, 8), v_descale=torch.ones(8, 2).t()),
         "k_descale and v_descale must share one layout"),
        (dict(k_descale=torch.ones(2, 8), v_descale=one),
         "k_descale and v_descale must share one layout"),
    ]
    for extra, msg in cases:
        for _ in range(2):
            with pytest.raises(fajit.Error) as e:
                fajit.attention_with_kvcache(q, k, v, **kw, **extra)
            assert e.value.name == "FAJIT_INVALID_ARGUMENT" and msg in e.value.message, \
                (extra, e.value.message)
    with pytest.raises(fajit.Error, match="k_cache and v_cache must have one dtype .FP8 K/V: "
                                          "both torch.float8_e4m3fn or both"):
        fajit.attention_with_kvcache(q, k, v.view(E5M2), k_descale=one, v_descale=one, **kw)
    with pytest.raises(fajit.Error, match="v_cache must be torch.bfloat16, got "
                                          "torch.float8_e4m3fn"):
        fajit.attention_with_kvcache(q, k.view(BF), v, k_descale=one, v_descale=one, **kw)
    with pytest.raises(fajit.Error, match="q must be torch.float16 or torch.bfloat16, got "
                                          "torch.float8_e4m3fn"):
        fajit.attention_with_kvcache(q.to(E4M3), k, v, k_descale=one, v_descale=one, **kw)
    assert launches == [] and len(T._descs()) == 0


def test_softcap_as_an_int_converts(launches):
    q, k, v, kw = paged()
    fajit.attention_with_kvcache(q, k, v, softcap=30, **kw)
    assert launches[-1].softcap == 30.0


# ------ flash_attn_varlen_func's names ------

def vllm(n=3, hq=32, hkv=8, d=128, page=16, max_pages=8, dtype=BF):
    q = torch.randn(n, hq, d).to(BF)
    kv = torch.randn(2, n * max_pages, page, hkv, d).to(dtype)
    return dict(q=q, k=kv[0], v=kv[1], cu_seqlens_q=torch.arange(n + 1, dtype=torch.int32),
                max_seqlen_q=1, seqused_k=torch.tensor([100, 5, 128][:n], dtype=torch.int32),
                max_seqlen_k=128,
                block_table=torch.arange(n * max_pages, dtype=torch.int32).view(n, max_pages))


def kvcache_of(a, **kw):
    """attention_with_kvcache's call for vLLM's call a (causal, scale 0.125)."""
    return (a["q"], a["k"], a["v"]), dict(
        block_table=a["block_table"], seqused_k=a["seqused_k"], cu_seqlens_q=a["cu_seqlens_q"],
        max_seqlen_q=a["max_seqlen_q"], max_seqlen_k=a["max_seqlen_k"], causal=True,
        scale=0.125, **kw)


@pytest.mark.parametrize("sink_name", ["s_aux", "learnable_sink"])
def test_varlen_features_map_onto_kvcache(monkeypatch, launches, sink_name):
    a = vllm()
    sinks, slopes = torch.randn(32), torch.rand(3, 32)
    for _ in range(2):   # a miss, then a hit
        fajit.flash_attn_varlen_func(**a, softmax_scale=0.125, causal=True, softcap=30.0,
                                     alibi_slopes=slopes, **{sink_name: sinks})
        d = launches[-1]
        assert (d.softcap, d.sinks, d.alibi_slopes, d.alibi_batch_stride) == \
            (30.0, sinks.data_ptr(), slopes.data_ptr(), 32)
    assert len(T._descs()) == 1
    args, kw = kvcache_of(a, softcap=30.0, sinks=sinks, alibi_slopes=slopes)
    assert fields(d) == fields(traced(monkeypatch, launches, fajit.attention_with_kvcache,
                                      *args, **kw))


def test_varlen_both_sink_names_is_an_error(launches):
    a = vllm()
    with pytest.raises(fajit.Error, match="s_aux and learnable_sink are both the attention "
                                          "sinks: give one"):
        fajit.flash_attn_varlen_func(**a, s_aux=torch.zeros(32),
                                     learnable_sink=torch.zeros(32))
    assert launches == []


def test_varlen_bad_features(launches):
    a = vllm()
    for kw, msg in ((dict(softcap=-30.0), "softcap must be finite and >= 0"),
                    (dict(s_aux=torch.zeros(31)), "sinks must have one value per query head"),
                    (dict(learnable_sink=torch.zeros(32).half()), "sinks must be "
                                                                 "torch.float32"),
                    (dict(alibi_slopes=torch.zeros(4, 32)), "alibi_slopes must have shape")):
        with pytest.raises(fajit.Error, match=msg):
            fajit.flash_attn_varlen_func(**a, **kw)
    assert launches == [] and len(T._descs()) == 0


@needs_fp8
@pytest.mark.parametrize("how", ["vllm", "fa3"])
def test_varlen_fp8_cache(monkeypatch, launches, how):
    """vLLM passes layer._k_scale.expand((batch, heads_kv)) and an FP8 view of its cache;
    FA3's callers [batch, heads_kv] descales. A hit writes the call's descale pointers."""
    a = vllm(dtype=E4M3)

    def descales():
        if how == "vllm":
            return {n: torch.rand(1).expand(3, 8) for n in ("q_descale", "k_descale",
                                                            "v_descale")}
        return {n: torch.rand(3, 8) for n in ("q_descale", "k_descale", "v_descale")}

    first = descales()
    fajit.flash_attn_varlen_func(**a, softmax_scale=0.125, causal=True, **first)
    second = descales()
    fajit.flash_attn_varlen_func(**a, softmax_scale=0.125, causal=True, **second)
    assert len(T._descs()) == 1
    d = launches[-1]
    assert d.kv_dtype == 1
    assert (d.k_descale, d.v_descale) == (second["k_descale"].data_ptr(),
                                          second["v_descale"].data_ptr())
    assert (d.descale_batch_stride, d.descale_head_stride) == \
        ((0, 0) if how == "vllm" else (8, 1))
    args, kw = kvcache_of(a, k_descale=second["k_descale"], v_descale=second["v_descale"])
    assert fields(d) == fields(traced(monkeypatch, launches, fajit.attention_with_kvcache,
                                      *args, **kw))
    with pytest.raises(fajit.Error, match="needs k_descale and v_descale"):
        fajit.flash_attn_varlen_func(**a, causal=True)
    with pytest.raises(fajit.Error, match="k_cache and v_cache must have one dtype"):
        fajit.flash_attn_varlen_func(**dict(a, v=a["v"].view(E5M2)), causal=True,
                                     **second)


def test_varlen_packed_keys_pass_the_features_to_attention(monkeypatch, launches):
    q, k = torch.randn(30, 8, 64).to(BF), torch.randn(50, 2, 64).to(BF)
    cq = torch.tensor([0, 10, 30], dtype=torch.int32)
    ck = torch.tensor([0, 20, 50], dtype=torch.int32)
    sinks, slopes = torch.randn(8), torch.rand(2, 8)
    fajit.flash_attn_varlen_func(q, k, k, cq, ck, 20, 30, causal=True, softcap=10.0,
                                 learnable_sink=sinks, alibi_slopes=slopes)
    d = launches[-1]
    assert (d.softcap, d.sinks, d.alibi_slopes, d.alibi_batch_stride) == \
        (10.0, sinks.data_ptr(), slopes.data_ptr(), 8)
    slow = traced(monkeypatch, launches, fajit.attention, q, k, k, causal=True, softcap=10.0,
                  sinks=sinks, alibi_slopes=slopes, cu_seqlens_q=cq, cu_seqlens_k=ck,
                  max_seqlen_q=20, max_seqlen_k=30)
    assert fields(d) == fields(slow)


# ------ head_dim_v: V (and O) with their own head_dim ------

def test_head_dim_v_on_attention(monkeypatch, launches):
    q, k, _ = dense(d=192)
    v = torch.randn(2, 56, 2, 128).to(BF)
    d = checked_both_ways(monkeypatch, launches, fajit.attention, q, k, v, causal=True)
    assert (d.head_dim, d.head_dim_v) == (192, 128)
    o = fajit.attention(q, k, v, causal=True)
    assert o.shape == (2, 40, 8, 128)
    assert launches[-1].o_head_stride == 128 and launches[-1].o == o.data_ptr()
    out = torch.empty(2, 40, 8, 128).to(BF)
    assert fajit.attention(q, k, v, out=out) is out
    with pytest.raises(fajit.Error, match=r"out must have q's shape with v's head_dim "
                                          r"\(2, 40, 8, 128\), got \(2, 40, 8, 192\)"):
        fajit.attention(q, k, v, out=torch.empty_like(q))
    with pytest.raises(fajit.Error, match="k and v must have one shape but for head_dim"):
        fajit.attention(q, k, torch.randn(2, 55, 2, 128).to(BF))
    q64, k64, v64 = dense()   # equal head_dims: head_dim_v stays 0 (head_dim)
    fajit.attention(q64, k64, v64)
    assert launches[-1].head_dim_v == 0


def test_head_dim_v_varlen_packed(monkeypatch, launches):
    cu = torch.tensor([0, 30, 70], dtype=torch.int32)
    q = torch.randn(70, 16, 192).to(BF)
    k = torch.randn(70, 16, 192).to(BF)
    v = torch.randn(70, 16, 128).to(BF)
    for _ in range(2):   # a miss, then a hit
        o = fajit.flash_attn_varlen_func(q, k, v, cu, cu, 40, 40, causal=True)
        assert o.shape == (70, 16, 128)
        d = launches[-1]
        assert (d.head_dim, d.head_dim_v, d.o) == (192, 128, o.data_ptr())
    assert len(T._descs()) == 1
