#!/usr/bin/env bash
# The README's quick start. On a fresh Debian 12 machine:
#   tools/setup.sh demo   installs what is missing, builds (release) and runs the demo
#   tools/setup.sh test   installs what is missing, builds (release) and runs the whole test suite
# Package installation needs root (or sudo); everything else runs as the calling user.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config git python3
  librocksdb-dev liburing-dev libxxhash-dev libmimalloc-dev libconcurrentqueue-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  libcli11-dev libfmt-dev libfyaml-dev libsimdjson-dev redis-server)

install_missing() {
  local missing=()
  for package in "${PACKAGES[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {  # build PRESET [TARGET...]
  local preset=$1
  shift
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" "$@"
}

case "${1:-demo}" in
  demo)
    install_missing
    build release --target wharf_demo
    exec build/release/tools/wharf_demo
    ;;
  test)
    install_missing
    build release
    ctest --preset release
    ;;
  sanitize)  # ASan+UBSan and TSan builds of the test suite (CI runs these too)
    install_missing
    for preset in asan tsan; do
      build "$preset"
      ctest --preset "$preset"
    done
    ;;
  *)
    echo "usage: tools/setup.sh demo|test|sanitize" >&2
    exit 2
    ;;
esac
