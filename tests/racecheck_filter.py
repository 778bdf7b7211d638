#!/usr/bin/env python3
"""racecheck_filter.py - sorts compute-sanitizer racecheck reports into reviewed and not.

A report names two accesses (file:line with FAJIT_LINEINFO=1). It is reviewed when both
lines carry the same marker, a comment `racecheck: <id>` on the line or up to three lines
above it (the nearest one counts) in src/kernels_src, and <id> is a section (`## <id>`) of racecheck_reviewed.md,
which holds the proof that the two accesses are ordered (by an mbarrier the tool does not
follow). Anything else, a report without source lines included, is unreviewed.

Usage: racecheck_filter.py RACECHECK_LOG SRC_DIR REVIEWED_MD
Prints the counts and every unreviewed report; exit status 1 when there is one, 2 when the
log has no racecheck summary (the tool did not finish).
"""
import collections
import os
import re
import sys

ACCESS = re.compile(r"(Read|Write) access at (\S+) in (.*?)(?:\s*\[(\d+) hazards?\])?\s*$")
FILELINE = re.compile(r"([\w.+-]+\.(?:cu|cuh|h)):(\d+)")
MARKER = re.compile(r"racecheck: ([\w-]+)")
SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def reviewed_ids(md):
    with open(md) as f:
        return {m.group(1) for m in re.finditer(r"^## ([\w-]+)\s*$", f.read(), re.M)}


def marker_at(src_dir, loc, cache):
    """The marker id of the access at `loc` ("file.cu:123"), or None."""
    m = FILELINE.search(loc)
    if not m:
        return None
    name, line = m.group(1), int(m.group(2))
    if name not in cache:
        path = os.path.join(src_dir, os.path.basename(name))
        cache[name] = open(path).read().split("\n") if os.path.exists(path) else []
    lines = cache[name]
    for i in range(min(line, len(lines)) - 1, max(0, line - 4) - 1, -1):   # the nearest
        mk = MARKER.search(lines[i])
        if mk:
            return mk.group(1)
    return None


def reports(log):
    """(kind, first access, second access, hazards) of every report in the log."""
    out, pending = [], None
    for raw in log.split("\n"):
        line = raw.replace("=========", "").strip()
        if line.startswith(("Error: Race reported between", "Warning: Race reported between")):
            kind = line.split(":")[0]
            m = ACCESS.search(line)
            pending = (kind, m.group(2) + " " + m.group(3) if m else line)
        elif pending and line.startswith("and "):
            m = ACCESS.search(line)
            second = m.group(2) + " " + m.group(3) if m else line
            hazards = int(m.group(4)) if m and m.group(4) else 1
            out.append((pending[0], pending[1], second, hazards))
            pending = None
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    log = open(sys.argv[1], errors="replace").read()
    ids = reviewed_ids(sys.argv[3])
    summary = SUMMARY.search(log)
    if not summary:
        print("racecheck: no RACECHECK SUMMARY in %s (the tool did not finish)" % sys.argv[1])
        return 2
    cache, by_id, bad, hazards = {}, collections.Counter(), [], 0
    reps = reports(log)
    for kind, a, b, n in reps:
        hazards += n
        ma, mb = marker_at(sys.argv[2], a, cache), marker_at(sys.argv[2], b, cache)
        if ma and ma == mb and ma in ids:
            by_id[ma] += 1
        else:
            bad.append("%s: %s / %s [%d hazards] (markers %s / %s)" % (kind, a, b, n, ma, mb))
    print("racecheck: %s reports (%s errors, %s warnings; %d parsed, %d hazards): %d reviewed%s, "
          "%d unreviewed" % (summary.group(1), summary.group(2), summary.group(3), len(reps),
                             hazards, sum(by_id.values()),
                             " (" + ", ".join("%s %d" % kv for kv in sorted(by_id.items())) + ")"
                             if by_id else "", len(bad)))
    if len(reps) != int(summary.group(1)):
        print("racecheck: parsed %d reports of the %s the summary counts" % (len(reps), summary.group(1)))
        return 1
    for r in bad:
        print("  unreviewed " + r)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
