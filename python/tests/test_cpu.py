"""The parts of fajit that need no GPU and no torch: loading, version, info, plan and warm on a
compile-only context, options and errors."""
import os
import re

import pytest

import fajit
from conftest import ROOT


def test_version_is_the_headers():
    header = os.path.join(ROOT, "include", "fajit.h")
    if not os.path.exists(header):
        pytest.skip("not run from a source tree")
    want = re.search(r'#define FAJIT_VERSION_STRING "(.*)"', open(header).read()).group(1)
    assert fajit.__version__ == want


def test_info_without_or_with_a_gpu():
    i = fajit.info()
    assert i["version"] == fajit.__version__
    assert i["device_count"] == len(i["devices"])
    if i["driver_version"] is None:        # no driver: nothing to list, and no failure
        assert i["device_count"] == 0
    for d in i["devices"]:
        assert d["arch"].startswith("sm_") and d["sm_count"] > 0
    # which NVRTC: "13.0 from /path (rule)", or "not loaded: why"
    if i["nvrtc_version"] is None:
        assert i["nvrtc"].startswith("not loaded: "), i["nvrtc"]
    else:
        assert i["nvrtc"].startswith("%d.%d from " % i["nvrtc_version"]), i["nvrtc"]


def test_plan_for_named_targets():
    hopper = fajit.plan(arch="sm_90a", head_dim=128, seqlen=8192)
    assert hopper.startswith("fa3 bf16 d128 causal"), hopper
    ampere = fajit.plan(arch="sm_80", head_dim=64, mask="none", dtype="f16", seqlen=2048)
    assert ampere.startswith("fa2 f16 d64 none"), ampere
    decode = fajit.plan(arch="sm_90a", seqlen_q=1, seqlen_k=32768, heads_q=32, heads_kv=8,
                        page_size=16)
    assert decode.startswith("dec bf16 d128") and "splits" in decode, decode
    prefill = fajit.plan(arch="sm_90a", seqlen_q=4096, seqlen_k=4096, heads_q=32, heads_kv=8,
                         page_size=16)   # paged prefill: the Hopper kernel by default
    assert prefill.startswith("fa3 bf16 d128 causal") and " paged" in prefill, prefill
    window = fajit.plan(arch="sm_80", mask="window", window=(128, 0))
    assert " win" in window or "window" in window, window


def test_plan_errors_name_the_rule():
    with pytest.raises(fajit.Error) as e:
        fajit.plan(arch="sm_90a", head_dim=100)
    assert e.value.name == "FAJIT_UNSUPPORTED" and e.value.status == 2
    assert "head_dim must be a multiple of 8" in e.value.message and "got 100" in str(e.value)
    assert not e.value.message.startswith("FAJIT_")   # the name is not repeated
    with pytest.raises(fajit.Error) as e:
        fajit.plan(arch="sm_90a", heads_q=30, heads_kv=8)
    assert e.value.name == "FAJIT_INVALID_ARGUMENT"
    with pytest.raises(fajit.Error, match="dtype must be one of f16, bf16, got 'fp8'"):
        fajit.plan(arch="sm_90a", dtype="fp8")
    with pytest.raises(fajit.Error, match="sm_70"):
        fajit.plan(arch="sm_70")


def test_plan_split_bound():
    """num_splits_max caps fajit's own split count (vLLM's num_splits is such a bound); a
    loose bound changes nothing; bad values name the rule."""
    shape = dict(arch="sm_90a", seqlen_q=1, seqlen_k=32768, heads_q=32, heads_kv=8,
                 page_size=16)
    free = fajit.plan(**shape)
    n = int(re.search(r"(\d+) splits? of", free).group(1))
    assert n > 4, free
    bound = fajit.plan(num_splits_max=4, **shape)
    assert "4 splits of" in bound and "at most 4" in bound, bound
    assert fajit.plan(num_splits_max=128, **shape).replace(", at most 128", "") == free
    for kw, msg in ((dict(num_splits_max=-1), "num_splits_max must be in [0, 128]"),
                    (dict(num_splits_max=129), "got 129"),
                    (dict(num_splits=8, num_splits_max=4),
                     "num_splits (8, a forced count) must be at most num_splits_max (4")):
        with pytest.raises(fajit.Error) as e:
            fajit.plan(**kw, **shape)
        assert e.value.name == "FAJIT_INVALID_ARGUMENT" and msg in e.value.message


def test_compile_only_context(tmp_path):
    with fajit.Context(None, cache_dir=str(tmp_path), policy="strict") as ctx:
        assert ctx.cache_path == str(tmp_path / "kernels.db")
        assert set(ctx.counters()) >= {"calls", "compiles", "hits_disk", "compile_seconds",
                                       "hits_other_nvrtc"}
        assert all(v == 0 for v in ctx.counters().values())
        assert ctx.plan(arch="sm_100a").split()[0] == "fa4"  # the Blackwell family
        with pytest.raises(fajit.Error) as e:
            ctx.tune("llama-3-8b")
        assert e.value.name == "FAJIT_NO_DEVICE"
        with pytest.raises(fajit.Error) as e:
            ctx.warm("sm_999")
        assert e.value.name in ("FAJIT_INVALID_ARGUMENT", "FAJIT_UNSUPPORTED")
        assert "sm_999" in e.value.message
        with pytest.raises(fajit.Error) as e:
            ctx.warm("sm_90a", spec=str(tmp_path / "missing.spec"))
        assert "cannot read" in e.value.message and "llama-3-8b" in e.value.message
    with pytest.raises(fajit.Error, match="the context is closed"):
        ctx.counters()


