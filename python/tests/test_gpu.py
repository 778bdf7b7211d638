"""fajit on a GPU through torch: random shapes against a float64 reference (with SDPA's error on
the same inputs as the yardstick), LSE, strides, varlen, paged decode, torch.compile and CUDA
graph capture. Skipped without torch or a CUDA GPU. FAJIT_TEST_SEED fixes the shapes."""
import itertools
import math
import os
import random

import pytest

from conftest import needs_gpu

pytestmark = needs_gpu
torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import fajit  # noqa: E402

SEED = int(os.environ.get("FAJIT_TEST_SEED", "1234"))


def reference(q, k, v, causal=False, window=None, scale=None):
    """float64 attention, fajit's mask rule (bottom-right): O [b, sq, hq, d], LSE [b, hq, sq];
    a row that sees no key gets O = 0 and LSE = -inf."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    qf = q.double().transpose(1, 2)
    kf = k.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vf = v.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    s = qf @ kf.transpose(-1, -2) * scale
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        vis &= j <= i
    if window is not None:
        vis &= (j >= i - window[0]) & (j <= i + window[1])
    s = s.masked_fill(~vis, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse, vis


def sdpa_error(q, k, v, vis, scale, ref):
    """The error of PyTorch SDPA (q's dtype, explicit mask) against the reference."""
    g = q.shape[2] // k.shape[2]
    mask = torch.zeros(vis.shape, dtype=q.dtype, device=q.device).masked_fill(~vis, -math.inf)
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(g, 1),
        v.transpose(1, 2).repeat_interleave(g, 1), attn_mask=mask, scale=scale)
    return (o.transpose(1, 2).double().nan_to_num(0.0) - ref).abs().max().item()


def check(o, lse, q, k, v, causal=False, window=None, scale=None, what=""):
    ref, ref_lse, vis = reference(q, k, v, causal, window, scale)
    err = (o.double() - ref).abs().max().item()
    yard = sdpa_error(q, k, v, vis, scale, ref)
    tol = max(3 * yard, 2 ** -7 * ref.abs().max().item()) + 1e-4
    assert err <= tol, f"{what}: max error {err:.5f}, SDPA's {yard:.5f}, allowed {tol:.5f}"
    if lse is not None:
        finite = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), finite), what
        assert (lse.double()[finite] - ref_lse[finite]).abs().max().item() < 1e-2, what


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def test_random_shapes_against_float64():
    rng = random.Random(SEED)
    for case in range(24):
        b = rng.choice([1, 2, 3])
        sq, sk = rng.randint(1, 700), rng.randint(1, 700)
        if rng.random() < 0.4:
            sk = sq
        hq, hkv = rng.choice([(4, 4), (8, 2), (6, 3), (4, 1)])
        d = rng.choice([64, 128])
        dtype = rng.choice([torch.bfloat16, torch.float16])
        causal = rng.random() < 0.5
        window = (rng.randint(0, 300), 0 if causal else rng.randint(0, 300)) \
            if rng.random() < 0.25 else None
        scale = rng.choice([None, 0.3])
        q, k, v = rand(b, sq, hq, d, dtype=dtype), rand(b, sk, hkv, d, dtype=dtype), \
            rand(b, sk, hkv, d, dtype=dtype)
        o, lse = fajit.attention(q, k, v, causal=causal, window=window, scale=scale,
                                 return_lse=True)
        assert o.shape == q.shape and lse.shape == (b, hq, sq)
        check(o, lse, q, k, v, causal, window, scale,
              f"case {case} (seed {SEED}): b{b} sq{sq} sk{sk} h{hq}/{hkv} d{d} {dtype} "
              f"causal={causal} window={window} scale={scale}")


