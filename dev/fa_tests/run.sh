#!/usr/bin/env bash
# run.sh - on the GPU host, from the repository root, with build/ (libfajit.so) and
# carry/fa_tests (prepare.sh) carried: flash-attention's own tests through the shim.
#   FA_SUITES  which suites, in order (default "fa3 fa2"): fa3 = hopper/test_flash_attn.py
#              (flash_attn_interface), fa2 = tests/test_flash_attn.py (flash_attn)
#   FA3_TESTS, FA2_TESTS  the test functions of each suite (naming them spares collecting
#              the others: FA2's file has 500k parametrizations)
#   FA3_SELECT, FA2_SELECT  fa_shim_plugin's FA_SELECT: a Python expression over each
#              test's parameters (a name a test lacks reads as None)
#   FA_LIMIT   at most this many items per test function, evenly spread (default 40)
#   FA_K       a -k expression on top; FA_ARGS more pytest arguments
#   FA_MAX     --maxfail (default 50); FA_TIMEOUT per-test seconds (default 120, with
#              pytest-timeout); FA_JOBS pytest-xdist workers (default 1: none)
#   FA_BUDGET  seconds for each suite's pytest (default 200); then SIGINT stops it, and
#              pytest still writes its summary and junit of the tests run so far
#   WARM=1     first `build/fajit-tune warm --arch sm_90a` on all cores (every kernel)
#   COLLECT=1  only collects (counts; no GPU needed: FA_COLLECT_ONLY_CPU)
#   CPU_REF=1  a dry run without a GPU: the tests on CPU tensors (a copy of them with
#              device "cpu", in /tmp), fajit's functions replaced by common/cpu_ref.py's
#              PyTorch model of their semantics: checks the shim's translation only
# Writes $OUT/fa3.md, $OUT/fa2.md (counts, skip reasons, failures), $OUT/fa3.xml, fa2.xml
# (junit) and $OUT/fa3.log, fa2.log.
set -u
ROOT=$PWD
OUT=${OUT:-/tmp/fa-tests-out}
FA_TESTS_DIR=${FA_TESTS_DIR:-$ROOT/carry/fa_tests}
mkdir -p "$OUT"
export FA_TESTS_DIR
export FAJIT_LIB=${FAJIT_LIB:-$ROOT/build/libfajit.so}
export FAJIT_MODEL_FEATURES=on
export FAJIT_CACHE_DIR=${FAJIT_CACHE_DIR:-/tmp/fajit-cache}
# upstream's own switches: fajit is forward only, and FP8 q (FA3's fp8 dtype) is unsupported
export FLASH_ATTENTION_DISABLE_BACKWARD=${FLASH_ATTENTION_DISABLE_BACKWARD:-TRUE}
export FLASH_ATTENTION_DISABLE_FP8=${FLASH_ATTENTION_DISABLE_FP8:-TRUE}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
site=""
if ! python3 -c "import einops" 2>/dev/null; then
    site=$(ls "$FA_TESTS_DIR"/site/einops-*.whl 2>/dev/null | head -1)   # a wheel imports as a zip
fi
# Default subsets (README.md has their counts): d 64 and 128, bf16, what fajit serves of each
# test's grid; FA_LIMIT of each function, spread over softcap, ALiBi, causal, window, GQA
FA3_TESTS=${FA3_TESTS:-test_flash_attn_varlen_output test_flash_attn_kvcache test_flash_attn_output}
FA2_TESTS=${FA2_TESTS:-test_flash_attn_output test_flash_attn_varlen_output}
FA3_SELECT=${FA3_SELECT:-"d in (64, 128) and dtype == torch.bfloat16 and not has_qv and not add_unused_qkv and not new_kv and not has_leftpad"}
FA2_SELECT=${FA2_SELECT:-"d in (64, 128) and dtype == torch.bfloat16 and not dropout_p and not deterministic and not new_kv and not has_leftpad and not rotary_fraction"}
export FA_LIMIT=${FA_LIMIT:-40}
if [ "${WARM:-0}" = 1 ] && [ "${COLLECT:-0}" != 1 ]; then
    t0=$(date +%s)
    timeout 600 build/fajit-tune -q warm --arch sm_90a -j "$(nproc)" 2>&1 | tail -1
    echo "[warm: $(( $(date +%s) - t0 )) s]"
fi
rc=0
for s in ${FA_SUITES:-fa3 fa2}; do
    case $s in
    fa3) tests=$FA3_TESTS; export FA_SELECT=$FA3_SELECT ;;
    fa2) tests=$FA2_TESTS; export FA_SELECT=$FA2_SELECT ;;
    *) echo "unknown suite $s"; exit 2 ;;
    esac
    dir=$FA_TESTS_DIR
    if [ "${CPU_REF:-0}" = 1 ]; then
        dir=/tmp/fa_tests_cpu; rm -rf "$dir/$s"; mkdir -p "$dir"; cp -r "$FA_TESTS_DIR/$s" "$dir/"
        sed -i 's/device = "cuda"/device = "cpu"/; s/device="cuda"/device="cpu"/' "$dir/$s"/*.py
    fi
    ids=(); for t in $tests; do ids+=("$dir/$s/test_flash_attn.py::$t"); done
    # the shim first (its flash_attn / flash_attn_interface), then fajit, then the einops wheel
    pp="$ROOT/dev/fa_tests/$s:$ROOT/dev/fa_tests/common:$ROOT/python${site:+:$site}"
    args=(-q -p no:cacheprovider -p fa_shim_plugin -c "$ROOT/dev/fa_tests/pytest.ini"
          --rootdir "$dir/$s" "${ids[@]}")
    [ "${CPU_REF:-0}" = 1 ] && args+=(-p cpu_ref)
    [ -n "${FA_K:-}" ] && args+=(-k "$FA_K")
    if [ "${COLLECT:-0}" = 1 ]; then
        FA_COLLECT_ONLY_CPU=1 PYTHONPATH=$pp python3 -m pytest "${args[@]}" --collect-only \
            2>&1 | grep -E "collected|rror" | tail -3
        continue
    fi
    python3 -c "import pytest_timeout" 2>/dev/null && args+=(--timeout "${FA_TIMEOUT:-120}")
    [ "${FA_JOBS:-1}" -gt 1 ] && args+=(-n "$FA_JOBS")
    t0=$(date +%s)
    FA_COLLECT_ONLY_CPU=${CPU_REF:-0} FA_TESTS_DIR=$dir FA_SUMMARY=$OUT/$s.md PYTHONPATH=$pp timeout -s INT -k 30 "${FA_BUDGET:-200}" python3 -m pytest \
        "${args[@]}" --maxfail "${FA_MAX:-50}" --junitxml "$OUT/$s.xml" ${FA_ARGS:-} \
        >"$OUT/$s.log" 2>&1
    r=$?
    echo "== $s: pytest rc=$r in $(( $(date +%s) - t0 )) s (124: stopped by FA_BUDGET)"
    tail -3 "$OUT/$s.log"
    cat "$OUT/$s.md" 2>/dev/null | head -40
    [ $r -ne 0 ] && rc=$r
done
exit $rc
