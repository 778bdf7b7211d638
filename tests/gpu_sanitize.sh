#!/usr/bin/env bash
# gpu_sanitize.sh BUILD_DIR [LOG_DIR] - compute-sanitizer memcheck, racecheck and synccheck
# over the attention families on the GPU (gpu suite): the gpu suite's `san` case (small
# problems, every tuning candidate of the Hopper family and four of the portable one, against
# the reference kernel) and a short paged-decode sweep plus its combine paths, the block
# table rewritten by the kernel before a decode step, and the decode defaults of each split
# class (head_dim 32, 48, 64 and 128). Kernels compile
# with FAJIT_LINEINFO=1 into a cache of their own, so reports name source lines.
#
# FAJIT_SAN_TOOLS picks the tools (default "memcheck synccheck racecheck"), e.g. to split a
# run over two time-limited calls sharing FAJIT_SAN_CACHE_DIR.
#
# Passes when memcheck and synccheck report 0 errors and every racecheck report is reviewed
# (tests/racecheck_filter.py: both accesses marked `racecheck: <id>` in the source, with the
# proof in tests/racecheck_reviewed.md). Prints the counts of each tool. Exit 77 (skipped)
# when there is no compute-sanitizer or no GPU.
set -u
B=${1:?usage: gpu_sanitize.sh BUILD_DIR [LOG_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
tools=${FAJIT_SAN_TOOLS:-memcheck synccheck racecheck}
for tool in $tools; do
    case $tool in memcheck|synccheck|racecheck) ;;
        *) echo "gpu_sanitize: unknown tool '$tool' in FAJIT_SAN_TOOLS"; exit 2 ;; esac
done
LOGS=${2:-$(mktemp -d /tmp/fajit-san-XXXXXX)}
mkdir -p "$LOGS"
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -z "$san" ]; then
    echo "gpu_sanitize: skipped: no compute-sanitizer on PATH or in /usr/local/cuda/bin"
    exit 77
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 ||
    { echo "gpu_sanitize: skipped: no GPU"; exit 77; }
export FAJIT_LINEINFO=1
export FAJIT_TEST_CACHE_DIR=${FAJIT_SAN_CACHE_DIR:-$LOGS/cache}
mkdir -p "$FAJIT_TEST_CACHE_DIR"

# The programs: <tag>|<environment>|<program>
runs=("fwd|CK_RUN_CASE=san|$B/tests/test_gpu"
      "decode|CK_RUN_CASE=paged_sweep FAJIT_TEST_DECODE_CASES=10|$B/tests/test_gpu_decode"
      "combine|CK_RUN_CASE=combine_paths|$B/tests/test_gpu_decode"
      "rewrite|CK_RUN_CASE=pdl_rewrite|$B/tests/test_gpu_decode"
      "classes|CK_RUN_CASE=defaults_per_class|$B/tests/test_gpu_decode")
# Compile everything once outside the tools (the compiles are host work, slow under them).
for r in "${runs[@]}"; do
    IFS="|" read -r tag envs prog <<<"$r"
    env $envs timeout 600 "$prog" >"$LOGS/plain-$tag.log" 2>&1 ||
        { echo "gpu_sanitize: $tag failed without the sanitizer:"; tail -20 "$LOGS/plain-$tag.log"; exit 1; }
done

fail=0
for tool in $tools; do
    errors=0
    for r in "${runs[@]}"; do
        IFS="|" read -r tag envs prog <<<"$r"
        log=$LOGS/$tool-$tag.log
        extra=()
        [ "$tool" = racecheck ] && extra=(--racecheck-report analysis)
        env $envs timeout 900 "$san" --tool "$tool" "${extra[@]}" --print-limit 1000 \
            --error-exitcode 99 "$prog" >"$log" 2>&1
        rc=$?
        if [ "$tool" = racecheck ]; then
            out=$(python3 "$here/racecheck_filter.py" "$log" "$here/../src/kernels_src" \
                  "$here/racecheck_reviewed.md")
            frc=$?
            echo "$tool $tag: $out"
            [ $frc -eq 0 ] || fail=1
            # the program itself must still pass (its own checks), whatever the tool says
            grep -qE "100%: Checks: [0-9]+, Failures: 0, Errors: 0" "$log" ||
                { echo "$tool $tag: the program failed under the tool (rc $rc)"; tail -5 "$log"; fail=1; }
        else
            n=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$log" | grep -oE "[0-9]+" | tail -1)
            echo "$tool $tag: ${n:-?} errors (rc $rc)"
            if [ -z "$n" ] || [ "$n" != 0 ] || ! grep -qE "100%: Checks: [0-9]+, Failures: 0, Errors: 0" "$log"; then
                fail=1
                grep -E "^========= (Invalid|Barrier|Error|Program hit)" "$log" | sort | uniq -c | head -10
                tail -5 "$log"
            fi
        fi
    done
done
echo "gpu_sanitize ($tools): logs in $LOGS; $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
