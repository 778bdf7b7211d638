"""_torch.py - fajit_attn_fwd on torch CUDA tensors, on torch's current stream.

Two paths reach the same descriptor (_build):
- eager calls (not traced by torch.compile, plain torch.Tensor inputs) go straight to the
  C function through a per-thread descriptor cache: the argument checks and the descriptor
  are done once per layout signature (shapes, strides, dtypes, devices, the scalar
  options), and a later call with that signature only writes its tensors' pointers and its
  max_seqlen_q / max_seqlen_k into the cached fajit_attn_desc (fajit_attn_fwd still
  validates every call in C, about 0.3 us). flash_attn_varlen_func's paged call (vLLM's)
  has a signature of its own, of flash-attn's options as given, so a hit skips their
  mapping onto fajit's too;
- traced calls go through two custom ops, fajit::fwd (allocates O) and fajit::fwd_out
  (writes a given O); each returns the LSE (an empty tensor when not asked for). They have
  fake (meta) implementations, so torch.compile traces them.
Under CUDA graph capture the workspace a plan needs (split-KV partials, tile counters) is a
torch allocation of the graph's pool, zeroed once, instead of the context's.
"""
import ctypes as C
import math
import struct
import threading
from typing import Optional, Tuple

import torch

from ._lib import AttnDesc, Unsupported, invalid, lib

_DT = {torch.float16: 0, torch.bfloat16: 1}
# FP8 K/V (fajit_kv_dtype): e4m3fn 1, e5m2 2; every torch float8 type, for q's rule
_FP8 = {getattr(torch, n): i for n, i in (("float8_e4m3fn", 1), ("float8_e5m2", 2))
        if hasattr(torch, n)}
_FP8_ANY = {getattr(torch, n) for n in dir(torch) if n.startswith("float8_")}
NONE, CAUSAL, WINDOW = 0, 1, 2
_F32 = torch.float32
_CONTIGUOUS = torch.contiguous_format
_Tensor = torch.Tensor

# ------ the cheap pieces of an eager call ------

try:
    _compiling = torch.compiler.is_compiling          # torch >= 2.3
except AttributeError:                                # pragma: no cover (older torch)
    def _compiling():
        return torch._dynamo.is_compiling()

if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    _stream = torch._C._cuda_getCurrentRawStream     # device index -> cudaStream_t (int)
else:                                                 # pragma: no cover
    def _stream(dev):
        return torch.cuda.current_stream(dev).cuda_stream

if hasattr(torch._C, "_cuda_isCurrentStreamCapturing"):
    _capturing = torch._C._cuda_isCurrentStreamCapturing
else:                                                 # pragma: no cover
    _capturing = torch.cuda.is_current_stream_capturing

# Python dispatch modes (TorchDispatchMode: FakeTensorMode, FlopCounterMode, ...) see every
# op: while one is active, calls take the custom ops so that it sees fajit's too.
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
_profiling = torch.autograd._profiler_enabled

_attn_fwd = lib.fajit_attn_fwd
_contexts = {}   # device index -> its default Context


def _context(dev):
    """The default context of device index `dev` (fajit.default_context), kept at hand."""
    ctx = _contexts.get(dev)
    if ctx is None or not ctx._ptr:   # first use, or closed at exit
        from . import default_context
        ctx = _contexts[dev] = default_context(dev)
    return ctx


def _submit(dev, ptr):
    """fajit_attn_fwd of the descriptor `ptr` (a ctypes pointer) on device `dev`'s current
    stream. Under CUDA graph capture a copy gets a workspace from the graph's pool."""
    ctx = _contexts.get(dev)   # _context(dev), inline
    if ctx is None or not ctx._ptr:
        ctx = _context(dev)
    if _capturing():
        d = AttnDesc.from_buffer_copy(ptr.contents)
        n = C.c_size_t()
        ctx.check(lib.fajit_attn_workspace_size(ctx.ptr, C.byref(d), C.byref(n)))
        if n.value:
            ws = torch.zeros(n.value, dtype=torch.uint8, device=torch.device("cuda", dev))
            d.workspace, d.workspace_bytes = ws.data_ptr(), n.value
        ptr = C.pointer(d)
    st = _attn_fwd(ctx._ptr, ptr, _stream(dev))
    if st:
        ctx.check(st)


def _lse_shape(q, batch, seqlen_q, varlen):
    return (q.shape[1], q.shape[0]) if varlen else (batch, q.shape[2], seqlen_q)


def _descale_strides(t):
    """(descale_batch_stride, descale_head_stride) of a descale tensor: one element (vLLM's
    per-tensor scale) or [batch, heads_kv]; a dimension of size 1 or stride 0 broadcasts."""
    if t.numel() == 1:
        return 0, 0
    return (t.stride(0) if t.shape[0] > 1 else 0), (t.stride(1) if t.shape[1] > 1 else 0)


