#!/bin/sh
# Fails (and prints the lines) when a source includes a RocksDB header (<rocksdb/...>) outside
# engine/store/ and the allow-list below: the store layer is the only code that talks to RocksDB
# (engine/store/store.h, store_batch.h, tables/), so that its types and calls do not spread.
# Usage: check_rocksdb_includes.sh SOURCE_DIR
set -eu
root=$1
cd "$root"

# Where a RocksDB header is still included outside engine/store/, and why (an extended regular
# expression over paths relative to SOURCE_DIR):
#   io/                  implements RocksDB's FileSystem, Logger and IOStatus interfaces
#   engine/backup/       drives RocksDB's BackupEngine and a StackableDB over the store's DB
#   engine/metrics/engine_metrics.cc   reads RocksDB's properties and tickers (to move behind Store)
#   engine/admin/(admin|leases).cc     read through Store::db() (to move behind Store)
#   tools/cli/main.cc    prints RocksDB's version
#   bench/, tests/       reference RocksDB baselines; tests that look at the store's RocksDB
allowed='^(engine/store/|io/|engine/backup/|engine/metrics/engine_metrics\.cc|engine/admin/(admin|leases)\.cc|tools/cli/main\.cc|bench/|tests/)'

dirs=
for d in engine api io tools bench tests; do
  [ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086
bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]rocksdb/' $dirs \
  --include='*.cc' --include='*.h' --include='*.c' --include='*.cpp' |
  grep -vE "$allowed" || true)
if [ -n "$bad" ]; then
  echo "FAIL: RocksDB headers included outside engine/store/ (go through Store or a table module,"
  echo "or add the file to the allow-list in tools/check_rocksdb_includes.sh, saying why):"
  echo "$bad"
  exit 1
fi
echo "OK: RocksDB headers are included only in engine/store/ and the allow-list"