def test_head_dims_and_strided_inputs():
    for d in (32, 96, 256):
        qkv = rand(2, 300, 3, 4, d)   # one packed tensor: q, k, v are strided views
        q, k, v = qkv.unbind(2)
        o = fajit.attention(q, k, v, causal=True)
        check(o, None, q, k, v, causal=True, what=f"packed qkv d{d}")
        out = torch.full_like(rand(2, 4, 300, d), float("nan")).transpose(1, 2)
        r = fajit.attention(q, k, v, out=out)   # into a strided out
        assert r is out
        check(out, None, q, k, v, what=f"strided out d{d}")


def test_varlen_matches_each_sequence():
    rng = random.Random(SEED + 1)
    lq = [rng.randint(1, 300) for _ in range(4)]
    lk = [n + rng.randint(0, 200) for n in lq]
    cq = torch.tensor([0] + lq, device="cuda").cumsum(0).to(torch.int32)
    ck = torch.tensor([0] + lk, device="cuda").cumsum(0).to(torch.int32)
    q, k, v = rand(sum(lq), 8, 64), rand(sum(lk), 2, 64), rand(sum(lk), 2, 64)
    o, lse = fajit.attention(q, k, v, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck,
                             max_seqlen_q=max(lq), max_seqlen_k=max(lk), return_lse=True)
    assert lse.shape == (8, sum(lq))
    for i in range(4):
        a, e = int(cq[i]), int(cq[i + 1])
        ka, ke = int(ck[i]), int(ck[i + 1])
        check(o[a:e][None], lse[:, a:e][None], q[a:e][None], k[ka:ke][None], v[ka:ke][None],
              causal=True, what=f"varlen sequence {i}")


def paged(k, v, page_size, gen):
    """k, v [b, N, hkv, d] -> pages [num_pages, page_size, hkv, d] in a random order, and the
    block table."""
    b, n, h, d = k.shape
    per = -(-n // page_size)
    perm = torch.randperm(b * per, generator=gen).cuda()
    kp = torch.zeros(b * per, page_size, h, d, dtype=k.dtype, device="cuda")
    vp = torch.zeros_like(kp)
    pad = per * page_size - n
    kp[perm] = F.pad(k, (0, 0, 0, 0, 0, pad)).reshape(b * per, page_size, h, d)
    vp[perm] = F.pad(v, (0, 0, 0, 0, 0, pad)).reshape(b * per, page_size, h, d)
    return kp, vp, perm.to(torch.int32).view(b, per).contiguous()


@pytest.mark.parametrize("q_len,page_size", [(1, 16), (4, 64), (1, 256)])
def test_kvcache_paged(q_len, page_size):
    gen = torch.Generator().manual_seed(SEED)
    b, n = 3, 1000
    k, v = rand(b, n, 8, 128), rand(b, n, 8, 128)
    q = rand(b, q_len, 32, 128)
    kp, vp, bt = paged(k, v, page_size, gen)
    used = torch.tensor([1000, 517, q_len], dtype=torch.int32, device="cuda")
    for splits in (0, 1, 5):
        o, lse = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used,
                                              causal=True, num_splits=splits, return_lse=True)
        for i in range(b):
            u = int(used[i])
            check(o[i:i + 1], lse[i:i + 1], q[i:i + 1], k[i:i + 1, :u], v[i:i + 1, :u],
                  causal=True, what=f"paged q_len {q_len} page {page_size} seq {i} "
                  f"splits {splits}")
    o = fajit.attention_with_kvcache(q, k, v, causal=True)   # contiguous cache
    check(o, None, q, k, v, causal=True, what="contiguous kvcache")


