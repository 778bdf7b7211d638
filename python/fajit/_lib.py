"""_lib.py - libfajit through ctypes: finding and loading the library, mirrors of the public
structs of include/fajit.h, the function signatures, and Error. No torch here."""
import ctypes as C
import os

# Mirrors of fajit_ctx_opts, fajit_attn_desc, fajit_merge_desc and fajit_tune_opts, field by
# field. They are
# filled by the *_init_sized functions with their own size (struct_size first: "Growing
# structs" in fajit.h); check_layout() refuses a library whose defaults read back wrong.


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
         ("block_table", C.c_void_p), ("block_table_stride", C.c_int64),
         ("page_size", C.c_int), ("num_pages", C.c_int),
         ("k_page_stride", C.c_int64), ("v_page_stride", C.c_int64),
         ("seqused_k", C.c_void_p), ("num_splits", C.c_int), ("num_splits_max", C.c_int),
         # model features (ctypes pads as C does: 4 bytes before alibi_batch_stride and
         # before k_descale)
         ("softcap", C.c_float), ("sinks", C.c_void_p), ("alibi_slopes", C.c_void_p),
         ("alibi_batch_stride", C.c_int64), ("head_dim_v", C.c_int),
         ("kv_dtype", C.c_int),   # fajit_kv_dtype, a C enum
         ("k_descale", C.c_void_p), ("v_descale", C.c_void_p),
         ("descale_batch_stride", C.c_int64), ("descale_head_stride", C.c_int64)]


class MergeDesc(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("o_a", C.c_void_p), ("o_b", C.c_void_p),
                ("lse_a", C.c_void_p), ("lse_b", C.c_void_p), ("o", C.c_void_p),
                ("lse", C.c_void_p)] + \
        [(f"{t}_{s}_stride", C.c_int64) for t in ("a", "b", "o", "lse")
         for s in ("batch", "row", "head")] + \
        [(n, C.c_int) for n in ("batch", "seqlen", "heads", "head_dim", "dtype")]


class TuneOpts(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("reps", C.c_int), ("noise_band", C.c_double),
                ("pin", C.c_int), ("force", C.c_int)]


class Sysinfo(C.Structure):
    _fields_ = [("driver_loaded", C.c_int), ("driver_version", C.c_int),
                ("nvrtc_loaded", C.c_int), ("nvrtc_major", C.c_int), ("nvrtc_minor", C.c_int),
                ("device_count", C.c_int), ("cache_path", C.c_char_p),
                ("cache_readonly", C.c_int)]


class DeviceInfo(C.Structure):
    _fields_ = [("name", C.c_char * 256), ("cc_major", C.c_int), ("cc_minor", C.c_int),
                ("sm_count", C.c_int), ("arch", C.c_char * 16), ("total_mem", C.c_size_t)]


class Counters(C.Structure):
    _fields_ = [(n, C.c_uint64) for n in ("calls", "hits_memory", "hits_disk", "misses",
                                          "compiles")] + \
        [("compile_seconds", C.c_double)] + \
        [(n, C.c_uint64) for n in ("corrupt_entries", "lease_waits", "serving_compiles",
                                   "background_compiles", "fallback_launches")]


class TuneResult(C.Structure):
    _fields_ = [("signature", C.c_char * 128), ("bucket", C.c_char * 16),
                ("seqlen_q", C.c_int), ("seqlen_k", C.c_int), ("batch", C.c_int),
                ("winner", C.c_char * 32), ("default_config", C.c_char * 32),
                ("winner_ms", C.c_double), ("default_ms", C.c_double),
                ("candidates", C.c_int), ("pruned", C.c_int), ("from_cache", C.c_int)]


TUNE_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(TuneResult))
LOG_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_char_p)

STATUS_NAMES = {}   # filled from the library: value -> "FAJIT_INVALID_ARGUMENT"


class Error(RuntimeError):
    """A fajit call failed: `status` (the fajit_status value), `name` ("FAJIT_NO_DEVICE")
    and `message` (fajit_errmsg's details, or the rule the binding checked)."""

    def __init__(self, status, message):
        self.status = int(status)
        self.name = STATUS_NAMES.get(self.status, f"FAJIT_STATUS_{self.status}")
        prefix = self.name + ": "   # fajit_errmsg starts with the name already
        self.message = message[len(prefix):] if message.startswith(prefix) else message
        super().__init__(f"{self.name}: {self.message}")


INVALID_ARGUMENT, UNSUPPORTED = 1, 2


class Unsupported(Error, NotImplementedError):
    """FAJIT_UNSUPPORTED from a rule the binding checks itself (an argument or a dtype that
    fajit does not serve): a fajit.Error and a NotImplementedError."""

    def __init__(self, message):
        super().__init__(UNSUPPORTED, message)


def invalid(message):
    """An Error with FAJIT_INVALID_ARGUMENT, for rules the binding checks itself."""
    return Error(INVALID_ARGUMENT, message)


