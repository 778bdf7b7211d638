#!/usr/bin/env python3
"""sass_compare.py - lab tool: are two fajit kernel caches the same machine code?

Usage: sass_compare.py BASE_DB NEW_DB [--arch sm_90a] [--prefix fa3] [--nvdisasm PATH]

Pairs the entries of two kernels.db files (table `kernels`) by `name` (one name per variant),
checks that their key parts differ at most in the source digest (`parts`: digest, function,
preamble hash, options, arch, nvrtc, format), disassembles both cubins with `nvdisasm -c`
and compares the text. Also compares the ptxas lines of the compile logs (registers, spills,
warnings). Prints one line per difference and the counts; exit status 0 when every paired
entry is identical and no entry is unpaired.

Typical use (a pristine tree at the base commit and this tree, each built in build/):
  FAJIT_CACHE_DIR=/tmp/c_base /tmp/base/build/fajit-tune warm --arch sm_90a -j 2  (+ --spec ...)
  FAJIT_CACHE_DIR=/tmp/c_new  build/fajit-tune warm --arch sm_90a -j 2            (+ --spec ...)
  python3 dev/fa3/sass_compare.py /tmp/c_base/kernels.db /tmp/c_new/kernels.db
"""
import argparse
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile


def entries(db, arch, prefix):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT name, arch, parts, blob, log FROM kernels WHERE arch = ?", (arch,))
    out = {}
    for name, a, parts, blob, log in rows:
        if prefix and not name.startswith(prefix):
            continue
        if name in out:
            sys.exit(f"{db}: two entries named {name!r} for {a}: cannot pair by name")
        kv = dict(p.split("=", 1) for p in (parts or "").split(";") if "=" in p)
        out[name] = (kv, bytes(blob), log or "")
    con.close()
    return out


def sass(nvdisasm, blob, tmp):
    # disassemblies are kept by cubin digest (a base db is compared more than once)
    cache = os.path.join(tempfile.gettempdir(), "fj_sass_cache")
    os.makedirs(cache, exist_ok=True)
    memo = os.path.join(cache, hashlib.sha256(blob).hexdigest() + ".sass")
    if os.path.exists(memo):
        with open(memo) as f:
            return f.read()
    path = os.path.join(tmp, "k.cubin")
    with open(path, "wb") as f:
        f.write(blob)
    r = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"nvdisasm failed: {r.stderr.strip()}")
    with open(memo + ".tmp", "w") as f:
        f.write(r.stdout)
    os.replace(memo + ".tmp", memo)
    return r.stdout


def ptxas_lines(log):
    # the lines that describe the code, without the compile time
    keep = []
    for line in log.splitlines():
        if "Compile time" in line:
            continue
        if re.search(r"registers|spill|stack|barriers|gmem|warning|C75\d\d", line):
            keep.append(line.strip())
    return keep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--prefix", default="", help="only names starting with this (e.g. fa3)")
    ap.add_argument("--nvdisasm", default=shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm",
                    help="(pip: nvidia-cuda-nvdisasm puts one under site-packages/nvidia/cu13/bin)")
    a = ap.parse_args()
    base, new = entries(a.base, a.arch, a.prefix), entries(a.new, a.arch, a.prefix)
    only_b, only_n = sorted(set(base) - set(new)), sorted(set(new) - set(base))
    for n in only_b:
        print(f"only in base: {n}")
    for n in only_n:
        print(f"only in new: {n}")
    same = diff = keydiff = sass_only = 0
    by_kind = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(set(base) & set(new)):
            (kb, bb, lb), (kn, bn, ln) = base[name], new[name]
            other = sorted(k for k in set(kb) | set(kn) if k != "digest" and kb.get(k) != kn.get(k))
            if other:
                keydiff += 1
                print(f"KEY DIFFERS beyond the digest: {name}: {other}")
                continue
            kind = name.split()[0]
            ok = sass(a.nvdisasm, bb, tmp) == sass(a.nvdisasm, bn, tmp)
            log_ok = ptxas_lines(lb) == ptxas_lines(ln)
            t = by_kind.setdefault(kind, [0, 0])
            t[1] += 1
            if ok and log_ok:
                same += 1
                t[0] += 1
            else:
                diff += 1
                pb, pn = ptxas_lines(lb), ptxas_lines(ln)
                what = [f"{x!r} -> {y!r}" for x, y in zip(pb, pn) if x != y] if len(pb) == len(pn) else []
                print(f"DIFFERS: {name}: sass {'same' if ok else 'differs'}, ptxas log "
                      f"{'same' if log_ok else 'differs'}" + (f": {'; '.join(what)}" if what else ""))
                sass_only += ok
    total = same + diff
    for kind, (s, t) in sorted(by_kind.items()):
        print(f"{kind}: {s} of {t} identical")
    print(f"{a.arch}: SASS {same + sass_only} of {total} identical; SASS and ptxas lines {same} of {total}; "
          f"{keydiff} with other key "
          f"differences, {len(only_b)} only in base, {len(only_n)} only in new")
    return 0 if diff == 0 and keydiff == 0 and not only_b and not only_n else 1


if __name__ == "__main__":
    sys.exit(main())
