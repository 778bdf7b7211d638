#!/usr/bin/env bash
# call33c.sh - lab (session 33): call33a's whole decode report (main, SDPA FLASH and CUDNN,
# the goals table) then call33b, in one call. Carry build/ and dev/decode/lib_cfg33.so.
# About 5 minutes.
set -u
. "$(dirname "$0")/lab_bench.sh"
mkdir -p .fjcache "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
full_report
bash "$(dirname "$0")/call33b.sh"