def _build(q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl, wr,
           scale, num_splits, num_splits_max, lse, softcap=0.0, sinks=None, alibi=None,
           k_descale=None, v_descale=None):
    """The descriptor of one call (every field from the tensors and options)."""
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
    if lse is not None:
        d.lse = lse.data_ptr()
    d.softcap = softcap
    if sinks is not None:
        d.sinks = sinks.data_ptr()
    if alibi is not None:
        d.alibi_slopes = alibi.data_ptr()
        d.alibi_batch_stride = alibi.stride(0) if alibi.dim() == 2 and alibi.shape[0] > 1 else 0
    d.kv_dtype = _FP8.get(k.dtype, 0)
    if v.shape[-1] != dim:
        d.head_dim_v = v.shape[-1]
    if k_descale is not None:
        d.k_descale, d.v_descale = k_descale.data_ptr(), v_descale.data_ptr()
        d.descale_batch_stride, d.descale_head_stride = _descale_strides(k_descale)
    return d


def _o_shape(q, v):
    """O's shape: q's, with V's head_dim (head_dim_v) last."""
    return q.shape if v.shape[-1] == q.shape[-1] else q.shape[:-1] + (v.shape[-1],)


def _launch(q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl, wr,
            scale, return_lse, num_splits, num_splits_max, softcap, sinks, alibi, k_descale,
            v_descale):
    """The custom ops' body: builds the descriptor and launches; returns the LSE."""
    varlen = cu_q is not None
    batch = (cu_q.shape[0] - 1) if varlen else q.shape[0]
    lse = torch.empty(_lse_shape(q, batch, max_q if varlen else q.shape[1], varlen)
                      if return_lse else (0,), dtype=_F32, device=q.device)
    d = _build(q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl, wr,
               scale, num_splits, num_splits_max, lse if return_lse else None, softcap, sinks,
               alibi, k_descale, v_descale)
    _submit(q.get_device(), C.pointer(d))
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
             num_splits: int, num_splits_max: int, softcap: float = 0.0,
             sinks: Optional[torch.Tensor] = None,
             alibi_slopes: Optional[torch.Tensor] = None,
             k_descale: Optional[torch.Tensor] = None,
             v_descale: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        o = torch.empty(_o_shape(q, v), dtype=q.dtype, device=q.device)
        lse = _launch(q, k, v, o, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                      max_seqlen_q, max_seqlen_k, mask, window_left, window_right, scale,
                      return_lse, num_splits, num_splits_max, softcap, sinks, alibi_slopes,
                      k_descale, v_descale)
        return o, lse

    @_fwd.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, max_seqlen_q,
          max_seqlen_k, mask, window_left, window_right, scale, return_lse, num_splits,
          num_splits_max, softcap=0.0, sinks=None, alibi_slopes=None, k_descale=None,
          v_descale=None):
        return (torch.empty(_o_shape(q, v), dtype=q.dtype, device=q.device),
                _fake_lse(q, cu_seqlens_q, max_seqlen_q, return_lse))

    @torch.library.custom_op("fajit::fwd_out", mutates_args=("out",))
    def _fwd_out(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                 cu_seqlens_q: Optional[torch.Tensor], cu_seqlens_k: Optional[torch.Tensor],
                 block_table: Optional[torch.Tensor], seqused_k: Optional[torch.Tensor],
                 max_seqlen_q: int, max_seqlen_k: int, mask: int, window_left: int,
                 window_right: int, scale: Optional[float], return_lse: bool,
                 num_splits: int, num_splits_max: int, softcap: float = 0.0,
                 sinks: Optional[torch.Tensor] = None,
                 alibi_slopes: Optional[torch.Tensor] = None,
                 k_descale: Optional[torch.Tensor] = None,
                 v_descale: Optional[torch.Tensor] = None) -> torch.Tensor:
        return _launch(q, k, v, out, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k,
                       max_seqlen_q, max_seqlen_k, mask, window_left, window_right, scale,
                       return_lse, num_splits, num_splits_max, softcap, sinks, alibi_slopes,
                       k_descale, v_descale)

    @_fwd_out.register_fake
    def _(q, k, v, out, cu_seqlens_q, cu_seqlens_k, block_table, seqused_k, max_seqlen_q,
          max_seqlen_k, mask, window_left, window_right, scale, return_lse, num_splits,
          num_splits_max, softcap=0.0, sinks=None, alibi_slopes=None, k_descale=None,
          v_descale=None):
        return _fake_lse(q, cu_seqlens_q, max_seqlen_q, return_lse)
else:   # torch < 2.4: eager calls only (no torch.compile support)
    def _fwd(q, k, v, *args):
        o = torch.empty(_o_shape(q, v), dtype=q.dtype, device=q.device)
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
    """q, k and v; K and V of q's dtype, or FP8 both of one type (an FP8 KV cache)."""
    _tensor("q", q, dims_q)
    v_name = kv_name.replace("k", "v", 1)
    kd = getattr(k, "dtype", None)
    if kd in _FP8:
        _tensor(kv_name, k, dims_kv, kd)
        if getattr(v, "dtype", None) != kd:
            raise invalid(f"{kv_name} and {v_name} must have one dtype (FP8 K/V: both "
                          f"torch.float8_e4m3fn or both torch.float8_e5m2), got {kd} and "
                          f"{getattr(v, 'dtype', type(v).__name__)}")
        _tensor(v_name, v, dims_kv, kd)
    else:
        _tensor(kv_name, k, dims_kv, q.dtype)
        _tensor(v_name, v, dims_kv, q.dtype)
    if k.shape[:-1] != v.shape[:-1]:
        raise invalid(f"k and v must have one shape but for head_dim, got {tuple(k.shape)} and "
                      f"{tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise invalid(f"q and k must have one head_dim, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] == 0 or q.shape[-2] % k.shape[-2]:
        raise invalid(f"q's heads ({q.shape[-2]}) must be a multiple of k's ({k.shape[-2]})")


