#!/bin/sh
# Installs the build tree into a scratch prefix, then builds the C++ example as outside programs
# would, against the installed files only: with `pkg-config --cflags --libs wharf++`, and as a
# CMake project with find_package(wharf CONFIG) linking wharf::wharf++. Runs both, and checks the
# installed CLI and Python module.
# Usage: install_test.sh BUILD_DIR PREFIX EXAMPLES_DIR CXX
set -eu
build=$1
prefix=$2
examples=$3
cxx=$4
. "$(dirname "$0")/../install_prefix.sh"
install_prefix "$build" "$prefix"
libdir=$(pkg-config --variable=libdir wharf++)
objdump -p "$libdir/libwharf++.so.0" | grep -q 'SONAME *libwharf++.so.0$' ||
  { echo "FAIL: libwharf++.so.0 has no SONAME libwharf++.so.0"; exit 1; }
flags=$(pkg-config --cflags --libs wharf++)
echo "pkg-config --cflags --libs wharf++: $flags"
# shellcheck disable=SC2086
"$cxx" -Wall -Wextra -Werror -o "$prefix/orders-pc" "$examples/orders.cc" $flags
out=$(LD_LIBRARY_PATH="$libdir" "$prefix/orders-pc" "$prefix/db-pc")
echo "$out"
echo "$out" | grep -q "3 orders projected, total 4450 cents" || { echo "FAIL: pkg-config build"; exit 1; }

cmake -S "$examples" -B "$prefix/example-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" >"$prefix/example-build.log" 2>&1 ||
  { cat "$prefix/example-build.log"; exit 1; }
cmake --build "$prefix/example-build" >>"$prefix/example-build.log" 2>&1 ||
  { cat "$prefix/example-build.log"; exit 1; }
out=$(LD_LIBRARY_PATH="$libdir" "$prefix/example-build/orders" "$prefix/db-cmake")
echo "$out" | grep -q "3 orders projected, total 4450 cents" || { echo "FAIL: CMake build"; exit 1; }
echo "find_package(wharf CONFIG) + wharf::wharf++: $out"

test -x "$prefix/bin/wharf" || { echo "FAIL: the wharf CLI is not installed"; exit 1; }
LD_LIBRARY_PATH="$libdir" "$prefix/bin/wharf" stat --db "$prefix/db-pc" >/dev/null
# The Python package: imported from the prefix, it loads the library installed with it (found
# through wharf/_installed.py, with neither WHARF_LIBRARY nor LD_LIBRARY_PATH).
py=$(find "$prefix" -path '*/wharf/__init__.py' | head -n 1)
[ -n "$py" ] || { echo "FAIL: the Python package is not installed"; exit 1; }
pydir=$(dirname "$(dirname "$py")")
test -f "$pydir/wharf/py.typed" || { echo "FAIL: wharf/py.typed is not installed"; exit 1; }
loaded=$(cd "$prefix" && env -u WHARF_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$pydir" \
  PYTHONDONTWRITEBYTECODE=1 python3 -c 'import os, wharf; print(os.path.realpath(wharf.library_path))')
[ "$loaded" = "$(realpath "$libdir/libwharf.so.0")" ] ||
  { echo "FAIL: the installed Python package loaded $loaded, not $libdir/libwharf.so.0"; exit 1; }
echo "installed: $(ls "$libdir" | tr '\n' ' ')bin/wharf ${pydir#"$prefix/"}/wharf (loads ${loaded#"$prefix/"})"
