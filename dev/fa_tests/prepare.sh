#!/usr/bin/env bash
# prepare.sh - here (with network or a fetched copy): extracts flash-attention's test files
# into $DEST (default carry/fa_tests, git-ignored: their code is never committed) and
# applies patch_tests.py's edits. Run from the repository root.
#   FA_REPO  a clone or bare git dir of Dao-AILab/flash-attention (default: a shallow clone
#            into /tmp/fa-upstream); FA_REV the commit (default HEAD)
#   EINOPS=1 also puts einops's pure-Python wheel in $DEST/site (for hosts without einops;
#            the GPU image has it)
set -euo pipefail
DEST=${DEST:-carry/fa_tests}
FA_REV=${FA_REV:-HEAD}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${FA_REPO:-}" ]; then
    FA_REPO=/tmp/fa-upstream
    [ -d "$FA_REPO" ] || git clone -q --depth 1 https://github.com/Dao-AILab/flash-attention "$FA_REPO"
fi
g() { git --git-dir="$(git -C "$FA_REPO" rev-parse --git-dir | sed "s|^\([^/]\)|$FA_REPO/\1|")" "$@"; }
rev=$(g rev-parse "$FA_REV")
rm -rf "$DEST/fa3" "$DEST/fa2"
mkdir -p "$DEST/fa3" "$DEST/fa2"
for f in test_flash_attn.py test_util.py padding.py; do
    g show "$rev:hopper/$f" >"$DEST/fa3/$f"
done
g show "$rev:tests/test_flash_attn.py" >"$DEST/fa2/test_flash_attn.py"
g show "$rev:flash_attn/bert_padding.py" >"$DEST/fa2/bert_padding.py"
python3 "$here/patch_tests.py" fa3 "$DEST/fa3/test_flash_attn.py"
python3 "$here/patch_tests.py" fa2 "$DEST/fa2/test_flash_attn.py"
echo "Dao-AILab/flash-attention $rev" >"$DEST/UPSTREAM"
if [ "${EINOPS:-0}" = 1 ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$DEST/site" einops
fi
echo "prepare: $DEST from flash-attention $rev"
