// Reference: an SQLite outbox table (WAL, synchronous=FULL) doing W1's transactions — what an
// embedded user would otherwise pick. P threads, each with its own connection; writers serialize
// on BEGIN IMMEDIATE with a busy_timeout, as SQLite applications usually do.
#pragma once

#include <string>

#include "bench/w1_shape.h"

namespace wharf::bench {

// Creates "<dir>/outbox.sqlite" and runs W1 against it. Per transaction: BEGIN IMMEDIATE, `batch`
// inserts into table outbox, one upsert into table orders, COMMIT. The commit latency covers
// BEGIN IMMEDIATE to COMMIT, since the inserts run while holding the write lock. facts_per_sync
// is left 0 (every COMMIT syncs the WAL, plus checkpoints).
W1Measurement RunW1SqliteFull(const W1Shape& shape, const std::string& dir);

}  // namespace wharf::bench
