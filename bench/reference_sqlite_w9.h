// W9-contended's SQLite reference: counters in a table, the fact a row of an outbox table in the
// same transaction; one connection per thread, writers serialized by BEGIN IMMEDIATE (WAL,
// synchronous=FULL, busy_timeout), as SQLite applications usually do.
#pragma once

#include <string>

#include "bench/w9_shape.h"

namespace wharf::bench {

// Creates "<dir>/outbox.sqlite" (tables counters, with the K counters at 0, and outbox) and runs
// W9 against it. Per transaction: BEGIN IMMEDIATE; UPDATE counters SET
// value = value + 1 WHERE key = ? RETURNING value; INSERT INTO outbox (W1's columns; payload the
// new value, 8 bytes big-endian); COMMIT. SQLITE_BUSY (the busy_timeout ran out, or a commit
// refused) rolls back and runs the transaction again, counted as a conflict. Ends by checking the
// counters and the outbox (CheckW9Outcome): a mismatch is the run's error.
W9Measurement RunW9SqliteFull(const W9Shape& shape, const std::string& dir);

}  // namespace wharf::bench
