#!/usr/bin/env bash
# dev/decode/fi_carry.sh - make carry/fi/ (git-ignored) HERE, on a machine with PyPI and no
# GPU: what the GPU host (no network) needs to run bench/bench_decode.py's flashinfer peer.
# There, `source dev/decode/fi_setup.sh` installs it. Run from the repo root:
#
#   bash dev/decode/fi_carry.sh            # wheels only (the host JIT-compiles, see below)
#   bash dev/decode/fi_carry.sh --aot      # + the decode modules precompiled for sm_90a
#   bash dev/decode/fi_carry.sh --aot-prefill   # + the paged prefill ones (fa2 and fa3)
#   bash dev/decode/fi_carry.sh --aot-fp8  # --aot's + the decode over e4m3 K/V (FP8 peer)
#
# What goes in carry/fi/ (under ~55 MB, so it travels in one device call's 64 MiB carry):
#   flashinfer_python-0.7.2.post1-1fajitslim-py3-none-any.whl  flashinfer-python 0.7.2.post1
#       with the CUDA sources of its other kernels (data/csrc/*/, 258 MB unpacked, most of its
#       62 MB) and CUTLASS's/CCCL's examples and python left out: all of its Python stays
#       (its __init__ imports every module), and so do the sources its paged decode builds
#       from (data/csrc/*.cu|*.h|*.jinja, data/include, cutlass/include, cccl, spdlog).
#   apache_tvm_ffi-*.whl  the one import-time dependency the host lacks (flashinfer's
#       kernels are tvm-ffi modules). The others in its metadata (nvidia-cudnn-frontend,
#       nvidia-cutlass-dsl, cuda-tile, nccl4py, nccl-extensions, cuda-python) are imported
#       lazily by other backends, not by `import flashinfer` nor by the fa2 decode path.
#   fi_aot_sm90a.tgz (--aot)  the two modules the decode wrapper loads for bf16, head_dim
#       128 (CUDA-core decode; tensor-core decode = the FA2 batch-prefill module), built for
#       sm_90a only, laid out as flashinfer/data/aot/<name>/<name>.so: flashinfer loads an
#       AOT module from there before it tries any JIT (flashinfer/jit/env.py
#       get_aot_artifacts), so the host compiles nothing. They depend on nothing but
#       libcudart.so.13 (torch's) and tvm-ffi. Every page size and GQA group is in them
#       (runtime dispatch); another head_dim or dtype is JIT-compiled on the host (if it
#       has nvcc).
#   fi_aot_sm90a.tgz (--aot-prefill)  those two, and what BatchPrefillWithPagedKVCacheWrapper
#       (kv_layout NHD) loads for bf16 q/k/v/o, head_dim 64 and 128: backend "fa2" -> the FA2
#       batch-prefill primary module (head_dim 128: the one above), backend "fa3" (and
#       "auto" on Hopper) -> the SM90 batch-prefill module (..._sm90). Page size, head counts
#       and causal/non-causal are runtime arguments. Only the paged kernels of mask modes
#       0 (none) and 1 (causal) are compiled into the batch-prefill modules, the --aot one
#       included (FI_AOT_TRIM, in the build step below). ~4 MB; with the wheels ~36 MB.
# Precompiling needs torch importable (flashinfer imports it): a Python 3.12 venv in /tmp
# with torch 2.11.0 from PyPI (the CUDA 13.0 build, as on the host; ~4 GB, no GPU used),
# and nvcc 13.0 at /usr/local/cuda. It takes ~5 minutes on 2 cores (--aot-prefill: ~25).
set -euo pipefail
FI_VER=0.7.2.post1
TVM_FFI_VER=0.1.15.post2
OUT=carry/fi
DL=carry/fi_dl            # the original downloads (not carried)
mkdir -p "$OUT" "$DL"
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    plat+=(--platform "$p")
done
for spec in "flashinfer-python==$FI_VER" "apache-tvm-ffi==$TVM_FFI_VER"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${plat[@]}" -d "$DL" "$spec"
done
cp "$DL"/apache_tvm_ffi-"$TVM_FFI_VER"-*.whl "$OUT"/

# the slim flashinfer wheel: same files less the sources of the kernels decode never builds,
# RECORD rewritten (sha256 of each kept file)
python3 - "$DL/flashinfer_python-$FI_VER-py3-none-any.whl" \
    "$OUT/flashinfer_python-$FI_VER-1fajitslim-py3-none-any.whl" <<'EOF'
import base64, hashlib, re, sys, zipfile
src, dst = sys.argv[1:]
drop = [re.compile(r) for r in (
    r"flashinfer/data/csrc/[^/]+/",                  # every kernel family's own folder
    r"flashinfer/data/cutlass/(?!include/|tools/util/include/)",
    r"flashinfer/data/cccl/python/",
)]
zin = zipfile.ZipFile(src)
rec_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
records, kept, left = [], 0, 0
with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for info in zin.infolist():
        n = info.filename
        if n == rec_name:
            continue
        if any(r.match(n) for r in drop):
            left += info.file_size
            continue
        data = zin.read(n)
        zout.writestr(info, data)
        if not n.endswith("/"):
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{n},sha256={h},{len(data)}")
        kept += info.file_size
    records.append(f"{rec_name},,")
    zout.writestr(rec_name, "\n".join(records) + "\n")