def test_kvcache_mixed_batch():
    """Chunked prefill and decode rows in one call (packed q, cu_seqlens_q) over one paged
    cache, each sequence against the float32 reference of its own keys (bottom-right
    causal), the LSE in the varlen layout [heads, total_q]."""
    gen = torch.Generator().manual_seed(SEED)
    b, n = 4, 700
    k, v = rand(b, n, 8, 128), rand(b, n, 8, 128)
    kp, vp, bt = paged(k, v, 16, gen)
    q_lens, used = [37, 1, 1, 4], [700, 431, 1, 29]
    cu = torch.tensor([0] + list(itertools.accumulate(q_lens)), dtype=torch.int32,
                      device="cuda")
    q = rand(sum(q_lens), 32, 128)
    o, lse = fajit.attention_with_kvcache(q, kp, vp, block_table=bt,
                                          seqused_k=torch.tensor(used, dtype=torch.int32,
                                                                 device="cuda"),
                                          cu_seqlens_q=cu, max_seqlen_q=max(q_lens),
                                          causal=True, return_lse=True)
    for i in range(b):
        a, e, u = int(cu[i]), int(cu[i + 1]), used[i]
        check(o[a:e].unsqueeze(0), lse[:, a:e].unsqueeze(0), q[a:e].unsqueeze(0),
              k[i:i + 1, :u], v[i:i + 1, :u], causal=True, what=f"mixed batch seq {i}")


def test_errors_from_the_library():
    x = rand(2, 64, 4 * 68)   # head stride 68: not a multiple of 8
    q = x.view(2, 64, 4, 68)[..., :64]
    k = rand(2, 64, 4, 64)
    with pytest.raises(fajit.Error) as e:
        fajit.attention(q, k, k)
    assert e.value.name == "FAJIT_INVALID_ARGUMENT" and "stride" in e.value.message
    with pytest.raises(fajit.Error) as e:
        fajit.attention(rand(1, 8, 2, 100), rand(1, 8, 2, 100), rand(1, 8, 2, 100))
    assert e.value.name == "FAJIT_UNSUPPORTED" and "got 100" in e.value.message


def test_torch_compile_matches_eager():
    q, k, v = rand(2, 512, 8, 128), rand(2, 512, 2, 128), rand(2, 512, 2, 128)

    def fn(q, k, v):
        o, lse = fajit.attention(q * 0.5, k, v, causal=True, return_lse=True)
        return o.float() + 1, lse

    eager = fn(q, k, v)
    for mode in (None, "reduce-overhead"):   # the second runs the op inside CUDA graphs
        torch._dynamo.reset()
        f = torch.compile(fn, fullgraph=True, mode=mode)
        for _ in range(3):
            got = f(q, k, v)
        assert torch.equal(got[0], eager[0]) and torch.equal(got[1], eager[1]), mode


def test_cuda_graph_capture_and_replay():
    q, k, v = rand(2, 1024, 16, 128), rand(2, 1024, 4, 128), rand(2, 1024, 4, 128)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # warm up (loads the kernel) off the capture
        fajit.attention(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = fajit.attention(q, k, v, causal=True)
    for _ in range(3):
        q.copy_(rand(*q.shape))
        k.copy_(rand(*k.shape))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(o, fajit.attention(q, k, v, causal=True))


def test_cuda_graph_decode_with_changing_lengths():
    """Split-KV decode captured once; seqused_k changes between replays (the workspace of
    the split partials comes from the graph's pool)."""
    gen = torch.Generator().manual_seed(SEED)
    b, n = 4, 4096
    k, v = rand(b, n, 8, 128), rand(b, n, 8, 128)
    kp, vp, bt = paged(k, v, 16, gen)
    q = rand(b, 1, 32, 128)
    used = torch.full((b,), n, dtype=torch.int32, device="cuda")
    fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used)
    for lens in ([4096, 1, 2000, 33], [17, 4096, 4095, 1024]):
        used.copy_(torch.tensor(lens, dtype=torch.int32))
        q.copy_(rand(*q.shape))
        g.replay()
        torch.cuda.synchronize()
        for i, u in enumerate(lens):
            check(o[i:i + 1], None, q[i:i + 1], k[i:i + 1, :u], v[i:i + 1, :u],
                  what=f"graph replay, seq {i} of {lens}")


def test_default_context_counts_calls():
    ctx = fajit.default_context(torch.cuda.current_device())
    before = ctx.counters()["calls"]
    q = rand(1, 128, 4, 64)
    fajit.attention(q, q, q)
    assert ctx.counters()["calls"] == before + 1
    assert fajit.info()["device_count"] >= 1
    assert fajit.plan(head_dim=64, seqlen=128, heads_q=4)   # the device's own target


