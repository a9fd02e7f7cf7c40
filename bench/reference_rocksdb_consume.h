// References for the consuming workloads on raw RocksDB (see reference_rocksdb.h for the layout).
//   W2: one reader thread iterates the outbox in batches of 100; per batch one WriteBatch with a
//       state row per fact plus the cursor, WriteOptions.sync = true.
//   W3: one producer thread commits W1 transactions of one fact (DB::Write, sync = true) and then
//       publishes the fact under a mutex and notifies a condition variable; one consumer thread
//       waits on it and marks the new facts seen. The floor of a durable hand-off to a waiting
//       thread: commit-ack -> consumer-seen is the wake-up alone.
#pragma once

#include <string>

#include "bench/w2_shape.h"
#include "bench/w3_shape.h"

namespace wharf::bench {

// Loaded by one thread, transactions of 10 000 facts (sync): the layout does not depend on how.
inline constexpr W2Precommit kW2RocksDbPrecommit{1, 10000};

// Creates the database in `dir` (empty) and commits `facts` W1 facts (rounded up to whole
// transactions), their keys drawn from `keys`. Sets *committed and *seconds. Returns "" or an
// error.
std::string PrecommitW2RocksDb(const std::string& dir, uint64_t facts, KeyDistribution keys,
                               uint64_t* committed, double* seconds);

// Consumes the loaded outbox from the start until done or kW2ReferenceBudget_s passed.
W2Measurement ConsumeW2RocksDb(const std::string& dir, uint64_t committed);

// Creates the database in `dir` (empty) and runs W3 (shape.workers is not used).
W3Measurement RunW3RocksDb(const W3Shape& shape, const std::string& dir);

}  // namespace wharf::bench
