#!/bin/bash
# Builds the Debian packages of a release build, installs them on this machine (root: CI), builds
# and runs the C and C++ examples against the installed packages only (pkg-config, and CMake's
# find_package), runs the installed CLI and imports the installed Python package, then removes the
# packages again. Usage: packaging/deb_test.sh BUILD_DIR
set -euo pipefail
build=$(realpath "$1")
source_dir=$(realpath "$(dirname "$0")/..")
work=$(mktemp -d)
packages=(libwharf0 libwharf-dev wharf python3-wharf)
cleanup() {
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$build" && rm -f ./*.deb && cpack -G DEB >"$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
debs=("$build"/*.deb)
echo "deb: built ${debs[*]##*/}"
for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Package Depends | sed 's/^/deb:   /'; done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; exit 1; }

cc -std=c99 -Wall -Wextra -Werror -o "$work/orders-c" "$source_dir/api/examples/orders.c" \
  $(pkg-config --cflags --libs wharf)
"$work/orders-c" "$work/db-c" | tail -n 1
c++ -Wall -Wextra -Werror -o "$work/orders-cc" "$source_dir/api/examples/orders.cc" \
  $(pkg-config --cflags --libs wharf++)
"$work/orders-cc" "$work/db-cc"
cmake -S "$source_dir/api/examples" -B "$work/cmake" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
"$work/cmake/orders" "$work/db-cmake" | grep "3 orders projected, total 4450 cents"
wharf --version 2>/dev/null || wharf version
wharf stat --db "$work/db-cc" | head -n 3
(cd "$work" && env -u WHARF_LIBRARY /usr/bin/python3 -c 'import wharf; print("python3: wharf",
  wharf.__version__, "from", wharf.__file__, "loads", wharf.library_path)')
echo "deb: installed packages build and run the examples"
