#!/bin/bash
# Builds the Debian packages of a release build, installs them on this machine (root: CI), checks
# where they put files (the libraries in /usr/lib/<multiarch>, the Python package where
# /usr/bin/python3 looks) and that libwharf-dev depends on the -dev package of every library its
# Libs.private names, builds and runs the C and C++ examples against the installed packages only
# (pkg-config, shared and static, and CMake's find_package), runs the installed CLI and imports the
# installed Python package, then removes the packages again. A build directory configured with
# another CMAKE_INSTALL_LIBDIR (one configured before the multiarch default) is reconfigured with
# the multiarch one first. Usage: packaging/deb_test.sh BUILD_DIR
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

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$libdir" != "lib/$multiarch" ]; then
  echo "deb: $build installs libraries into $libdir: reconfiguring it with lib/$multiarch"
  cmake -B "$build" -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" >"$work/cmake-libdir.log" 2>&1 ||
    { cat "$work/cmake-libdir.log"; exit 1; }
fi
(cd "$build" && rm -f ./*.deb && cpack -G DEB >"$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
debs=("$build"/*.deb)
echo "deb: built ${debs[*]##*/}"
for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Package Depends | sed 's/^/deb:   /'; done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; exit 1; }

# Where the files went.
for library in libwharf.so.0 libwharf++.so.0; do
  dpkg -L libwharf0 | grep -x "/usr/lib/$multiarch/$library" >/dev/null ||
    { echo "FAIL: libwharf0 has no /usr/lib/$multiarch/$library:"; dpkg -L libwharf0; exit 1; }
done
if dpkg -L libwharf0 libwharf-dev | grep -E '^/usr/lib/[^/]+\.(so|a)'; then
  echo "FAIL: libraries outside /usr/lib/$multiarch (above)"; exit 1
fi
pydir=$(dpkg -L python3-wharf | grep '/wharf/__init__.py$' | xargs dirname | xargs dirname)
/usr/bin/python3 -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$pydir" ||
  { echo "FAIL: python3-wharf installs into $pydir, not on /usr/bin/python3's sys.path"; exit 1; }
if pkg-config --libs wharf++ | grep rpath >/dev/null; then
  echo "FAIL: /usr's wharf++.pc sets an rpath: $(pkg-config --libs wharf++)"; exit 1
fi
echo "deb: libraries in /usr/lib/$multiarch, the Python package in $pydir, no rpath in the .pc files"
# Each library Libs.private names resolves to a file of a package libwharf-dev depends on.
depends=$(dpkg-deb -f "$build"/libwharf-dev_*.deb Depends | tr ',|' '\n\n' | sed 's/(.*//; s/ //g')
for lib in $(pkg-config --static --libs-only-l wharf++ | tr ' ' '\n' | sed -n 's/^-l//p'); do
  case "$lib" in wharf | wharf++) continue ;; esac
  file=$(cc -print-file-name="lib$lib.so")
  [ -e "$file" ] || file=$(cc -print-file-name="lib$lib.a")
  owner=$(dpkg -S "$(realpath -s "$file")" 2>/dev/null | cut -d: -f1 | head -n 1)
  grep -qx "$owner" <<<"$depends" ||
    { echo "FAIL: Libs.private's -l$lib is in package '${owner:-none}', not a dependency of libwharf-dev"; exit 1; }
done
echo "deb: libwharf-dev depends on the package of each library in Libs.private"

cc -std=c99 -Wall -Wextra -Werror -o "$work/orders-c" "$source_dir/api/examples/orders.c" \
  $(pkg-config --cflags --libs wharf)
"$work/orders-c" "$work/db-c" | tail -n 1
c++ -std=c++20 -Wall -Wextra -Werror -o "$work/orders-cc" "$source_dir/api/examples/orders.cc" \
  $(pkg-config --cflags --libs wharf++)
"$work/orders-cc" "$work/db-cc"
# The static link line of docs/bindings.md, against the packages.
c++ -std=c++20 "$source_dir/api/examples/orders.cc" $(pkg-config --cflags wharf++) -o "$work/orders-static" \
  $(pkg-config --variable=archive wharf++) $(pkg-config --variable=archive_libs wharf++)
"$work/orders-static" "$work/db-static" | grep "3 orders projected, total 4450 cents"
cmake -S "$source_dir/api/examples" -B "$work/cmake" >"$work/cmake.log" 2>&1 &&
  cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
"$work/cmake/orders" "$work/db-cmake" | grep "3 orders projected, total 4450 cents"
wharf --version 2>/dev/null || wharf version
wharf stat --db "$work/db-cc" | head -n 3
(cd "$work" && env -u WHARF_LIBRARY /usr/bin/python3 -c 'import wharf; print("python3: wharf",
  wharf.__version__, "from", wharf.__file__, "loads", wharf.library_path)')
echo "deb: installed packages build and run the examples"
