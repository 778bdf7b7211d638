#!/usr/bin/env python3
"""cycles.py - file-level include/call circles among the C files of each folder given.

A file uses another when it includes it ("y.h", resolved from the including file's folder) or names a
function that the other defines without `static` (a call, or its address in a table). A
header's declarations are not uses: only the bodies of its inline functions are, and a
macro's body counts as a use of each file that names the macro. Only files
of the same folder count. For each folder, prints every circle (a strongly connected set of
two or more nodes) with one use per arrow, or "no circle". Exit status 1 when there is a
circle.

    python3 dev/cycles.py src/api src/cache src/families
"""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "_Static_assert", "defined"}


def strip(text):
    """Comments, strings and character constants blanked (lines kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def definitions(code):
    """Names the file defines for others: non-static functions and globals at column 0."""
    names = set()
    lines = code.split("\n")
    for i, line in enumerate(lines):
        if not line or line[0] in " \t#}/{" or line.startswith(("static", "typedef", "extern")):
            continue
        head = line
        j = i
        while "(" not in head and "=" not in head and ";" not in head and j + 1 < len(lines):
            j += 1
            head += " " + lines[j]
        m = re.match(r"[^=(;]*?\b([A-Za-z_]\w*)\s*\(", head)
        if m and m.group(1) not in KEYWORDS:
            # a definition: the body opens before the next ';'
            rest = "\n".join(lines[i:i + 40])
            brace, semi = rest.find("{"), rest.find(";")
            if brace >= 0 and (semi < 0 or brace < semi):
                names.add(m.group(1))
            continue
    return names


def macros(code):
    """A header's function-like and object-like macros: name -> the identifiers of its body
    (counted as uses of every file that names the macro, not of the header)."""
    out = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", code, re.M):
        out[m.group(1)] = set(IDENT.findall(m.group(2)))
    return out


def without_macros(code):
    return re.sub(r"^[ \t]*#[ \t]*define(?:[^\n]*\\\n)*[^\n]*", "", code, flags=re.M)


def bodies(code):
    """The text inside braces (a header's inline function bodies; struct fields too)."""
    out, depth = [], 0
    for ch in code:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth > 0:
            out.append(ch)
    return "".join(out)


def node(folder, f):
    """A file is a node."""
    return f


def scan(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith((".c", ".h")))
    code = {f: strip(open(os.path.join(folder, f), encoding="utf-8").read()) for f in files}
    owner = {}
    for f in files:
        if f.endswith(".c"):
            for name in definitions(code[f]):
                owner.setdefault(name, f)
    expands = {}
    for f in files:
        if f.endswith(".h"):
            expands.update(macros(code[f]))
    edges = {node(folder, f): {} for f in files}
    for f in files:
        n = node(folder, f)
        raw = open(os.path.join(folder, f), encoding="utf-8").read()
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', raw, flags=re.M):
            path = os.path.normpath(os.path.join(folder, inc))
            g = os.path.basename(path)
            if os.path.dirname(path) == os.path.normpath(folder) and g in code \
                    and node(folder, g) != n:
                edges[n].setdefault(node(folder, g), "#include " + g)
        text = code[f] if f.endswith(".c") else bodies(without_macros(code[f]))
        names = set(IDENT.findall(text))
        for name in sorted(names):
            for used in sorted(expands.get(name, ())):
                g = owner.get(used)
                if g and g != n:
                    edges[n].setdefault(g, f"{used} in {name}")
        for name in sorted(names):
            g = owner.get(name)
            if g and g != n:
                edges[n].setdefault(g, name)
    return edges


def circles(edges):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def main(folders):
    found = 0
    for folder in folders:
        edges = scan(folder)
        comps = circles(edges)
        if not comps:
            print(f"{folder}: no circle ({len(edges)} files)")
        for comp in comps:
            found = 1
            print(f"{folder}: circle of {len(comp)} files: {' '.join(comp)}")
            for f in comp:
                for g, why in sorted(edges[f].items()):
                    if g in comp:
                        print(f"    {f} -> {g} ({why})")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["src/api", "src/cache", "src/families"]))
