"""cpu_ref - pytest plugin for a dry run without a GPU (`run.sh` with CPU_REF=1): fajit's
torch functions are replaced by a PyTorch model of their documented semantics (float32;
causal and windows bottom-right aligned, softcap, ALiBi, paged K/V by block_table and
seqused_k, packed rows by cu_seqlens), so flash-attention's tests run through the shim on
CPU tensors and check its translation end to end (fajit.flash_attn_varlen_func's own
mapping included: it runs, calling the models). Says nothing about fajit's kernels."""
import math

import torch

import fajit
from fajit import _torch as T

_attention, _kvcache = T.attention, T.attention_with_kvcache   # their argument checks


def _one(q, k, v, causal, window, scale, softcap, slopes):
    """q [sq, hq, d], k, v [sk, hkv, d] -> (o [sq, hq, d], lse [hq, sq])."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    k = k.float().repeat_interleave(hq // hkv, dim=1)
    v = v.float().repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), k) * (scale or 1 / math.sqrt(d))
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    off = torch.arange(sq)[:, None] + sk - sq
    j = torch.arange(sk)[None]
    if slopes is not None:
        s = s - slopes.float()[:, None, None] * (off - j).abs()
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if causal:
        ok &= j <= off
    if window is not None:
        ok &= (j >= off - window[0]) & (j <= off + window[1])
    s = s.masked_fill(~ok, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return torch.einsum("hqk,khd->qhd", p, v).to(q.dtype), lse


def _slopes(alibi, b):
    if alibi is None:
        return None
    return alibi if alibi.dim() == 1 else alibi[b if alibi.shape[0] > 1 else 0]


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
              out=None, softcap=0.0, sinks=None, alibi_slopes=None, k_descale=None,
              v_descale=None):
    with _no_cuda_check():
        _attention(q, k, v, causal=causal, window=window, scale=scale, return_lse=return_lse,
                   cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                   max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, out=out,
                   softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes,
                   k_descale=k_descale, v_descale=v_descale)
    o = torch.zeros_like(q)
    if cu_seqlens_q is None:
        lse = torch.empty(q.shape[0], q.shape[2], q.shape[1])
        for b in range(q.shape[0]):
            o[b], lse[b] = _one(q[b], k[b], v[b], causal, window, scale, softcap,
                                _slopes(alibi_slopes, b))
    else:
        lse = torch.empty(q.shape[1], q.shape[0])
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        for b in range(len(cq) - 1):
            o[cq[b]:cq[b + 1]], lse[:, cq[b]:cq[b + 1]] = _one(
                q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], causal, window,
                scale, softcap, _slopes(alibi_slopes, b))
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def attention_with_kvcache(q, k_cache, v_cache, *, block_table=None, seqused_k=None,
                           cu_seqlens_q=None, max_seqlen_q=None, causal=False, window=None,
                           scale=None, num_splits=0, num_splits_max=0, return_lse=False,
                           max_seqlen_k=None, out=None, softcap=0.0, sinks=None,
                           alibi_slopes=None, k_descale=None, v_descale=None):
    with _no_cuda_check():
        _kvcache(q, k_cache, v_cache, block_table=block_table, seqused_k=seqused_k,
                 cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, causal=causal,
                 window=window, scale=scale, num_splits=num_splits,
                 num_splits_max=num_splits_max, return_lse=return_lse,
                 max_seqlen_k=max_seqlen_k, out=out, softcap=softcap, sinks=sinks,
                 alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale)
    assert block_table is not None, "the shim always pages"
    ps = k_cache.shape[1]
    cap = block_table.shape[1] * ps if max_seqlen_k is None else int(max_seqlen_k)
    o = torch.zeros_like(q)
    packed = cu_seqlens_q is not None
    batch = cu_seqlens_q.shape[0] - 1 if packed else q.shape[0]
    lse = torch.empty(q.shape[1], q.shape[0]) if packed else \
        torch.empty(q.shape[0], q.shape[2], q.shape[1])
    cq = cu_seqlens_q.tolist() if packed else None
    for b in range(batch):
        n = cap if seqused_k is None else int(seqused_k[b])
        pages = block_table[b].long()
        kb = k_cache[pages].reshape(-1, *k_cache.shape[2:])[:n]
        vb = v_cache[pages].reshape(-1, *v_cache.shape[2:])[:n]
        rows = slice(cq[b], cq[b + 1]) if packed else b
        ob, lb = _one(q[rows], kb, vb, causal, window, scale, softcap,
                      _slopes(alibi_slopes, b))
        o[rows] = ob
        if packed:
            lse[:, rows] = lb
        else:
            lse[b] = lb
    return (o, lse) if return_lse else o


class _no_cuda_check:
    """fajit's argument checks run (their rules are part of what is checked); only the
    rule that tensors be on CUDA, checked last, is lifted, and no launch happens."""

    def __enter__(self):
        self.saved = T._on_cuda, T._submit
        T._on_cuda = lambda *a, **k: None
        T._submit = lambda *a, **k: None

    def __exit__(self, *exc):
        T._on_cuda, T._submit = self.saved


def pytest_configure(config):
    T._FAST = False   # flash_attn_varlen_func then calls the module's functions (these)
    T.attention, T.attention_with_kvcache = attention, attention_with_kvcache
    fajit.attention, fajit.attention_with_kvcache = attention, attention_with_kvcache
