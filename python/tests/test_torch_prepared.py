"""fajit.prepare_kvcache without a GPU: a prepared call's runs launch exactly the descriptor
attention_with_kvcache builds for the same call (every field), with each run's own pointers
and lengths; its guards refuse another layout before anything launches; traced calls take
attention_with_kvcache. The C launch (_torch._submit) records the descriptor it would get
and the CUDA device rule does nothing, so CPU tensors stand in for CUDA ones."""
import pytest

from conftest import needs_torch

torch = pytest.importorskip("torch")
import fajit  # noqa: E402
from fajit import _torch as T  # noqa: E402
from fajit._lib import AttnDesc  # noqa: E402

pytestmark = needs_torch
BF = torch.bfloat16
FIELDS = [name for name, _ in AttnDesc._fields_]


def fields(d):
    return {n: getattr(d, n) for n in FIELDS}


def decode_step(b=2, hq=32, hkv=8, d=128, pages=40, page=16, width=10):
    """One step's tensors: q, a layer's cache (k, v), out, the block table and lengths."""
    q = torch.randn(b, 1, hq, d).to(BF)
    kv = torch.randn(2, pages, page, hkv, d).to(BF)
    bt = torch.randperm(pages)[:b * width].to(torch.int32).view(b, width)
    used = torch.randint(1, width * page, (b,), dtype=torch.int32)
    return q, kv[0], kv[1], torch.empty_like(q), bt, used


def mixed_step():
    """vLLM's unified step: packed q of 2 prefill chunks and 2 decode rows."""
    q = torch.randn(9, 32, 128).to(BF)
    kv = torch.randn(2, 40, 16, 8, 128).to(BF)
    bt = torch.arange(40, dtype=torch.int32).view(4, 10).flip(1)
    used = torch.tensor([5, 100, 160, 1], dtype=torch.int32)
    cu = torch.tensor([0, 5, 6, 8, 9], dtype=torch.int32)
    return q, kv[0], kv[1], torch.empty_like(q), bt, used, cu


@pytest.mark.parametrize("opts", [dict(causal=True), dict(causal=True, return_lse=True),
                                  dict(window=(64, 0), num_splits=3, scale=0.1),
                                  dict(softcap=30.0, num_splits_max=4)])
def test_runs_launch_what_attention_with_kvcache_launches(launches, opts):
    q, k, v, out, bt, used = decode_step()
    p = fajit.prepare_kvcache(q, k, v, out=out, block_table=bt, seqused_k=used, **opts)
    assert launches == []   # preparing launches nothing
    for layer in range(3):   # each layer: its own cache, the step's q/out/table
        q2, k2, v2, out2, bt2, used2 = decode_step()
        r = p.run(q2, k2, v2, out=out2, block_table=bt2, seqused_k=used2,
                  max_seqlen_k=90 + layer)
        fast = launches.pop()
        T._descs().clear()
        r2 = fajit.attention_with_kvcache(q2, k2, v2, out=out2, block_table=bt2,
                                          seqused_k=used2, max_seqlen_k=90 + layer, **opts)
        ref = launches.pop()
        if opts.get("return_lse"):   # each call's own LSE tensor
            assert r[0] is out2 and r[1].shape == r2[1].shape
            assert fast.lse == r[1].data_ptr() and ref.lse == r2[1].data_ptr()
            fast.lse = ref.lse = 0
        else:
            assert r is out2
        assert fields(fast) == fields(ref)
        assert (fast.q, fast.k, fast.v, fast.o, fast.block_table, fast.seqused_k) == (
            q2.data_ptr(), k2.data_ptr(), v2.data_ptr(), out2.data_ptr(), bt2.data_ptr(),
            used2.data_ptr())
        assert fast.seqlen_k == 90 + layer


def test_mixed_batch_and_allocated_out(launches):
    q, k, v, out, bt, used, cu = mixed_step()
    kw = dict(block_table=bt, seqused_k=used, cu_seqlens_q=cu, max_seqlen_q=5, causal=True)
    p = fajit.prepare_kvcache(q, k, v, **kw)
    q2, k2, v2, _, bt2, used2, cu2 = mixed_step()
    o = p(q2, k2, v2, block_table=bt2, seqused_k=used2, cu_seqlens_q=cu2, max_seqlen_q=4)
    fast = launches.pop()
    assert o.shape == q2.shape and fast.o == o.data_ptr() and fast.seqlen_q == 4
    assert fast.cu_seqlens_q == cu2.data_ptr()
    fajit.attention_with_kvcache(q2, k2, v2, out=o, **dict(kw, block_table=bt2,
                                                           seqused_k=used2, cu_seqlens_q=cu2,
                                                           max_seqlen_q=4))
    assert fields(fast) == fields(launches.pop())


