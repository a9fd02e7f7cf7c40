// W9-contended's RocksDB references: RocksDB's own transactions, optimistic
// (OptimisticTransactionDB) and pessimistic (TransactionDB), WriteOptions.sync = true, the counters
// in column family "state" and the fact a Put into "outbox" in the same transaction.
#pragma once

#include <string>

#include "bench/w9_shape.h"

namespace wharf::bench {

// Both run, per transaction on one reused rocksdb::Transaction: GetForUpdate of the counter (the
// optimistic one records the key and its sequence for validation at Commit; the pessimistic one
// locks it), Put of the count + 1 (8 bytes big-endian) in "state", Put of the fact in "outbox"
// under W1's 12-byte partition·sequence key (partition = counter index mod 16, sequence from a
// shared atomic drawn after the read, so one counter's facts are in key order), value = counter
// key + new count; Commit. Retried from the start, counted as a conflict: optimistic on Busy or
// TryAgain at Commit (a key read was written since), pessimistic on TimedOut (the lock wait,
// default 1 s) or Busy (deadlock) at GetForUpdate or Commit. Default options otherwise; each
// run ends by checking the counters and the outbox (CheckW9Outcome).
W9Measurement RunW9RocksDbOptimistic(const W9Shape& shape, const std::string& dir);
W9Measurement RunW9RocksDbPessimistic(const W9Shape& shape, const std::string& dir);

}  // namespace wharf::bench
