#!/usr/bin/env bash
# test_cli.sh FAJIT_TUNE - bad command lines are refused with exit 2 (or 1) and a message that
# names the rule; every command's --help prints its usage and exits 0; no GPU needed. Only the last part compiles (19 small sm_80 kernels, with
# NVRTC where there is one).
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
expect_out() {   # expect_out RC PATTERN ARGS...: run fajit-tune ARGS, want exit RC and PATTERN on stdout
    local want=$1 pat=$2 out rc
    shift 2
    out=$("$T" "$@" 2>/dev/null)
    rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$pat" <<<"$out"; then
        echo "FAIL: fajit-tune $* -> rc $rc (want $want), no '$pat' in stdout: $out"
        fails=$((fails + 1))
    else
        echo "ok: fajit-tune ${*:1:6} -> $rc"
    fi
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Help: the whole usage, or one command's, on stdout with exit 0.
expect_out 0 "^usage: fajit-tune" --help
expect_out 0 "^usage: fajit-tune" -h
expect_out 0 "^  cache merge OUT IN" help
expect_out 0 "^fajit-tune [0-9]" --version
for c in info warm tune bench validate plan; do
    expect_out 0 "^  $c" "$c" --help
    expect_out 0 "^  $c" help "$c"
done
for c in ls stats verify clear prune export import merge explain; do
    expect_out 0 "^  cache $c" cache "$c" --help
done
expect_out 0 "^  cache prune --max-mb N" cache --help
expect_out 0 "^  plan \\[--arch A\\]" --cache-dir "$dir" plan --hdim 64 --help
# --opt=value as well as --opt value.
expect_out 0 "^sm_90a fwd hdim 64 f16 none -> " --cache-dir="$dir" plan --arch=sm_90a --hdim=64 \
    --dtype=f16 --mask none
expect 2 "--hdim needs a whole number in 8..256, got '12x'" plan --hdim=12x
expect 2 "--reps needs a whole number in 1..1000, got '0'" bench --reps=0
expect 2 "--pin takes no value" tune --pin=1 --spec llama-3-8b
# Options of another command, unknown options and stray words: refused with the usage.
expect 2 "unknown option '--bogus' for plan" plan --bogus
expect 2 "--spec is an option of warm, tune, bench, not plan" plan --spec x
expect 2 "usage:" plan --bogus
expect 2 "unknown command 'bogus'" bogus
expect 2 "unknown cache command 'bogus'" cache bogus
expect 2 "cache needs a command: ls, stats" cache
for c in ls stats verify clear; do
    expect 2 "cache $c takes no argument 'extra'" --cache-dir "$dir" cache "$c" extra
done
expect 2 "cache prune takes no argument 'extra'" --cache-dir "$dir" cache prune --max-mb 1 extra
expect 2 "cache prune needs --max-mb N" --cache-dir "$dir" cache prune
expect 2 "cache export takes no argument 'b.db'" --cache-dir "$dir" cache export "$dir/a.db" b.db
expect 2 "cache export needs FILE" --cache-dir "$dir" cache export
expect 2 "cache merge needs OUT and at least one IN" --cache-dir "$dir" cache merge "$dir/o.db"
expect 2 "cache explain takes no argument 'x'" --cache-dir "$dir" cache explain x
[ -e "$dir/a.db" ] && { echo "FAIL: a refused export wrote $dir/a.db"; fails=$((fails + 1)); }
expect 2 "-j needs a whole number in 1..1024, got 'abc'" warm --arch sm_80 -j abc
expect 2 "-j needs a whole number in 1..1024, got '99999999999999'" warm -j 99999999999999
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
# Model features: named in the kernel that plan shows; bad lists refused.
expect_out 0 "dec bf16 d128 .* kv-e4m3 softcap sinks" --cache-dir "$dir" \
    plan --arch sm_90a --page-size 16 --seqlen-q 1 --seqlen-k 4096 --heads-q 32 --heads-kv 8 \
    --kv-dtype e4m3 --features softcap,sinks
expect_out 0 "fa3 bf16 d128 causal .* alibi" --cache-dir "$dir" plan --arch sm_90a \
    --features alibi
expect_out 0 "fa2 bf16 d128 .* softcap" --cache-dir "$dir" plan --arch sm_80 --features softcap
# head_dim_v (DeepSeek 192/128): served by default (fa3 on sm_90a, fa2 on sm_80)
expect_out 0 "fa3 bf16 d192 causal .* dv128" --cache-dir "$dir" \
    plan --arch sm_90a --hdim 192 --hdim-v 128
expect_out 0 "fa2 bf16 d192 causal .* dv128" --cache-dir "$dir" \
    plan --arch sm_80 --hdim 192 --hdim-v 128
expect 2 "--hdim-v needs a whole number in 8..256, got '300'" plan --hdim-v 300
expect 2 "--features takes softcap, sinks and alibi, comma-separated; got 'tanh'" plan --arch sm_80 \
    --features softcap,tanh
expect 2 "--kv-dtype must be e4m3 or e5m2, got 'fp8'" plan --arch sm_80 --kv-dtype fp8
# bench without a driver: refused at once (with one, it would run: the gpu suite's job).
if "$T" --cache-dir "$dir" info | grep -q "^driver  *not found"; then
    expect 1 "bench runs kernels on GPU 0, and there is none here" --cache-dir "$dir" bench
    expect 1 "bench runs kernels on GPU 0, and there is none here" --cache-dir "$dir" bench \
        --spec llama-3-8b --json "$dir/b.json"
    [ -e "$dir/b.json" ] && { echo "FAIL: bench without a GPU wrote $dir/b.json"; fails=$((fails + 1)); }
else
    echo "skip: a CUDA driver loads here; bench without a GPU not tested"
fi
expect 2 "--reps needs a whole number in 1..1000, got '0'" bench --reps 0
expect 2 "--json needs a value" bench --json
# A cache file found corrupt is moved aside with every entry: verify must not call it clean.
mkdir "$dir/bad" && head -c 8192 /dev/urandom > "$dir/bad/kernels.db"
expect 1 "was corrupt or not a fajit cache when this context opened or used it" \
    --cache-dir "$dir/bad" cache verify
expect 0 "" --cache-dir "$dir/bad" cache verify   # the fresh file: clean
expect 1 "got 'sm_999'" --cache-dir "$dir/bad" cache export "$dir/x.db" --arch sm_999
expect 1 "no usable kernel of target sm_90a" --cache-dir "$dir/bad" cache export "$dir/x.db" \
    --arch sm_90a
[ -e "$dir/x.db" ] && { echo "FAIL: a refused export wrote $dir/x.db"; fails=$((fails + 1)); }
expect 2 "--family must be one of: fa2 fa3 decode fa4 mixed; got 'fa9'" validate --family fa9
expect 2 "--family is an option of validate" plan --family fa2
if "$T" --cache-dir "$dir" info 2>/dev/null | grep -q "^devices      0"; then
    expect 1 "validate runs kernels on GPU 0, and there is none here" --cache-dir "$dir" validate
    "$T" --cache-dir "$dir" info | grep -q "^validation   no GPU here" ||
        { echo "FAIL: info does not say that nothing is validated here"; fails=$((fails + 1)); }
fi
# Text from a bundle (a kernel's name and target) is printed with control characters escaped.
"$T" --cache-dir "$dir/esc" cache ls >/dev/null 2>&1
python3 - "$dir/esc/kernels.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("INSERT INTO kernels (key, arch, nvrtc_version, name, options, blob, blob_size,"
           " checksum, log, created, last_used) VALUES (?, ?, 13000, ?, '', x'00', 1, 0, '', 0, 0)",
           (bytes(16), "sm_80\x1b[5m", "ref bf16\x1b[2J\x1b]0;owned\x07\x1b[31mFAKE"))
db.commit()
PY
out=$("$T" --cache-dir "$dir/esc" cache ls 2>&1)
if grep -q $'[\x01-\x09\x0b-\x1f\x7f]' <<<"$out" || ! grep -qF 'ref bf16\x1b[2J\x1b]0;owned\x07' <<<"$out" ||
    ! grep -qF 'sm_80\x1b[5m' <<<"$out"; then
    echo "FAIL: cache ls printed control characters from a row: $(od -c <<<"$out" | head -5)"
    fails=$((fails + 1))
else
    echo "ok: cache ls escapes control characters"
fi
# export and merge replace only a bundle (or an empty file; any regular file with --force),
# never a FIFO or a device, and block on none; import reads only a regular file.
mkdir "$dir/out" && echo "not a bundle" > "$dir/out/text" && mkfifo "$dir/out/fifo"
"$T" -q --cache-dir "$dir/e" cache export "$dir/out/b.db" >/dev/null 2>&1 ||
    { echo "FAIL: export to a new file"; fails=$((fails + 1)); }
expect 0 "" --cache-dir "$dir/e" cache export "$dir/out/b.db"   # a bundle: replaced
expect 1 "neither empty nor a fajit bundle" --cache-dir "$dir/e" cache export "$dir/out/text"
expect 1 "neither empty nor a fajit bundle" --cache-dir "$dir/e" cache merge "$dir/out/text" \
    "$dir/out/b.db"
[ "$(cat "$dir/out/text")" = "not a bundle" ] ||
    { echo "FAIL: a refused export or merge replaced $dir/out/text"; fails=$((fails + 1)); }
for cmd in "export $dir/out/fifo" "merge $dir/out/fifo $dir/out/b.db" "import $dir/out/fifo" \
           "export /dev/null"; do
    [ "${cmd%% *}" = import ] && force= || force=--force
    err=$(timeout 20 "$T" --cache-dir "$dir/e" cache $cmd $force 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != 1 ] || ! grep -q "not a regular file" <<<"$err" || [ ! -p "$dir/out/fifo" ] ||
        [ ! -c /dev/null ]; then
        echo "FAIL: cache $cmd $force -> rc $rc (want 1, 124: blocked), stderr: $err"
        fails=$((fails + 1))
    else
        echo "ok: cache $cmd $force refused, not blocked -> 1"
    fi
done
expect 0 "" --cache-dir "$dir/e" cache export --force "$dir/out/text"
expect 0 "" --cache-dir "$dir/e" cache merge "$dir/out/text" "$dir/out/b.db"   # now a bundle
# merge works under $TMPDIR, and SIGTERM during it leaves nothing there.
python3 - "$dir/out/b.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executemany("INSERT INTO tuning (gpu_name, arch, sm_count, signature, bucket, config, time_ms,"
               " table_json, pinned, fajit_version, nvrtc_version, created, op) VALUES ('G',"
               " 'sm_90a', 132, ?, 'b', 'fa3:x', 1.0, '', 0, '0.1.0', 13000, 1000, 'fwd')",
               [("fwd.s%d" % i,) for i in range(5000)])
db.commit()
PY
mkdir "$dir/tmp"
args=()
for i in $(seq 1 63); do args+=("$dir/out/b.db"); done
TMPDIR="$dir/tmp" "$T" -q --cache-dir "$dir/e" cache merge "$dir/out/m.db" "${args[@]}" \
    >/dev/null 2>&1 &
pid=$!
seen=0
for i in $(seq 1 1000); do
    ls "$dir/tmp" | grep -q '^fajit-merge-' && { seen=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
left=$(ls "$dir/tmp")
if [ "$seen" != 1 ] || [ -n "$left" ] || [ "$rc" = 0 ]; then
    echo "FAIL: merge under TMPDIR=$dir/tmp, SIGTERM: seen $seen, rc $rc, left: $left"
    fails=$((fails + 1))
else
    echo "ok: merge works under TMPDIR and removes its directory on SIGTERM -> $rc"
fi
# cache verify checks verdict rows (as a bundle may bring them): a family of this fajit, a
# target, a feature set it names, a pass/fail status, a date not in the future; bad ones are
# named and removed.
"$T" --cache-dir "$dir/vd" cache ls >/dev/null 2>&1
python3 - "$dir/vd/kernels.db" <<'PY'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
now = int(time.time())
rows = [("fa3", "sm_90a", 1, now - 100, ""), ("fa9", "sm_90a", 1, now - 100, ""),
        ("fa3", "sm_999", 0, now - 100, ""), ("decode", "sm_90a", 7, now - 100, ""),
        ("fa4", "sm_100a", 1, 4102444800, ""), ("fa3", "sm_90a", 1, now - 100, "softcap,bogus")]
db.executemany("INSERT INTO verdicts VALUES ('NVIDIA X', ?, 132, 13000, '0.1.0', ?, ?, '', '', ?, ?)",
               [(a, f, p, t, s) for f, a, p, t, s in rows])
db.commit()
PY
out=$("$T" --cache-dir "$dir/vd" cache verify 2>&1)
rc=$?
if [ "$rc" != 1 ] || ! grep -q "^6 verdicts checked, 5 bad (removed)" <<<"$out" ||
    [ "$(grep -c '^BAD VERDICT' <<<"$out")" != 5 ] || ! grep -q "fa9 sm_90a.*no family" <<<"$out" ||
    ! grep -q "fa4 sm_100a.*in the future" <<<"$out" ||
    ! grep -q "fa3 sm_90a .* for softcap,bogus: its feature set" <<<"$out"; then
    echo "FAIL: cache verify with 5 bad verdict rows -> rc $rc (want 1): $out"
    fails=$((fails + 1))
else
    echo "ok: cache verify names and removes 5 bad verdict rows -> 1"
fi
expect_out 0 "^1 verdicts checked, 0 bad" --cache-dir "$dir/vd" cache verify
args=()
for i in $(seq 1 70); do args+=("$dir/b$i.db"); done
expect 2 "too many arguments (at most 64 files)" --cache-dir "$dir" cache import "${args[@]}"

# With NVRTC: warm one small spec for sm_80, forge one kernel (another kernel's blob under
# its key, with a checksum made for the pair, as a hostile bundle can): the checksums pass,
# verify --recompile names it and exits 1; a bundle with a damaged blob imports with exit 1.
if "$T" info 2>/dev/null | grep -q '^nvrtc  *[0-9]'; then
    printf '[model t]\ndtype = bf16\nhead_dim = 64\nheads_q = 1\nheads_kv = 1\nmask = none\nprefill = 512\n' \
        > "$dir/t.spec"
    "$T" -q --cache-dir "$dir/w" warm --arch sm_80 --spec "$dir/t.spec" -j 2 >/dev/null 2>&1 ||
        { echo "FAIL: warm of $dir/t.spec"; fails=$((fails + 1)); }
    cp "$dir/w/kernels.db" "$dir/pristine.db"
    # Damage inside the file (one flipped page-type byte of the kernels table's root page;
    # the file one byte short): whichever command finds it first sets the file aside, and
    # each works (verify says the entries were lost, exit 1); warm fills the fresh file.
    for kind in flip short; do
        for cmd in "cache ls" "cache stats" "cache verify" "cache clear" "warm"; do
            rm -rf "$dir/dmg" && mkdir "$dir/dmg"
            python3 - "$dir/pristine.db" "$dir/dmg/kernels.db" "$kind" <<'PY'
import sqlite3, sys
src, dst, kind = sys.argv[1:]
root = sqlite3.connect(src).execute(
    "SELECT rootpage FROM sqlite_master WHERE name = 'kernels'").fetchone()[0]
d = bytearray(open(src, "rb").read())
if kind == "flip":
    d[(root - 1) * 4096] = 7
else:
    d = d[:-1]
open(dst, "wb").write(d)
PY
            want=0
            [ "$cmd" = "cache verify" ] && want=1
            set -- $cmd
            [ "$1" = warm ] && set -- warm --arch sm_80 --spec "$dir/t.spec" -j 2
            "$T" -q --cache-dir "$dir/dmg" "$@" >"$dir/dmg.out" 2>&1
            rc=$?
            "$T" --cache-dir "$dir/dmg" cache verify >>"$dir/dmg.out" 2>&1
            rc2=$?
            if [ "$rc" != "$want" ] || [ "$rc2" != 0 ] || ! grep -q "setting it aside" "$dir/dmg.out" ||
                [ "$(ls "$dir/dmg" | grep -c corrupt-)" != 1 ]; then
                echo "FAIL: $kind file, $cmd -> rc $rc (want $want), verify after -> $rc2: $(cat "$dir/dmg.out")"
                fails=$((fails + 1))
            else
                echo "ok: $kind file, $cmd -> $rc, set aside, verify after -> 0"
            fi
        done
    done
    grep -q "^19 entries checked" "$dir/dmg.out" ||
        { echo "FAIL: warm did not refill the fresh file: $(cat "$dir/dmg.out")"; fails=$((fails + 1)); }
    forged=$(python3 - "$dir/w/kernels.db" <<'PY'
import ctypes, sqlite3, struct, sys
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
db = sqlite3.connect(sys.argv[1])
(ka, blob_a), (kb, blob_b) = db.execute("SELECT key, blob FROM kernels ORDER BY key LIMIT 2")
data = bytes(ka) + bytes(blob_b)
s = struct.unpack("<q", struct.pack("<Q", xxh.XXH3_64bits(data, len(data))))[0]
db.execute("UPDATE kernels SET blob = ?, blob_size = ?, checksum = ? WHERE key = ?",
           (blob_b, len(blob_b), s, ka))
db.commit()
print(bytes(ka).hex())
PY
)
    expect 0 "" --cache-dir "$dir/w" cache verify   # a forged checksum passes the checksums
    out=$("$T" --cache-dir "$dir/w" cache verify --recompile 2>&1)
    rc=$?
    if [ "$rc" != 1 ] || ! grep -q "DIFFERS  $forged" <<<"$out" ||
        ! grep -q "18 identical, 1 differ" <<<"$out"; then
        echo "FAIL: verify --recompile -> rc $rc (want 1), forged $forged, output: $out"
        fails=$((fails + 1))
    else
        echo "ok: verify --recompile names the forged kernel $forged -> 1"
    fi
    # The same forgery with the nvrtc_version column of the forged row set to another
    # version (neither key nor checksum covers it): still compared by its key, rc 1.
    python3 - "$dir/w/kernels.db" "$forged" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("UPDATE kernels SET nvrtc_version = 12080 WHERE key = ?", (bytes.fromhex(sys.argv[2]),))
db.commit()
PY
    out=$("$T" --cache-dir "$dir/w" cache verify --recompile 2>&1)
    rc=$?
    if [ "$rc" != 1 ] || ! grep -q "DIFFERS  $forged" <<<"$out" ||
        ! grep -q "18 identical, 1 differ; 0 skipped" <<<"$out"; then
        echo "FAIL: verify --recompile, nvrtc_version edited -> rc $rc (want 1), output: $out"
        fails=$((fails + 1))
    else
        echo "ok: verify --recompile compares by key, whatever nvrtc_version says -> 1"
    fi
    # A row no key of this fajit finds (an unknown variant) is skipped, and that is an
    # error unless --allow-skipped.
    python3 - "$dir/w/kernels.db" "$forged" <<'PY'
import ctypes, sqlite3, struct, sys
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
db = sqlite3.connect(sys.argv[1])
db.execute("DELETE FROM kernels WHERE key = ?", (bytes.fromhex(sys.argv[2]),))
k, blob = db.execute("SELECT key, blob FROM kernels ORDER BY key LIMIT 1").fetchone()
nk = bytes(range(16))
data = nk + bytes(blob)
s = struct.unpack("<q", struct.pack("<Q", xxh.XXH3_64bits(data, len(data))))[0]
db.execute("UPDATE kernels SET key = ?, checksum = ? WHERE key = ?", (nk, s, k))
db.commit()
PY
    expect 1 "1 kernels could not be compared" --cache-dir "$dir/w" cache verify --recompile
    expect 0 "" --cache-dir "$dir/w" cache verify --recompile --allow-skipped
    "$T" -q --cache-dir "$dir/w" cache export "$dir/w.db" >/dev/null 2>&1
    python3 - "$dir/w.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
k, b = db.execute("SELECT key, blob FROM kernels ORDER BY key DESC LIMIT 1").fetchone()
db.execute("UPDATE kernels SET blob = ? WHERE key = ?", (bytes([b[0] ^ 1]) + bytes(b[1:]), k))
db.commit()
PY
    expect 1 "import: 1 corrupt kernels were skipped" --cache-dir "$dir/i" cache import "$dir/w.db"
else
    echo "skip: no NVRTC here, verify --recompile and import of a damaged bundle not tested"
fi
# Which NVRTC: info and explain name the file, its version and the rule that chose it.
nv_line() {   # nv_line WHAT PATTERN ENV... -- ARGS...: want PATTERN in fajit-tune ARGS' output
    local what=$1 pat=$2 out
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    out=$(env "${envs[@]}" "$T" "$@" 2>&1)
    if grep -q -- "$pat" <<<"$out"; then
        echo "ok: $what"
    else
        echo "FAIL: $what: no '$pat' in: $out"
        fails=$((fails + 1))
    fi
}
nv_line "info without NVRTC says why" "^nvrtc  *not loaded" FAJIT_NVRTC_PATH=none -- \
    --cache-dir "$dir/n" info
toolkit=/usr/local/cuda/lib64/libnvrtc.so.13
if [ -r "$toolkit" ]; then
    nv_line "info names FAJIT_NVRTC_PATH's file and rule" \
        "^nvrtc  *13\.[0-9]* from $toolkit (FAJIT_NVRTC_PATH)\$" FAJIT_NVRTC_PATH="$toolkit" -- \
        --cache-dir "$dir/n" info
    nv_line "explain names the NVRTC" "^  nvrtc 13\.[0-9]* from $toolkit (FAJIT_NVRTC_PATH)" \
        FAJIT_NVRTC_PATH="$toolkit" -- --cache-dir "$dir/n" cache explain --arch sm_80
fi
[ "$fails" = 0 ] && echo "cli: all refused as they should be" || echo "cli: $fails failures"
exit $((fails > 0))
