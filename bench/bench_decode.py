#!/usr/bin/env python3
"""bench_decode.py - fajit's decode path (paged and contiguous K/V) against PyTorch SDPA
(FLASH and CUDNN backends) and a device-to-device copy of the K/V bytes, in one process on
the same tensors. bf16; 32 query heads, 8 KV heads, head_dim 128 by default.

Per shape (batch x keys) and query length (1: decode; 4, 8: speculative decode, bottom-right
causal), fajit's outputs (every page size and contiguous) and the peers' are first checked
against a float32 torch reference; a fajit error above --tol aborts that shape. Then every
call is timed with CUDA events, the L2 flushed before each repetition, in --rounds
interleaved rounds (odd rounds in reverse order) of --reps repetitions, the median of the
rounds' medians kept. Latency-bound shapes (K+V below --graph-max-mib) are also timed as a
CUDA graph of --graph-calls back-to-back calls (replayed, time divided by the calls: warm
L2, no launch overhead). Last, the mixed batch: chunked-prefill sequences plus decode rows,
paged, in one fajit call (varlen cu_seqlens_q) against the two separate calls.

fajit is called through ctypes over libfajit.so (public API only), on torch's current
stream. The optional peers flashinfer and flash_attn are timed when importable.

usage: bench_decode.py --lib build/libfajit.so [--out decode.md] [--shapes 64x16384,...]
                       [--q-lens 1,4,8] [--page-sizes 16,1] [--rounds 3] [--reps 20]
       bench_decode.py --lib build/libfajit.so --check-layout   (no GPU, no torch needed)
"""
import argparse
import ctypes as C
import datetime
import itertools
import math
import os
import platform
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_goals  # noqa: E402 - bench/decode_goals.py, the issue's goals on the report

torch = F = None   # imported in main(): --help and --check-layout work without torch
DEV = "cuda"       # tests of the helpers set "cpu"


# These two mirror fajit_ctx_opts and fajit_attn_desc of include/fajit.h field by field,
# the paged fields (appended after workspace_bytes) included. They are filled by the
# *_init_sized functions with their own size (struct_size, first); check_layout() checks
# the fields' places against what the library writes and reports.
class CtxOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("device", C.c_int), ("cache_dir", C.c_char_p),
                ("policy", C.c_int), ("log", C.c_void_p), ("log_user", C.c_void_p),
                ("log_level", C.c_int), ("progress", C.c_void_p), ("progress_user", C.c_void_p),
                ("family", C.c_int), ("cache_max_bytes", C.c_int64), ("checked", C.c_int)]


class AttnDesc(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("q", C.c_void_p), ("k", C.c_void_p),
                ("v", C.c_void_p), ("o", C.c_void_p)] + \
        [(f"{t}_{s}_stride", C.c_int64) for t in "qkvo" for s in ("batch", "row", "head")] + \
        [(n, C.c_int) for n in ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k",
                                "head_dim", "dtype", "mask", "window_left", "window_right")] + \
        [("softmax_scale", C.c_float), ("cu_seqlens_q", C.c_void_p),
         ("cu_seqlens_k", C.c_void_p), ("total_q", C.c_int), ("total_k", C.c_int),
         ("lse", C.c_void_p), ("op", C.c_int), ("workspace", C.c_void_p),
         ("workspace_bytes", C.c_size_t),
         # paged K/V
         ("block_table", C.c_void_p), ("block_table_stride", C.c_int64),
         ("page_size", C.c_int), ("num_pages", C.c_int),
         ("k_page_stride", C.c_int64), ("v_page_stride", C.c_int64),
         ("seqused_k", C.c_void_p), ("num_splits", C.c_int)]


# Offsets of include/fajit.h on LP64 (gcc, x86-64 and aarch64): the mirror must match them.
DESC_OFFSETS = {"workspace_bytes": 232, "block_table": 240, "block_table_stride": 248,
                "page_size": 256, "num_pages": 260, "k_page_stride": 264, "v_page_stride": 272,
                "seqused_k": 280, "num_splits": 288}
DESC_SIZE, CTX_SIZE = 296, 96

FAJIT_MASK_NONE, FAJIT_MASK_CAUSAL, FAJIT_BF16, FAJIT_DEVICE_NONE = 0, 1, 1, -1