def _check_features(q, k, batch, softcap, sinks, alibi_slopes, k_descale, v_descale,
                    kv_name="k"):
    """The model features' arguments (fajit_attn_desc's softcap, sinks, alibi_slopes and
    the FP8 descales); returns softcap as a float. Whether a kernel family serves them is
    the C library's to say (FAJIT_UNSUPPORTED naming the feature)."""
    try:
        cap = float(softcap)
    except (TypeError, ValueError):
        raise invalid(f"softcap must be a float (0: off), got {softcap!r}") from None
    if not math.isfinite(cap) or cap < 0:
        raise invalid(f"softcap must be finite and >= 0 (0: off), got {softcap}")
    heads_q, heads_kv = q.shape[-2], k.shape[-2]
    if sinks is not None:
        _tensor("sinks", sinks, 1, _F32)
        if sinks.shape[0] != heads_q:
            raise invalid(f"sinks must have one value per query head ({heads_q}), got "
                          f"shape {tuple(sinks.shape)}")
    if alibi_slopes is not None:
        if not isinstance(alibi_slopes, torch.Tensor) or alibi_slopes.dim() not in (1, 2):
            raise invalid("alibi_slopes must be a torch.float32 tensor [heads_q] or [batch, "
                          f"heads_q], got {getattr(alibi_slopes, 'shape', alibi_slopes)}")
        _tensor("alibi_slopes", alibi_slopes, alibi_slopes.dim(), _F32)
        if alibi_slopes.shape[-1] != heads_q or (alibi_slopes.dim() == 2 and
                                                 alibi_slopes.shape[0] not in (1, batch)):
            raise invalid(f"alibi_slopes must have shape [{heads_q}] or [{batch}, {heads_q}] "
                          f"([heads_q] or [batch, heads_q]), got {tuple(alibi_slopes.shape)}")
    if k.dtype not in _FP8:
        if k_descale is not None or v_descale is not None:
            raise invalid(f"k_descale and v_descale go with FP8 K/V ({kv_name} of "
                          f"torch.float8_e4m3fn or torch.float8_e5m2), got {kv_name} of "
                          f"{k.dtype}")
        return cap
    if k_descale is None or v_descale is None:
        raise invalid(f"FP8 K/V ({k.dtype}) needs k_descale and v_descale (torch.float32: "
                      "one value, or [batch, heads_kv]; 1.0 where the cache is not scaled)")
    for name, t in (("k_descale", k_descale), ("v_descale", v_descale)):
        if not isinstance(t, torch.Tensor) or t.dtype != _F32:
            raise invalid(f"{name} must be a torch.float32 tensor, got "
                          f"{getattr(t, 'dtype', type(t).__name__)}")
        if t.numel() != 1 and (t.dim() != 2 or t.shape[0] not in (1, batch) or
                               t.shape[1] not in (1, heads_kv)):
            raise invalid(f"{name} must have one element (a per-tensor scale) or shape "
                          f"[{batch}, {heads_kv}] ([batch, heads_kv]), got {tuple(t.shape)}")
    if _descale_strides(k_descale) != _descale_strides(v_descale):
        raise invalid("k_descale and v_descale must share one layout (fajit_attn_desc has "
                      "one pair of descale strides), got shapes "
                      f"{tuple(k_descale.shape)} and {tuple(v_descale.shape)} with strides "
                      f"{k_descale.stride()} and {v_descale.stride()}")
    return cap


def _check_out(out, q, v):
    if out is None:
        return
    _tensor("out", out, q.dim(), q.dtype)
    if out.shape != _o_shape(q, v):
        raise invalid(f"out must have q's shape with v's head_dim {tuple(_o_shape(q, v))}, got "
                      f"{tuple(out.shape)}")


def _run(q, k, v, out, return_lse, *args):
    """The traced path: one custom op."""
    if out is None:
        o, lse = _fwd(q, k, v, *args)
    else:
        o, lse = out, _fwd_out(q, k, v, out, *args)
    return (o, lse) if return_lse else o


# ------ the eager path: a per-thread cache of descriptors by layout signature ------
#
# A signature is everything a call's checks and descriptor read but the data pointers and
# the per-call lengths: each tensor's shape, strides, dtype and device index, and the
# options as given. It is built inline in each entry point (a function call per tensor
# costs as much as its reads), one tuple from one read of each attribute, and compared with
# the thread's last entry's before it is hashed for the dict; a hit then writes the
# pointers and lengths into the cached descriptor with struct.pack_into where fields are
# adjacent (q, k, v, o; seqlen_q, seqlen_k) and launches. Any difference from the cached
# signature is another key, so every check runs again for it.

_FAST = True        # False: every call takes the traced path's custom op (for comparisons)
_CACHE_MAX = 256    # descriptors kept per thread; the oldest goes first


class _Cache(dict):
    """A thread's entries by signature, and the last one looked up or made (`last_key`,
    `last`): compared first, which spares hashing the signature when one layout repeats
    (every layer of a step). The last entry is exact for its key even once evicted."""
    __slots__ = ("last_key", "last")

    def __init__(self):
        super().__init__()
        self.last_key = self.last = None

    def clear(self):
        super().clear()
        self.last_key = self.last = None


