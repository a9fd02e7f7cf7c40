// Reference: raw RocksDB doing W1's transactions with WriteOptions.sync = true, from the same P
// threads. The gap between this and Wharf is the engine's overhead (or gain) over its own store.
#pragma once

#include <string>

#include "bench/w1_shape.h"

namespace wharf::bench {

// Creates a database in `dir` (which must be empty) and runs W1 against it. Per transaction: one
// WriteBatch with `batch` facts (12-byte key: 4-byte partition, 8-byte sequence, both big-endian;
// value: the 100-byte payload) in column family "outbox", plus one state row in "state".
// facts_per_sync comes from RocksDB's WAL_FILE_SYNCED ticker.
W1Measurement RunW1RocksDbSync(const W1Shape& shape, const std::string& dir);

}  // namespace wharf::bench
