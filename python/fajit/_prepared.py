"""_prepared.py - a decode/prefill call over a KV cache checked once and launched many times:
fajit.prepare_kvcache, for a server's attention layers.

attention_with_kvcache already keeps a descriptor per layout signature, but finding it
costs reading every tensor's shape, strides, dtype and device on each call (most of its
host time). A server knows better: within a step, every layer calls attention with tensors
of one layout (the step's q and out shapes, its block table and lengths; each layer's own
cache of one shape). prepare_kvcache takes that call once, runs all of attention_with_kvcache's
checks, and returns a PreparedKVCache whose run() writes the new tensors' pointers and
lengths into the descriptor and launches: no signature, no checks beyond the cheap guards
below. The contract is a CUDA graph replay's: a run's tensors have the layouts (shape,
strides, dtype, device) of the prepared call's. The guards catch the likely slips (another
q shape, another batch in the block table or cu_seqlens_q, an out of another shape) with a
fajit.Error before anything launches; a cache, seqused_k or feature tensor of another layout
is not caught. Prepare again when the step's layout changes (vLLM: once per step). A run
writes the prepared descriptor: one thread runs a PreparedKVCache at a time (the eager cache
of attention_with_kvcache is per thread for the same reason)."""
from . import _torch as T
from ._lib import invalid


class PreparedKVCache:
    """attention_with_kvcache's call, checked once; run() launches it on new tensors."""
    __slots__ = ("_e", "_qs", "_os", "_bts", "_cus", "_lse", "_feats", "_kwargs")

    def run(self, q, k_cache, v_cache, *, out=None, block_table=None, seqused_k=None,
            cu_seqlens_q=None, max_seqlen_q=None, max_seqlen_k=None, sinks=None,
            alibi_slopes=None, k_descale=None, v_descale=None):
        """attention_with_kvcache(q, k_cache, v_cache, ...) with the prepared options, on
        these tensors (of the prepared layouts); returns O (and the LSE if prepared with
        return_lse). Traced or fake tensors take attention_with_kvcache itself."""
        if type(q) is not T._Tensor or T._compiling() or T._dispatch_modes():
            return T.attention_with_kvcache(
                q, k_cache, v_cache, out=out, block_table=block_table, seqused_k=seqused_k,
                cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q,
                max_seqlen_k=max_seqlen_k, sinks=sinks, alibi_slopes=alibi_slopes,
                k_descale=k_descale, v_descale=v_descale, **self._kwargs)
        qs = q.shape
        if qs != self._qs:
            raise invalid(f"q has shape {tuple(qs)}, the prepared call {tuple(self._qs)}: "
                          "prepare_kvcache again for another layout")
        if out is not None and out.shape != self._os:
            raise invalid(f"out has shape {tuple(out.shape)}, the prepared call "
                          f"{tuple(self._os)}")
        if (block_table is None) != (self._bts is None) or (
                block_table is not None and block_table.shape != self._bts):
            raise invalid("block_table must have the prepared call's shape "
                          f"({None if self._bts is None else tuple(self._bts)})")
        e = self._e
        if self._cus is None:
            if cu_seqlens_q is not None:
                raise invalid("cu_seqlens_q was not given to prepare_kvcache")
            max_q = qs[1]
        else:
            if cu_seqlens_q is None or cu_seqlens_q.shape != self._cus:
                raise invalid("cu_seqlens_q must have the prepared call's shape "
                              f"({tuple(self._cus)})")
            max_q = int(max_seqlen_q)
        max_k = e.max_k if max_seqlen_k is None else int(max_seqlen_k)
        if self._feats is not None or sinks is not None or alibi_slopes is not None or \
                k_descale is not None:
            self._check_feats(sinks, alibi_slopes, k_descale, v_descale)
        return T._call(e, q, k_cache, v_cache, out, cu_seqlens_q, None, block_table,
                       seqused_k, max_q, max_k, sinks, alibi_slopes, k_descale, v_descale,
                       self._lse)

    __call__ = run

    def _check_feats(self, *given):
        """A run passes exactly the feature tensors the call was prepared with (each layer
        its own sinks, slopes, descales; the descriptor keeps no pointer across runs)."""
        names = ("sinks", "alibi_slopes", "k_descale", "v_descale")
        want = self._feats or (False,) * 4
        for name, t, w in zip(names, given, want):
            if (t is not None) != w:
                why = "must be given to run" if w else "was not given to prepare_kvcache"
                raise invalid(f"{name} {why} (each run passes the feature tensors it was "
                              "prepared with)")


def prepare_kvcache(q, k_cache, v_cache, *, block_table=None, seqused_k=None,
                    cu_seqlens_q=None, max_seqlen_q=None, causal=False, window=None,
                    scale=None, num_splits=0, num_splits_max=0, return_lse=False,
                    max_seqlen_k=None, out=None, softcap=0.0, sinks=None, alibi_slopes=None,
                    k_descale=None, v_descale=None):
    """attention_with_kvcache's arguments (the same meaning and checks), nothing launched:
    a PreparedKVCache whose run(q, k_cache, v_cache, out=, block_table=, seqused_k=,
    cu_seqlens_q=, max_seqlen_q=, max_seqlen_k=, and the feature tensors) launches that
    call on tensors of the same layouts (see the module's contract). The scalar options
    (causal, window, scale, splits, return_lse, softcap) are fixed here."""
    if block_table is None and cu_seqlens_q is not None:
        raise invalid("cu_seqlens_q (a mixed batch) needs a block_table (paged K/V)")
    mask, wl, wr, max_q, cap, _, scale, feats = T._kvcache_checks(
        q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, causal,
        window, scale, num_splits, num_splits_max, max_seqlen_k, out, softcap, sinks,
        alibi_slopes, k_descale, v_descale)
    o = q.new_empty(T._o_shape(q, v_cache)) if out is None else out
    p = PreparedKVCache()
    p._e = T._entry(None, q, k_cache, v_cache, o, cu_seqlens_q, None, block_table, seqused_k,
                    max_q, cap, mask, wl, wr, scale, return_lse, int(num_splits),
                    int(num_splits_max), feats)
    p._qs, p._os = q.shape, o.shape
    p._bts = None if block_table is None else block_table.shape
    p._cus = None if cu_seqlens_q is None else cu_seqlens_q.shape
    p._lse = bool(return_lse)
    p._feats = tuple(t is not None for t in feats[1:]) if any(
        t is not None for t in feats[1:]) else None
    p._kwargs = dict(causal=causal, window=window, scale=scale, num_splits=num_splits,
                     num_splits_max=num_splits_max, return_lse=return_lse, softcap=softcap)
    return p
