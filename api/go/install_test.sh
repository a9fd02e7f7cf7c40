#!/bin/sh
# Installs the build tree into a scratch prefix, then runs the Go package's tests against the
# installed library only, as a Go user would build it (`#cgo pkg-config: wharf`), with the race
# detector. Usage: install_test.sh BUILD_DIR PREFIX GO_PACKAGE_DIR
set -eu
build=$1
prefix=$2
package=$3
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 || {
  cat "$prefix.log"
  exit 1
}
pc=$(find "$prefix" -name wharf.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no wharf.pc installed under $prefix"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
export LD_LIBRARY_PATH="$(pkg-config --variable=libdir wharf)"
# Go's caches in the scratch prefix: the test must not write outside the build tree.
export GOCACHE="$prefix/gocache" GOPATH="$prefix/gopath" GOFLAGS=-mod=mod GOTOOLCHAIN=local
cd "$package"
go vet ./...
go test -race -count=1 ./...
