#!/bin/sh
# Installs the build tree into a scratch prefix, then builds the C example as an outside program
# would (`pkg-config --cflags --libs wharf`) and runs it against the installed library without
# LD_LIBRARY_PATH (the .pc's rpath, for a prefix outside /usr and /usr/local). Then checks what an
# install into /usr and /usr/local (through DESTDIR) would choose: no rpath there, and the Python
# package where Debian's /usr/bin/python3 looks.
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
case "$flags" in
  *"-Wl,-rpath,$libdir"*) ;;
  *) echo "FAIL: wharf.pc of prefix $prefix has no -Wl,-rpath,$libdir"; exit 1 ;;
esac
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror -o "$prefix/orders" "$example" $flags
env -u LD_LIBRARY_PATH "$prefix/orders" "$prefix/db" | tail -n 1

# A system prefix: staged with DESTDIR, as the Debian packages and `sudo cmake --install` do.
for system in /usr/local /usr; do
  stage="$prefix-stage$(echo "$system" | tr / -)"
  rm -rf "$stage"
  DESTDIR="$stage" cmake --install "$build" --prefix "$system" >"$stage.log" 2>&1 ||
    { cat "$stage.log"; exit 1; }
  pc=$(find "$stage" -name wharf.pc)
  if grep -q rpath "$pc"; then echo "FAIL: $pc (prefix $system) sets an rpath"; exit 1; fi
  py=$(find "$stage" -path '*/wharf/__init__.py' | head -n 1)
  pydir=$(dirname "$(dirname "$py")")
  pydir=${pydir#"$stage"}
  if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$pydir" || {
      echo "FAIL: prefix $system: the Python package went to $pydir, not on /usr/bin/python3's" \
        "sys.path"; exit 1; }
  fi
  echo "prefix $system: $(dirname "${pc#"$stage"}")/wharf.pc without rpath, Python package in $pydir"
done
