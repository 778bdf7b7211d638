"""fa_shim.py - flash-attn's Python calls (FA2's flash_attn, FA3's flash_attn_interface)
translated onto fajit's torch functions, so that flash-attention's own tests run through
fajit (dev/fa_tests/README.md).

Every argument fajit has no counterpart for raises ShimUnsupported naming it; the pytest
plugin (fa_shim_plugin) reports such a test as skipped with that reason, as it does a
fajit.Error FAJIT_UNSUPPORTED from the library. Anything else (a wrong result, a
FAJIT_INVALID_ARGUMENT) is the test's failure. What is translated:

- layouts: packed kv / qkv (FA2's *_kvpacked_func, *_qkvpacked_func) become views of K and
  V (no copies); FA3's and FA2's window_size (tensor, list or tuple) becomes ints, -1 an
  unbounded side, causal forcing the right side to 0;
- varlen calls go to fajit.flash_attn_varlen_func (FA2's positional order, fajit's own
  mapping of flash-attn's options);
- kvcache calls go to fajit.attention_with_kvcache: page_table / block_table (the rows
  picked by cache_batch_idx) -> block_table, cache_seqlens -> seqused_k, a contiguous cache
  [batch_cache, seqlen_k, heads_kv, head_dim] -> pages of seqlen_k keys (one page a
  sequence: the same memory, block_table [batch, 1] = cache_batch_idx or 0..batch-1),
  FA3's num_splits (a forced count) -> num_splits;
- softcap, alibi_slopes ([heads] or [batch, heads]) and softmax_scale pass as they are;
- FP8 descales go with FP8 K/V only (flash-attn ignores them with 16-bit K/V, as fajit's
  flash_attn_varlen_func does);
- seqused_q / seqused_k (packed keys) equal to cu_seqlens' lengths are dropped (they then
  say nothing more); other values are unsupported;
- speed knobs with no effect on results are dropped: pack_gqa, sm_margin, deterministic
  (fajit's forward is deterministic), FA3's scheduler_metadata (fajit plans per call), and
  num_splits where fajit's entry has none (dense attention);
- return_attn_probs: FA3 gives (out, lse); FA2 gives (out, lse, None) - S_dmask is only
  read by FA2's tests with dropout, which is unsupported, so None is never read;
- backward: fajit is forward only. An output that requires grad comes back through an
  autograd.Function whose backward raises ShimUnsupported (a test that differentiates is
  skipped there; FLASH_ATTENTION_DISABLE_BACKWARD=TRUE keeps the tests' forward checks).
"""
import torch

import fajit

_FP8_Q = {getattr(torch, n) for n in dir(torch) if n.startswith("float8_")}
_FP8_KV = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)}


class ShimUnsupported(NotImplementedError):
    """An argument fajit has no counterpart for: the test is skipped, the reason kept."""


def unsupported(what):
    raise ShimUnsupported(f"fajit: {what}")


def is_unsupported(exc):
    """Whether exc says fajit does not serve a call (a skip), not that it got it wrong."""
    if isinstance(exc, ShimUnsupported):
        return True
    return isinstance(exc, fajit.Error) and exc.name == "FAJIT_UNSUPPORTED"


# ------ loop narrowing (the patched tests' loops over values fajit does not serve) ------

def narrow(pairs, d):
    """The (dv, attention_chunk) pairs of FA3's tests that fajit serves: attention_chunk 0,
    and dv == d or a head_dim_v below d in multiples of 16 (DeepSeek's 192 / 128: the
    prefill kernels; FAJIT_UNSUPPORTED where no family serves it, as paged K/V). None
    served: the test is skipped."""
    pairs = list(pairs)
    keep = [(dv, chunk) for dv, chunk in pairs
            if not chunk and (dv == d or (dv < d and dv % 16 == 0))]
    if not keep:
        unsupported(f"no (dv, attention_chunk) of {pairs} is served (fajit needs dv <= d == "
                    f"{d} and attention_chunk 0)")
    return keep


# ------ shared pieces ------

def window(causal, window_size):
    """flash-attn's (causal, window_size) as fajit's (causal, window): ints, -1 unbounded."""
    if window_size is None:
        left = right = -1
    else:
        left, right = (int(w) for w in window_size)
    if causal:
        right = 0
    if left < 0 and right < 0:
        return causal, None
    if left < 0 and right == 0:
        return True, None
    big = 1 << 30   # an unbounded side when the other is bounded (fajit_attn_desc's limit)
    return False, (big if left < 0 else left, big if right < 0 else right)


class _ForwardOnly(torch.autograd.Function):
    """Gives an output a grad_fn whose backward says fajit has none."""

    @staticmethod
    def forward(ctx, out, *inputs):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, *grads):
        unsupported("backward (fajit computes the forward pass only)")


def forward_only(out, *inputs):
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in inputs):
        return _ForwardOnly.apply(out, *inputs)
    return out


def _plain(t):
    return t.detach() if isinstance(t, torch.Tensor) and t.requires_grad else t


