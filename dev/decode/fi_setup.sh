# dev/decode/fi_setup.sh - make FlashInfer importable on the GPU host (no network) from what
# dev/decode/fi_carry.sh put in carry/fi/ (git-ignored: name carry/fi in the device call's
# carry list). Meant to be sourced, from the repo root, before bench/bench_decode.py or a
# bench that uses bench/fi_prefill.py (FlashInfer's paged prefill):
#
#   source dev/decode/fi_setup.sh && python3 bench/bench_decode.py --lib build/libfajit.so ...
#
# It installs the wheels into $FI_SITE (default /tmp/site) and puts that on PYTHONPATH,
# unpacks the precompiled sm_90a modules (fi_aot_sm90a.tgz: decode, and with --aot-prefill
# the fa2/fa3 paged prefill for bf16 head_dim 64/128) where flashinfer loads them without
# compiling (flashinfer/data/aot/), and sets what a JIT build that is still needed (another
# head_dim or dtype; only where nvcc exists) uses: sm_90a only, 16 jobs, a cache under /tmp.
FI_SITE=${FI_SITE:-/tmp/site}
if [ ! -d carry/fi ]; then
    echo "fi_setup: no carry/fi here (run from the repo root, with carry/fi carried)" >&2
    return 1 2>/dev/null || exit 1
fi
# the wheels (--no-deps: torch, numpy, jinja2 ... are the host's own)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$FI_SITE" carry/fi/*.whl ||
    # no pip in this python: a wheel without a .data folder is just its files, unzipped
    for w in carry/fi/*.whl; do python3 -m zipfile -e "$w" "$FI_SITE"; done
export PYTHONPATH="$FI_SITE${PYTHONPATH:+:$PYTHONPATH}"
# precompiled modules -> $FI_SITE/flashinfer/data/aot/<name>/<name>.so
for t in carry/fi/*.tgz; do
    [ -e "$t" ] && tar -xzf "$t" -C "$FI_SITE/flashinfer/data"
done
# for any JIT build (flashinfer/jit: compilation_context.py, cpp_ext.py, env.py)
export FLASHINFER_CUDA_ARCH_LIST="9.0a"          # sm_90a only, not every visible GPU's
export MAX_JOBS=16                                # ninja -j
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/fi_ws}   # .cache/flashinfer
[ -n "${CUDA_HOME:-}" ] || ! [ -x /usr/local/cuda/bin/nvcc ] || export CUDA_HOME=/usr/local/cuda
# flashinfer runs `ninja` from PATH: the pip package's binary if there is no other
command -v ninja >/dev/null ||
    export PATH="$PATH:$(python3 -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null)"
python3 -c "import flashinfer, flashinfer.jit.env as e, os; d = e.FLASHINFER_AOT_DIR; \
m = sorted(os.listdir(d)) if d.is_dir() else []; \
print('flashinfer', flashinfer.__version__, 'from', os.path.dirname(flashinfer.__file__), \
'| AOT modules:', len(m), '| prefill:', sum(n.startswith('batch_prefill') for n in m))"