print(f"slim wheel: kept {kept / 1e6:.0f} MB unpacked, left out {left / 1e6:.0f} MB")
EOF

if [ "${1:-}" = "--aot" ] || [ "${1:-}" = "--aot-prefill" ] || [ "${1:-}" = "--aot-fp8" ]; then
    VENV=/tmp/fivenv SITE=/tmp/fisite WS=/tmp/fiws
    py312=$(python3.12 -V >/dev/null 2>&1 && echo python3.12 ||
            ls -d ~/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1)
    [ -x $VENV/bin/python ] || "${py312:-python3.12}" -m venv $VENV
    $VENV/bin/python -c "import torch" 2>/dev/null ||
        $VENV/bin/pip install -q torch==2.11.0 einops tabulate tqdm packaging requests \
            nvidia-ml-py click ninja cuda-core
    rm -rf $SITE $WS
    $VENV/bin/python -m pip install -q --no-index --no-deps --no-compile --target $SITE \
        "$OUT"/*.whl
    PYTHONPATH=$SITE FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE=$WS \
        MAX_JOBS=$(nproc) CUDA_HOME=/usr/local/cuda PATH=$VENV/bin:$PATH \
        $VENV/bin/python - "$1" <<'EOF'
# build, with no GPU, the modules the wrappers load for bf16 (o bf16, int32 indices, no
# RoPE / sliding window / soft cap / fp16 qk reduction: the args plan() passes):
#   --aot: BatchDecodeWithPagedKVCacheWrapper, head_dim 128: use_tensor_cores=False ->
#     gen_batch_decode_module, =True (backend fa2) -> the FA2 batch-prefill "primary"
#     module (prefill.py get_batch_prefill_module: URI ..._kv_stride_equal)
#   --aot-prefill: those + BatchPrefillWithPagedKVCacheWrapper, head_dim 64 and 128:
#     backend "fa2" -> the same FA2 primary module (its paged_run; the "independent
#     stride" module is only loaded when k_cache and v_cache strides differ), backend
#     "fa3" (and "auto" on Hopper: utils.py determine_attention_backend) -> the SM90
#     module gen_batch_prefill_module("fa3", ...) (URI ..._sm90).
# Page size, GQA group, head counts and causal/non-causal are runtime arguments of these.
# Each batch-prefill module instantiates paged and ragged kernels for 4 mask modes
# (0 none, 1 causal, 2 custom mask, 3 multi-item scoring). FI_AOT_TRIM=1 (default) builds
# only the paged kernels of mask modes 0 and 1 - what the paged wrappers run - and turns
# the other explicit instantiations into specializations returning cudaErrorNotSupported
# (the call then fails with "... failed with error: operation not supported"). A stub still
# parses the headers (fa3: ~110 s against ~185 s for a real file on this 2-core machine), so
# this saves ~40% of the nvcc time, and the device code of 3/4 of the kernels. FI_AOT_TRIM=0
# builds them all.
import os, re, sys, time, torch, flashinfer
from flashinfer.jit.attention.modules import (gen_batch_decode_module,
                                              gen_batch_prefill_module,
                                              _gen_batch_prefill_primary_module)
bf = torch.bfloat16
def args(d):
    return (bf, bf, bf, torch.int32, d, d, 0, False, False)
specs = [gen_batch_decode_module(*args(128)),
         _gen_batch_prefill_primary_module("fa2", *args(128), False)]
if sys.argv[1] == "--aot-fp8":     # + the CUDA-core decode over e4m3 K/V (bf16 q and o)
    specs.append(gen_batch_decode_module(bf, torch.float8_e4m3fn, bf, torch.int32, 128, 128,
                                         0, False, False))
if sys.argv[1] == "--aot-prefill":
    specs += [_gen_batch_prefill_primary_module("fa2", *args(64), False),
              gen_batch_prefill_module("fa3", *args(128), False),
              gen_batch_prefill_module("fa3", *args(64), False)]
inst = re.compile(r"template cudaError_t (\w+)\s*<(.*?)>\((.*?)\);", re.S)
for s in specs:
    for src in s.sources if os.environ.get("FI_AOT_TRIM", "1") == "1" else ():
        m = re.search(r"_kernel_mask_(\d)\.cu$", src.name)
        if m and ("ragged" in src.name or m[1] in "23"):
            txt, n = inst.subn(lambda i: f"template <> cudaError_t {i[1]}<{i[2]}>({i[3]}) "
                               "{ return cudaErrorNotSupported; }", src.read_text())
            assert n, src
            src.write_text(txt)    # the spec wrote it; build() only writes build.ninja
    t = time.time()
    s.build()
    print(f"built {s.name} in {time.time() - t:.0f} s", flush=True)
EOF
    rm -rf /tmp/fi_aot && mkdir -p /tmp/fi_aot/aot
    for d in $WS/.cache/flashinfer/*/90a/cached_ops/*/; do
        n=$(basename "$d")
        mkdir -p /tmp/fi_aot/aot/"$n" && cp "$d/$n.so" /tmp/fi_aot/aot/"$n"/
    done
    tar -czf "$OUT"/fi_aot_sm90a.tgz -C /tmp/fi_aot aot   # unpacks into flashinfer/data
    ls -l /tmp/fi_aot/aot/*/
fi
ls -l "$OUT"
du -cb "$OUT"/* | tail -1