class _Local(threading.local):
    def __init__(self):   # runs once in each thread that touches it
        self.descs = _Cache()


_tls = _Local()
_QKVO = struct.Struct("=4Q").pack_into     # q, k, v, o: adjacent pointers
_LENS = struct.Struct("=2i").pack_into     # seqlen_q, seqlen_k: adjacent ints
_OFF_QKVO, _OFF_LENS = AttnDesc.q.offset, AttnDesc.seqlen_q.offset
assert AttnDesc.o.offset == _OFF_QKVO + 24 and AttnDesc.seqlen_k.offset == _OFF_LENS + 4


def _lens_error(max_q, max_k):
    return invalid(f"max_seqlen_q and max_seqlen_k must be int32 values, got {max_q} and "
                   f"{max_k}")


def _descs():
    """This thread's cache (a descriptor is written per call, so threads do not share)."""
    return _tls.descs


def _sig(t):
    """What a tensor contributes to a signature: everything but its data pointer."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.get_device())


class _Entry:
    """One signature's descriptor; a call writes its pointers and max lengths into it."""
    __slots__ = ("desc", "ptr", "dev", "device", "lse_shape", "max_k", "dv")


def _entry(key, q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl, wr,
           scale, return_lse, num_splits, num_splits_max, feats):
    """A new entry (the arguments checked already), kept under `key` unless it is None.
    feats: (softcap, sinks, alibi_slopes, k_descale, v_descale)."""
    e = _Entry()
    e.desc = _build(q, k, v, o, cu_q, cu_k, block_table, seqused_k, max_q, max_k, mask, wl,
                    wr, scale, num_splits, num_splits_max, None, *feats)
    e.ptr = C.pointer(e.desc)
    e.dev, e.device, e.max_k = q.get_device(), q.device, max_k
    e.dv = v.shape[-1] if v.shape[-1] != q.shape[-1] else 0   # head_dim_v, 0: head_dim
    varlen = cu_q is not None
    e.lse_shape = _lse_shape(q, (cu_q.shape[0] - 1) if varlen else q.shape[0],
                             max_q if varlen else q.shape[1], varlen) if return_lse else None
    if key is not None:
        cache = _tls.descs
        if len(cache) >= _CACHE_MAX:
            del cache[next(iter(cache))]
        cache[key] = e
        cache.last_key, cache.last = key, e
    return e


def _call(e, q, k, v, out, cu_q, cu_k, block_table, seqused_k, max_q, max_k, sinks, alibi,
          k_descale, v_descale, return_lse):
    """fajit_attn_fwd of entry `e` on these tensors, for every entry point's hit (and its
    miss, on the new entry): the pointers and lengths written into e's descriptor, then the
    launch. The descales are written when k_descale is given (the caller passes None where
    they are ignored). Returns O, or (O, LSE) with return_lse."""
    d = e.desc
    if out is not None:
        o = out
    elif e.dv:
        o = q.new_empty(q.shape[:-1] + (e.dv,))
    else:
        o = torch.empty_like(q, memory_format=_CONTIGUOUS)
    _QKVO(d, _OFF_QKVO, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr())
    try:
        _LENS(d, _OFF_LENS, max_q, max_k)
    except struct.error:
        raise _lens_error(max_q, max_k) from None
    if block_table is not None:
        d.block_table = block_table.data_ptr()
    if seqused_k is not None:
        d.seqused_k = seqused_k.data_ptr()
    if cu_q is not None:
        d.cu_seqlens_q = cu_q.data_ptr()
    if cu_k is not None:
        d.cu_seqlens_k = cu_k.data_ptr()
    if sinks is not None:
        d.sinks = sinks.data_ptr()
    if alibi is not None:
        d.alibi_slopes = alibi.data_ptr()
    if k_descale is not None:
        d.k_descale, d.v_descale = k_descale.data_ptr(), v_descale.data_ptr()
    if e.lse_shape is None:
        lse = None
    else:
        lse = torch.empty(e.lse_shape, dtype=_F32, device=e.device)
        d.lse = lse.data_ptr()
    if _profiling():   # a named range in torch.profiler's trace, as the custom op has
        with torch.profiler.record_function("fajit::attn_fwd"):
            _submit(e.dev, e.ptr)
    else:
        _submit(e.dev, e.ptr)
    return (o, lse) if return_lse else o


def _eager(q):
    """Whether a call on `q` takes the eager path: not traced by torch.compile (checked
    first: Dynamo stops there), a plain tensor (not a fake or functional one), and no
    Python dispatch mode active. (Inlined in the entry points' hit paths.)"""
    return _FAST and not _compiling() and type(q) is _Tensor and not _dispatch_modes()


