#!/usr/bin/env python3
"""sass_ab.py CACHE_DB OUTDIR - for every kernel name that appears under two keys in one
cache (the same variant compiled from two source trees, e.g. two libfajit builds benched into
one FAJIT_CACHE_DIR), disassembles both cubins (nvdisasm) and reports whether the SASS
differs, ignoring addresses; prints the differing lines of each pair.
Caveat (2026-12-02): names are not unique per variant (the preamble also carries the length
class and varlen flags), so a name with more than two rows pairs its first and last row,
which may be different variants: trust only names with exactly two rows."""
import collections, difflib, os, re, sqlite3, subprocess, sys

db, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rows = sqlite3.connect(db).execute("SELECT name, created, blob FROM kernels ORDER BY created").fetchall()
by = collections.defaultdict(list)
for name, created, blob in rows:
    by[name].append(blob)

def sass(blob, path):
    open(path, "wb").write(blob)
    txt = subprocess.run(["nvdisasm", "-c", path], capture_output=True, text=True).stdout
    ins = []
    for l in txt.split("\n"):
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", l)
        if m:
            ins.append(re.sub(r"0x[0-9a-f]+", "X", m.group(1)))
    return ins

for name, blobs in sorted(by.items()):
    if len(blobs) < 2 or not blobs[0].startswith(b"\x7fELF"):
        continue
    safe = re.sub(r"[^\w.-]", "_", name)
    a, b = sass(blobs[0], os.path.join(out, safe + ".a.cubin")), sass(blobs[-1], os.path.join(out, safe + ".b.cubin"))
    d = [l for l in difflib.unified_diff(a, b, lineterm="", n=0) if not l.startswith(("---", "+++", "@@"))]
    print("%-50s %5d -> %5d instructions, %d differing lines" % (name, len(a), len(b), len(d)))
    for l in d[:40]:
        print("    " + l)
