#!/usr/bin/env bash
# call23j.sh - lab (2026-12-04, session 23): tests/gpu_sanitize.sh's decode half (the paged
# sweep and the combine paths under memcheck, synccheck and racecheck, reports filtered by
# tests/racecheck_filter.py) on main d30619f: the row-wise epilogue 2 changed which threads
# read which shared memory after epilogue 1's barrier. (The forward half, every tuning
# candidate of the Hopper family, takes longer than this session's device time.)
set -u
sed -e '/^runs=("fwd|CK_RUN_CASE=san|/s/^runs=("fwd|[^"]*"/runs=(/' tests/gpu_sanitize.sh \
    -e "s/FAJIT_TEST_DECODE_CASES=10/FAJIT_TEST_DECODE_CASES=4/" > tests/.gpu_sanitize_decode.sh
grep -n '^runs=' -A2 tests/.gpu_sanitize_decode.sh
timeout 330 bash tests/.gpu_sanitize_decode.sh build /tmp/san23 2>&1 | tail -12
echo "rc=$?"
