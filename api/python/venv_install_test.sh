#!/bin/sh
# Installs the package as a user would, into a fresh virtual environment: `pip install` of a copy
# of api/python (offline: no build isolation, no index), then runs the Python tests from a
# directory outside the source tree, so they import the INSTALLED package, against LIBRARY.
# The venv sees the system site-packages (--system-site-packages) because that is where the
# build backend comes from offline (Debian's python3-setuptools and python3-wheel): with no
# index, pip cannot fetch them into an isolated environment. The package itself is installed
# into the venv and shadows any system copy; test_package checks it was imported from there.
# Usage: venv_install_test.sh PYTHON SOURCE_DIR WORK_DIR LIBRARY
set -eu
python=$1
source=$2
work=$3
library=$4
rm -rf "$work"
mkdir -p "$work/tests"
# pip builds in the directory it is given (build/, wharf.egg-info): a copy keeps the checkout clean.
mkdir "$work/src"
cp -R "$source/pyproject.toml" "$source/wharf" "$work/src/"
rm -rf "$work/src/wharf/__pycache__"
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --no-build-isolation --no-index --no-deps \
  --disable-pip-version-check --quiet "$work/src" >"$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; echo "FAIL: pip install $work/src (a copy of $source)"; exit 1; }
cp "$source"/test_*.py "$work/tests/"
cd "$work/tests"
export WHARF_LIBRARY="$library" WHARF_EXPECT_INSTALLED=1
where=$("$work/venv/bin/python" -c 'import wharf; print(wharf.__file__)')
case "$where" in
  "$work/venv/"*) echo "installed: $where" ;;
  *) echo "FAIL: wharf was imported from $where, not from the venv $work/venv"; exit 1 ;;
esac
exec "$work/venv/bin/python" -m unittest -v test_package test_wharf
