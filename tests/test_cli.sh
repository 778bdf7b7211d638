#!/usr/bin/env bash
# test_cli.sh FAJIT_TUNE - bad command lines are refused with exit 2 (or 1) and a message that
# names the rule; nothing here compiles or needs a GPU.
set -u
T=$1
fails=0
expect() {   # expect RC PATTERN ARGS...: run fajit-tune ARGS, want exit RC and PATTERN on stderr
    local want=$1 pat=$2 err rc
    shift 2
    err=$("$T" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$pat" <<<"$err"; then
        echo "FAIL: fajit-tune $* -> rc $rc (want $want), stderr: $err"
        fails=$((fails + 1))
    else
        echo "ok: fajit-tune ${*:1:6} -> $rc"
    fi
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect 2 "-j needs a whole number in 1..1024, got 'abc'" plan -j abc
expect 2 "-j needs a whole number in 1..1024, got '99999999999999'" plan -j 99999999999999
expect 2 "--seqlen needs a whole number in 1..16777216, got '99999999999'" plan --seqlen 99999999999
expect 2 "--hdim needs a whole number in 8..256, got '12x'" plan --hdim 12x
expect 2 "--batch needs a whole number" plan --batch 0
expect 2 "--page-size needs a whole number" plan --page-size -3
expect 2 "info takes no argument 'extra'" info extra
expect 2 "plan takes no argument 'sm_90a'" plan sm_90a
expect 2 "names no target" --cache-dir "$dir" warm --arch ,
expect 2 "names no target" --cache-dir "$dir" warm --arch ""
expect 1 "got 'sm_999'" --cache-dir "$dir" warm --arch sm_999
expect 1 "the cache is memory only: nothing compiled now would be kept" --cache-dir "" warm --arch sm_80
expect 2 "--op must be one of: fwd; got 'bwd'" plan --arch sm_90a --op bwd
expect 2 "--family must be one of: fa2 fa3 decode; got 'fa9'" validate --family fa9
expect 2 "--family is an option of validate" plan --family fa2
if "$T" --cache-dir "$dir" info 2>/dev/null | grep -q "^devices      0"; then
    expect 1 "validate runs kernels on GPU 0, and there is none here" --cache-dir "$dir" validate
    "$T" --cache-dir "$dir" info | grep -q "^validation   no GPU here" ||
        { echo "FAIL: info does not say that nothing is validated here"; fails=$((fails + 1)); }
fi
args=()
for i in $(seq 1 70); do args+=("$dir/b$i.db"); done
expect 2 "too many arguments (at most 64 files)" --cache-dir "$dir" cache import "${args[@]}"
[ "$fails" = 0 ] && echo "cli: all refused as they should be" || echo "cli: $fails failures"
exit $((fails > 0))