class Fajit:
    def __init__(self, path, device):
        self.lib = C.CDLL(path)
        L = self.lib
        L.fajit_ctx_create.argtypes = [C.POINTER(C.c_void_p), C.POINTER(CtxOpts)]
        L.fajit_ctx_opts_init_sized.argtypes = [C.POINTER(CtxOpts), C.c_size_t]
        L.fajit_errmsg.restype = C.c_char_p
        L.fajit_errmsg.argtypes = [C.c_void_p]
        L.fajit_attn_desc_init_sized.argtypes = [C.POINTER(AttnDesc), C.c_size_t] + \
            [C.c_void_p] * 4 + [C.c_int] * 7
        L.fajit_attn_fwd.argtypes = [C.c_void_p, C.POINTER(AttnDesc), C.c_void_p]
        L.fajit_attn_check.argtypes = [C.c_void_p, C.POINTER(AttnDesc)]
        L.fajit_attn_workspace_size.argtypes = [C.c_void_p, C.POINTER(AttnDesc),
                                                C.POINTER(C.c_size_t)]
        L.fajit_dispatch_describe.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(AttnDesc),
                                              C.c_char_p, C.c_size_t]
        L.fajit_version_string.restype = C.c_char_p
        L.fajit_ctx_destroy.argtypes = [C.c_void_p]
        opts = CtxOpts()
        L.fajit_ctx_opts_init_sized(C.byref(opts), C.sizeof(opts))
        opts.device = device
        self.ctx = C.c_void_p()
        st = L.fajit_ctx_create(C.byref(self.ctx), C.byref(opts))
        if st != 0:
            sys.exit(f"fajit_ctx_create: {L.fajit_errmsg(self.ctx).decode()}")
        self.check_layout()

    def err(self):
        return self.lib.fajit_errmsg(self.ctx).decode(errors="replace")

    def check_layout(self):
        """Refuses to run when the mirror and the library disagree: the sizes and offsets of
        the header (LP64), the defaults the init functions write, and, for each paged field,
        the value the library's own rule reports back (fajit_attn_check reads it at its
        offset in the library's struct and names it in its message)."""
        bad = []
        if C.sizeof(AttnDesc) != DESC_SIZE or C.sizeof(CtxOpts) != CTX_SIZE:
            bad.append(f"sizes {C.sizeof(AttnDesc)}/{C.sizeof(CtxOpts)}, header "
                       f"{DESC_SIZE}/{CTX_SIZE}")
        for name, off in DESC_OFFSETS.items():
            if getattr(AttnDesc, name).offset != off:
                bad.append(f"{name} at {getattr(AttnDesc, name).offset}, header {off}")
        o = CtxOpts()
        self.lib.fajit_ctx_opts_init_sized(C.byref(o), C.sizeof(o))
        d = AttnDesc()
        C.memset(C.byref(d), 0xA5, C.sizeof(d))   # every byte must be written by init
        self.lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), *(0,) * 4, 3, 8, 2, 16,
                                            32, 64, 1)
        if not (o.struct_size == C.sizeof(o) and o.log_level == 1 and o.device == 0 and
                o.checked == 0 and d.struct_size == C.sizeof(d) and d.window_left == -1 and
                d.dtype == 1 and d.head_dim == 64 and d.k_batch_stride == 64 * 2 * 32 and
                abs(d.softmax_scale - 0.125) < 1e-7 and d.op == 0 and d.workspace_bytes == 0
                and d.block_table is None and d.block_table_stride == 0 and d.page_size == 0
                and d.num_pages == 0 and d.k_page_stride == 0 and d.v_page_stride == 0 and
                d.seqused_k is None and d.num_splits == 0):
            bad.append("the init functions' defaults read back wrong")

        def probe(**fields):
            e = AttnDesc()
            self.lib.fajit_attn_desc_init_sized(C.byref(e), C.sizeof(e), 0x10000, 0x20000,
                                                0x30000, 0x40000, 2, 8, 2, 1, 64, 64, 1)
            for k, v in fields.items():
                setattr(e, k, v)
            st = self.lib.fajit_attn_check(self.ctx, C.byref(e))
            return st, (self.err() if st else "")

        paged = dict(block_table=0x50000, block_table_stride=4, page_size=16, num_pages=1)
        probes = [({}, 0, ""),
                   (paged, 0, ""),
                   (dict(paged, seqused_k=0x60000, num_splits=3), 0, ""),
                   (dict(page_size=5, num_pages=7), 1, "page_size 5, num_pages 7"),
                   (dict(num_splits=129), 1, "got 129"),
                   (dict(paged, block_table_stride=3), 1, "page_size (48)"),
                   (dict(paged, k_page_stride=12), 1, "k_page_stride must be >= 0 and a "
                    "multiple of 8 elements (0: dense pages), got 12"),
                   (dict(paged, v_page_stride=20), 1, "v_page_stride must be >= 0 and a "
                    "multiple of 8 elements (0: dense pages), got 20"),
                   (dict(paged, seqused_k=0x60002), 1, "seqused_k must be 4-byte aligned"),
                   (dict(paged, block_table=0x50002), 1, "block_table must be 4-byte aligned")]
        for fields, want_st, want_msg in probes:
            st, msg = probe(**fields)
            if st != want_st or want_msg not in msg:
                bad.append(f"probe {fields}: status {st} '{msg}', expected {want_st} "
                           f"'{want_msg}'")
        if bad:
            sys.exit("bench_decode.py: CtxOpts/AttnDesc do not match this libfajit.so "
                     "(include/fajit.h):\n  " + "\n  ".join(bad))

    def close(self):
        if self.ctx:
            self.lib.fajit_ctx_destroy(self.ctx)
            self.ctx = C.c_void_p()

    def prepare(self, d, keep):
        """Checks d, gives it a caller-owned workspace (zeroed once, as the header asks for
        launches captured into graphs; kept alive in `keep`), returns fajit's one-line
        description of the kernel it runs."""
        if self.lib.fajit_attn_check(self.ctx, C.byref(d)) != 0:
            raise RuntimeError("fajit_attn_check: " + self.err())
        n = C.c_size_t(0)
        if self.lib.fajit_attn_workspace_size(self.ctx, C.byref(d), C.byref(n)) != 0:
            raise RuntimeError("fajit_attn_workspace_size: " + self.err())
        if n.value:
            ws = torch.zeros(n.value + 256, dtype=torch.uint8, device=DEV)
            keep.append(ws)
            p = ws.data_ptr()
            d.workspace, d.workspace_bytes = (p + 255) // 256 * 256, n.value
        buf = C.create_string_buffer(512)
        if self.lib.fajit_dispatch_describe(self.ctx, None, C.byref(d), buf, 512) != 0:
            return "describe: " + self.err()
        return buf.value.decode(errors="replace")

    def fwd(self, d):
        st = self.lib.fajit_attn_fwd(self.ctx, C.byref(d), torch.cuda.current_stream().cuda_stream)
        if st != 0:
            raise RuntimeError(f"fajit_attn_fwd status {st}: {self.err()}")


def set_strides(d, name, t):
    """t: [batch or pages, rows, heads, dim] (any strides, last dim contiguous)."""
    st = t.stride()
    setattr(d, f"{name}_batch_stride", st[0])
    setattr(d, f"{name}_row_stride", st[1])
    setattr(d, f"{name}_head_stride", st[2])