def test_merge_attention_equals_one_call():
    """Attention over keys [0, n1) and over [n1, n), merged by LSE, equals one call over all
    n keys (cascade attention), fixed-length and packed varlen, under torch.compile too."""
    torch.manual_seed(SEED)
    q, k, v = rand(2, 3, 8, 128), rand(2, 500, 2, 128), rand(2, 500, 2, 128)
    o, lse = fajit.attention(q, k, v, return_lse=True)
    oa, la = fajit.attention(q, k[:, :180], v[:, :180], return_lse=True)
    ob, lb = fajit.attention(q, k[:, 180:], v[:, 180:], return_lse=True)
    om, lm = fajit.merge_attention(oa, la, ob, lb)
    assert (om.float() - o.float()).abs().max().item() <= 2 ** -7 * o.abs().max().item()
    assert (lm - lse).abs().max().item() < 1e-3
    check(om, lm, q, k, v, what="merged")
    cm, cl = torch.compile(fajit.merge_attention, fullgraph=True)(oa, la, ob, lb)
    assert torch.equal(cm, om) and torch.equal(cl, lm)
    # packed rows: [total, heads, dim] with LSE [heads, total]
    pm, pl = fajit.merge_attention(oa.reshape(6, 8, 128), la.permute(1, 0, 2).reshape(8, 6),
                                   ob.reshape(6, 8, 128), lb.permute(1, 0, 2).reshape(8, 6))
    assert torch.equal(pm.reshape(2, 3, 8, 128), om)
    assert torch.equal(pl.reshape(8, 2, 3).permute(1, 0, 2), lm)


def vllm_batch(q_lens, used, n=700, page=16, hq=32, hkv=8, d=128):
    """A mixed batch as vLLM passes it: packed q, a (2, pages, page, hkv, d) cache unbound
    into K and V pages, the block table, cu_seqlens_q and seqused_k; and the contiguous K, V
    [b, n, hkv, d] the reference reads."""
    gen = torch.Generator().manual_seed(SEED)
    b = len(q_lens)
    k, v = rand(b, n, hkv, d), rand(b, n, hkv, d)
    kp, vp, bt = paged(k, v, page, gen)
    kv = torch.stack([kp, vp])
    cu = torch.tensor([0] + list(itertools.accumulate(q_lens)), dtype=torch.int32,
                      device="cuda")
    return dict(q=rand(sum(q_lens), hq, d), k=kv[0], v=kv[1], cu_seqlens_q=cu,
                max_seqlen_q=max(q_lens), seqused_k=torch.tensor(used, dtype=torch.int32,
                                                                 device="cuda"),
                max_seqlen_k=max(used), block_table=bt), k, v


def check_rows(o, lse, a, k, v, used, causal, window=None, what=""):
    cu = a["cu_seqlens_q"].tolist()
    for i, u in enumerate(used):
        s, e = cu[i], cu[i + 1]
        check(o[s:e].unsqueeze(0), None if lse is None else lse[:, s:e].unsqueeze(0),
              a["q"][s:e].unsqueeze(0), k[i:i + 1, :u], v[i:i + 1, :u], causal=causal,
              window=window, what=f"{what} seq {i}")


@pytest.mark.parametrize("window", [None, (64, 0)])
def test_flash_attn_varlen_func_paged_mixed_batch(window):
    """vLLM's call (keywords, out=, window_size as a list, the ignored FA3 arguments):
    chunked prefill and decode rows over paged GQA K/V, bottom-right causal."""
    q_lens, used = [37, 1, 1, 4], [700, 431, 1, 29]
    a, k, v = vllm_batch(q_lens, used)
    out = torch.full_like(a["q"], float("nan"))
    ws = [-1, -1] if window is None else [window[0], 0]
    o, lse = fajit.flash_attn_varlen_func(**a, out=out, softmax_scale=128 ** -0.5,
                                          causal=True, window_size=ws, alibi_slopes=None,
                                          softcap=0.0, scheduler_metadata=None, fa_version=3,
                                          num_splits=0, return_softmax_lse=True)
    assert o is out and lse.shape == (32, sum(q_lens)) and lse.dtype == torch.float32
    check_rows(o, lse, a, k, v, used, True, window, f"varlen paged window={window}")
    for splits in (1, 4):   # a split bound (num_splits_max) gives the same results
        o2 = fajit.flash_attn_varlen_func(**a, causal=True, window_size=ws, num_splits=splits)
        check_rows(o2, None, a, k, v, used, True, window, f"splits {splits}")


