"""fajit - FlashAttention kernels compiled at run time with NVRTC, cached in SQLite.

A ctypes binding over libfajit (include/fajit.h); no compiled extension. Without torch:
Context, info, plan, warm, tune, Error, __version__. With torch (imported here when it is
installed): attention, attention_with_kvcache, flash_attn_varlen_func and merge_attention on
CUDA tensors, and prepare_kvcache (attention_with_kvcache checked once, launched per layer). Eager calls go straight to the C library with a cached descriptor; under
torch.compile they are the custom ops torch.ops.fajit.fwd / .fwd_out / .merge, and CUDA
graph capture records them either way.
"""
import atexit
import ctypes as C
import importlib.util
import os
import threading

from ._lib import (AttnDesc, Counters, CtxOpts, DeviceInfo, Error, LOG_FN, Sysinfo, TUNE_FN,
                   TuneOpts, invalid, lib)

__version__ = lib.fajit_version_string().decode()

DEVICE_NONE = -1
_POLICIES = {"blocking": 0, "fallback": 1, "strict": 2}
_FAMILIES = {"auto": 0, "fa2": 2, "fa3": 3, "decode": 4, "fa4": 5, "mixed": 6}
_LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
_MASKS = {"none": 0, "causal": 1, "window": 2}
_DTYPES = {"f16": 0, "bf16": 1}


def _pick(table, value, what):
    if value not in table:
        raise invalid(f"{what} must be one of {', '.join(table)}, got {value!r}")
    return table[value]


class Context:
    """One fajit context (fajit_ctx): a device (an ordinal, or None for a compile-only
    context that plans and warms for named targets), its cache and policy. Thread-safe;
    close() (or the end of a `with` block) releases it."""

    def __init__(self, device=0, *, cache_dir=None, policy="blocking", family="auto",
                 log=None, log_level="warn", cache_max_bytes=0, checked=False):
        self._ptr = C.c_void_p()
        if device is not None and hasattr(device, "index"):   # a torch.device
            device = device.index or 0
        o = CtxOpts()
        lib.fajit_ctx_opts_init_sized(C.byref(o), C.sizeof(o))
        o.device = DEVICE_NONE if device is None else int(device)
        o.cache_dir = None if cache_dir is None else os.fsencode(cache_dir)
        o.policy = _pick(_POLICIES, policy, "policy")
        o.family = _pick(_FAMILIES, family, "family")
        o.log_level = _pick(_LOG_LEVELS, log_level, "log_level")
        o.cache_max_bytes = int(cache_max_bytes)
        o.checked = 1 if checked else 0
        self._log = None
        if log is not None:   # log(level_name, message); called from any thread
            names = list(_LOG_LEVELS)
            self._log = LOG_FN(lambda user, level, msg: log(names[level], msg.decode(
                errors="replace")))
            o.log = C.cast(self._log, C.c_void_p)
        self.device = None if device is None else int(device)
        st = lib.fajit_ctx_create(C.byref(self._ptr), C.byref(o))
        if st:
            msg = self.errmsg()
            lib.fajit_ctx_destroy(self._ptr)
            self._ptr = C.c_void_p()
            raise Error(st, msg or lib.fajit_strerror(st).decode())

    @property
    def ptr(self):
        if not self._ptr:
            raise invalid("the context is closed")
        return self._ptr

    def errmsg(self):
        return lib.fajit_errmsg(self._ptr).decode(errors="replace")

    def check(self, st):
        """Raises Error for a non-zero status, with this thread's message."""
        if st:
            raise Error(st, self.errmsg() or lib.fajit_strerror(st).decode())

    def close(self):
        if self._ptr:
            lib.fajit_ctx_destroy(self._ptr)
            self._ptr = C.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def counters(self):
        c = Counters()
        lib.fajit_counters_get(self.ptr, C.byref(c))
        out = {name: getattr(c, name) for name, _ in Counters._fields_}
        out["hits_other_nvrtc"] = lib.fajit_hits_other_nvrtc(self.ptr)   # of hits_disk
        return out

    def sysinfo(self):
        s = Sysinfo()
        self.check(lib.fajit_sysinfo_get(self.ptr, C.byref(s)))
        return s

    @property
    def cache_path(self):
        p = self.sysinfo().cache_path
        return None if p is None else os.fsdecode(p)

    def device_info(self, ordinal=None):
        di = DeviceInfo()
        self.check(lib.fajit_device_info_get(self.ptr, self.device if ordinal is None
                                             else ordinal, C.byref(di)))
        return {"name": di.name.decode(), "cc": (di.cc_major, di.cc_minor),
                "arch": di.arch.decode(), "sm_count": di.sm_count, "total_mem": di.total_mem}

    def plan(self, **problem):
        return plan(context=self, **problem)

    def warm(self, arch, spec=None, jobs=0):
        return warm(arch, spec=spec, jobs=jobs, context=self)

    def tune(self, spec, **opts):
        return tune(spec, context=self, **opts)


_defaults = {}
_defaults_lock = threading.Lock()


def default_context(device):
    """The context fajit's functions use for `device` (an ordinal; None: compile-only),
    created on first use with the defaults (and the FAJIT_* variables)."""
    with _defaults_lock:
        ctx = _defaults.get(device)
        if ctx is None:
            ctx = _defaults[device] = Context(device)
        return ctx


