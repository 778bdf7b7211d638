#!/usr/bin/env python3
"""longfuncs.py - the long functions of C files: `file:line name length`, longest first.

A function is a definition whose head starts in column 0 (the project's style); its length
counts the lines from the head's first line to the `}` that closes its body. Comments, strings and character constants are blanked before
braces are matched. Directories are searched for *.c files (not *.cu).

    python3 dev/longfuncs.py src                # functions over 100 lines
    python3 dev/longfuncs.py --min 60 src/api src/families/decode.c
"""
import argparse
import os
import re
import signal
import sys

HEAD = re.compile(r"([A-Za-z_]\w*)\s*\(")
NOT_NAMES = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def strip(text):
    """Comments, strings and character constants blanked (lines kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def functions(path):
    """(line, name, length) of each function defined in the file at `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = strip(f.read()).split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        # a head starts in column 0 with a name, not a preprocessor line or a brace
        if not line or line[0] in " \t#{}" or "(" not in line or line.rstrip().endswith(";"):
            i += 1
            continue
        m = None
        for cand in HEAD.finditer(line):
            if cand.group(1) not in NOT_NAMES:
                m = cand   # the last name before a "(": the function (not its return type)
                break
        if not m:
            i += 1
            continue
        # the head may run over several lines up to the body's "{"
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or "{" not in lines[j] or "=" in "".join(lines[i:j + 1]).split("(")[0]:
            i += 1
            continue
        depth, k = 0, j
        while k < len(lines):   # to the "}" that closes the body
            depth += lines[k].count("{") - lines[k].count("}")
            if depth <= 0:
                break
            k += 1
        if k < len(lines):
            out.append((i + 1, m.group(1), k - i + 1))
        i = k + 1
    return out


def c_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith(".c"):
                        yield os.path.join(root, n)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min", type=int, default=100, help="shortest length listed (100)")
    ap.add_argument("paths", nargs="+", help="C files or directories")
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # `| head` ends the listing quietly
    rows = [(n, f, line, name) for f in c_files(a.paths) for line, name, n in functions(f)
            if n > a.min]
    for n, f, line, name in sorted(rows, key=lambda r: (-r[0], r[1], r[2])):
        print(f"{f}:{line} {name} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