def test_flash_attn_varlen_func_fa2_forms():
    """FA2's positional call over pages with cu_seqlens_k (the lengths), and packed keys
    (no block table), non-causal."""
    q_lens, used = [5, 1, 3], [300, 17, 650]
    a, k, v = vllm_batch(q_lens, used)
    cu_k = torch.tensor([0] + list(itertools.accumulate(used)), dtype=torch.int32,
                        device="cuda")
    o = fajit.flash_attn_varlen_func(a["q"], a["k"], a["v"], a["cu_seqlens_q"], cu_k,
                                     max(q_lens), max(used), 0.0, None, True,
                                     block_table=a["block_table"])
    check_rows(o, None, a, k, v, used, True, what="FA2 paged")
    kp = torch.cat([k[i, :u] for i, u in enumerate(used)])
    vp = torch.cat([v[i, :u] for i, u in enumerate(used)])
    o, lse = fajit.flash_attn_varlen_func(a["q"], kp, vp, a["cu_seqlens_q"], cu_k,
                                          max(q_lens), max(used), return_softmax_lse=True)
    check_rows(o, lse, a, k, v, used, False, what="packed keys")


def test_eager_path_equals_the_custom_op_and_follows_new_tensors():
    """The cached descriptor with new pointers and lengths each call gives bit-identical
    results to the custom-op path building a new descriptor each call."""
    from fajit import _torch as T
    gen = torch.Generator().manual_seed(SEED)
    k, v = rand(2, 1024, 8, 128), rand(2, 1024, 8, 128)
    kp, vp, bt = paged(k, v, 16, gen)
    out = torch.empty(2, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    for lens in ([1024, 3], [77, 900], [1, 1]):
        q = rand(2, 1, 32, 128)   # new storage each time: a cache hit after the first
        used = torch.tensor(lens, dtype=torch.int32, device="cuda")
        fast = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used,
                                            out=out).clone()
        T._FAST = False
        try:
            slow = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used)
        finally:
            T._FAST = True
        assert torch.equal(fast, slow), lens
        for i, u in enumerate(lens):
            check(fast[i:i + 1], None, q[i:i + 1], k[i:i + 1, :u], v[i:i + 1, :u],
                  what=f"eager path {lens} seq {i}")


def test_flash_attn_varlen_func_under_torch_compile_and_graphs():
    q_lens, used = [9, 1, 1], [500, 64, 333]
    a, k, v = vllm_batch(q_lens, used)

    def fn(q, kc, vc, cu, used, bt):
        return fajit.flash_attn_varlen_func(q=q, k=kc, v=vc, cu_seqlens_q=cu, max_seqlen_q=9,
                                            seqused_k=used, max_seqlen_k=500, causal=True,
                                            block_table=bt)

    args = (a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["seqused_k"], a["block_table"])
    eager = fn(*args)
    torch._dynamo.reset()
    got = torch.compile(fn, fullgraph=True)(*args)
    assert torch.equal(got, eager)
    g = torch.cuda.CUDAGraph()   # the eager path captured: the workspace from the pool
    with torch.cuda.graph(g):
        o = fn(*args)
    a["seqused_k"].copy_(torch.tensor([17, 64, 1], dtype=torch.int32))
    g.replay()
    torch.cuda.synchronize()
    check_rows(o, None, a, k, v, [17, 64, 1], True, what="graph replay")


