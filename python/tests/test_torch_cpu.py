"""fajit's torch entry points on a machine without a GPU: every argument rule is reported
before anything reaches the GPU, and the custom ops' fake implementations give the shapes
torch.compile traces with."""
import pytest

from conftest import needs_torch

torch = pytest.importorskip("torch")
import fajit  # noqa: E402

pytestmark = needs_torch
BF = torch.bfloat16


def qkv(b=2, sq=64, sk=64, hq=8, hkv=2, d=64, dtype=BF, device="cpu"):
    return (torch.zeros(b, sq, hq, d, dtype=dtype, device=device),
            torch.zeros(b, sk, hkv, d, dtype=dtype, device=device),
            torch.zeros(b, sk, hkv, d, dtype=dtype, device=device))


def err(fn, *args, **kwargs):
    with pytest.raises(fajit.Error) as e:
        fn(*args, **kwargs)
    assert e.value.name == "FAJIT_INVALID_ARGUMENT"
    return e.value.message


def test_cpu_tensors_are_refused():
    assert err(fajit.attention, *qkv()) == "q must be a CUDA tensor, got one on cpu"
    q, k, v = qkv(sq=1)
    assert "CUDA tensor" in err(fajit.attention_with_kvcache, q, k, v)


def test_wrong_dtypes():
    q, k, v = qkv(dtype=torch.float32)
    assert err(fajit.attention, q, k, v) == \
        "q must be torch.float16 or torch.bfloat16, got torch.float32"
    q, k, v = qkv()
    assert err(fajit.attention, q, k.half(), v) == "k must be torch.bfloat16, got torch.float16"
    assert "out must be torch.bfloat16" in err(fajit.attention, q, k, v, out=q.float())
    assert err(fajit.attention, 1, k, v) == \
        "q must be a torch.Tensor, got int"


def test_bad_shapes():
    q, k, v = qkv()
    assert err(fajit.attention, q[0], k, v) == \
        "q must have 4 dimensions, got shape (64, 8, 64)"
    assert "one head_dim" in err(fajit.attention, q, k[..., :32], v[..., :32])
    assert "k and v must have one shape" in err(fajit.attention, q, k, v[:, :32])
    q2, k2, v2 = qkv(hq=6, hkv=4)
    assert err(fajit.attention, q2, k2, v2) == "q's heads (6) must be a multiple of k's (4)"
    assert "one batch" in err(fajit.attention, q[:1], k, v)
    assert "out must have q's shape" in err(fajit.attention, q, k, v, out=q[:, :32])
    assert "last dimension must be contiguous" in err(
        fajit.attention, q.transpose(2, 3), k.transpose(2, 3), v.transpose(2, 3))


def test_varlen_rules():
    q, k, v = (t.flatten(0, 1) for t in qkv())
    cu = torch.tensor([0, 64, 128], dtype=torch.int32)
    assert "given together" in err(fajit.attention, q, k, v, cu_seqlens_q=cu)
    assert "max_seqlen_q and max_seqlen_k" in err(fajit.attention, q, k, v, cu_seqlens_q=cu,
                                                  cu_seqlens_k=cu)
    assert err(fajit.attention, q, k, v, cu_seqlens_q=cu.long(), cu_seqlens_k=cu,
               max_seqlen_q=64, max_seqlen_k=64) == \
        "cu_seqlens_q must be torch.int32, got torch.int64"
    assert "must have one length" in err(fajit.attention, q, k, v, cu_seqlens_q=cu,
                                         cu_seqlens_k=cu[:2], max_seqlen_q=64, max_seqlen_k=64)


def test_masks():
    q, k, v = qkv()
    assert "causal=True allows window right 0 or -1, got 3" in err(
        fajit.attention, q, k, v, causal=True, window=(16, 3))
    assert "needs both >= 0" in err(fajit.attention, q, k, v, window=(-1, 4))


