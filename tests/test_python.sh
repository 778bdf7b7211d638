#!/usr/bin/env bash
# test_python.sh LIBFAJIT SOURCE_ROOT TESTS... - python/tests (pytest) on the source tree's
# package against the build tree's libfajit (FAJIT_LIB); exit 77 (skipped) without pytest.
set -u
lib=$1 src=$2
shift 2
# The first interpreter with pytest: the one on PATH (a pyenv, a venv), else the system's,
# where tools/setup.sh installs python3-pytest.
py=
for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c "import pytest" 2>/dev/null; then
        py=$c
        break
    fi
done
if [ -z "$py" ]; then
    echo "pytest is not installed for $(command -v python3) nor /usr/bin/python3: skipped"
    exit 77
fi
cd "$src" || exit 1
FAJIT_LIB=$lib PYTHONPATH=$src/python exec "$py" -m pytest -q -p no:cacheprovider "$@"
