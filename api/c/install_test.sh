#!/bin/sh
# Installs the build tree into a scratch prefix, then builds the C example as an outside program
# would (`pkg-config --cflags --libs wharf`) and runs it against the installed library.
# Usage: install_test.sh BUILD_DIR PREFIX EXAMPLE_C CC
set -eu
build=$1
prefix=$2
example=$3
cc=$4
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 || {
  cat "$prefix.log"
  exit 1
}
pc=$(find "$prefix" -name wharf.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no wharf.pc installed under $prefix"; exit 1; }
test -f "$prefix/include/wharf.h" || { echo "FAIL: wharf.h not installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs wharf)
echo "pkg-config --cflags --libs wharf: $flags"
libdir=$(pkg-config --variable=libdir wharf)
test -e "$libdir/libwharf.so.0" || { echo "FAIL: $libdir/libwharf.so.0 missing"; exit 1; }
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -o "$prefix/orders" "$example" $flags
LD_LIBRARY_PATH="$libdir" "$prefix/orders" "$prefix/db"