def test_kvcache_rules():
    q = torch.zeros(2, 1, 8, 64, dtype=BF)
    pages = torch.zeros(10, 16, 2, 64, dtype=BF)
    bt = torch.zeros(2, 5, dtype=torch.int32)
    used = torch.zeros(2, dtype=torch.int32)
    assert err(fajit.attention_with_kvcache, q, pages, pages, seqused_k=used) == \
        "seqused_k needs a block_table (paged K/V)"
    assert "a row per sequence (2), got 1" in err(fajit.attention_with_kvcache, q, pages, pages,
                                                  block_table=bt[:1])
    assert "block_table must be torch.int32" in err(fajit.attention_with_kvcache, q, pages,
                                                    pages, block_table=bt.long())
    assert "seqused_k must have 2 entries" in err(fajit.attention_with_kvcache, q, pages, pages,
                                                  block_table=bt, seqused_k=used[:1])
    assert "num_splits must be in 0..128" in err(fajit.attention_with_kvcache, q, pages, pages,
                                                 block_table=bt, num_splits=200)
    assert "num_splits_max must be in 0..128 (0: no bound), got -1" in err(
        fajit.attention_with_kvcache, q, pages, pages, block_table=bt, num_splits_max=-1)
    assert "num_splits (8, a forced count) must be at most num_splits_max (4" in err(
        fajit.attention_with_kvcache, q, pages, pages, block_table=bt, num_splits=8,
        num_splits_max=4)
    # a mixed batch: packed q rows, cu_seqlens_q, max_seqlen_q, over a block table
    qp = torch.zeros(7, 8, 64, dtype=BF)
    cu = torch.tensor([0, 5, 7], dtype=torch.int32)
    assert err(fajit.attention_with_kvcache, qp, pages, pages, cu_seqlens_q=cu,
               max_seqlen_q=5) == "cu_seqlens_q (a mixed batch) needs a block_table (paged K/V)"
    assert "needs max_seqlen_q" in err(fajit.attention_with_kvcache, qp, pages, pages,
                                       block_table=bt, cu_seqlens_q=cu)
    assert "max_seqlen_q goes with cu_seqlens_q" in err(fajit.attention_with_kvcache, q, pages,
                                                        pages, block_table=bt, max_seqlen_q=1)
    assert "cu_seqlens_q must be torch.int32" in err(fajit.attention_with_kvcache, qp, pages,
                                                     pages, block_table=bt,
                                                     cu_seqlens_q=cu.long(), max_seqlen_q=5)
    assert "a row per sequence (3), got 2" in err(
        fajit.attention_with_kvcache, qp, pages, pages, block_table=bt,
        cu_seqlens_q=torch.tensor([0, 2, 5, 7], dtype=torch.int32), max_seqlen_q=3)
    assert "q must have 3 dimensions" in err(fajit.attention_with_kvcache, q, pages, pages,
                                             block_table=bt, cu_seqlens_q=cu, max_seqlen_q=5)
    assert "CUDA tensor" in err(fajit.attention_with_kvcache, qp, pages, pages, block_table=bt,
                                cu_seqlens_q=cu, max_seqlen_q=5)   # every rule passed


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch < 2.4")
def test_fake_implementations_give_the_shapes():
    q, k, v = qkv(device="meta")
    o, lse = torch.ops.fajit.fwd(q, k, v, None, None, None, None, 64, 64, 1, -1, -1, None,
                                 True, 0, 0)
    assert o.shape == q.shape and o.dtype == BF and lse.shape == (2, 8, 64)
    assert lse.dtype == torch.float32
    o, lse = torch.ops.fajit.fwd(q, k, v, None, None, None, None, 64, 64, 0, -1, -1, 0.5,
                                 False, 0, 0)
    assert lse.numel() == 0
    qv, kv = q.flatten(0, 1), k.flatten(0, 1)
    cu = torch.zeros(3, dtype=torch.int32, device="meta")
    o, lse = torch.ops.fajit.fwd(qv, kv, kv, cu, cu, None, None, 64, 64, 0, -1, -1, None,
                                 True, 0, 0)
    assert o.shape == qv.shape and lse.shape == (8, 128)
    lse = torch.ops.fajit.fwd_out(q, k, v, torch.empty_like(q), None, None, None, None, 64, 64,
                                  1, -1, -1, None, True, 0, 0)
    assert lse.shape == (2, 8, 64)


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch < 2.4")
def test_torch_compile_traces_one_op_without_a_gpu():
    """Dynamo traces the whole wrapper (fullgraph: no graph break) into one fajit op, on fake
    CUDA tensors: no GPU is needed to trace."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(q, k, v, o, sinks):
        a = fajit.attention(q, k, v, causal=True)
        b, lse = fajit.attention(q, k, v, window=(16, 0), return_lse=True, out=o,
                                 softcap=30.0, sinks=sinks)
        return a + b, lse

    f = torch.compile(fn, fullgraph=True, backend=backend)
    with FakeTensorMode():
        q, k, v = qkv(device="cuda")
        out, lse = f(q, k, v, torch.empty_like(q), torch.zeros(8, device="cuda"))
        assert out.shape == q.shape and lse.shape == (2, 8, 64)
    code = graphs[0].code
    assert code.count("torch.ops.fajit.fwd.default(") == 1, code
    assert code.count("torch.ops.fajit.fwd_out.default") == 1, code
    # window mask, its bounds, lse; then softcap and the sinks (no ALiBi, no descales)
    assert ", 2, 16, 0, None, True, 0, 0, 30.0, l_sinks_, None, None, None)" in code, code
    assert ", 1, -1, -1, None, False, 0, 0, 0.0, None, None, None, None)" in code, code


def test_merge_attention_rules():
    o = torch.zeros(2, 5, 4, 64, dtype=BF)
    lse = torch.zeros(2, 4, 5)
    assert err(fajit.merge_attention, o, lse, o, lse) == \
        "o_a must be a CUDA tensor, got one on cpu"
    assert "o_a and o_b must have one shape" in \
        err(fajit.merge_attention, o, lse, o[:, :4], lse)
    assert err(fajit.merge_attention, o, lse[:, :, :4], o, lse) == \
        "lse_a must have shape (2, 4, 5), got (2, 4, 4)"
    assert err(fajit.merge_attention, o, lse.half(), o, lse) == \
        "lse_a must be a torch.float32 tensor"
    assert "o_b must be torch.bfloat16" in err(fajit.merge_attention, o, lse, o.half(), lse)
    packed = torch.zeros(7, 4, 64, dtype=BF)
    assert err(fajit.merge_attention, packed, torch.zeros(4, 6), packed, torch.zeros(4, 7)) \
        == "lse_a must have shape (4, 7), got (4, 6)"