def check_common(q, v, *, qv=None, attention_chunk=0, dropout_p=0.0, q_descale=None):
    if dropout_p:
        unsupported(f"dropout_p={dropout_p} (inference only)")
    if qv is not None:
        unsupported("qv (MLA's second query)")
    if attention_chunk:
        unsupported(f"attention_chunk={attention_chunk}")
    if q.dtype in _FP8_Q:
        unsupported(f"an FP8 q ({q.dtype}): FP8 K/V only, with 16-bit q")


def descales(k, k_descale, v_descale):
    """The descales fajit takes: with FP8 K/V only (flash-attn ignores them otherwise)."""
    if k.dtype in _FP8_KV:
        return k_descale, v_descale
    return None, None


# ------ dense ------

def dense(q, k, v, *, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
          alibi_slopes=None, k_descale=None, v_descale=None, return_lse=False):
    """[batch, seqlen, heads, head_dim] q, k, v through fajit.attention: (out, lse)."""
    causal, win = window(causal, window_size)
    kd, vd = descales(k, k_descale, v_descale)
    out, lse = fajit.attention(_plain(q), _plain(k), _plain(v), causal=causal, window=win,
                               scale=softmax_scale, return_lse=True, softcap=softcap,
                               alibi_slopes=alibi_slopes, k_descale=kd, v_descale=vd)
    return forward_only(out, q, k, v), lse


# ------ varlen ------

def _lengths_of(seqused, cu_seqlens):
    """Whether seqused gives every sequence's whole length (cu_seqlens' differences): then
    it says nothing more, and the call is the same without it (FA3's tests pass both)."""
    return torch.equal(seqused.to(torch.int32), (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int32))


def varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
           alibi_slopes=None, block_table=None, seqused_q=None, seqused_k=None,
           num_splits=0, q_descale=None, k_descale=None, v_descale=None):
    """Packed rows through fajit.flash_attn_varlen_func: (out, lse)."""
    if seqused_q is not None and not _lengths_of(seqused_q, cu_seqlens_q):
        unsupported("seqused_q (query rows unused past each sequence's count)")
    if seqused_k is not None and block_table is None:
        if not _lengths_of(seqused_k, cu_seqlens_k):
            unsupported("seqused_k with packed (not paged) keys")
        seqused_k = None
    seqused_q = None
    causal, win = window(causal, window_size)
    out, lse = fajit.flash_attn_varlen_func(
        _plain(q), _plain(k), _plain(v), cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q),
        int(max_seqlen_k), softmax_scale=softmax_scale, causal=causal,
        window_size=(-1, -1) if win is None else win, softcap=softcap,
        alibi_slopes=alibi_slopes, block_table=block_table, seqused_k=seqused_k,
        num_splits=max(0, int(num_splits)), return_softmax_lse=True, q_descale=q_descale,
        k_descale=k_descale, v_descale=v_descale)
    return forward_only(out, q, k, v), lse


# ------ kvcache ------

def kvcache(q, k_cache, v_cache, *, k=None, v=None, rotary_cos=None, cache_seqlens=None,
            cache_batch_idx=None, cache_leftpad=None, block_table=None, cu_seqlens_q=None,
            max_seqlen_q=None, softmax_scale=None, causal=False, window_size=(-1, -1),
            softcap=0.0, alibi_slopes=None, num_splits=0, k_descale=None, v_descale=None):
    """flash_attn_with_kvcache (FA2's or FA3's) through fajit.attention_with_kvcache:
    (out, lse)."""
    if k is not None or v is not None:
        unsupported("appending k/v to the cache (fajit reads the cache, never writes it)")
    if rotary_cos is not None:
        unsupported("rotary embedding (rotary_cos/rotary_sin)")
    if cache_leftpad is not None:
        unsupported("cache_leftpad (keys starting past position 0)")
    batch = q.shape[0] if cu_seqlens_q is None else cu_seqlens_q.shape[0] - 1
    dev = q.device
    if block_table is None:
        # a contiguous cache [batch_cache, seqlen_k, heads_kv, d]: one page per sequence
        rows = (torch.arange(batch, dtype=torch.int32, device=dev) if cache_batch_idx is None
                else cache_batch_idx.to(torch.int32))
        block_table = rows.reshape(batch, 1).contiguous()
    elif cache_batch_idx is not None:
        block_table = block_table[cache_batch_idx.long()].contiguous()
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=dev)
    elif cache_seqlens is not None:
        cache_seqlens = cache_seqlens.to(torch.int32).contiguous()
    causal, win = window(causal, window_size)
    kd, vd = descales(k_cache, k_descale, v_descale)
    out, lse = fajit.attention_with_kvcache(
        q, k_cache, v_cache, block_table=block_table, seqused_k=cache_seqlens,
        cu_seqlens_q=cu_seqlens_q,
        max_seqlen_q=None if cu_seqlens_q is None else int(max_seqlen_q), causal=causal,
        window=win, scale=softmax_scale, num_splits=max(0, min(int(num_splits), 128)),
        return_lse=True, softcap=softcap, alibi_slopes=alibi_slopes, k_descale=kd,
        v_descale=vd)
    return out, lse