def test_guards_refuse_another_layout_before_launching(launches):
    q, k, v, out, bt, used = decode_step(b=2)
    p = fajit.prepare_kvcache(q, k, v, out=out, block_table=bt, seqused_k=used, causal=True)
    q3, k3, v3, out3, bt3, used3 = decode_step(b=3)
    with pytest.raises(fajit.Error, match="q has shape"):
        p.run(q3, k, v, out=out, block_table=bt, seqused_k=used)
    with pytest.raises(fajit.Error, match="out has shape"):
        p.run(q, k, v, out=out3, block_table=bt, seqused_k=used)
    with pytest.raises(fajit.Error, match="block_table must have the prepared call's shape"):
        p.run(q, k, v, out=out, block_table=bt3, seqused_k=used)
    with pytest.raises(fajit.Error, match="block_table must have the prepared call's shape"):
        p.run(q, k, v, out=out, seqused_k=used)
    with pytest.raises(fajit.Error, match="cu_seqlens_q was not given to prepare_kvcache"):
        p.run(q, k, v, out=out, block_table=bt, cu_seqlens_q=torch.tensor([0, 1, 2]))
    with pytest.raises(fajit.Error, match="sinks was not given to prepare_kvcache"):
        p.run(q, k, v, out=out, block_table=bt, seqused_k=used, sinks=torch.zeros(32))
    assert launches == []
    # the mixed batch: another number of sequences is another layout
    q, k, v, out, bt, used, cu = mixed_step()
    p = fajit.prepare_kvcache(q, k, v, block_table=bt, seqused_k=used, cu_seqlens_q=cu,
                              max_seqlen_q=5)
    with pytest.raises(fajit.Error, match="cu_seqlens_q must have the prepared call's shape"):
        p.run(q, k, v, block_table=bt, seqused_k=used, cu_seqlens_q=cu[:4], max_seqlen_q=5)
    with pytest.raises(fajit.Error, match="cu_seqlens_q must have the prepared call's shape"):
        p.run(q, k, v, block_table=bt, seqused_k=used)
    assert launches == []


def test_feature_tensors_per_run(launches):
    q, k, v, out, bt, used = decode_step()
    sinks, slopes = torch.randn(32), torch.rand(32)
    p = fajit.prepare_kvcache(q, k, v, out=out, block_table=bt, seqused_k=used,
                              sinks=sinks, alibi_slopes=slopes, causal=True)
    s2, a2 = torch.randn(32), torch.rand(32)
    p.run(q, k, v, out=out, block_table=bt, seqused_k=used, sinks=s2, alibi_slopes=a2)
    d = launches.pop()
    assert (d.sinks, d.alibi_slopes) == (s2.data_ptr(), a2.data_ptr())
    with pytest.raises(fajit.Error, match="alibi_slopes must be given to run"):
        p.run(q, k, v, out=out, block_table=bt, seqused_k=used, sinks=s2)
    assert launches == []


def test_prepare_checks_like_attention_with_kvcache(launches):
    q, k, v, out, bt, used = decode_step()
    with pytest.raises(fajit.Error, match="block_table"):
        fajit.prepare_kvcache(q, k, v, block_table=bt.long(), seqused_k=used)
    with pytest.raises(fajit.Error, match="num_splits must be in 0..128"):
        fajit.prepare_kvcache(q, k, v, block_table=bt, num_splits=200)
    with pytest.raises(fajit.Error, match="needs a block_table"):
        fajit.prepare_kvcache(q, k, v, cu_seqlens_q=torch.tensor([0, 1, 2],
                                                                 dtype=torch.int32))
    assert launches == []


def test_traced_runs_take_attention_with_kvcache(monkeypatch, launches):
    q, k, v, out, bt, used = decode_step()
    p = fajit.prepare_kvcache(q, k, v, out=out, block_table=bt, seqused_k=used, causal=True,
                              softcap=5.0)
    seen = []
    monkeypatch.setattr(T, "attention_with_kvcache",
                        lambda *a, **kw: seen.append((a, kw)) or "traced")
    monkeypatch.setattr(T, "_compiling", lambda: True)
    assert p.run(q, k, v, out=out, block_table=bt, seqused_k=used) == "traced"
    (args, kw), = seen
    assert args == (q, k, v) and kw["causal"] is True and kw["softcap"] == 5.0
    assert kw["block_table"] is bt and kw["out"] is out
    assert launches == []
