# lab_bench.sh - lab: shell functions that a device-call script sources (bench, peers,
# full_report). bench(): one bench_decode.py run without peers or the mixed batch; prints
# the per-call rows and the graph-replay rows on one line each. LAB_PREFIX (a letter per
# script) names /tmp/<prefix>_<tag>.md; LAB_FIELDS the per-call columns to keep (cut -f,
# default 2,3,5,9: shape, q, ps16, the next column), or "rows" for the table header and
# whole rows.
bench() {   # $1 lib, $2 tag, $3 q_lens, $4 shapes, $5 heads_kv, $6.. extra bench options
    local lib=$1 tag=$2 q=$3 sh=$4 hk=$5; shift 5
    local md=/tmp/${LAB_PREFIX:-x}_$tag.md
    FAJIT_CACHE_DIR=$PWD/.fjcache/$tag timeout 200 python3 \
        bench/bench_decode.py --lib $lib --q-lens $q --shapes $sh --heads-kv $hk \
        --no-mixed --no-peers --rounds 3 --reps 10 --graph-replays 10 --graph-max-mib 80 \
        --out "$md" "$@" > "${md%.md}.log" 2>&1
    echo "== $tag rc=$?"
    if [ "${LAB_FIELDS:-}" = rows ]; then
        grep -E '^\| shape \| q \| K' "$md" | head -1
        grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "$md" | cut -c1-160
    else
        grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \| [0-9]+ \|' "$md" |
            cut -d'|' -f"${LAB_FIELDS:-2,3,5,9}" | tr '\n' ' '
        echo
    fi
    sed -n '/^Latency-bound/,$p' "$md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4 | tr '\n' ' '
    echo
}

# peers(): one bench_decode.py run with SDPA FLASH and CUDNN (ps16, no mixed batch) into
# $OUT/$2.md; prints its per-call rows (shape, q, ps16, contig, CUDNN, x FLASH, x CUDNN)
# and its graph-replay rows on one line each.
peers() {   # $1 lib, $2 tag, $3 time limit (s), $4.. bench options (--head-dim, --q-lens, ...)
    local lib=$1 tag=$2 lim=$3; shift 3
    PYTHONUNBUFFERED=1 FAJIT_CACHE_DIR=$PWD/.fjcache/$tag timeout "$lim" python3 \
        bench/bench_decode.py --lib $lib --page-sizes 16 --no-mixed "$@" \
        --out "$OUT/$tag.md" > "$OUT/$tag.log" 2>&1
    echo "== $tag rc=$?"
    grep -E '^\| [0-9]+x[0-9]+ \| [0-9]+ \|' "$OUT/$tag.md" | cut -d'|' -f2,3,5,9,11,12,13 |
        tr '\n' ' '
    echo
    sed -n '/^Latency-bound/,$p' "$OUT/$tag.md" | grep -E '^\| [0-9]x' | cut -d'|' -f2-4,7,9 |
        tr '\n' ' '
    echo
}

# full_report(): the whole decode benchmark on build/libfajit.so (q_len 1/4/8, SDPA FLASH and
# CUDNN, the mixed batch) into $OUT/decode.md; prints its goals table (issue 18).
full_report() {
    FAJIT_CACHE_DIR=$PWD/.fjcache/full timeout 300 python3 bench/bench_decode.py \
        --lib build/libfajit.so --q-lens 1,4,8 --out "$OUT/decode.md" > "$OUT/decode.log" 2>&1
    echo "== full rc=$?"
    sed -n '/^| goal |/,/met,/p' "$OUT/decode.md"
}
