#!/usr/bin/env bash
# call32d.sh - lab (session 32): the gpu-decode suite on main's build (pdl_rewrite on the
# plain prologue: nothing read before the wait), then call32c (the speculation's
# diagnostic on the branch's build). About 5 minutes. Carry ["build", "build-spec",
# "dev/decode/lib_s32nocheck.so"]. Ran once, on an H100 (NOTES.md, session 32).
set -u
mkdir -p .fjcache
T0=$(date +%s)
timeout 300 build/tests/test_gpu_decode > "$OUT/suite_main.log" 2>&1
echo "== gpu-decode (main) rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "pdl_rewrite: .*step 2|decode sweep: [0-9]|FAILED|Checks|:F:|:E:" "$OUT/suite_main.log" |
    cut -c1-160 | head -20
bash "$(dirname "$0")/call32c.sh"
echo "t=$(( $(date +%s) - T0 ))"
