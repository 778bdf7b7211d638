#!/usr/bin/env bash
# dev/bw/sass_check.sh DIR - SASS check of the Blackwell (fa4) cubins in DIR, for a machine
# with cuobjdump or nvdisasm (the CUDA toolkit's; the compile-only build host has neither).
# Prints PASS/FAIL per cubin and exits 1 if any failed.
#
# Get the cubins with either of
#   FAJIT_DUMP_CUBINS=/tmp/fa4-cubins build/tests/test_nvrtc_sm100
#   fajit-tune warm --arch sm_100a && python3 dev/bw/dump_cubins.py ~/.cache/fajit/kernels.db /tmp/fa4-cubins
#
# A cubin passes when its SASS has
#   UTCHMMA  >= 2     tcgen05.mma kind::f16 (S = Q K^T and O += P V, both unrolled over k)
#   UTCBAR   >= 1     tcgen05.commit to an mbarrier
#   LDTM, STTM >= 1   tcgen05.ld / tcgen05.st (S, O rows; P and the rescaled O back)
#   UTMALDG  >= 1     TMA tile loads
#   MUFU.EX2 >= 1     hardware exp2
#   no LDL / STL      no local memory (spills)
# and, as the sign that ptxas kept the MMA stream unserialized, every UTCHMMA inside the
# kernel is issued from uniform registers only (no UTCHMMA operand is a vector register R*):
# a tcgen05.mma whose descriptors ptxas had to move through per-thread registers shows up as
# R2UR right before it; the count of R2UR within 2 instructions before a UTCHMMA is printed
# and must be 0. The counts are printed either way. The opcode names are those of CUDA 12.8+
# sm_100 SASS (UTCHMMA/UTCBAR/LDTM/STTM); if a toolkit renames them, every cubin fails the
# same way: read one listing (cuobjdump -sass FILE | less) before trusting a FAIL.
set -u
dir=${1:?usage: sass_check.sh DIR_WITH_CUBINS}
if command -v cuobjdump >/dev/null; then dis() { cuobjdump -sass "$1"; }
elif command -v nvdisasm >/dev/null; then dis() { nvdisasm -c "$1"; }
else echo "sass_check: neither cuobjdump nor nvdisasm on PATH" >&2; exit 2; fi
fails=0 n=0
for f in "$dir"/*.cubin; do
    [ -e "$f" ] || { echo "sass_check: no .cubin in $dir" >&2; exit 2; }
    n=$((n + 1))
    sass=$(dis "$f" 2>&1)
    c() { grep -cE "$1" <<<"$sass"; }
    mma=$(c '\bUTCHMMA\b|\bUTCHMMA\.'); bar=$(c '\bUTCBAR\b|\bUTCBAR\.'); ldtm=$(c '\bLDTM\b|\bLDTM\.')
    sttm=$(c '\bSTTM\b|\bSTTM\.'); tma=$(c '\bUTMALDG\b|\bUTMALDG\.'); ex2=$(c 'MUFU\.EX2')
    local_mem=$(c '\b(LDL|STL)(\.|\b)')
    r2ur=$(grep -B2 -E '\bUTCHMMA' <<<"$sass" | grep -cE '\bR2UR\b')
    why=""
    [ "$mma" -ge 2 ] || why+=" UTCHMMA=$mma"
    [ "$bar" -ge 1 ] || why+=" UTCBAR=$bar"
    [ "$ldtm" -ge 1 ] || why+=" LDTM=$ldtm"
    [ "$sttm" -ge 1 ] || why+=" STTM=$sttm"
    [ "$tma" -ge 1 ] || why+=" UTMALDG=$tma"
    [ "$ex2" -ge 1 ] || why+=" MUFU.EX2=$ex2"
    [ "$local_mem" -eq 0 ] || why+=" LDL/STL=$local_mem"
    [ "$r2ur" -eq 0 ] || why+=" R2UR-before-UTCHMMA=$r2ur"
    counts="UTCHMMA=$mma UTCBAR=$bar LDTM=$ldtm STTM=$sttm UTMALDG=$tma MUFU.EX2=$ex2 LDL/STL=$local_mem R2UR@MMA=$r2ur"
    if [ -z "$why" ]; then echo "PASS $(basename "$f")  $counts"
    else echo "FAIL $(basename "$f") :$why  ($counts)"; fails=$((fails + 1)); fi
done
echo "sass_check: $((n - fails)) of $n cubins pass"
[ "$fails" -eq 0 ]