# ------ the model features: softcap, attention sinks, ALiBi, FP8 K/V ------

def feature_reference(q, k, v, causal=False, scale=None, softcap=0.0, sinks=None,
                      slopes=None):
    """float64 attention with the model features as fajit_attn_desc defines them: logits
    s = scale * q.k, then softcap * tanh(s / softcap), then ALiBi's -slope * |i + sk - sq -
    j|, the causal mask (bottom-right), and a softmax over the keys and each head's sink
    logit (its column dropped from P). slopes: [hq] or [1, hq]. O [b, sq, hq, d], LSE [b, hq,
    sq] (the sink included)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    qf = q.double().transpose(1, 2)
    kf = k.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vf = v.double().transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    if slopes is not None:
        s = s - slopes.double().reshape(1, hq, 1, 1) * (i - j).abs()
    if causal:
        s = s.masked_fill(j > i, -math.inf)
    full = s
    if sinks is not None:
        full = torch.cat([s, sinks.double().view(1, hq, 1, 1).expand(b, hq, sq, 1)], -1)
    lse = torch.logsumexp(full, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse


def check_features(o, lse, q, k, v, what="", **features):
    """o (and lse) against feature_reference: no SDPA yardstick here (SDPA has none of the
    features), a bound of bf16's rounding of O and of P instead."""
    ref, ref_lse = feature_reference(q, k, v, **features)
    err = (o.double() - ref).abs().max().item()
    tol = 2 ** -6 * ref.abs().max().item() + 2e-3
    assert err <= tol, f"{what}: max error {err:.5f}, allowed {tol:.5f}"
    if lse is not None:
        assert (lse.double() - ref_lse).abs().max().item() < 1e-2, what


def alibi_slopes(heads):
    """ALiBi's geometric slopes 2^(-8 h / heads), h = 1..heads (float32, CUDA)."""
    return torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)],
                        dtype=torch.float32, device="cuda")


FEATURES = {
    "softcap": lambda hq, b: dict(softcap=2.0),
    "sinks": lambda hq, b: dict(sinks=torch.randn(hq, device="cuda") * 2),
    "alibi": lambda hq, b: dict(alibi_slopes=alibi_slopes(hq)),
    "alibi per sequence": lambda hq, b: dict(
        alibi_slopes=torch.stack([alibi_slopes(hq) * (1 + i) / b for i in range(b)])),
    "all": lambda hq, b: dict(softcap=5.0, sinks=torch.randn(hq, device="cuda"),
                              alibi_slopes=alibi_slopes(hq) / 16),
}


def per_sequence(features, i):
    """The reference's features of sequence i (a [batch, heads] slope row picked)."""
    f = {("slopes" if n == "alibi_slopes" else n): t for n, t in features.items()}
    if f.get("slopes") is not None and f["slopes"].dim() == 2:
        f["slopes"] = f["slopes"][i]
    return f


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("q_len", [1, 4])
def test_kvcache_features_paged(feature, q_len):
    """Decode (and a few query rows) over paged K/V with each feature, per sequence against
    the float64 reference; a second call with new feature tensors of the same layout (an
    eager cache hit) follows them."""
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    b, n, hq = 3, 1000, 32
    k, v = rand(b, n, 8, 128), rand(b, n, 8, 128)
    q = rand(b, q_len, hq, 128)
    kp, vp, bt = paged(k, v, 16, gen)
    used = torch.tensor([1000, 517, q_len], dtype=torch.int32, device="cuda")
    for call in range(2):
        features = FEATURES[feature](hq, b)
        o, lse = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used,
                                              causal=True, return_lse=True, **features)
        for i in range(b):
            u = int(used[i])
            check_features(o[i:i + 1], lse[i:i + 1], q[i:i + 1], k[i:i + 1, :u],
                           v[i:i + 1, :u], causal=True,
                           what=f"{feature} q_len {q_len} seq {i} call {call}",
                           **per_sequence(features, i))


FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def quantize(x, scale, fp8):
    """x / scale as FP8 and its dequantized value (fp8.float() * scale), the reference's K
    or V. scale: a float32 tensor of one element, or [b, hkv] (per sequence and head)."""
    s = scale.view(1, 1, 1, 1) if scale.numel() == 1 else scale[:, None, :, None]
    x8 = (x.float() / s).to(fp8)
    return x8, x8.float() * s


@pytest.mark.skipif(not hasattr(torch, "float8_e5m2"), reason="torch without float8")
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("per_head", [False, True])
def test_kvcache_fp8_paged(fmt, per_head):
    """An FP8 paged cache (k = k_fp8 * k_descale) against the float64 reference of the
    dequantized K and V; per-tensor descales (vLLM's k_scale) or [batch, heads_kv] (FA3's),
    with softcap and sinks on a second call."""
    fp8 = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    gen = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    b, n, hq, hkv = 3, 700, 32, 8
    k, v = rand(b, n, hkv, 128), rand(b, n, hkv, 128)
    if per_head:
        ks = 0.01 + 0.02 * torch.rand(b, hkv, device="cuda")
        vs = 0.01 + 0.02 * torch.rand(b, hkv, device="cuda")
    else:
        ks = torch.tensor([0.02], device="cuda")
        vs = torch.tensor([0.03], device="cuda")
    k8, kd = quantize(k, ks, fp8)
    v8, vd = quantize(v, vs, fp8)
    kp, vp, bt = paged(k8.view(torch.uint8), v8.view(torch.uint8), 16, gen)
    kp, vp = kp.view(fp8), vp.view(fp8)
    for q_len in (1, 5):
        q = rand(b, q_len, hq, 128)
        used = torch.tensor([700, 311, q_len], dtype=torch.int32, device="cuda")
        for features in ({}, dict(softcap=4.0, sinks=torch.randn(hq, device="cuda"))):
            o, lse = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used,
                                                  causal=True, return_lse=True, k_descale=ks,
                                                  v_descale=vs, **features)
            for i in range(b):
                u = int(used[i])
                check_features(o[i:i + 1], lse[i:i + 1], q[i:i + 1], kd[i:i + 1, :u],
                               vd[i:i + 1, :u], causal=True,
                               what=f"fp8 {fmt} per_head={per_head} q_len {q_len} seq {i} "
                               f"{sorted(features)}", **features)
    # new descale tensors of the same layout (an eager hit): their values are read
    o2 = fajit.attention_with_kvcache(q, kp, vp, block_table=bt, seqused_k=used, causal=True,
                                      k_descale=ks.clone(), v_descale=vs * 2)
    for i in range(b):
        u = int(used[i])
        check_features(o2[i:i + 1], None, q[i:i + 1], kd[i:i + 1, :u], 2 * vd[i:i + 1, :u],
                       causal=True, what=f"fp8 {fmt} v_descale doubled seq {i}")


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without float8")
def test_flash_attn_varlen_func_fp8_sinks_softcap_alibi():
    """vLLM's call with an FP8 cache view, its expanded per-tensor descales (q_descale too,
    ignored with a bf16 q), s_aux and softcap; then learnable_sink and ALiBi."""
    q_lens, used = [37, 1, 1, 4], [700, 431, 1, 29]
    a, k, v = vllm_batch(q_lens, used)
    scale = torch.tensor([0.02], device="cuda")
    fp8 = torch.float8_e4m3fn
    a["k"] = (a["k"].float() / scale).to(fp8)   # the pages (a K and V of the same layout)
    a["v"] = (a["v"].float() / scale).to(fp8)
    kd = (k.float() / scale).to(fp8).float() * scale
    vd = (v.float() / scale).to(fp8).float() * scale
    desc = scale.expand(len(q_lens), 8)
    sinks = torch.randn(32, device="cuda")
    o, lse = fajit.flash_attn_varlen_func(**a, softmax_scale=128 ** -0.5, causal=True,
                                          softcap=8.0, s_aux=sinks, q_descale=desc,
                                          k_descale=desc, v_descale=desc, fa_version=3,
                                          return_softmax_lse=True)
    cu = a["cu_seqlens_q"].tolist()
    for i, u in enumerate(used):
        s, e = cu[i], cu[i + 1]
        check_features(o[s:e][None], lse[:, s:e][None], a["q"][s:e][None], kd[i:i + 1, :u],
                       vd[i:i + 1, :u], causal=True, softcap=8.0, sinks=sinks,
                       what=f"varlen fp8 softcap sinks seq {i}")
    slopes = alibi_slopes(32)
    o = fajit.flash_attn_varlen_func(**a, causal=True, learnable_sink=sinks, alibi_slopes=slopes,
                                     k_descale=desc, v_descale=desc)
    for i, u in enumerate(used):
        s, e = cu[i], cu[i + 1]
        check_features(o[s:e][None], None, a["q"][s:e][None], kd[i:i + 1, :u],
                       vd[i:i + 1, :u], causal=True, sinks=sinks, slopes=slopes,
                       what=f"varlen fp8 learnable_sink alibi seq {i}")