def fajit_desc(fj, q, k, v, o, seqlen_k, causal, paged=None, num_splits=0, cu_seqlens_q=None,
               total_q=0, seqlen_q=None, batch=None):
    """q, o: [b, L, hq, d] (varlen: [1, total_q, hq, d]); k, v: [b, N, hkv, d] contiguous or
    [pages, page_size, hkv, d] with paged = (block_table [b, stride] int32, seqused_k int32
    or None)."""
    d = AttnDesc()
    b = batch if batch is not None else q.shape[0]
    L = seqlen_q if seqlen_q is not None else q.shape[1]
    fj.lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), q.data_ptr(), k.data_ptr(),
                                      v.data_ptr(), o.data_ptr(), b, q.shape[2], k.shape[2], L,
                                      seqlen_k, q.shape[3], FAJIT_BF16)
    for name, t in (("q", q), ("k", k), ("v", v), ("o", o)):
        set_strides(d, name, t)
    if paged is not None:
        bt, used = paged
        d.k_batch_stride = d.v_batch_stride = 0      # not read with a block table
        d.block_table, d.block_table_stride = bt.data_ptr(), bt.stride(0)
        d.page_size, d.num_pages = k.shape[1], k.shape[0]
        d.k_page_stride, d.v_page_stride = k.stride(0), v.stride(0)
        d.seqused_k = used.data_ptr() if used is not None else None
    if cu_seqlens_q is not None:
        d.cu_seqlens_q, d.total_q = cu_seqlens_q.data_ptr(), total_q
        d.q_batch_stride = d.o_batch_stride = 0      # packed rows: ignored
    d.mask = FAJIT_MASK_CAUSAL if causal else FAJIT_MASK_NONE
    d.num_splits = num_splits
    return d