@atexit.register
def _close_defaults():
    """Before the interpreter tears modules down (background compiles joined, cache closed)."""
    with _defaults_lock:
        for ctx in _defaults.values():
            ctx.close()
        _defaults.clear()


def info():
    """Versions, driver, NVRTC, devices and cache, as a dict; works without a GPU."""
    ctx = default_context(None)
    s = ctx.sysinfo()
    devices = []
    for i in range(s.device_count):
        try:
            devices.append(ctx.device_info(i))
        except Error:
            pass
    return {"version": __version__,
            "driver_version": s.driver_version if s.driver_loaded else None,
            "nvrtc_version": (s.nvrtc_major, s.nvrtc_minor) if s.nvrtc_loaded else None,
            "nvrtc": lib.fajit_nvrtc_describe().decode(errors="replace"),
            "device_count": s.device_count, "devices": devices,
            "cache_path": None if s.cache_path is None else os.fsdecode(s.cache_path),
            "cache_readonly": bool(s.cache_readonly)}


def _shape_desc(head_dim, dtype, mask, window, seqlen_q, seqlen_k, batch, heads_q, heads_kv,
                page_size):
    """A descriptor of a problem's shape only (its pointers are never read)."""
    d = AttnDesc()
    p = 0x100000
    lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), p, p, p, p, batch, heads_q,
                                   heads_kv, seqlen_q, seqlen_k, head_dim,
                                   _pick(_DTYPES, dtype, "dtype"))
    d.mask = _pick(_MASKS, mask, "mask")
    if d.mask == _MASKS["window"]:
        d.window_left, d.window_right = window if window is not None else (256, 0)
    if page_size:
        d.block_table = 0x200000
        d.page_size = page_size
        d.block_table_stride = -(-seqlen_k // page_size)
        d.num_pages = d.block_table_stride * batch
    return d


def plan(*, arch=None, head_dim=128, dtype="bf16", mask="causal", window=None, seqlen=4096,
         seqlen_q=None, seqlen_k=None, batch=1, heads_q=16, heads_kv=None, page_size=None,
         num_splits=0, num_splits_max=0, context=None):
    """The one line fajit_dispatch_describe gives for a problem on target `arch`
    ("sm_90a"; None: the context's device): family, tile, launch shape (with num_splits a
    forced split count, with num_splits_max fajit's own count at most that). Compiles
    nothing; with arch given it needs no GPU (the default context is then compile-only)."""
    ctx = context or default_context(None if arch else 0)
    d = _shape_desc(head_dim, dtype, mask, window, seqlen if seqlen_q is None else seqlen_q,
                    seqlen if seqlen_k is None else seqlen_k, batch, heads_q,
                    heads_q if heads_kv is None else heads_kv, page_size)
    d.num_splits, d.num_splits_max = num_splits, num_splits_max
    buf = C.create_string_buffer(512)
    ctx.check(lib.fajit_dispatch_describe(ctx.ptr, arch.encode() if arch else None,
                                          C.byref(d), buf, len(buf)))
    return buf.value.decode()


def warm(arch, *, spec=None, jobs=0, context=None):
    """Compiles every kernel fajit ships (or every one `spec` needs) for target `arch` into
    the cache; no GPU needed. Returns (compiled now, already cached)."""
    ctx = context or default_context(None)
    n, c = C.c_int(), C.c_int()
    if spec is None:
        st = lib.fajit_warm(ctx.ptr, arch.encode(), jobs, C.byref(n), C.byref(c))
    else:
        st = lib.fajit_warm_spec(ctx.ptr, os.fsencode(spec), arch.encode(), jobs, C.byref(n),
                                 C.byref(c))
    ctx.check(st)
    return n.value, c.value


def tune(spec, *, reps=20, noise_band=0.03, pin=False, force=False, context=None):
    """Tunes every shape of `spec` (a spec file or preset name) on GPU `context.device`
    (default 0) and stores the winners; returns one dict per shape."""
    ctx = context or default_context(0)
    o = TuneOpts()
    lib.fajit_tune_opts_init_sized(C.byref(o), C.sizeof(o))
    o.reps, o.noise_band, o.pin, o.force = reps, noise_band, int(pin), int(force)
    rows = []

    def on_result(user, r):
        r = r.contents
        rows.append({name: (v.decode() if isinstance(v, bytes) else v)
                     for name, v in ((n, getattr(r, n)) for n, _ in r._fields_)})
    fn = TUNE_FN(on_result)
    ctx.check(lib.fajit_tune_spec(ctx.ptr, os.fsencode(spec), C.byref(o), fn, None))
    return rows


if importlib.util.find_spec("torch") is not None:
    from ._torch import (attention, attention_with_kvcache,  # noqa: E402,F401
                         flash_attn_varlen_func, merge_attention)
    from ._prepared import PreparedKVCache, prepare_kvcache  # noqa: E402,F401
else:
    def attention(*args, **kwargs):
        """Needs PyTorch (not installed)."""
        raise ImportError("fajit.attention needs PyTorch (torch is not installed)")

    attention_with_kvcache = flash_attn_varlen_func = merge_attention = attention
    prepare_kvcache = attention
