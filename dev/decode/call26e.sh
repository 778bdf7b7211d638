#!/usr/bin/env bash
# call26e.sh - lab (session 26, prepared without a GPU): the full decode benchmark of main
# with the goals' table (bench/decode_goals.py, appended by bench_decode.py): every default
# shape, q_len 1/4/8, page sizes 16 and 1, the mixed batch, SDPA FLASH and CUDNN, FlashInfer
# when carry/fi is carried (`PYENV_VERSION=3.12.1 bash dev/decode/fi_carry.sh --aot` here
# first; 33 MB: carry ["build", "carry/fi"]). The raw report is what decode_goals.py reads:
# commit it whole to bench/results (the session summaries since session 20 are hand-made
# and carry no goals' table). About 4-5 minutes.
set -u
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
if [ -d carry/fi ]; then source dev/decode/fi_setup.sh || echo "fi_setup failed: no FlashInfer"; fi
mkdir -p .fjcache
PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 560 python3 \
    bench/bench_decode.py --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" \
    > "$OUT/bench.log" 2>&1
echo "bench rc=$?"
sed -n '/^The serving goals/,$p' "$OUT/decode.md" | grep -E '^\||met,' | cut -c1-150