def make_paged(kv, page_size, gen, in_order=False):
    """kv: [2, b, N, hkv, d] -> (kvp [2, pages, page_size, hkv, d], block_table [b, pps]
    int32): the same keys scattered over pages in a random order (a served cache's), or
    laid out in order (in_order, --pages-in-order: what paging costs without the scatter)."""
    _, b, N, h, dim = kv.shape
    pps = -(-N // page_size)
    pages = b * pps
    perm = torch.randperm(pages, generator=gen, device="cpu").to(DEV)
    if in_order:   # (the random order is still drawn: the inputs after it stay the same)
        perm = torch.arange(pages, device=DEV)
    kvp = torch.empty(2, pages, page_size, h, dim, dtype=kv.dtype, device=DEV)
    src = kv
    if pps * page_size != N:
        src = torch.zeros(2, b, pps * page_size, h, dim, dtype=kv.dtype, device=DEV)
        src[:, :, :N] = kv
    for i in range(2):
        kvp[i][perm] = src[i].reshape(pages, page_size, h, dim)
    bt = perm.to(torch.int32).view(b, pps).contiguous()
    return kvp, bt


def reference(q, k, v, scale, used=None):
    """float32 attention of q [b, L, hq, d] over k, v [b, N, hkv, d] (bottom-right causal
    for L > 1; keys past used[i] ignored), in batch chunks of ~1 GiB of temporaries."""
    b, L, hq, dim = q.shape
    N, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    out = torch.empty(b, L, hq, dim, dtype=torch.float32, device=q.device)
    per = max(1, int((1 << 30) // (N * (2 * hkv * dim + 2 * hq * L) * 4)))
    rows = torch.arange(g * L, device=q.device) % L
    cols = torch.arange(N, device=q.device)
    for s in range(0, b, per):
        e = min(b, s + per)
        n = e - s
        qq = q[s:e].float().view(n, L, hkv, g, dim).permute(0, 2, 3, 1, 4).reshape(n, hkv, g * L, dim)
        kk = k[s:e].float().permute(0, 2, 1, 3)
        vv = v[s:e].float().permute(0, 2, 1, 3)
        sc = (qq @ kk.transpose(-1, -2)) * scale                     # n, hkv, gL, N
        nk = (used[s:e].long() if used is not None else
              torch.full((n,), N, dtype=torch.long, device=q.device))
        # key j visible to query row i when j <= i + used - L (and j < used)
        lim = rows[None, :] + nk[:, None] - L                            # n, gL
        vis = cols[None, None, :] <= lim[:, :, None]                     # n, gL, N
        sc.masked_fill_(~vis[:, None], float("-inf"))
        o = torch.softmax(sc, -1) @ vv
        out[s:e] = o.view(n, hkv, g, L, dim).permute(0, 3, 1, 2, 4).reshape(n, L, hq, dim)
        del qq, kk, vv, sc, vis, o
    return out


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def max_err(o, ref):
    e = (o.float() - ref).abs().max().item()
    return e if math.isfinite(e) else float("inf")


class Timer:
    """flush_mode "read": the flush reads its buffer (L2 left holding clean lines, as after
    the kernels a decode step follows); "write": it zeroes the buffer, which leaves the L2
    full of dirty lines whose write-back the timed call then pays (~12 us for 50 MB at
    4 TB/s: a floor under every short call, the peers' and the copy's as much as fajit's)."""
    def __init__(self, flush_mib, reps, rounds, flush_mode="read"):
        self.flush = torch.zeros(flush_mib << 20, dtype=torch.int8, device=DEV)
        self.reps, self.rounds, self.mode = reps, rounds, flush_mode
        torch.cuda.synchronize()

    def do_flush(self):
        if self.mode == "write":
            self.flush.zero_()
        else:
            self.flush.max()

    def once(self, fn, flush=True):
        """Median per-call us over self.reps calls, each after an L2 flush."""
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(self.reps)]
        for s, e in ev:
            if flush:
                self.do_flush()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in ev) * 1e3

    def interleaved(self, fns, notes=None, tag=""):
        """fns: {name: fn}. Rounds in order, odd rounds reversed; median of round medians.
        One that fails in its warm-up is left out (noted)."""
        names = []
        for n in fns:            # warm-up: compile, cache, allocator, autotuners
            try:
                for _ in range(3):
                    fns[n]()
                torch.cuda.synchronize()
                names.append(n)
            except Exception as ex:   # noqa: BLE001 - one kernel failing must not stop the run
                if notes is not None:
                    notes.append(f"{tag} {n}: not timed, {str(ex).splitlines()[0][:160]}")
        samples = {n: [] for n in names}
        for r in range(self.rounds):
            for n in (names if r % 2 == 0 else names[::-1]):
                samples[n].append(self.once(fns[n]))
        return {n: statistics.median(v) for n, v in samples.items()}


def graph_time(fn, calls, replays):
    """us per call of `calls` back-to-back calls captured in one CUDA graph (warm first)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3 / calls)
    del g
    return statistics.median(ts)


class SdpaPeer:
    """One SDPA backend. For a shape it tries, in order, ways to express the problem (GQA
    through enable_gqa on transposed BSHD views; the KV heads expanded to heads_q, marked *,
    reading group-times more bytes; for q_len > 1 the bottom-right causal mask as
    torch.nn.attention.bias.causal_lower_right or as an explicit boolean attn_mask), keeps
    the first that runs and matches the reference, and notes why the others were refused."""

    def __init__(self, name, backend):
        self.name, self.backend = name, backend
        self.notes = {}     # (q_len) -> text

    def setup(self, q, k, v, ref, tol, L):
        from torch.nn.attention import sdpa_kernel
        N = k.shape[1]
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        masks = [("no mask", None)]
        if L > 1:
            masks = []
            try:
                from torch.nn.attention.bias import causal_lower_right
                masks.append(("causal_lower_right", causal_lower_right(L, N)))
            except ImportError:
                pass
            masks.append(("bool attn_mask", torch.ones(L, N, dtype=torch.bool,
                                                       device=DEV).tril(N - L)))
        g = q.shape[2] // k.shape[2]
        tried = []
        expanded = None
        for layout in ("gqa", "expanded"):
            if layout == "expanded":
                if g == 1:
                    break
                expanded = (kt.repeat_interleave(g, dim=1).contiguous(),
                            vt.repeat_interleave(g, dim=1).contiguous())
            for mname, m in masks:
                kk, vv = (kt, vt) if layout == "gqa" else expanded
                kw = dict(enable_gqa=True) if layout == "gqa" and g > 1 else {}

                def fn(kk=kk, vv=vv, m=m, kw=kw):
                    with sdpa_kernel([self.backend]):
                        return F.scaled_dot_product_attention(qt, kk, vv, attn_mask=m, **kw)
                label = f"{layout}, {mname}"
                with warnings.catch_warnings(record=True) as ws:
                    warnings.simplefilter("always")
                    try:
                        out = fn()
                        sync()
                    except Exception as ex:   # noqa: BLE001 - any refusal: try the next way
                        why = "; ".join(str(w.message).split("\n")[0] for w in ws[:2]) or \
                            str(ex).split("\n")[0]
                        tried.append(f"{label}: refused ({why[:160]})")
                        continue
                err = max_err(out.transpose(1, 2), ref)
                del out
                if err > tol:
                    tried.append(f"{label}: wrong (max err {err:.3g})")
                    continue
                self.notes[L] = f"{label}" + (" *" if layout == "expanded" else "") + \
                    ("" if not tried else " [" + " | ".join(tried) + "]")
                return fn, layout == "expanded", expanded
        self.notes[L] = "skipped: " + " | ".join(tried)
        return None, False, None


def optional_peers():
    """{name: (module or None, status)} for flashinfer and flash_attn."""
    out = {}
    for name in ("flashinfer", "flash_attn"):
        try:
            m = __import__(name)
            out[name] = (m, f"installed, {getattr(m, '__version__', 'version unknown')}")
        except ImportError:
            out[name] = (None, "not installed")
        except Exception as ex:   # noqa: BLE001 - a broken install must not stop the run
            out[name] = (None, f"import failed: {str(ex)[:100]}")
    return out


# The table columns of each optional peer. flashinfer is timed twice: "FI tc" is its decode
# wrapper with use_tensor_cores=True (its FA2 prefill kernels over the paged cache, what it
# advises for GQA groups of 4 and more), "FI cc" its CUDA-core decode kernel (the default).
OPT_COLS = {"flashinfer": ("FI tc", "FI cc"), "flash_attn": ("flash_attn",)}


def flashinfer_fn(fi, q, kvp, bt, page_size, N, hq, hkv, dim, scale, tensor_cores):
    """flashinfer's paged decode (q_len 1 only; flashinfer 0.7.2's
    BatchDecodeWithPagedKVCacheWrapper) on fajit's own paged cache: kvp [2, pages, page_size,
    hkv, dim] is the NHD layout flashinfer reads, K and V as a tuple of two [pages, page_size,
    hkv, dim] tensors; fajit's block table bt [b, pps] (every sequence N keys, pps pages)
    becomes flashinfer's CSR page list. plan() runs here, once; the returned callable is
    run() alone, into a preallocated output."""
    b = q.shape[0]
    # 128 MiB float workspace (its split-k partials), zeroed as its first use wants
    ws = torch.zeros(128 << 20, dtype=torch.uint8, device=DEV)
    # backend fa2 by name: "auto" picks it on sm90 too, but first asks cuDNN's frontend
    w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tensor_cores,
                                              backend="fa2")
    pps = bt.shape[1]
    indptr = torch.arange(0, b + 1, dtype=torch.int32, device=DEV) * pps   # pps pages each
    indices = bt.reshape(-1).contiguous()                                 # page ids, in order
    last = torch.full((b,), N - (pps - 1) * page_size, dtype=torch.int32, device=DEV)
    w.plan(indptr, indices, last, hq, hkv, dim, page_size, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16, sm_scale=scale)
    q3 = q[:, 0].contiguous()                                             # [b, hq, dim]
    o = torch.empty_like(q3)
    kv = (kvp[0], kvp[1])
    return lambda: w.run(q3, kv, out=o)


def flash_attn_fn(fa, q, k, v, causal):
    """flash_attn_with_kvcache on the contiguous cache (its paged mode wants pages of 256)."""
    seqlens = torch.full((q.shape[0],), k.shape[1], dtype=torch.int32, device=DEV)
    return lambda: fa.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, causal=causal)


def fmt(x, spec="%.1f"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return spec % x


def ratio(a, b):
    return a / b if a and b and math.isfinite(a) and math.isfinite(b) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libfajit.so")
    ap.add_argument("--out", help="write the markdown tables here too")
    ap.add_argument("--shapes", default="64x16384,128x2048,16x8192,1x32768,1x131072,1x1024,"
                                        "1x2048,1x4096", help="batch x keys, comma separated")
    ap.add_argument("--q-lens", default="1,4,8", help="query rows per sequence (decode, "
                    "speculative decode: bottom-right causal)")
    ap.add_argument("--heads-q", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-sizes", default="16,1", help="fajit paged page sizes; the first "
                    "is the headline column (ratios to the peers), the others get their own")
    ap.add_argument("--num-splits", type=int, default=0, help="fajit num_splits (0: fajit "
                    "chooses)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=15, help="timed calls per round and kernel")
    ap.add_argument("--flush-mib", type=int, default=256, help="L2 flush buffer (MiB)")
    ap.add_argument("--verbose", action="store_true", help="a line before each fajit variant's "
                    "first call")
    ap.add_argument("--flush-mode", choices=("read", "write"), default="read",
                    help="the flush reads its buffer (clean L2) or zeroes it (dirty L2, the "
                    "mode of the results before 2026-12-02)")
    ap.add_argument("--graph-max-mib", type=float, default=32, help="shapes whose K+V is "
                    "below this are latency-bound: also timed as CUDA-graph replays")
    ap.add_argument("--graph-calls", type=int, default=100)
    ap.add_argument("--graph-replays", type=int, default=10)
    ap.add_argument("--tol", type=float, default=2e-2, help="max abs error vs the float32 "
                    "reference above which fajit's shape is aborted")
    ap.add_argument("--no-peers", action="store_true", help="fajit and the copy only")
    ap.add_argument("--no-mixed", action="store_true", help="skip the mixed batch")
    ap.add_argument("--mixed", default="8,512,4096,120,4096", metavar="P,NEW,PREFIX,D,CTX",
                    help="mixed batch: P chunked-prefill sequences of NEW tokens over PREFIX "
                    "keys, D decode rows over CTX keys (page size: the first of --page-sizes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pages-in-order", action="store_true", help="block tables list the pages "
                    "in order (default: a random order, as a served cache has them)")
    ap.add_argument("--check-layout", action="store_true", help="only check the ctypes "
                    "mirror against the library (a context without a GPU; no torch)")
    args = ap.parse_args()
    if args.check_layout:
        fj = Fajit(args.lib, FAJIT_DEVICE_NONE)
        print(f"layout ok: fajit {fj.lib.fajit_version_string().decode()}, desc "
              f"{C.sizeof(AttnDesc)} bytes, ctx opts {C.sizeof(CtxOpts)} bytes")
        fj.close()
        return
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps must be at least 1")
    try:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shapes.split(",")]
        q_lens = [int(x) for x in args.q_lens.split(",")]
        page_sizes = [int(x) for x in args.page_sizes.split(",")]
        mixed = [int(x) for x in args.mixed.split(",")]
        assert all(len(s) == 2 and min(s) > 0 for s in shapes) and min(q_lens) > 0
        assert min(page_sizes) > 0 and len(mixed) == 5 and min(mixed) > 0
    except (ValueError, AssertionError):
        ap.error("--shapes BxN,..., --q-lens, --page-sizes and --mixed take positive integers")
    if args.heads_q % args.heads_kv:
        ap.error("--heads-q must be a multiple of --heads-kv")

    global torch, F
    import torch as _torch
    import torch.nn.functional as _F
    torch, F = _torch, _F
    from torch.nn.attention import SDPBackend

    t_start = time.time()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    fj = Fajit(args.lib, torch.cuda.current_device())
    timer = Timer(args.flush_mib, args.reps, args.rounds, args.flush_mode)
    hq, hkv, hd = args.heads_q, args.heads_kv, args.head_dim
    scale = 1.0 / math.sqrt(hd)
    ps0 = page_sizes[0]
    peers = [] if args.no_peers else [SdpaPeer("FLASH", SDPBackend.FLASH_ATTENTION),
                                      SdpaPeer("CUDNN", SDPBackend.CUDNN_ATTENTION)]
    opt = {} if args.no_peers else optional_peers()
    for n, (_, status) in opt.items():
        print(f"optional peer {n}: {status}", flush=True)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}, fajit {fj.lib.fajit_version_string().decode()}; "
          f"{len(shapes)} shapes x q_len {args.q_lens}, page sizes {args.page_sizes}",
          flush=True)
    rows, bw_rows, graph_rows, notes, kernels = [], [], [], [], {}
    opt_cols = [c for n, (m, _) in opt.items() if m is not None for c in OPT_COLS[n]]
    total = len(shapes) * len(q_lens)
    idx = 0
    for b, N in shapes:
        kv_bytes = 2 * b * N * hkv * hd * 2          # K and V, bf16, every key in use
        latency = kv_bytes < args.graph_max_mib * (1 << 20)
        kv = torch.randn(2, b, N, hkv, hd, dtype=torch.bfloat16, device=DEV)
        k, v = kv[0], kv[1]
        paged = {}
        for ps in page_sizes:
            kvp, bt = make_paged(kv, ps, gen, args.pages_in_order)
            used = torch.full((b,), N, dtype=torch.int32, device=DEV)
            paged[ps] = (kvp, bt, used)
        # the bandwidth ceiling: a copy of the same bytes, and a read-only reduction
        flat = kv.view(-1)
        dst = torch.empty_like(flat)
        bw = timer.interleaved({"copy": lambda: dst.copy_(flat),
                                "sum": lambda: flat.sum(dtype=torch.float32)})
        copy_rw = 2 * kv_bytes / (bw["copy"] * 1e-6) / 1e12
        copy_rd = kv_bytes / (bw["copy"] * 1e-6) / 1e12
        sum_rd = kv_bytes / (bw["sum"] * 1e-6) / 1e12
        bw_rows.append((b, N, kv_bytes / (1 << 20), bw["copy"], copy_rw, copy_rd, bw["sum"],
                        sum_rd))
        del dst
        for L in q_lens:
            idx += 1
            tag = f"[{idx}/{total}] {b}x{N} q{L}"
            causal = L > 1
            q = torch.randn(b, L, hq, hd, dtype=torch.bfloat16, device=DEV)
            ref = reference(q, k, v, scale)
            keep, fns, errs, failed = [], {}, {}, None
            # fajit: every page size, then contiguous
            variants = [(f"ps{ps}", paged[ps]) for ps in page_sizes] + [("contig", None)]
            for name, pg in variants:
                o = torch.full_like(q, float("nan"))
                if args.verbose:
                    print(f"{tag}: fajit {name}: first call", flush=True)
                try:
                    if pg is None:
                        d = fajit_desc(fj, q, k, v, o, N, causal, num_splits=args.num_splits)
                    else:
                        kvp, bt, used = pg
                        d = fajit_desc(fj, q, kvp[0], kvp[1], o, N, causal, (bt, used),
                                       args.num_splits)
                    kernels.setdefault((b, N, L, name), fj.prepare(d, keep))
                    fj.fwd(d)
                    torch.cuda.synchronize()
                except RuntimeError as ex:
                    errs[name] = None
                    notes.append(f"{b}x{N} q{L} fajit {name}: {ex}")
                    print(f"{tag}: fajit {name} failed: {ex}", flush=True)
                    continue
                errs[name] = max_err(o, ref)
                if errs[name] > args.tol:
                    failed = f"fajit {name} max abs error {errs[name]:.3g} > {args.tol}"
                keep.append((d, o))
                fns["fajit " + name] = (lambda d=d: fj.fwd(d))
            if failed:
                print(f"{tag}: ABORTED: {failed}", flush=True)
                notes.append(f"{b}x{N} q{L}: aborted, {failed}")
                rows.append((b, N, L, None, failed))
                del q, ref, keep, fns
                continue
            expanded = {}
            for p in peers:
                fn, exp, buf = p.setup(q, k, v, ref, args.tol, L)
                if fn is not None:
                    fns[p.name] = fn
                    expanded[p.name] = exp
                    keep.append(buf)
            for name, (m, _) in opt.items():
                if m is None or (name == "flashinfer" and L != 1):
                    continue   # flashinfer's decode wrapper: q_len 1 only (said in the report)
                for col in OPT_COLS[name]:
                    try:
                        if name == "flashinfer":
                            kvp, bt, _u = paged[ps0]
                            fn = flashinfer_fn(m, q, kvp, bt, ps0, N, hq, hkv, hd, scale,
                                               tensor_cores=col == "FI tc")
                            out = fn().view(b, 1, hq, hd)
                        else:
                            fn = flash_attn_fn(m, q, k, v, causal)
                            out = fn()
                        e = max_err(out, ref)
                        if e > args.tol:
                            raise RuntimeError(f"max abs error {e:.3g}")
                        fns[col] = fn
                        errs[col] = e
                    except Exception as ex:   # noqa: BLE001 - optional peers never stop the run
                        notes.append(f"{b}x{N} q{L} {col}: {str(ex)[:160]}")
            t = timer.interleaved(fns, notes, f"{b}x{N} q{L}")
            g = {}
            if latency:
                for n, fn in fns.items():
                    try:
                        g[n] = graph_time(fn, args.graph_calls, args.graph_replays)
                    except Exception as ex:   # noqa: BLE001 - a peer that cannot be captured
                        g[n] = None
                        notes.append(f"{b}x{N} q{L} {n}: graph capture failed: "
                                     f"{str(ex).splitlines()[0][:160]}")
                        torch.cuda.synchronize()
                graph_rows.append((b, N, L, g, expanded))
            head = t.get(f"fajit ps{ps0}")
            tbs = kv_bytes / (head * 1e-6) / 1e12 if head else None
            rows.append((b, N, L, dict(t=t, tbs=tbs, errs=errs, expanded=expanded,
                                       copy_rd=copy_rd, copy_rw=copy_rw), None))
            line = f"{tag}: " + "  ".join(f"{n} {v:.1f}" for n, v in t.items()) + " us"
            if tbs:
                line += f" | fajit ps{ps0} {tbs:.2f} TB/s = {100 * tbs / copy_rd:.0f}% copy read, " \
                        f"{100 * tbs / copy_rw:.0f}% copy r+w"
            line += " | max err " + ", ".join(f"{n} {fmt(e, '%.4f')}" for n, e in errs.items())
            print(line + f" ({time.time() - t_start:.0f} s)", flush=True)
            del q, ref, keep, fns
            torch.cuda.empty_cache()
        del kv, k, v, paged, flat
        torch.cuda.empty_cache()

    mixed_res = None if args.no_mixed else run_mixed(fj, timer, mixed, ps0, hq, hkv, hd, scale,
                                                     gen, args, notes, kernels)
    report(args, fj, rows, bw_rows, graph_rows, mixed_res, peers, opt, opt_cols, notes,
           kernels, page_sizes, q_lens, time.time() - t_start)
    torch.cuda.synchronize()
    fj.close()


def run_mixed(fj, timer, mixed, ps, hq, hkv, hd, scale, gen, args, notes, kernels):
    """P chunked-prefill sequences (NEW new tokens over PREFIX cached keys, bottom-right
    causal) and D decode rows (1 token over CTX keys), all paged: one fajit call (varlen
    cu_seqlens_q + block table + seqused_k) against the prefill call plus the decode call."""
    P, new, prefix, D, ctx = mixed
    b = P + D
    lens_q = [new] * P + [1] * D
    lens_k = [prefix + new] * P + [ctx] * D
    Nmax = max(lens_k)
    total_q = sum(lens_q)
    print(f"mixed: {P} x ({new} new over {prefix}) + {D} decode rows over {ctx}, page size "
          f"{ps}, one call vs two", flush=True)
    kv = torch.randn(2, b, Nmax, hkv, hd, dtype=torch.bfloat16, device=DEV)
    kvp, bt = make_paged(kv, ps, gen, args.pages_in_order)
    used = torch.tensor(lens_k, dtype=torch.int32, device=DEV)
    cu = torch.tensor([0] + list(itertools.accumulate(lens_q)), dtype=torch.int32,
                      device=DEV)
    qp = torch.randn(1, total_q, hq, hd, dtype=torch.bfloat16, device=DEV)
    keep = []
    try:
        o1 = torch.full_like(qp, float("nan"))
        d1 = fajit_desc(fj, qp, kvp[0], kvp[1], o1, Nmax, True, (bt, used), args.num_splits,
                        cu_seqlens_q=cu, total_q=total_q, seqlen_q=max(lens_q), batch=b)
        kernels[("mixed", "one call")] = fj.prepare(d1, keep)
        # the two calls on slices of the same tensors
        pre_rows = P * new
        q_pre = qp[0, :pre_rows].view(P, new, hq, hd)
        q_dec = qp[0, pre_rows:].view(D, 1, hq, hd)
        o2 = torch.full_like(qp, float("nan"))
        o_pre = o2[0, :pre_rows].view(P, new, hq, hd)
        o_dec = o2[0, pre_rows:].view(D, 1, hq, hd)
        d_pre = fajit_desc(fj, q_pre, kvp[0], kvp[1], o_pre, prefix + new, True,
                           (bt[:P], used[:P]), args.num_splits)
        d_dec = fajit_desc(fj, q_dec, kvp[0], kvp[1], o_dec, ctx, False, (bt[P:], used[P:]),
                           args.num_splits)
        kernels[("mixed", "prefill call")] = fj.prepare(d_pre, keep)
        kernels[("mixed", "decode call")] = fj.prepare(d_dec, keep)
        fj.fwd(d1)
        fj.fwd(d_pre)
        fj.fwd(d_dec)
        torch.cuda.synchronize()
    except RuntimeError as ex:
        notes.append(f"mixed batch: {ex}")
        print(f"mixed: failed: {ex}", flush=True)
        return None
    # reference: the prefill sequences one at a time, the decode rows together
    err_one, err_two = 0.0, 0.0
    for i in range(P):
        r = reference(q_pre[i:i + 1], kv[0, i:i + 1, :prefix + new], kv[1, i:i + 1, :prefix + new],
                      scale)
        err_one = max(err_one, max_err(o1[0, i * new:(i + 1) * new][None], r))
        err_two = max(err_two, max_err(o_pre[i:i + 1], r))
    r = reference(q_dec, kv[0, P:, :ctx], kv[1, P:, :ctx], scale)
    err_one = max(err_one, max_err(o1[0, pre_rows:].view(D, 1, hq, hd), r))
    err_two = max(err_two, max_err(o_dec, r))
    del r
    if max(err_one, err_two) > args.tol:
        msg = f"mixed batch aborted: max abs error one call {err_one:.3g}, two {err_two:.3g}"
        notes.append(msg)
        print(msg, flush=True)
        return None

    def both():
        fj.fwd(d_pre)
        fj.fwd(d_dec)
    t = timer.interleaved({"one call": lambda: fj.fwd(d1), "prefill": lambda: fj.fwd(d_pre),
                           "decode": lambda: fj.fwd(d_dec), "both": both})
    kv_bytes = sum(lens_k) * hkv * hd * 2 * 2
    res = dict(t=t, err_one=err_one, err_two=err_two, kv_bytes=kv_bytes, total_q=total_q,
               desc=f"{P} x {new} new over {prefix} + {D} x 1 over {ctx}, page size {ps}")
    print("mixed: " + "  ".join(f"{n} {v:.1f}" for n, v in t.items()) +
          f" us | one/(prefill+decode) {t['one call'] / (t['prefill'] + t['decode']):.2f}",
          flush=True)
    del kv, kvp, keep
    torch.cuda.empty_cache()
    return res


def report(args, fj, rows, bw_rows, graph_rows, mixed, peers, opt, opt_cols, notes, kernels,
           page_sizes, q_lens, elapsed):
    ps0 = page_sizes[0]
    others = page_sizes[1:]
    cmd = "python3 bench/bench_decode.py " + " ".join(sys.argv[1:])
    lines = [
        f"# fajit decode vs PyTorch SDPA and a copy, {torch.cuda.get_device_name()}, "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", "",
        f"Command: `{cmd}`  ",
        f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, fajit "
        f"{fj.lib.fajit_version_string().decode()}, python {platform.python_version()}; "
        f"run took {elapsed:.0f} s  ",
        f"bf16, heads {args.heads_q} query / {args.heads_kv} KV, head_dim {args.head_dim}; "
        f"q_len {','.join(map(str, q_lens))} (q_len > 1: bottom-right causal); fajit paged "
        f"page sizes {','.join(map(str, page_sizes))} (pages "
        f"{'in order' if args.pages_in_order else 'in random order'}, seqused_k "
        f"given), fajit num_splits {args.num_splits}; the peers on the contiguous tensors.  ",
        f"Times: us per call, median over {args.rounds} interleaved rounds (odd rounds "
        f"reversed) of the median of {args.reps} calls, each after a {args.flush_mib} MiB L2 "
        f"flush ({args.flush_mode}: "
        + ("a read of the buffer, clean L2" if args.flush_mode == "read" else
           "the buffer zeroed, dirty L2") + "), CUDA events. "
        f"fajit's decode loader: FAJIT_DECODE_LOADER={os.environ.get('FAJIT_DECODE_LOADER', 'auto')}. "
        "TB/s: K+V bytes of the keys in use / fajit paged "
        f"(page size {ps0}) time. %copy rd: that over the copy's read rate (bytes/time); "
        "%copy rw: over the copy's read+write rate (2*bytes/time, what DRAM sustains). "
        f"x FLASH, x CUDNN: peer time / fajit ps{ps0} time (>1: fajit faster). psN/contig: "
        "fajit paged time / fajit contiguous time (>1: paging costs). * after a peer's time: "
        "it ran with the KV heads expanded to the query heads (reads heads_q/heads_kv times "
        "the bytes; its GQA path was refused). max err: vs a float32 torch reference.", ""]
    hdr = (["shape", "q", "K+V MiB", f"fajit ps{ps0} us", "TB/s", "%copy rd", "%copy rw"] +
           [f"ps{p} us" for p in others] + ["contig us"] + [f"{p.name} us" for p in peers] +
           [f"{n} us" for n in opt_cols] + [f"x {p.name}" for p in peers] +
           [f"ps{p}/contig" for p in page_sizes] + ["max err"])
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for b, N, L, r, failed in rows:
        mib = 2 * b * N * args.heads_kv * args.head_dim * 2 / (1 << 20)
        if failed:
            lines.append(f"| {b}x{N} | {L} | {mib:.0f} | " + " | ".join(
                ["ABORTED: " + failed] + ["-"] * (len(hdr) - 4)) + " |")
            continue
        t, ex = r["t"], r["expanded"]
        f0 = t.get(f"fajit ps{ps0}")
        cells = [f"{b}x{N}", str(L), f"{mib:.0f}", fmt(f0), fmt(r["tbs"], "%.2f"),
                 fmt(ratio(r["tbs"], r["copy_rd"]) and 100 * ratio(r["tbs"], r["copy_rd"]), "%.0f%%"),
                 fmt(ratio(r["tbs"], r["copy_rw"]) and 100 * ratio(r["tbs"], r["copy_rw"]), "%.0f%%")]
        cells += [fmt(t.get(f"fajit ps{p}")) for p in others]
        cells.append(fmt(t.get("fajit contig")))
        cells += [fmt(t.get(p.name)) + (" *" if ex.get(p.name) else "") for p in peers]
        cells += [fmt(t.get(n)) for n in opt_cols]
        cells += [fmt(ratio(t.get(p.name), f0), "%.2f") for p in peers]
        cells += [fmt(ratio(t.get(f"fajit ps{p}"), t.get("fajit contig")), "%.2f")
                  for p in page_sizes]
        cells.append(", ".join(f"{n} {fmt(e, '%.4f')}" for n, e in r["errs"].items()))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Bandwidth ceiling per shape, same bytes as K+V: `dst.copy_(src)` on a flat "
              "buffer, and a read-only `src.sum(dtype=float32)`; same timing.", "",
              "| shape | K+V MiB | copy us | copy rw TB/s | copy rd TB/s | sum us | sum rd TB/s |",
              "|---|---|---|---|---|---|---|"]
    lines += ["| %dx%d | %.0f | %.1f | %.2f | %.2f | %.1f | %.2f |" % r for r in bw_rows]
    if graph_rows:
        names = [f"fajit ps{p}" for p in page_sizes] + ["fajit contig"] + \
            [p.name for p in peers] + opt_cols
        lines += ["", f"Latency-bound shapes (K+V < {args.graph_max_mib:g} MiB): us per call "
                  f"of {args.graph_calls} back-to-back calls captured in one CUDA graph "
                  f"(median of {args.graph_replays} replays; warm L2, no launch overhead). "
                  f"x: peer / fajit ps{ps0}.", "",
                  "| shape | q | " + " | ".join(names) + " | " +
                  " | ".join(f"x {p.name}" for p in peers) + " |",
                  "|" + "---|" * (2 + len(names) + len(peers))]
        for b, N, L, g, ex in graph_rows:
            f0 = g.get(f"fajit ps{ps0}")
            lines.append(f"| {b}x{N} | {L} | " + " | ".join(
                fmt(g.get(n)) + (" *" if ex.get(n) else "") for n in names) + " | " +
                " | ".join(fmt(ratio(g.get(p.name), f0), "%.2f") for p in peers) + " |")
    if mixed:
        t = mixed["t"]
        s = t["prefill"] + t["decode"]
        lines += ["", f"Mixed batch ({mixed['desc']}; {mixed['total_q']} query rows, "
                  f"{mixed['kv_bytes'] / (1 << 20):.0f} MiB of K+V in use), fajit only: one "
                  "call (varlen cu_seqlens_q + block_table + seqused_k) vs the prefill "
                  "sequences' call and the decode rows' call, on slices of the same tensors. "
                  "both: the two calls back to back, timed together.", "",
                  "| one call us | prefill us | decode us | prefill+decode us | both us | "
                  "one/(prefill+decode) | one/both | one call TB/s | max err one, two |",
                  "|---|---|---|---|---|---|---|---|---|",
                  "| %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.4f, %.4f |" % (
                      t["one call"], t["prefill"], t["decode"], s, t["both"], t["one call"] / s,
                      t["one call"] / t["both"], mixed["kv_bytes"] / (t["one call"] * 1e-6) / 1e12,
                      mixed["err_one"], mixed["err_two"])]
    lines += ["", "SDPA peers, the way each ran per q_len (first that ran and matched the "
              "reference; refused or wrong ways in brackets):", ""]
    for p in peers:
        for L in q_lens:
            if L in p.notes:
                lines.append(f"- {p.name} q_len {L}: {p.notes[L]}")
    for n, (_, status) in opt.items():
        lines.append(f"- {n}: {status}" + (
            "; q_len 1 only, paged (page size %d, fajit's pages and block table), backend "
            "fa2; FI tc: use_tensor_cores=True, FI cc: its CUDA-core decode kernel" % ps0
            if n == "flashinfer" else ""))
    if kernels:
        lines += ["", "fajit's kernels (fajit_dispatch_describe), one line per distinct "
                  "description:", ""]
        seen = {}
        for key, desc in kernels.items():
            seen.setdefault(desc, []).append(key)
        for desc, keys in seen.items():
            where = ", ".join("%s %s" % (f"{k[0]}x{k[1]} q{k[2]}" if len(k) == 4 else k[0],
                                         k[-1]) for k in keys[:4])
            more = f" (+{len(keys) - 4} more)" if len(keys) > 4 else ""
            lines.append(f"- `{desc}`: {where}{more}")
    body = "\n".join(lines)
    if decode_goals.reports(body):   # (head_dim 128, 32 / 8 heads: the goals' problems)
        lines += ["", "The serving goals (issue 18) on this report (bench/decode_goals.py): "
                  "what a shape or column the run left out cannot show is not measured.", "",
                  decode_goals.markdown(decode_goals.evaluate(body))]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