def attention(q, k, v, *, causal=False, window=None, scale=None, return_lse=False,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
              out=None, softcap=0.0, sinks=None, alibi_slopes=None, k_descale=None,
              v_descale=None):
    """softmax(q k^T * scale + mask) v with fajit_attn_fwd on torch's current stream.

    q [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
    (float16 or bfloat16, CUDA, any strides fajit accepts: multiples of 8 elements, the last
    dimension contiguous); varlen: q [total_q, heads_q, head_dim], k and v [total_k, ...] with
    cu_seqlens_q / cu_seqlens_k (int32 [batch + 1]) and max_seqlen_q / max_seqlen_k. causal:
    bottom-right aligned; window (left, right): keys i-left..i+right (with causal, right 0).
    Returns O (into `out` when given) and, with return_lse, the natural-log LSE, float32
    [batch, heads_q, seqlen_q] (varlen: [heads_q, total_q]). Raises fajit.Error.

    Model features (fajit_attn_desc's; a call with one that no kernel family serves raises
    fajit.Error FAJIT_UNSUPPORTED naming it): softcap > 0 (logits become softcap *
    tanh(s / softcap); 0 off), sinks (float32 [heads_q]: a logit per head that joins the
    softmax's denominator), alibi_slopes (float32 [heads_q] or [batch, heads_q]: adds
    -slope * |i + seqlen_k - seqlen_q - j|), and FP8 K/V (k, v of torch.float8_e4m3fn or
    float8_e5m2, both one type) with k_descale / v_descale (float32, one element or [batch,
    heads_kv]: K = k_descale * k). v may have its own head_dim (head_dim_v: DeepSeek's 192 /
    128), O then has v's. All CUDA tensors on q's device."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    eager = _eager(q)
    key = None
    if eager:
        try:
            key = (0, q.shape, q.stride(), q.dtype, q.get_device(),   # _sig(q), inline
                   k.shape, k.stride(), k.dtype, k.get_device(),
                   v.shape, v.stride(), v.dtype, v.get_device(),
                   _sig(out), _sig(cu_seqlens_q), _sig(cu_seqlens_k), max_seqlen_q is None,
                   max_seqlen_k is None, causal, window, scale, return_lse, softcap,
                   _sig(sinks), _sig(alibi_slopes), _sig(k_descale), _sig(v_descale))
            e = _tls.descs.get(key)
        except (AttributeError, TypeError):   # not tensors, or unhashable: checked below
            key = e = None
        if e is not None:
            if varlen:
                return _call(e, q, k, v, out, cu_seqlens_q, cu_seqlens_k, None, None,
                             int(max_seqlen_q), int(max_seqlen_k), sinks, alibi_slopes,
                             k_descale, v_descale, return_lse)
            return _call(e, q, k, v, out, None, None, None, None, q.shape[1], k.shape[1],
                         sinks, alibi_slopes, k_descale, v_descale, return_lse)
    dims = 3 if varlen else 4
    _check_qkv(q, k, v, dims, dims)
    _check_out(out, q, v)
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
    batch = cu_seqlens_q.shape[0] - 1 if varlen else q.shape[0]
    softcap = _check_features(q, k, batch, softcap, sinks, alibi_slopes, k_descale, v_descale)
    _on_cuda(q, k=k, v=v, out=out, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
             sinks=sinks, alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale)
    scale = None if scale is None else float(scale)
    feats = (softcap, sinks, alibi_slopes, k_descale, v_descale)
    if eager:
        o = q.new_empty(_o_shape(q, v)) if out is None else out
        e = _entry(key, q, k, v, o, cu_seqlens_q, cu_seqlens_k, None, None, max_q, max_k,
                   mask, wl, wr, scale, return_lse, 0, 0, feats)
        return _call(e, q, k, v, o, cu_seqlens_q, cu_seqlens_k, None, None, max_q, max_k,
                     *feats[1:], return_lse)
    return _run(q, k, v, out, return_lse, cu_seqlens_q, cu_seqlens_k, None, None, max_q,
                max_k, mask, wl, wr, scale, return_lse, 0, 0, *feats)


def attention_with_kvcache(q, k_cache, v_cache, *, block_table=None, seqused_k=None,
                           cu_seqlens_q=None, max_seqlen_q=None, causal=False, window=None,
                           scale=None, num_splits=0, num_splits_max=0, return_lse=False,
                           max_seqlen_k=None, out=None, softcap=0.0, sinks=None,
                           alibi_slopes=None, k_descale=None, v_descale=None):
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
    return_lse, the LSE [batch, heads_q, seqlen_q] ([heads_q, total_q] for a mixed batch).

    Model features, as attention's (the decode kernels serve them all): softcap, sinks
    (float32 [heads_q]), alibi_slopes (float32 [heads_q] or [batch, heads_q]), and an FP8
    cache: k_cache and v_cache of torch.float8_e4m3fn or float8_e5m2 (one type) with
    k_descale / v_descale, float32 CUDA tensors of one element (vLLM's k_scale / v_scale)
    or [batch, heads_kv] (FA3's), sharing one layout; q stays float16 or bfloat16."""
    key = None
    if _FAST and not _compiling() and type(q) is _Tensor and not _dispatch_modes():
        try:   # the signature (see above), then the lengths of this call
            qs = q.shape
            key = (1, qs, q.stride(), q.dtype, q.get_device(),
                   k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.get_device(),
                   v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.get_device(),
                   None if out is None else
                   (out.shape, out.stride(), out.dtype, out.get_device()),
                   None if block_table is None else
                   (block_table.shape, block_table.stride(), block_table.dtype,
                    block_table.get_device()),
                   None if seqused_k is None else
                   (seqused_k.shape, seqused_k.stride(), seqused_k.dtype,
                    seqused_k.get_device()),
                   None if cu_seqlens_q is None else
                   (cu_seqlens_q.shape, cu_seqlens_q.stride(), cu_seqlens_q.dtype,
                    cu_seqlens_q.get_device()),
                   max_seqlen_q is None, causal, window, scale, num_splits, num_splits_max,
                   return_lse, softcap,
                   None if sinks is None else
                   (sinks.shape, sinks.stride(), sinks.dtype, sinks.get_device()),
                   None if alibi_slopes is None else
                   (alibi_slopes.shape, alibi_slopes.stride(), alibi_slopes.dtype,
                    alibi_slopes.get_device()),
                   None if k_descale is None else
                   (k_descale.shape, k_descale.stride(), k_descale.dtype,
                    k_descale.get_device()),
                   None if v_descale is None else
                   (v_descale.shape, v_descale.stride(), v_descale.dtype,
                    v_descale.get_device()))
            c = _tls.descs
            if key == c.last_key:
                e = c.last
            else:
                e = c.get(key)
                if e is not None:
                    c.last_key, c.last = key, e
            if e is not None:
                max_q = qs[1] if cu_seqlens_q is None else int(max_seqlen_q)
                max_k = e.max_k if max_seqlen_k is None else int(max_seqlen_k)
        except (AttributeError, TypeError, ValueError, IndexError):
            key = e = None   # not tensors, unhashable, bad lengths: the checks below tell
        if e is not None:
            return _call(e, q, k_cache, v_cache, out, cu_seqlens_q, None, block_table,
                         seqused_k, max_q, max_k, sinks, alibi_slopes, k_descale, v_descale,
                         return_lse)
        eager = True
    else:
        eager = False
    return _kvcache(key, eager, q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q,
                    max_seqlen_q, causal, window, scale, num_splits, num_splits_max,
                    return_lse, max_seqlen_k, out, softcap, sinks, alibi_slopes, k_descale,
                    v_descale)


