#!/bin/sh
# Installs the build tree into a scratch prefix, then builds the C++ example as outside programs
# would, against the installed files only: with each link line of docs/bindings.md's "Install and
# link" block as written there (pkg-config, shared and static), and as a CMake project with
# find_package(wharf CONFIG) linking wharf::wharf++. Runs each without LD_LIBRARY_PATH, checks that
# a -std=c++23 build keeps its standard (the .pc forces none) and that C++17 is refused by name,
# and checks the installed CLI and Python module.
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
"$cxx" -std=c++20 -Wall -Wextra -Werror -o "$prefix/orders-pc" "$examples/orders.cc" $flags
out=$(env -u LD_LIBRARY_PATH "$prefix/orders-pc" "$prefix/db-pc")
echo "$out" | grep -q "3 orders projected, total 4450 cents" || { echo "FAIL: pkg-config build"; exit 1; }

# The link lines users copy (docs/bindings.md), with app.c/app.cc the examples: each builds a
# program that runs without LD_LIBRARY_PATH; the static one needs no libwharf*.so at all.
bindings="$(dirname "$0")/../../docs/bindings.md"
awk '/^## Install and link/ { section = 1 } section && /^```sh/ { block = 1; next }
     block && /^```/ { exit } block && !/^#/ { printf "%s", $0; if (!/\\$/) print "" }' "$bindings" |
  sed 's/\\$//; s/\\ */ /g' >"$prefix/link-lines.sh"
[ "$(grep -c . "$prefix/link-lines.sh")" -ge 3 ] ||
  { echo "FAIL: no link lines found in $bindings"; cat "$prefix/link-lines.sh"; exit 1; }
line_index=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  line_index=$((line_index + 1))
  program="$prefix/link-line-$line_index"
  command=$(printf '%s' "$line" | sed "s|app\.cc|$examples/orders.cc|; s|app\.c |$examples/orders.c |;
    s|-o app|-o $program|; s|#.*||")
  sh -c "$command" || { echo "FAIL: docs/bindings.md's link line fails: $line"; exit 1; }
  env -u LD_LIBRARY_PATH "$program" "$program.db" | grep -q "3 orders projected, total 4450 cents" ||
    { echo "FAIL: the program of docs/bindings.md's link line did not run: $line"; exit 1; }
  case "$line" in
    *archive*)
      if objdump -p "$program" | grep -q 'NEEDED *libwharf'; then
        echo "FAIL: the static link line linked a shared libwharf: $line"; exit 1
      fi
      echo "static link line: $(objdump -p "$program" | grep -c NEEDED) shared libraries, no libwharf" ;;
  esac
done <"$prefix/link-lines.sh"
echo "docs/bindings.md: $line_index link lines build programs that run without LD_LIBRARY_PATH"

# The standard is the program's: C++23 stays C++23; below C++20 the headers say what they need.
printf '#include "wharf/engine.h"\n#include <cstdio>\nint main() { std::printf("%%ld\\n", __cplusplus); }\n' \
  >"$prefix/standard.cc"
# shellcheck disable=SC2086
"$cxx" -std=c++23 -o "$prefix/standard" "$prefix/standard.cc" $flags
standard=$("$prefix/standard")
[ "$standard" -gt 202002 ] || { echo "FAIL: -std=c++23 with wharf++.pc became __cplusplus $standard"; exit 1; }
# shellcheck disable=SC2086
if "$cxx" -std=c++17 -o "$prefix/standard17" "$prefix/standard.cc" $flags 2>"$prefix/standard17.log" ||
   ! grep -q "needs C++20 or later" "$prefix/standard17.log"; then
  echo "FAIL: a C++17 build of wharf/engine.h did not stop at the headers' C++20 #error"
  head -5 "$prefix/standard17.log"; exit 1
fi
echo "-std=c++23 with wharf++.pc: __cplusplus $standard; -std=c++17: refused by the headers' #error"

cmake -S "$examples" -B "$prefix/example-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" >"$prefix/example-build.log" 2>&1 ||
  { cat "$prefix/example-build.log"; exit 1; }
cmake --build "$prefix/example-build" >>"$prefix/example-build.log" 2>&1 ||
  { cat "$prefix/example-build.log"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$prefix/example-build/orders" "$prefix/db-cmake")
echo "$out" | grep -q "3 orders projected, total 4450 cents" || { echo "FAIL: CMake build"; exit 1; }
echo "find_package(wharf CONFIG) + wharf::wharf++: $out"

test -x "$prefix/bin/wharf" || { echo "FAIL: the wharf CLI is not installed"; exit 1; }
env -u LD_LIBRARY_PATH "$prefix/bin/wharf" stat --db "$prefix/db-pc" >/dev/null
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
