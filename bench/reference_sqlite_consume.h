// References for the consuming workloads on SQLite (WAL, synchronous=FULL; see reference_sqlite.h
// for the outbox table).
//   W2: one connection reads the next 100 outbox rows after its cursor and writes one row per fact
//       into orders_by_id plus the cursor update, in one transaction (BEGIN IMMEDIATE ... COMMIT).
//   W3: one producer connection commits W1 transactions of one fact; a consumer connection polls
//       the outbox every millisecond (SELECT id FROM outbox WHERE id > last) and marks the new
//       rows seen. What an application without a notification path gets.
#pragma once

#include <string>

#include "bench/w2_shape.h"
#include "bench/w3_shape.h"

namespace wharf::bench {

// Loaded by one connection, transactions of 10 000 facts (several writers would only queue on
// SQLite's write lock).
inline constexpr W2Precommit kW2SqlitePrecommit{1, 10000};

// Creates the database in `dir` (empty) and commits `facts` W1 facts (rounded up to whole
// transactions), their keys drawn from `keys`. Sets *committed and *seconds. Returns "" or an
// error.
std::string PrecommitW2Sqlite(const std::string& dir, uint64_t facts, KeyDistribution keys,
                              uint64_t* committed, double* seconds);

// Consumes the loaded outbox from the start until done or kW2ReferenceBudget_s passed.
W2Measurement ConsumeW2Sqlite(const std::string& dir, uint64_t committed);

// Poll interval of the W3 consumer.
inline constexpr int kW3SqlitePoll_us = 1000;

// Creates the database in `dir` (empty) and runs W3 (shape.workers is not used).
W3Measurement RunW3Sqlite(const W3Shape& shape, const std::string& dir);

}  // namespace wharf::bench
