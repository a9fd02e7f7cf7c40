// CursorChain: a lane's position in each of its partitions, and the batches that move it.
//
// Three views of the same cursors:
//  - the *head*: what the next batch builds on, counting every batch in flight;
//  - the *in-flight batches*, oldest first: each carries its partitions as it leaves them,
//    including the exact cursor bytes it writes, and its commit's outcome once known;
//  - the *durable* cursors: what the completed batches made durable, where the lane starts again
//    when a batch is refused.
//
// A batch is drafted from the head (Draft), its facts move the draft's positions, its cursor
// writes are added to its transaction (AddCursorWrites: each cursor it moves is compared to the
// bytes the batch before it writes, so a refused batch refuses every later one), and Push makes it
// the newest batch in flight and the draft the head. Outcomes arrive in any order (Complete) and
// are applied in push order (Settle): a success moves the durable cursors to the batch's; the
// first failure discards every later batch, and once none is in flight the head returns to the
// durable cursors.
//
// Invariants, asserted at every transition: durable positions are at or below the head's; the
// batches are in number order; each batch's cursor check expects the bytes the batch before it
// writes; a batch's positions are at or above the head it was drafted from.
//
// Thread safety: one thread at a time (the lane's), except in_flight() (any thread) and a batch's
// `settled` flag (set by the committer's callback, waited on by AwaitSettled()).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/commit/txn_rep.h"
#include "engine/runtime/consumer_metrics.h"
#include "wharf/status.h"

namespace wharf::internal {

// A consumer's cursor in one partition, as a lane holds it.
struct PartitionCursor {
  uint64_t position = 0;   // the last fact passed
  uint64_t persisted = 0;  // the last fact passed as the cursors table holds it (or will)
  std::optional<std::string> persisted_bytes;  // its exact stored bytes (none: no cursor stored)
  uint64_t scanned = 0;       // no fact of the partition at or below this is left unpassed
  uint64_t stored_retry = 0;  // the fact its stored retry record names (0: none)
};

// A batch as it leaves one partition.
struct BatchPartition {
  PartitionCursor cursor;
  uint32_t passed = 0;             // facts it passes that the consumer takes
  int64_t head_ms = kHeadUnknown;  // commit time of the first taken fact it does not pass
};

struct ChainBatch {
  uint64_t number = 0;
  bool commits = false;  // false: it passed skipped facts only (moved in memory, no commit)
  bool stopped = false;  // it ends at a fact to retry later
  bool owned = false;    // it started while this instance held the lease ...
  uint64_t epoch = 0;    // ... at this epoch (its commit is fenced by it; its cursors carry it)
  std::vector<BatchPartition> partitions;
  uint32_t dead = 0;                 // dead letters it adds
  uint32_t taken = 0;                // facts it took (settled, or stopped at)
  uint64_t last_id = 0;              // the last fact it passes
  std::optional<Status> outcome;     // its commit's, once known
  std::atomic<uint32_t> settled{0};  // 1 once the outcome is known (any thread; futex word)
};

class CursorChain {
 public:
  // `partitions`: the lane's, by index; `batches_max`: most batches in flight at once
  // (lane_batches_in_flight, at least 1).
  CursorChain(std::vector<uint32_t> partitions, uint32_t batches_max);
  CursorChain(const CursorChain&) = delete;
  CursorChain& operator=(const CursorChain&) = delete;

  size_t partitions() const { return head_.size(); }
  // The index of `partition` among the lane's (it must be one of them).
  size_t IndexOf(uint32_t partition) const;
  const PartitionCursor& head(size_t index) const { return head_[index]; }
  const PartitionCursor& durable(size_t index) const { return durable_[index]; }
  // The head's positions, and the furthest of them.
  std::vector<uint64_t> HeadPositions() const;
  uint64_t FurthestPosition() const;

  // Starts from cursors read from the store: head and durable. Nothing may be in flight.
  void Load(std::vector<PartitionCursor> cursors);
  // The stored retry record of a partition (read with the cursors).
  void SetStoredRetry(size_t index, uint64_t fact_id);
  // Nothing unpassed at or below `to` in the partition (the head's; the durable cursor's too
  // when nothing is in flight).
  void RaiseScanned(size_t index, uint64_t to);

  // The batch being built, reset to the head, fenced at `epoch` when `owned`.
  ChainBatch& Draft(bool owned, uint64_t epoch);
  ChainBatch& draft() { return *draft_; }
  const ChainBatch& draft() const { return *draft_; }
  // The draft passed a fact of the partition at `index` (its id is above the draft's position).
  void DraftPass(size_t index, uint64_t fact_id, bool taken);
  // The draft moves a position.
  bool DraftMoves() const;
  // Adds to `rep` the draft's cursor writes, each with a compare-and-set on the bytes the head
  // holds (the previous batch's), and a check on every cursor a batch in flight writes that the
  // draft does not move, so the draft is refused whenever one of them is. Deletes the retry record
  // of a partition whose position passes it. Records the bytes written in the draft.
  void AddCursorWrites(std::string_view consumer_id, TxnRep* rep);
  // The draft enters the chain (commits: its transaction is being submitted; else it moved in
  // memory only) and becomes the head. Returns the batch (valid until applied by Settle).
  ChainBatch* Push(bool commits, bool stopped);

  bool empty() const { return batches_.empty(); }
  size_t size() const { return batches_.size(); }
  const ChainBatch& newest() const { return *batches_.back(); }
  // Any batch is in flight (any thread).
  bool in_flight() const { return in_flight_.load(); }
  // Another batch may enter: fewer than batches_max are in flight, none failed, and the newest
  // does not stop at a fact to retry.
  bool CanAppend() const;
  // The first failed batch waits for the later ones to complete.
  bool failing() const { return failure_ != nullptr; }
  // Most batches that were in flight at once so far.
  uint32_t max_in_flight() const { return max_in_flight_; }
  // Waits until every batch in flight has its outcome.
  void AwaitSettled() const;

  // The outcome of batch `number` (in flight, not completed before).
  void Complete(uint64_t number, const Status& status);
  // Applies, oldest first, the batches whose outcome is known: `succeeded` for each that moved
  // the durable cursors. After a failure, once nothing is in flight, the head returns to the
  // durable cursors and `failed` gets the failed batch and whether a batch after it committed
  // (possible only when its outcome is unknown: the store may then hold other cursors).
  void Settle(const std::function<void(const ChainBatch&)>& succeeded,
              const std::function<void(const ChainBatch&, bool successor_committed)>& failed);

 private:
  std::unique_ptr<ChainBatch> TakeRecord();
  void CheckInvariants() const;

  const std::vector<uint32_t> partitions_;  // the partition at each index
  const uint32_t batches_max_;
  std::vector<PartitionCursor> head_;
  std::vector<PartitionCursor> durable_;
  std::unique_ptr<ChainBatch> draft_;
  std::deque<std::unique_ptr<ChainBatch>> batches_;  // in number order, the oldest first
  std::vector<std::unique_ptr<ChainBatch>> free_;    // records for reuse
  std::unique_ptr<ChainBatch> failure_;  // the first failed batch, while later ones complete
  bool successor_committed_ = false;     // a batch after it committed
  uint64_t next_number_ = 1;
  uint32_t max_in_flight_ = 0;
  std::atomic<bool> in_flight_{false};
};

}  // namespace wharf::internal
