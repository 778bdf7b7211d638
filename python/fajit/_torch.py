"""_torch.py - fajit_attn_fwd on torch CUDA tensors, on torch's current stream.

Two custom ops carry every call: fajit::fwd (allocates O) and fajit::fwd_out (writes a given
O); each returns the LSE (an empty tensor when not asked for). They have fake (meta)
implementations, so torch.compile traces through them; under CUDA graph capture the
workspace a plan needs (split-KV partials, tile counters) is a torch allocation of the
graph's pool, zeroed once, instead of the context's.
"""
import ctypes as C
from typing import Optional, Tuple

import torch

from ._lib import AttnDesc, invalid, lib

_DT = {torch.float16: 0, torch.bfloat16: 1}
NONE, CAUSAL, WINDOW = 0, 1, 2


def _ctx(device):
    from . import default_context
    return default_context(device.index if device.index is not None
                           else torch.cuda.current_device())


def _lse_shape(q, batch, seqlen_q, varlen):
    return (q.shape[1], q.shape[0]) if varlen else (batch, q.shape[2], seqlen_q)


def _launch(q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl, wr,
            scale, return_lse, num_splits, num_splits_max):
    varlen = cu_q is not None
    batch = (cu_q.shape[0] - 1) if varlen else q.shape[0]
    seqlen_q = max_q if varlen else q.shape[1]
    hq, hkv, dim = q.shape[-2], k.shape[-2], q.shape[-1]
    d = AttnDesc()
    lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), q.data_ptr(), k.data_ptr(),
                                   v.data_ptr(), o.data_ptr(), batch, hq, hkv, seqlen_q, max_k,
                                   dim, _DT[q.dtype])
    for name, t in (("q", q), ("o", o), ("k", k), ("v", v)):
        st = t.stride()
        if t.dim() == 3:   # packed rows (varlen)
            st = (0,) + st
        setattr(d, f"{name}_batch_stride", st[0])
        setattr(d, f"{name}_row_stride", st[1])
        setattr(d, f"{name}_head_stride", st[2])
    if varlen:
        d.cu_seqlens_q, d.total_q = cu_q.data_ptr(), q.shape[0]
        if cu_k is not None:
            d.cu_seqlens_k, d.total_k = cu_k.data_ptr(), k.shape[0]
    if block_table is not None:
        d.k_batch_stride = d.v_batch_stride = 0   # not read with a block table
        d.block_table, d.block_table_stride = block_table.data_ptr(), block_table.stride(0)
        d.page_size, d.num_pages = k.shape[1], k.shape[0]
        d.k_page_stride, d.v_page_stride = k.stride(0), v.stride(0)
        if seqused_k is not None:
            d.seqused_k = seqused_k.data_ptr()
    d.mask, d.window_left, d.window_right = mask, wl, wr
    if scale is not None:
        d.softmax_scale = scale
    d.num_splits, d.num_splits_max = num_splits, num_splits_max
    lse = torch.empty(_lse_shape(q, batch, seqlen_q, varlen) if return_lse else (0,),
                      dtype=torch.float32, device=q.device)
    if return_lse:
        d.lse = lse.data_ptr()
    ctx = _ctx(q.device)
    stream = torch.cuda.current_stream(q.device)
    if torch.cuda.is_current_stream_capturing():
        n = C.c_size_t()
        ctx.check(lib.fajit_attn_workspace_size(ctx.ptr, C.byref(d), C.byref(n)))
        if n.value:
            ws = torch.zeros(n.value, dtype=torch.uint8, device=q.device)
            d.workspace, d.workspace_bytes = ws.data_ptr(), n.value
    ctx.check(lib.fajit_attn_fwd(ctx.ptr, C.byref(d), stream.cuda_stream))
    return lse


def _fake_lse(q, cu_q, max_q, return_lse):
    varlen = cu_q is not None
    batch = (cu_q.shape[0] - 1) if varlen else q.shape[0]
    shape = _lse_shape(q, batch, max_q if varlen else q.shape[1], varlen) if return_lse else (0,)
    return q.new_empty(shape, dtype=torch.float32)


