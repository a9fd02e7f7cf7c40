// TxnRep: a transaction as the committer sees it. Producers encode everything (keys, sealed
// records, checksums) in their own thread; the committer only checks preconditions, stamps LSNs
// and appends to the group's WriteBatch.
//
// Ownership: a blocking commit's rep lives in the producer's Txn, which waits on `done` and does
// not touch the rep until it is set; the committer never touches the rep after setting it. An
// async commit's rep is owned by the committer and deleted after its callback ran.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/commit/read_set.h"
#include "engine/commit/read_snapshots.h"
#include "engine/store/store.h"
#include "wharf/engine.h"

namespace wharf::internal {

struct WriteOp {
  Cf cf;
  bool is_delete = false;
  std::string key;
  std::string value;           // sealed
  std::string range_end = {};  // with is_delete: delete every key in [key, range_end) (trimming)
};

struct FactOp {
  uint32_t partition = 0;
  int64_t deliver_at_ms = 0;  // > 0: held in the timers family instead of the outbox
  std::string record;         // sealed fact record (codec::kFactRecordVersion)
  // The committer stamps the record's commit_ms when it commits the transaction; false for a
  // fact that was committed before (a released timer keeps its original commit time).
  bool stamp_commit_ms = true;
};

// A precondition evaluated by the committer, serially, before the transaction joins a group:
// the stored value of (cf, key) must equal `expected` (nullopt: the key must be absent).
// Cursor compare-and-set and lease-epoch fencing are expressed this way.
struct CheckOp {
  Cf cf;
  std::string key;
  std::optional<std::string> expected;  // sealed bytes, compared exactly
  std::string what;                     // for the Conflict message, e.g. "cursor of c/3"
};

struct TxnRep {
  std::vector<WriteOp> writes;
  std::vector<FactOp> facts;
  std::vector<CheckOp> checks;
  // What it read (validated by the committer) and the snapshot it read from, taken at its first
  // read (engine/core/txn_reads.cc); null while it read nothing. The snapshot keeps the committer
  // tracking writes until the transaction is answered and released.
  ReadSet reads;
  std::shared_ptr<const ReadSnapshot> snapshot;
  size_t bytes = 0;
  // Of `writes`, the write-backs of rows read at an older table version and migrated
  // (engine/core/txn_reads.cc): all of them when the transaction itself wrote nothing.
  size_t migrated_rows = 0;
  // A batch of Engine::MigrateTable: its write-backs are the point, so a conflict refuses it (to
  // be retried) instead of committing it as a read-only transaction (Txn::Commit).
  bool migrating = false;
  bool committed = false;

  // For the committer's metrics (engine/metrics): when Submit took it (the one clock reading per
  // transaction), and the bytes it writes (keys and sealed values of its writes, its sealed fact
  // records), counted when it joins a group.
  std::chrono::steady_clock::time_point submitted{};
  size_t stored_bytes = 0;

  // Outcome, written by the committer before `done` is set.
  Status status;
  CommitResult result;
  std::atomic<uint32_t> done{0};
  Txn::CommitCallback callback;  // set for async commits (the committer then owns the rep)

  // Set: not a transaction but a durable point (Committer::RunAtDurablePoint). It carries nothing
  // else; the committer runs it between two groups and answers with its status.
  std::function<Status()> at_durable_point;
};

}  // namespace wharf::internal