def _candidates():
    env = os.environ.get("FAJIT_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, "libfajit.so"), "libfajit.so.0"]


def _load():
    errors = []
    for path in _candidates():
        try:
            return C.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("fajit: libfajit could not be loaded (FAJIT_LIB names it):\n  " +
                      "\n  ".join(errors))


def _declare(L):
    P, I, S, V, D = C.c_void_p, C.c_int, C.c_char_p, None, C.POINTER
    sigs = {
        "fajit_version_string": (S, []), "fajit_version_number": (C.c_uint, []),
        "fajit_status_name": (S, [I]), "fajit_strerror": (S, [I]),
        "fajit_errmsg": (S, [P]), "fajit_compile_log": (S, [P]),
        "fajit_ctx_opts_init_sized": (V, [D(CtxOpts), C.c_size_t]),
        "fajit_ctx_create": (I, [D(P), D(CtxOpts)]), "fajit_ctx_destroy": (V, [P]),
        "fajit_attn_desc_init_sized": (V, [D(AttnDesc), C.c_size_t] + [P] * 4 + [I] * 7),
        "fajit_attn_check": (I, [P, D(AttnDesc)]),
        "fajit_attn_fwd": (I, [P, D(AttnDesc), P]),
        "fajit_attn_fwd_reference": (I, [P, D(AttnDesc), P]),
        "fajit_dispatch_describe": (I, [P, S, D(AttnDesc), C.c_char_p, C.c_size_t]),
        "fajit_attn_workspace_size": (I, [P, D(AttnDesc), D(C.c_size_t)]),
        "fajit_merge_desc_init_sized": (V, [D(MergeDesc), C.c_size_t] + [P] * 6 + [I] * 5),
        "fajit_attn_merge": (I, [P, D(MergeDesc), P]),
        "fajit_counters_get": (V, [P, D(Counters)]),
        "fajit_sysinfo_get": (I, [P, D(Sysinfo)]),
        "fajit_device_info_get": (I, [P, I, D(DeviceInfo)]),
        "fajit_warm": (I, [P, S, I, D(I), D(I)]),
        "fajit_warm_spec": (I, [P, S, S, I, D(I), D(I)]),
        "fajit_tune_opts_init_sized": (V, [D(TuneOpts), C.c_size_t]),
        "fajit_tune_spec": (I, [P, S, D(TuneOpts), TUNE_FN, P]),
        "fajit_family_name": (S, [I]),
        "fajit_hits_other_nvrtc": (C.c_uint64, [P]), "fajit_nvrtc_describe": (S, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    s = 0
    while True:
        name = L.fajit_status_name(s).decode()
        if name == "FAJIT_UNKNOWN_STATUS":
            break
        STATUS_NAMES[s] = name
        s += 1


def check_layout(L):
    """The init functions write struct_size bytes and known defaults: a mirror whose fields
    are out of place reads them back wrong."""
    o = CtxOpts()
    L.fajit_ctx_opts_init_sized(C.byref(o), C.sizeof(o))
    d = AttnDesc()
    C.memset(C.byref(d), 0xA5, C.sizeof(d))   # every byte must be written by init
    L.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), *(0,) * 4, 3, 8, 2, 16, 32, 64, 1)
    t = TuneOpts()
    L.fajit_tune_opts_init_sized(C.byref(t), C.sizeof(t))
    ok = (o.struct_size == C.sizeof(o) and o.log_level == 1 and o.device == 0 and
          o.checked == 0 and d.struct_size == C.sizeof(d) and d.window_left == -1 and
          d.dtype == 1 and d.head_dim == 64 and d.k_batch_stride == 64 * 2 * 32 and
          abs(d.softmax_scale - 0.125) < 1e-7 and d.op == 0 and d.workspace_bytes == 0 and
          d.block_table is None and d.page_size == 0 and d.seqused_k is None and
          d.num_splits == 0 and d.num_splits_max == 0 and d.softcap == 0 and
          d.sinks is None and d.alibi_batch_stride == 0 and d.kv_dtype == 0 and
          d.v_descale is None and d.descale_head_stride == 0 and t.reps == 20 and
          abs(t.noise_band - 0.03) < 1e-12)
    m = MergeDesc()
    C.memset(C.byref(m), 0xA5, C.sizeof(m))
    L.fajit_merge_desc_init_sized(C.byref(m), C.sizeof(m), *(0,) * 6, 2, 3, 4, 8, 1)
    ok = ok and (m.struct_size == C.sizeof(m) and m.a_head_stride == 8 and
                 m.b_row_stride == 32 and m.o_batch_stride == 96 and m.lse_row_stride == 1 and
                 m.lse_head_stride == 3 and m.lse_batch_stride == 12 and m.head_dim == 8 and
                 m.dtype == 1)
    if not ok:
        raise ImportError("fajit: this libfajit's structs do not match the binding "
                          "(python/fajit/_lib.py against include/fajit.h)")


lib = _load()
_declare(lib)
check_layout(lib)