if hasattr(torch.library, "custom_op"):
    @torch.library.custom_op("fajit::fwd", mutates_args=())
    def _fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
             block_table: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor],
             max_seqlen_q: int, max_seqlen_k: int, mask: int, window_left: int,
             window_right: int, scale: Optional[float], return_lse: bool,
             num_splits: int, num_splits_max: int) -> Tuple[torch.Tensor, torch.Tensor]:
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = _launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                      max_seqlen_q, max_seqlen_k, mask, window_left, window_right, scale,
                      return_lse, num_splits, num_splits_max)
        return o, lse

    @_fwd.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, max_seqlen_q,
          max_seqlen_k, mask, window_left, window_right, scale, return_lse, num_splits,
          num_splits_max):
        return (torch.empty(q.shape, dtype=q.dtype, device=q.device),
                _fake_lse(q, cu_seqlens_q, max_seqlen_q, return_lse))

    @torch.library.custom_op("fajit::fwd_out", mutates_args=("out",))
    def _fwd_out(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                 block_table: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor],
                 max_seqlen_q: int, max_seqlen_k: int, mask: int, window_left: int,
                 window_right: int, scale: Optional[float], return_lse: bool,
                 num_splits: int, num_splits_max: int) -> torch.Tensor:
        return _launch(q, k, v, out, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                       max_seqlen_q, max_seqlen_k, mask, window_left, window_right, scale,
                       return_lse, num_splits, num_splits_max)

    @_fwd_out.register_fake
    def _(q, k, v, out, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, max_seqlen_q,
          max_seqlen_k, mask, window_left, window_right, scale, return_lse, num_splits,
          num_splits_max):
        return _fake_lse(q, cu_seqlens_q, max_seqlen_q, return_lse)
else:   # torch < 2.4: eager calls only (no torch.compile support)
    def _fwd(q, k, v, *args):
        o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        return o, _launch(q, k, v, o, *args)

    def _fwd_out(q, k, v, out, *args):
        return _launch(q, k, v, out, *args)


# ------ argument checks: the rule and the value, before anything reaches the GPU ------

