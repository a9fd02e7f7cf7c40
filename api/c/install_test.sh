#!/bin/sh
# Installs the build tree into a scratch prefix, then builds the C example as an outside program
# would (`pkg-config --cflags --libs wharf`) and runs it against the installed library.
# Usage: install_test.sh BUILD_DIR PREFIX EXAMPLE_C CC
set -eu
build=$1
prefix=$2
example=$3
cc=$4
. "$(dirname "$0")/../install_prefix.sh"
install_prefix "$build" "$prefix"
flags=$(pkg-config --cflags --libs wharf)
echo "pkg-config --cflags --libs wharf: $flags"
libdir=$(pkg-config --variable=libdir wharf)
test -e "$libdir/libwharf.so.0" || { echo "FAIL: $libdir/libwharf.so.0 missing"; exit 1; }
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -o "$prefix/orders" "$example" $flags
LD_LIBRARY_PATH="$libdir" "$prefix/orders" "$prefix/db"
