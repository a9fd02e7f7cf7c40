#!/bin/sh
# The Go binding's tests against an installed library only, as a Go user builds it
# (`#cgo pkg-config: wharf`). Usage: install_test.sh MODE BUILD_DIR PREFIX GO_PACKAGE_DIR
#   binding  installs the build tree into the scratch PREFIX, follows the install steps of
#            docs/bindings.md ("Go") word for word in a new module OUTSIDE the repository (go mod
#            init, go mod edit -require/-replace, a main.go importing the package, go build) and
#            runs the program, then runs go test of the package: every test and example (ctest
#            go_binding; the other modes use the PREFIX it installed)
#   vet      gofmt -l and go vet of the package (ctest go_vet)
#   race     go test -race of the tests where goroutines meet the library's threads (go_race)
set -eu
mode=$1
build=$2
prefix=$3
package=$4
module=github.com/wharf/wharf/api/go
. "$(dirname "$0")/../install_prefix.sh"
# Go's caches in the scratch prefix: the test must not write outside the build tree.
export GOCACHE="$prefix.go/cache" GOPATH="$prefix.go/path" GOTOOLCHAIN=local GOFLAGS=
export GOPROXY=off # nothing is downloaded: the module needs only the standard library

case $mode in
binding)
  install_prefix "$build" "$prefix" # sets PKG_CONFIG_PATH to the prefix's pkg-config directory
  ;;
*)
  PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name wharf.pc | head -n 1)")
  export PKG_CONFIG_PATH
  ;;
esac
# The documented rule: a prefix whose wharf.pc links with an rpath (prefixes other than /usr and
# /usr/local) needs nothing more; otherwise the program needs LD_LIBRARY_PATH (or ldconfig).
if ! pkg-config --libs wharf | grep -q -- '-Wl,-rpath'; then
  LD_LIBRARY_PATH="$(pkg-config --variable=libdir wharf)"
  export LD_LIBRARY_PATH
fi

case $mode in
binding)
  app="$prefix.go/myapp"
  rm -rf "$app"
  mkdir -p "$app"
  cd "$app"
  go mod init example.com/myapp
  go mod edit -require="$module@v0.0.0" -replace="$module=$package"
  cat >main.go <<'EOF'
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	wharf "github.com/wharf/wharf/api/go"
)

func main() {
	dir, err := os.MkdirTemp("", "myapp")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	engine, err := wharf.Open(filepath.Join(dir, "db"), "")
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	if err := engine.DeclareTypes("OrderPlaced"); err != nil {
		log.Fatal(err)
	}
	txn, err := engine.Begin()
	if err != nil {
		log.Fatal(err)
	}
	txn.Emit("OrderPlaced", []byte("alice"), []byte("o-1"))
	id, err := txn.Commit()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wharf %s: committed fact %d\n", wharf.Version(), id)
}
EOF
  go build -o myapp .
  out=$(./myapp)
  echo "$out"
  case $out in
  *"committed fact 1") ;;
  *) echo "FAIL: the program outside the repository printed '$out'"; exit 1 ;;
  esac
  cd "$package"
  go test -count=1 ./...
  ;;
vet)
  cd "$package"
  gofmt_out=$(gofmt -l .)
  [ -z "$gofmt_out" ] || { echo "FAIL: not gofmt-ed: $gofmt_out"; exit 1; }
  go vet ./...
  ;;
race)
  cd "$package"
  # The tests where goroutines meet the library's threads (asynchronous deliveries, trace and
  # commit callbacks, contexts, handlers, backups' progress); the whole package takes several
  # minutes under the race detector on 2 cores.
  go test -race -count=1 \
    -run 'Async|KeyConcurrency|Trace|Context|Projection|HandlerFailures|Deadlock|Progress|TransactLoses|Example' \
    ./...
  ;;
*)
  echo "install_test.sh: unknown mode '$mode' (binding, vet or race)"
  exit 2
  ;;
esac