def unsupported_skips(fn, *args, **kwargs):
    """fn's result, or a skip with the library's message where no family serves a feature."""
    try:
        return fn(*args, **kwargs)
    except fajit.Error as e:
        if e.name == "FAJIT_UNSUPPORTED":
            pytest.skip(e.message)
        raise


@pytest.mark.parametrize("feature", list(FEATURES))
def test_attention_features_contiguous_and_varlen(feature):
    """fajit.attention (the prefill families) with each feature, where a family serves it."""
    torch.manual_seed(SEED)
    b, sq, sk, hq = 2, 300, 420, 8
    q, k, v = rand(b, sq, hq, 128), rand(b, sk, 2, 128), rand(b, sk, 2, 128)
    features = FEATURES[feature](hq, b)
    o, lse = unsupported_skips(fajit.attention, q, k, v, causal=True, return_lse=True,
                               **features)
    for i in range(b):
        check_features(o[i:i + 1], lse[i:i + 1], q[i:i + 1], k[i:i + 1], v[i:i + 1],
                       causal=True, what=f"{feature} dense seq {i}",
                       **per_sequence(features, i))
    lq, lk = [300, 17], [420, 17]   # varlen: the same sequences, the second one shorter
    qp = torch.cat([q[0], q[1, :lq[1]]])
    kp, vp = torch.cat([k[0], k[1, :lk[1]]]), torch.cat([v[0], v[1, :lk[1]]])
    cq = torch.tensor([0, lq[0], sum(lq)], dtype=torch.int32, device="cuda")
    ck = torch.tensor([0, lk[0], sum(lk)], dtype=torch.int32, device="cuda")
    o, lse = unsupported_skips(fajit.attention, qp, kp, vp, causal=True, return_lse=True,
                               cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=max(lq),
                               max_seqlen_k=max(lk), **features)
    for i in range(b):
        s, e, ks, ke = int(cq[i]), int(cq[i + 1]), int(ck[i]), int(ck[i + 1])
        check_features(o[s:e][None], lse[:, s:e][None], qp[s:e][None], kp[ks:ke][None],
                       vp[ks:ke][None], causal=True, what=f"{feature} varlen seq {i}",
                       **per_sequence(features, i))


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="torch without float8")
def test_attention_fp8_names_the_feature_or_is_right():
    """Contiguous FP8 K/V: the prefill families do not serve it (FAJIT_UNSUPPORTED naming
    it); should one serve it, the result must be right."""
    q, k, v = rand(1, 64, 8, 128), rand(1, 64, 2, 128), rand(1, 64, 2, 128)
    one = torch.ones(1, device="cuda")
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    try:
        o = fajit.attention(q, k8, v8, k_descale=one, v_descale=one)
    except fajit.Error as e:
        assert e.name == "FAJIT_UNSUPPORTED" and "kv_dtype" in e.message, e.message
        return
    check_features(o, None, q, k8.float(), v8.float(), what="contiguous fp8")