def _kvcache(key, eager, q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q,
             max_seqlen_q, causal, window, scale, num_splits, num_splits_max, return_lse,
             max_seqlen_k, out, softcap, sinks, alibi_slopes, k_descale, v_descale):
    """attention_with_kvcache past a miss: every check, then (eager) a new entry kept under
    `key` and its launch, or (traced) the custom op."""
    mask, wl, wr, max_q, cap, max_k, scale, feats = _kvcache_checks(
        q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q, causal,
        window, scale, num_splits, num_splits_max, max_seqlen_k, out, softcap, sinks,
        alibi_slopes, k_descale, v_descale)
    if eager:
        o = q.new_empty(_o_shape(q, v_cache)) if out is None else out
        e = _entry(key, q, k_cache, v_cache, o, cu_seqlens_q, None, block_table, seqused_k,
                   max_q, cap, mask, wl, wr, scale, return_lse, int(num_splits),
                   int(num_splits_max), feats)
        return _call(e, q, k_cache, v_cache, o, cu_seqlens_q, None, block_table, seqused_k,
                     max_q, max_k, *feats[1:], return_lse)
    return _run(q, k_cache, v_cache, out, return_lse, cu_seqlens_q, None, block_table,
                seqused_k, max_q, max_k, mask, wl, wr, scale, return_lse, int(num_splits),
                int(num_splits_max), *feats)


def _kvcache_checks(q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q, max_seqlen_q,
                    causal, window, scale, num_splits, num_splits_max, max_seqlen_k, out,
                    softcap, sinks, alibi_slopes, k_descale, v_descale):
    """Every check of attention_with_kvcache's arguments (fajit.Error on the first that
    fails); returns (mask, window_left, window_right, max_q, the cache's key capacity,
    max_k, scale, (softcap, sinks, alibi_slopes, k_descale, v_descale))."""
    varlen = cu_seqlens_q is not None
    _check_qkv(q, k_cache, v_cache, 3 if varlen else 4, 4, "k_cache")
    _check_out(out, q, v_cache)
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
        cap = k_cache.shape[1]
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
    softcap = _check_features(q, k_cache, batch, softcap, sinks, alibi_slopes, k_descale,
                              v_descale, "k_cache")
    _on_cuda(q, k_cache=k_cache, v_cache=v_cache, out=out, block_table=block_table,
             seqused_k=seqused_k, cu_seqlens_q=cu_seqlens_q, sinks=sinks,
             alibi_slopes=alibi_slopes, k_descale=k_descale, v_descale=v_descale)
    scale = None if scale is None else float(scale)
    return mask, wl, wr, max_q, cap, max_k, scale, (softcap, sinks, alibi_slopes, k_descale,
                                                    v_descale)


# ------ flash-attn's varlen entry point ------

_UNBOUNDED = 1 << 30   # a window side that covers every key (fajit_attn_desc's limit)


_SPLITS_MAX = 128      # fajit_attn_desc's largest split count


def _splits(num_splits):
    """flash-attn's num_splits as fajit_attn_desc.num_splits_max, the one place that maps
    it: vLLM sizes it as an upper bound (its CUDA graphs' split buffers), so it bounds the
    count fajit picks and forces none; 0 (or below, as FA3 reads it) = fajit picks freely.
    A bound above fajit's 128 bounds nothing more, so it is taken as 128."""
    return max(0, min(int(num_splits), _SPLITS_MAX))