def _tensor(name, t, dims, dtype=None):
    if not isinstance(t, torch.Tensor):
        raise invalid(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dims:
        raise invalid(f"{name} must have {dims} dimensions, got shape {tuple(t.shape)}")
    if dtype is not None and t.dtype != dtype:
        raise invalid(f"{name} must be {dtype}, got {t.dtype}")
    if dtype is None and t.dtype not in _DT:
        raise invalid(f"{name} must be torch.float16 or torch.bfloat16, got {t.dtype}")
    if t.stride(-1) != 1 and t.shape[-1] > 1:
        raise invalid(f"{name}'s last dimension must be contiguous, got strides {t.stride()}")


def _on_cuda(q, first="q", **others):
    """Checked last: every other rule can be seen on CPU tensors too. `first` names q."""
    if q.device.type != "cuda":
        raise invalid(f"{first} must be a CUDA tensor, got one on {q.device}")
    for name, t in others.items():
        if t is not None and t.device != q.device:
            raise invalid(f"{name} must be on {first}'s device {q.device}, got {t.device}")


def _mask(causal, window):
    """(mask, window_left, window_right) of causal and window=(left, right); -1 = unbounded."""
    if window is None:
        return (CAUSAL if causal else NONE), -1, -1
    left, right = (int(w) for w in window)
    if causal:
        if right > 0:
            raise invalid(f"causal=True allows window right 0 or -1, got {right}")
        right = 0
    if left < 0 and right < 0:
        return NONE, -1, -1
    if left < 0 and right == 0:
        return CAUSAL, -1, -1
    if left < 0 or right < 0:
        raise invalid(f"window (left, right) needs both >= 0 when one is, got {tuple(window)}")
    return WINDOW, left, right


def _check_qkv(q, k, v, dims_q, dims_kv, kv_name="k"):
    _tensor("q", q, dims_q)
    _tensor(kv_name, k, dims_kv, q.dtype)
    _tensor(kv_name.replace("k", "v", 1), v, dims_kv, q.dtype)
    if k.shape != v.shape:
        raise invalid(f"k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise invalid(f"q and k must have one head_dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] == 0 or q.shape[-2] % k.shape[-2]:
        raise invalid(f"q's heads ({q.shape[-2]}) must be a multiple of k's ({k.shape[-2]})")


def _check_out(out, q):
    if out is None:
        return
    _tensor("out", out, q.dim(), q.dtype)
    if out.shape != q.shape:
        raise invalid(f"out must have q's shape {tuple(q.shape)}, got {tuple(out.shape)}")


def _run(q, k, v, out, return_lse, *args):
    if out is None:
        o, lse = _fwd(q, k, v, *args)
    else:
        o, lse = out, _fwd_out(q, k, v, out, *args)
    return (o, lse) if return_lse else o


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
              out=None):
    """softmax(q k^T * scale + mask) v with fajit_attn_fwd on torch's current stream.

    q [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
    (float16 or bfloat16, CUDA, any strides fajit accepts: multiples of 8 elements, the last
    dimension contiguous); varlen: q [total_q, heads_q, head_dim], k and v [total_k, ...] with
    cu_seqlens_q / cu_seqlens_k (int32 [batch + 1]) and max_seqlen_q / max_seqlen_k. causal:
    bottom-right aligned; window (left, right): keys i-left..i+right (with causal, right 0).
    Returns O (into `out` when given) and, with return_lse, the natural-log LSE, float32
    [batch, heads_q, seqlen_q] (varlen: [heads_q, total_q]). Raises fajit.Error."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    dims = 3 if varlen else 4
    _check_qkv(q, k, v, dims, dims)
    _check_out(out, q)
    mask, wl, wr = _mask(causal, window)
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise invalid("cu_seqlens_q and cu_seqlens_k must be given together")
        if max_seqlen_q is None or max_seqlen_k is None:
            raise invalid("varlen needs max_seqlen_q and max_seqlen_k (host ints)")
        for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            _tensor(name, t, 1, torch.int32)
        if cu_seqlens_q.shape != cu_seqlens_k.shape:
            raise invalid(f"cu_seqlens_q and cu_seqlens_k must have one length, got "
                          f"{cu_seqlens_q.shape[0]} and {cu_seqlens_k.shape[0]}")
        max_q, max_k = int(max_seqlen_q), int(max_seqlen_k)
    else:
        if q.shape[0] != k.shape[0]:
            raise invalid(f"q and k must have one batch, got {q.shape[0]} and {k.shape[0]}")
        max_q, max_k = q.shape[1], k.shape[1]
    _on_cuda(q, k=k, v=v, out=out, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    return _run(q, k, v, out, return_lse, cu_seqlens_q, cu_seqlens_k, None, None, max_q,
                max_k, mask, wl, wr, None if scale is None else float(scale), return_lse, 0, 0)


def attention_with_kvcache(q, k_cache, v_cache, *, block_table=None, seqused_k=None,
                           cu_seqlens_q=None, max_seqlen_q=None, causal=False, window=None,
                           scale=None, num_splits=0, num_splits_max=0, return_lse=False,
                           max_seqlen_k=None, out=None):
    """Decode and chunked prefill over a KV cache, the decode kernels' entry.

    q [batch, seqlen_q, heads_q, head_dim]. Without block_table, k_cache and v_cache are
    [batch, seqlen_k, heads_kv, head_dim]. With block_table (int32 [batch, max_pages]) they
    are pages [num_pages, page_size, heads_kv, head_dim] (any strides: views of one combined
    tensor work), and seqused_k (int32 [batch], optional) gives the keys in use per sequence;
    the launch shape takes max_seqlen_k (default max_pages * page_size), so seqused_k may
    change between CUDA graph replays. A mixed batch (chunked prefill and decode rows in one
    call, vLLM's unified attention): q packed [total_q, heads_q, head_dim] with cu_seqlens_q
    (int32 [batch + 1]) and max_seqlen_q (a host int), over a block_table; causal is then
    bottom-right per sequence (query i of a sequence of q_b rows and k_b keys sees keys up
    to i + k_b - q_b). num_splits: a forced split-KV count (0: fajit picks); num_splits_max:
    at most that many splits of fajit's own choice (0: no bound; vLLM's num_splits, an upper
    bound sized for its CUDA-graph buffers, goes here); both given: num_splits <=
    num_splits_max. Returns O and, with
    return_lse, the LSE [batch, heads_q, seqlen_q] ([heads_q, total_q] for a mixed batch)."""
    varlen = cu_seqlens_q is not None
    _check_qkv(q, k_cache, v_cache, 3 if varlen else 4, 4, "k_cache")
    _check_out(out, q)
    mask, wl, wr = _mask(causal, window)
    if not 0 <= int(num_splits) <= 128:
        raise invalid(f"num_splits must be in 0..128, got {num_splits}")
    if not 0 <= int(num_splits_max) <= 128:
        raise invalid(f"num_splits_max must be in 0..128 (0: no bound), got {num_splits_max}")
    if 0 < int(num_splits_max) < int(num_splits):
        raise invalid(f"num_splits ({num_splits}, a forced count) must be at most "
                      f"num_splits_max ({num_splits_max}, the bound) when both are given")
    if varlen:
        if block_table is None:
            raise invalid("cu_seqlens_q (a mixed batch) needs a block_table (paged K/V)")
        _tensor("cu_seqlens_q", cu_seqlens_q, 1, torch.int32)
        if cu_seqlens_q.shape[0] < 2:
            raise invalid("cu_seqlens_q needs batch + 1 >= 2 entries, got "
                          f"{cu_seqlens_q.shape[0]}")
        if max_seqlen_q is None:
            raise invalid("cu_seqlens_q needs max_seqlen_q (a host int: the most query rows "
                          "of one sequence)")
        batch, max_q = cu_seqlens_q.shape[0] - 1, int(max_seqlen_q)
    else:
        if max_seqlen_q is not None:
            raise invalid("max_seqlen_q goes with cu_seqlens_q (a mixed batch)")
        batch, max_q = q.shape[0], q.shape[1]
    if block_table is None:
        if seqused_k is not None:
            raise invalid("seqused_k needs a block_table (paged K/V)")
        if q.shape[0] != k_cache.shape[0]:
            raise invalid(f"q and k_cache must have one batch, got {q.shape[0]} and "
                          f"{k_cache.shape[0]}")
        max_k = k_cache.shape[1] if max_seqlen_k is None else int(max_seqlen_k)
    else:
        _tensor("block_table", block_table, 2, torch.int32)
        if block_table.shape[0] != batch:
            raise invalid(f"block_table must have a row per sequence ({batch}), got "
                          f"{block_table.shape[0]}")
        if seqused_k is not None:
            _tensor("seqused_k", seqused_k, 1, torch.int32)
            if seqused_k.shape[0] != batch:
                raise invalid(f"seqused_k must have {batch} entries, got "
                              f"{seqused_k.shape[0]}")
        cap = block_table.shape[1] * k_cache.shape[1]
        max_k = cap if max_seqlen_k is None else int(max_seqlen_k)
    _on_cuda(q, k_cache=k_cache, v_cache=v_cache, out=out, block_table=block_table,
             seqused_k=seqused_k, cu_seqlens_q=cu_seqlens_q)
    return _run(q, k_cache, v_cache, out, return_lse, cu_seqlens_q, None, block_table,
                seqused_k, max_q, max_k, mask, wl, wr, None if scale is None else float(scale),
                return_lse, int(num_splits), int(num_splits_max))


def _merge_launch(o_a, lse_a, o_b, lse_b, o, lse):
    """fajit_attn_merge on [batch, seqlen, heads, head_dim] (or packed [total, heads,
    head_dim]) results and their LSEs [batch, heads, seqlen] (or [heads, total])."""
    from ._lib import MergeDesc
    packed = o_a.dim() == 3
    if packed:   # one "sequence" of total rows: fajit's varlen LSE layout [heads, total]
        views = [t.unsqueeze(0) for t in (o_a, o_b, o)]
        lviews = [t.unsqueeze(0) for t in (lse_a, lse_b, lse)]
    else:
        views, lviews = [o_a, o_b, o], [lse_a, lse_b, lse]
    b, L, h, dim = views[0].shape
    m = MergeDesc()
    lib.fajit_merge_desc_init_sized(C.byref(m), C.sizeof(m), o_a.data_ptr(), lse_a.data_ptr(),
                                    o_b.data_ptr(), lse_b.data_ptr(), o.data_ptr(),
                                    lse.data_ptr(), b, L, h, dim, _DT[o_a.dtype])
    for name, t in zip(("a", "b", "o"), views):
        st = t.stride()
        setattr(m, f"{name}_batch_stride", st[0])
        setattr(m, f"{name}_row_stride", st[1])
        setattr(m, f"{name}_head_stride", st[2])
    st = lviews[0].stride()   # [batch, heads, seqlen]
    m.lse_batch_stride, m.lse_head_stride, m.lse_row_stride = st[0], st[1], st[2]
    ctx = _ctx(o_a.device)
    ctx.check(lib.fajit_attn_merge(ctx.ptr, C.byref(m),
                                   torch.cuda.current_stream(o_a.device).cuda_stream))


def _merge(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor,
           lse_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    o = torch.empty_like(o_a, memory_format=torch.contiguous_format)
    lse = torch.empty_like(lse_a, memory_format=torch.contiguous_format)
    _merge_launch(o_a, lse_a, o_b, lse_b, o, lse)
    return o, lse


if hasattr(torch.library, "custom_op"):   # (torch < 2.4: eager calls only)
    _merge = torch.library.custom_op("fajit::merge", mutates_args=())(_merge)

    @_merge.register_fake
    def _(o_a, lse_a, o_b, lse_b):
        return (torch.empty_like(o_a, memory_format=torch.contiguous_format),
                torch.empty_like(lse_a, memory_format=torch.contiguous_format))


def merge_attention(o_a, lse_a, o_b, lse_b):
    """Merges two partial results of the same queries over disjoint key sets by their LSE
    (cascade / shared-prefix attention): returns (O, LSE) of the union, as attention over all
    the keys would give. o_x [batch, seqlen, heads, head_dim] with lse_x [batch, heads,
    seqlen] (return_lse=True of attention / attention_with_kvcache), or packed varlen rows
    [total, heads, head_dim] with lse_x [heads, total]."""
    dims = 3 if isinstance(o_a, torch.Tensor) and o_a.dim() == 3 else 4
    _tensor("o_a", o_a, dims)
    _tensor("o_b", o_b, dims, o_a.dtype)
    if o_b.shape != o_a.shape:
        raise invalid(f"o_a and o_b must have one shape, got {tuple(o_a.shape)} and "
                      f"{tuple(o_b.shape)}")
    if o_a.shape[-1] % 4:
        raise invalid(f"head_dim must be a multiple of 4, got {o_a.shape[-1]}")
    want = ((o_a.shape[1], o_a.shape[0]) if o_a.dim() == 3 else
            (o_a.shape[0], o_a.shape[2], o_a.shape[1]))
    for name, t in (("lse_a", lse_a), ("lse_b", lse_b)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            raise invalid(f"{name} must be a torch.float32 tensor")
        if tuple(t.shape) != want:
            raise invalid(f"{name} must have shape {want}, got {tuple(t.shape)}")
    _on_cuda(o_a, "o_a", o_b=o_b, lse_a=lse_a, lse_b=lse_b)
    return _merge(o_a, lse_a, o_b, lse_b)


__all__ = ["attention", "attention_with_kvcache", "merge_attention"]