def test_memory_only_cache():
    with fajit.Context(None, cache_dir="") as ctx:
        assert ctx.cache_path is None


def test_bad_options():
    with pytest.raises(fajit.Error, match="policy must be one of blocking, fallback, strict"):
        fajit.Context(None, policy="eager")
    with pytest.raises(fajit.Error, match="family must be one of"):
        fajit.Context(None, family="fa9")


def test_log_callback(tmp_path):
    (tmp_path / "file").write_text("")
    seen = []
    with fajit.Context(None, cache_dir=str(tmp_path / "file" / "x"),
                       log=lambda lvl, msg: seen.append((lvl, msg)), log_level="info") as ctx:
        assert ctx.cache_path is None
    assert ("warn", f"cache: cannot use directory '{tmp_path}/file/x' (Not a directory); "
            "using memory only") in seen
    assert any(lvl == "info" and msg.startswith("context: device -1") for lvl, msg in seen)


def test_context_on_a_machine_without_a_driver():
    if fajit.info()["driver_version"] is not None:
        pytest.skip("a CUDA driver loads here")
    with pytest.raises(fajit.Error) as e:
        fajit.Context(0)
    assert e.value.name == "FAJIT_NO_DRIVER" and "libcuda.so.1" in e.value.message


def test_the_library_loaded_is_the_one_asked_for():
    want = os.environ.get("FAJIT_LIB")
    if want:
        assert os.path.samefile(fajit._lib.lib._name, want)
    else:
        assert os.path.dirname(fajit._lib.lib._name) == os.path.dirname(fajit.__file__)


def test_attn_desc_mirror_matches_the_library():
    """The ctypes fajit_attn_desc has the C struct's size (the library names its own when a
    larger struct sets a byte past it) and its appended fields sit where C reads them (each
    one set alone draws the library's rule for that field)."""
    import ctypes as C
    from fajit._lib import AttnDesc, lib
    # LP64 offsets of the C header's layout: an int64 or pointer after an odd int count
    # takes 4 bytes of padding (before alibi_batch_stride and k_descale)
    want = {"num_splits_max": 292, "softcap": 296, "sinks": 304, "alibi_slopes": 312,
            "alibi_batch_stride": 320, "head_dim_v": 328, "kv_dtype": 332, "k_descale": 336,
            "v_descale": 344, "descale_batch_stride": 352, "descale_head_stride": 360}
    if C.sizeof(C.c_void_p) == 8:
        assert {n: getattr(AttnDesc, n).offset for n in want} == want
        assert C.sizeof(AttnDesc) == 368

    class Larger(C.Structure):
        _fields_ = [("d", AttnDesc), ("extra", C.c_uint64)]

    with fajit.Context(None, cache_dir="") as ctx:
        big = Larger()
        lib.fajit_attn_desc_init_sized(C.byref(big.d), C.sizeof(big), *(0x100000,) * 4, 2, 8,
                                       2, 1, 64, 128, 1)
        assert lib.fajit_attn_check(ctx.ptr, C.byref(big.d)) == 0
        big.extra = 1
        assert lib.fajit_attn_check(ctx.ptr, C.byref(big.d)) == 1
        assert f"larger than this library's {C.sizeof(AttnDesc)}, and byte " \
               f"{C.sizeof(AttnDesc)} is not zero" in ctx.errmsg()

        def check(**fields):
            d = AttnDesc()
            lib.fajit_attn_desc_init_sized(C.byref(d), C.sizeof(d), *(0x100000,) * 4, 2, 8,
                                           2, 1, 64, 128, 1)
            for name, value in fields.items():
                setattr(d, name, value)
            assert lib.fajit_attn_check(ctx.ptr, C.byref(d)) == 1, fields
            return ctx.errmsg()

        assert "softcap must be finite and >= 0" in check(softcap=-1.0)
        assert "sinks must be 4-byte aligned, got 0x100001" in check(sinks=0x100001)
        assert "alibi_slopes must be 4-byte aligned" in check(alibi_slopes=0x100001)
        assert "alibi_batch_stride must be 0" in check(alibi_slopes=0x100000,
                                                        alibi_batch_stride=-5)
        assert "kv_dtype must be AS_Q (0)" in check(kv_dtype=3)
        assert "kv_dtype e4m3 needs k_descale and v_descale" in check(kv_dtype=1)
        p = 0x100000
        assert "got 0 and -1" in check(kv_dtype=1, k_descale=p, v_descale=p,
                                       descale_head_stride=-1)
        assert "got -1 and 0" in check(kv_dtype=1, k_descale=p, v_descale=p,
                                       descale_batch_stride=-1)
