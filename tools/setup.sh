#!/usr/bin/env bash
# The README's quick start. On a fresh Debian 12 machine:
#   tools/setup.sh demo   installs what is missing, builds (release) and runs the demo
#   tools/setup.sh test   installs what is missing, builds (release) and runs the whole test suite
#   tools/setup.sh package  builds the Debian packages (CPack), installs them, builds and runs the
#                         examples against them, removes them (root; CI runs it)
#   tools/setup.sh sanitize  the test suite under ASan+UBSan (clang 14) and under TSan
#   tools/setup.sh fuzz   builds the libFuzzer targets (the ASan build) and runs each for
#                         FUZZ_SECONDS (45)
#   tools/setup.sh soak   300 SIGKILLs under load (SOAK_KILLS), then each fuzzer for 10 minutes
# Package installation needs root (or sudo); everything else runs as the calling user.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config git python3
  librocksdb-dev liburing-dev libxxhash-dev libmimalloc-dev libconcurrentqueue-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  libcli11-dev libfmt-dev libfyaml-dev libsimdjson-dev libcpp-httplib-dev golang-go redis-server
  nats-server libhiredis-dev libnats-dev openssl
  prometheus tmux
  # The Node.js binding (api/node): node, its headers (node_api.h) and npm. NodeSource's nodejs
  # has all three; Debian's needs libnode-dev and npm too, which conflict with NodeSource's: not
  # listed, so that a machine with NodeSource's node installs nothing here.
  nodejs
  python3-venv python3-setuptools python3-wheel mypy)

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

# The ASan+UBSan build (preset asan) is clang's: the same objects serve the suite and the fuzzers.
# lld: the sanitizer builds link about 130 test programs each; lld links one in half the time.
CLANG_PACKAGES=(clang-14 libclang-rt-14-dev lld-14)

# Runs every fuzz target for $1 seconds from its seed corpus (tests/fuzz/corpus/<name>); new
# inputs go to build/asan/fuzz/corpus/<name>, crashes to build/asan/fuzz/artifacts/. Any crash,
# input slower than 1 s (-timeout) or memory past 2 GiB (-rss_limit_mb) fails.
run_fuzzers() {
  local seconds=$1 failed=0 out=build/asan/fuzz
  mkdir -p "$out/artifacts"
  for binary in build/asan/tests/fuzz/fuzz_*; do
    local name=${binary##*/fuzz_}
    mkdir -p "$out/corpus/$name"
    echo "fuzz: $name for ${seconds}s" >&2
    if ! LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp" \
        "$binary" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$out/artifacts/$name-" \
        "$out/corpus/$name" "tests/fuzz/corpus/$name" >"$out/$name.log" 2>&1; then
      echo "fuzz: $name FAILED ($out/$name.log):" >&2
      grep -A30 -m1 "ERROR: \|==ERROR\|runtime error\|deadly signal\|timeout" "$out/$name.log" >&2 || tail -40 "$out/$name.log" >&2
      failed=1
    else
      grep -E "stat::number_of_executed_units|cov:" "$out/$name.log" | tail -2 >&2
    fi
  done
  return $failed
}

# WHARF_UNITY_BUILD (on unless set to OFF): the library and the CLI compile in batches, which
# takes minutes off a clean build (the library's share to about a third); set it to OFF to work
# on the code (with it on, a change rebuilds a batch of eight files).
build() {  # build PRESET [TARGET...]
  local preset=$1
  shift
  cmake --preset "$preset" -DWHARF_UNITY_BUILD="${WHARF_UNITY_BUILD:-ON}" >/dev/null
  cmake --build --preset "$preset" "$@"
}

case "${1:-demo}" in
  demo)
    install_missing
    build release --target wharf_demo wharf_cli
    exec build/release/tools/wharf_demo
    ;;
  test)
    install_missing
    build release
    ctest --preset release
    ;;
  package)  # the Debian packages: built, installed, examples built against them, removed (root)
    install_missing
    build release
    packaging/deb_test.sh build/release
    ;;
  sanitize)  # ASan+UBSan and TSan builds of the test suite (CI runs these too)
    PACKAGES+=("${CLANG_PACKAGES[@]}")
    install_missing
    for preset in asan tsan; do
      build "$preset"
      ctest --preset "$preset"
    done
    ;;
  fuzz)  # libFuzzer (clang, ASan+UBSan): every target for FUZZ_SECONDS (CI runs this too)
    PACKAGES+=("${CLANG_PACKAGES[@]}")
    install_missing
    build asan --target fuzzers  # after `sanitize`, already built
    run_fuzzers "${FUZZ_SECONDS:-45}"
    ;;
  soak)  # the long attacks: SOAK_KILLS SIGKILLs under load, each fuzzer for SOAK_FUZZ_SECONDS
    PACKAGES+=("${CLANG_PACKAGES[@]}")
    install_missing
    build release --target kill_under_load_test kill_load_child
    WHARF_KILLS="${SOAK_KILLS:-300}" build/release/tests/kill_under_load_test
    build asan --target fuzzers
    run_fuzzers "${SOAK_FUZZ_SECONDS:-600}"
    ;;
  *)
    echo "usage: tools/setup.sh demo|test|package|sanitize|fuzz|soak" >&2
    exit 2
    ;;
esac
