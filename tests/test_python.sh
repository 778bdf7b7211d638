#!/usr/bin/env bash
# test_python.sh LIBFAJIT SOURCE_ROOT TESTS... - python/tests (pytest) on the source tree's
# package against the build tree's libfajit (FAJIT_LIB); exit 77 (skipped) without pytest.
set -u
lib=$1 src=$2
shift 2
if ! python3 -c "import pytest" 2>/dev/null; then
    echo "pytest is not installed for $(command -v python3): skipped"
    exit 77
fi
cd "$src" || exit 1
FAJIT_LIB=$lib PYTHONPATH=$src/python exec python3 -m pytest -q -p no:cacheprovider "$@"
