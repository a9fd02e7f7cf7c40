#!/bin/sh
# Installs the build tree into a scratch prefix, then runs the Go package's tests against the
# installed library only, as a Go user would build it (`#cgo pkg-config: wharf`), with the race
# detector. Usage: install_test.sh BUILD_DIR PREFIX GO_PACKAGE_DIR
set -eu
build=$1
prefix=$2
package=$3
. "$(dirname "$0")/../install_prefix.sh"
install_prefix "$build" "$prefix"
export LD_LIBRARY_PATH="$(pkg-config --variable=libdir wharf)"
# Go's caches in the scratch prefix: the test must not write outside the build tree.
export GOCACHE="$prefix/gocache" GOPATH="$prefix/gopath" GOFLAGS=-mod=mod GOTOOLCHAIN=local
cd "$package"
go vet ./...
go test -race -count=1 ./...
