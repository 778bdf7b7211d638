#!/usr/bin/env bash
# setup.sh - everything a fresh Debian 12 machine needs to build and test fajit:
# the Debian packages, then `meson setup build` and `meson compile -C build`.
# The CUDA toolkit is not installed here: NVRTC is found at run time
# (/usr/local/cuda/lib64 or FAJIT_NVRTC_PATH); the quick-start test uses the toolkit's
# static CUDA runtime when /usr/local/cuda has one.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(meson ninja-build pkg-config gcc python3 libsqlite3-dev libxxhash-dev check libsubunit-dev
      python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

[ -d build ] || meson setup build
meson compile -C build