def _fa_window(causal, window_size):
    """flash-attn's (causal, window_size) as attention_with_kvcache's (causal, window):
    -1 is an unbounded side, and causal sets the right side to 0."""
    if window_size is None:
        left = right = -1
    else:
        left, right = window_size
    if causal:
        right = 0
    if left < 0 and right < 0:
        return False, None
    if left < 0 and right == 0:
        return True, None
    return False, (_UNBOUNDED if left < 0 else left, _UNBOUNDED if right < 0 else right)


def _unsupported(name, what):
    raise Unsupported(f"fajit.flash_attn_varlen_func: {name} is not supported ({what})")


def flash_attn_varlen_func(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                           max_seqlen_k=None, dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None, *,
                           seqused_k=None, out=None, num_splits=0, return_softmax_lse=False,
                           scheduler_metadata=None, fa_version=None, q_v=None, q_descale=None,
                           k_descale=None, v_descale=None, s_aux=None, learnable_sink=None,
                           cp_world_size=1, cp_rank=0, cp_tot_seqused_k=None):
    """flash-attn's flash_attn_varlen_func (FA2, FA3 and vLLM's vllm_flash_attn) on fajit:
    the same argument names, meanings and results, so a backend that calls it switches by
    importing this one.

    q [total_q, heads_q, head_dim] packed by cu_seqlens_q (int32 [batch + 1]) with
    max_seqlen_q. Keys either packed the same way (k, v [total_k, heads_kv, head_dim],
    cu_seqlens_k, max_seqlen_k) or paged (block_table int32 [batch, max_pages], k and v
    [num_pages, page_size, heads_kv, head_dim] with any strides, seqused_k int32 [batch]
    the keys in use per sequence; with cu_seqlens_k instead, the lengths are taken from
    it). softmax_scale (default 1/sqrt(head_dim)), causal (bottom-right), window_size
    (left, right), -1 unbounded; out: O's buffer; num_splits: an upper bound on the
    split-KV count of paged K/V (vLLM's meaning: sized for its CUDA graph buffers), fajit's
    num_splits_max; 0 = fajit picks unbounded (ignored without block_table: it changes
    speed, not results). Positional arguments follow FA2's order (q, k, v, cu_seqlens_q,
    cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...); vLLM's (q, k, v, max_seqlen_q,
    cu_seqlens_q, max_seqlen_k, cu_seqlens_k) is recognised by the types. Returns O, or
    (O, LSE) with return_softmax_lse: LSE float32 [heads_q, total_q], natural log.

    Model features: softcap (> 0 on), alibi_slopes (float32 [heads_q] or [batch, heads_q]),
    attention sinks as s_aux (vLLM's name) or learnable_sink (FA3/FA4's), float32
    [heads_q], and FP8 K/V (k, v of torch.float8_e4m3fn or float8_e5m2) with k_descale /
    v_descale (float32, one element or [batch, heads_kv], as vLLM and FA3 pass them). The
    paged (decode) kernels serve them all; for packed keys the prefill kernels serve what
    they do, and a feature none serves raises fajit.Error FAJIT_UNSUPPORTED naming it.
    k_descale / v_descale with float16 or bfloat16 K/V are ignored (as in FA3; vLLM passes
    them always), and so is q_descale: q must be float16 or bfloat16 (an FP8 q raises).

    scheduler_metadata, fa_version, deterministic and cp_rank are accepted and ignored
    (fajit plans on the host per call; its forward is deterministic). dropout_p,
    return_attn_probs, q_v, FP8 queries and context parallelism (cp_world_size > 1,
    cp_tot_seqused_k) raise NotImplementedError (fajit.Error FAJIT_UNSUPPORTED)."""
    if isinstance(cu_seqlens_q, int):   # vLLM's positional order: max_q, cu_q, max_k, cu_k
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k = \
            cu_seqlens_k, max_seqlen_k, cu_seqlens_q, max_seqlen_q
    if learnable_sink is not None:   # FA3/FA4's name for vLLM's s_aux
        if s_aux is not None:
            raise invalid("s_aux and learnable_sink are both the attention sinks: give one")
        s_aux = learnable_sink
    key = None
    if block_table is not None and _FAST and not _compiling() and type(q) is _Tensor and \
            not _dispatch_modes() and (seqused_k is not None or cu_seqlens_k is None) and \
            not (dropout_p or return_attn_probs) and q_v is None and cp_world_size == 1 and \
            cp_tot_seqused_k is None:
        # vLLM's paged call with nothing unsupported: its own signature (the options as
        # flash-attn names them, their mapping onto attention_with_kvcache's done on the
        # miss), so a hit skips the mapping too. The descales join the key (and a hit
        # writes their pointers) only with FP8 K/V: with 16-bit K/V they are ignored, and
        # so is q_descale (an FP8 q is refused on the miss, so never cached).
        try:
            qs = q.shape
            kd = k.dtype
            fp8 = kd not in _DT
            key = (2, qs, q.stride(), q.dtype, q.get_device(),
                   k.shape, k.stride(), kd, k.get_device(),
                   v.shape, v.stride(), v.dtype, v.get_device(),
                   None if out is None else
                   (out.shape, out.stride(), out.dtype, out.get_device()),
                   block_table.shape, block_table.stride(), block_table.dtype,
                   block_table.get_device(),
                   None if seqused_k is None else
                   (seqused_k.shape, seqused_k.stride(), seqused_k.dtype,
                    seqused_k.get_device()),
                   cu_seqlens_q.shape, cu_seqlens_q.stride(), cu_seqlens_q.dtype,
                   cu_seqlens_q.get_device(), causal,
                   window_size if type(window_size) is tuple else
                   None if window_size is None else tuple(window_size),
                   softmax_scale, num_splits, return_softmax_lse, softcap,
                   None if alibi_slopes is None else
                   (alibi_slopes.shape, alibi_slopes.stride(), alibi_slopes.dtype,
                    alibi_slopes.get_device()),
                   None if s_aux is None else
                   (s_aux.shape, s_aux.stride(), s_aux.dtype, s_aux.get_device()),
                   (None if k_descale is None else
                    (k_descale.shape, k_descale.stride(), k_descale.dtype,
                     k_descale.get_device()),
                    None if v_descale is None else
                    (v_descale.shape, v_descale.stride(), v_descale.dtype,
                     v_descale.get_device())) if fp8 else None)
            c = _tls.descs
            if key == c.last_key:
                e = c.last
            else:
                e = c.get(key)
                if e is not None:
                    c.last_key, c.last = key, e
            if e is not None:
                max_q = int(max_seqlen_q)
                max_k = e.max_k if max_seqlen_k is None else int(max_seqlen_k)
        except (AttributeError, TypeError, ValueError, IndexError):
            key = e = None   # not tensors, unhashable, bad lengths: the checks below tell
        if e is not None:   # (the descales are in the key only with FP8 K/V)
            return _call(e, q, k, v, out, cu_seqlens_q, None, block_table, seqused_k, max_q,
                         max_k, s_aux, alibi_slopes, k_descale if fp8 else None, v_descale,
                         return_softmax_lse)
    if dropout_p:
        _unsupported("dropout_p", f"inference only, got {dropout_p}")
    if return_attn_probs:
        _unsupported("return_attn_probs", "the probabilities are never formed; "
                     "return_softmax_lse=True gives the LSE")
    if q_v is not None:
        _unsupported("q_v", "MLA decode with an extra query is not served (v may have its own "
                     "head_dim: head_dim_v)")
    if getattr(q, "dtype", None) in _FP8_ANY:
        _unsupported(f"an FP8 q ({q.dtype})", "FP8 queries are not served, so neither is "
                     "q_descale: q must be float16 or bfloat16 (K/V may be FP8, with "
                     "k_descale and v_descale)")
    if getattr(k, "dtype", None) not in _FP8:   # 16-bit K/V: the descales ignored, as in FA3
        k_descale = v_descale = None
    if cp_world_size != 1 or cp_tot_seqused_k is not None:
        _unsupported("cp_world_size/cp_tot_seqused_k", "no context parallelism")
    if cu_seqlens_q is None:
        raise invalid("flash_attn_varlen_func needs cu_seqlens_q (int32 [batch + 1])")
    if max_seqlen_q is None:
        raise invalid("flash_attn_varlen_func needs max_seqlen_q (a host int)")
    causal, window = _fa_window(causal, window_size)
    ret = return_softmax_lse
    feats = dict(softcap=softcap, sinks=s_aux, alibi_slopes=alibi_slopes, k_descale=k_descale,
                 v_descale=v_descale)
    if block_table is not None:
        if key is not None:   # the eager path's miss: the new entry goes under `key` too
            return _kvcache(key, True, q, k, v, block_table, seqused_k, cu_seqlens_q,
                            max_seqlen_q, causal, window, softmax_scale, 0,
                            _splits(num_splits), ret, max_seqlen_k, out, **feats)
        if seqused_k is None and cu_seqlens_k is not None:   # FA2's paged form
            seqused_k = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).to(torch.int32)
        return attention_with_kvcache(q, k, v, block_table=block_table, seqused_k=seqused_k,
                                      cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q,
                                      causal=causal, window=window, scale=softmax_scale,
                                      num_splits_max=_splits(num_splits), return_lse=ret,
                                      max_seqlen_k=max_seqlen_k, out=out, **feats)
    if seqused_k is not None:
        _unsupported("seqused_k without block_table", "seqused_k limits the keys of paged "
                     "K/V only; give cu_seqlens_k")
    if cu_seqlens_k is None:
        raise invalid("flash_attn_varlen_func needs cu_seqlens_k or a block_table")
    # num_splits is dropped: split-KV is the paged kernels' (results are the same)
    return attention(q, k, v, causal=causal, window=window, scale=softmax_scale,
                     return_lse=ret, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                     max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, out=out, **feats)


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
    dev = o_a.get_device()
    ctx = _context(dev)
    ctx.check(lib.fajit_attn_merge(ctx.ptr, C.byref(m), _stream(dev)))


def _merge_eager(o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor,
                 lse_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    o = torch.empty_like(o_a, memory_format=torch.contiguous_format)
    lse = torch.empty_like(lse_a, memory_format=torch.contiguous_format)
    _merge_launch(o_a, lse_a, o_b, lse_b, o, lse)
    return o, lse


_merge = _merge_eager
if hasattr(torch.library, "custom_op"):   # (torch < 2.4: eager calls only)
    _merge = torch.library.custom_op("fajit::merge", mutates_args=())(_merge_eager)

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
    return (_merge_eager if _eager(o_a) else _merge)(o_a, lse_a, o_b, lse_b)


__all__ = ["attention", "attention_with_kvcache", "flash_attn_varlen_func",
           "merge_attention"]
