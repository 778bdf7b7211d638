#!/usr/bin/env python3
"""Copies the first ```c block under the README's "Quick start" heading to a .c file, so
the quick start users read is the one the build compiles."""
import re, sys

text = open(sys.argv[1], encoding="utf-8").read()
start = text.find("## Quick start")
m = re.search(r"```c\n(.*?)```", text[start:], re.S) if start >= 0 else None
if not m:
    sys.exit("README.md: no ```c block under '## Quick start'")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write("/* extracted from README.md by extract_quickstart.py - edit the README */\n")
    f.write(m.group(1))
