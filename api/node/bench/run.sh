#!/bin/sh
# Node against the C ABI in the same run: W1-append (C: 16 producer threads; Node: one event loop,
# 64 transactions in flight; B=10, durability sync) and W8-slow-subscriber (5 ms async handler,
# keyConcurrency 64, 16 partitions), each C then Node, `ROUNDS` times (default 1), printing every
# JSON line and the ratios Node / C (goals: W1 >= 0.70, W8 >= 0.50).
# Usage: run.sh C_ABI_BENCH [W8_FACTS]
#   C_ABI_BENCH: build/release/bench/c_abi_bench (`ninja c_abi_bench`: bench/c_abi_bench.c);
#   WHARF_NODE_ADDON: the build tree's addon (build/release/api/node/wharf.node) when the package
#   was not installed with npm. Example, from the repository's root:
#     WHARF_NODE_ADDON=build/release/api/node/wharf.node ROUNDS=5 \
#       api/node/bench/run.sh build/release/bench/c_abi_bench 100000
set -eu
c_bench=$1
facts=${2:-200000}
here=$(dirname "$0")
rounds=${ROUNDS:-1}
ratio() {  # ratio NODE_LINE C_LINE
  node -e 'const [n, c] = process.argv.slice(1).map((l) => JSON.parse(l).facts_per_s);
    console.log((n / c).toFixed(2))' "$1" "$2"
}
i=0
while [ "$i" -lt "$rounds" ]; do
  i=$((i + 1))
  c_w1=$("$c_bench" w1 --producers 16 --batch 10 --seconds 3)
  node_w1=$(node "$here/w1.mjs" --in-flight 64 --batch 10 --seconds 3)
  c_w8=$("$c_bench" w8 --facts "$facts" --key-concurrency 64 --partitions 16 --wait-ms 5)
  node_w8=$(node "$here/w8.mjs" --facts "$facts" --key-concurrency 64 --partitions 16 --wait-ms 5)
  printf '%s\n%s\n%s\n%s\n' "$c_w1" "$node_w1" "$c_w8" "$node_w8"
  echo "round $i: W1 node/c = $(ratio "$node_w1" "$c_w1"), W8 node/c = $(ratio "$node_w8" "$c_w8")"
done
