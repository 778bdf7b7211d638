#!/bin/bash
# run7.sh - one GPU call of the short-sequence work (NOTES.md run 7/8): checks + interleaved
# A/B bench (device.sh), then, with PROF set, the ncu profiles of prof.sh.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/fa3out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash device.sh
[ -n "${PROF:-}" ] && bash prof.sh
