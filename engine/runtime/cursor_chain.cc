// CursorChain: head, in-flight batches and durable cursors of a lane, with their transitions.
#include "engine/runtime/cursor_chain.h"

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/base/futex.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/retries.h"

namespace wharf::internal {

namespace {

std::string CursorName(std::string_view consumer_id, uint32_t partition) {
  return "cursor of " + std::string(consumer_id) + "/" + std::to_string(partition);
}

}  // namespace

CursorChain::CursorChain(std::vector<uint32_t> partitions, uint32_t batches_max)
    : partitions_(std::move(partitions)),
      batches_max_(std::max<uint32_t>(batches_max, 1)),
      head_(partitions_.size()),
      durable_(partitions_.size()),
      draft_(std::make_unique<ChainBatch>()) {
  WHARF_ASSERT(!partitions_.empty());
  draft_->partitions.resize(partitions_.size());
}

size_t CursorChain::IndexOf(uint32_t partition) const {
  auto it = std::find(partitions_.begin(), partitions_.end(), partition);
  WHARF_ASSERT(it != partitions_.end());  // a lane reads only its own partitions
  return static_cast<size_t>(it - partitions_.begin());
}

std::vector<uint64_t> CursorChain::HeadPositions() const {
  std::vector<uint64_t> positions(head_.size());
  for (size_t i = 0; i < head_.size(); ++i) positions[i] = head_[i].position;
  return positions;
}

uint64_t CursorChain::FurthestPosition() const {
  uint64_t furthest = 0;
  for (const PartitionCursor& cursor : head_) furthest = std::max(furthest, cursor.position);
  return furthest;
}

void CursorChain::Load(std::vector<PartitionCursor> cursors) {
  WHARF_ASSERT(batches_.empty() && failure_ == nullptr);  // the head is the durable position
  WHARF_ASSERT(cursors.size() == head_.size());
  head_ = std::move(cursors);
  durable_ = head_;
  CheckInvariants();
}

void CursorChain::SetStoredRetry(size_t index, uint64_t fact_id) {
  WHARF_ASSERT(batches_.empty() && index < head_.size());  // read with the cursors
  head_[index].stored_retry = fact_id;
  durable_[index].stored_retry = fact_id;
}

void CursorChain::RaiseScanned(size_t index, uint64_t to) {
  WHARF_DASSERT(index < head_.size());
  head_[index].scanned = std::max(head_[index].scanned, to);
  if (batches_.empty()) durable_[index].scanned = head_[index].scanned;
}

ChainBatch& CursorChain::Draft(bool owned, uint64_t epoch) {
  ChainBatch& draft = *draft_;
  WHARF_DASSERT(draft.partitions.size() == head_.size());
  draft.owned = owned;
  draft.epoch = epoch;
  for (size_t i = 0; i < head_.size(); ++i) {
    draft.partitions[i].cursor = head_[i];
    draft.partitions[i].passed = 0;
    draft.partitions[i].head_ms = kHeadUnknown;
  }
  draft.dead = 0;
  draft.taken = 0;
  draft.last_id = 0;
  return draft;
}

void CursorChain::DraftPass(size_t index, uint64_t fact_id, bool taken) {
  BatchPartition& partition = draft_->partitions[index];
  WHARF_DASSERT(fact_id > partition.cursor.position);  // in id order, after the position
  partition.cursor.position = fact_id;
  if (taken) ++partition.passed;
}

bool CursorChain::DraftMoves() const {
  for (size_t i = 0; i < head_.size(); ++i) {
    if (draft_->partitions[i].cursor.position != head_[i].position) return true;
  }
  return false;
}

void CursorChain::AddCursorWrites(std::string_view consumer_id, TxnRep* rep) {
  ChainBatch& draft = *draft_;
  for (size_t i = 0; i < head_.size(); ++i) {
    const PartitionCursor& head = head_[i];
    PartitionCursor& next = draft.partitions[i].cursor;
    // The head holds the bytes the newest batch in flight writes (or the durable ones): the chain
    // links each batch to the one before it.
    WHARF_DASSERT(head.persisted_bytes ==
                  (batches_.empty() ? durable_[i].persisted_bytes
                                    : batches_.back()->partitions[i].cursor.persisted_bytes));
    const uint32_t partition = partitions_[i];
    if (next.position == head.persisted) {
      // A cursor a batch in flight writes must be as it leaves it, so that this batch is refused
      // whenever that one is.
      if (head.persisted_bytes != durable_[i].persisted_bytes) {
        rep->checks.push_back({kCursors, tables::cursors::Key(consumer_id, partition),
                               head.persisted_bytes, CursorName(consumer_id, partition)});
      }
      continue;
    }
    WHARF_DASSERT(next.position >= head.position && next.position > head.persisted);
    if (head.stored_retry != 0 && next.position >= head.stored_retry) {
      // The advance passes the fact it was retrying: its record goes with it.
      rep->writes.push_back(
          {kMeta, true, tables::retries::Key(consumer_id, partition), std::string()});
      next.stored_retry = 0;
    }
    std::string key = tables::cursors::Key(consumer_id, partition);
    std::string value = tables::cursors::EncodeValue(next.position, draft.epoch);
    rep->checks.push_back(
        {kCursors, key, head.persisted_bytes, CursorName(consumer_id, partition)});
    next.persisted = next.position;
    next.persisted_bytes = value;
    rep->writes.push_back({kCursors, false, std::move(key), std::move(value)});
  }
}

std::unique_ptr<ChainBatch> CursorChain::TakeRecord() {
  if (free_.empty()) return std::make_unique<ChainBatch>();
  std::unique_ptr<ChainBatch> record = std::move(free_.back());
  free_.pop_back();
  return record;
}

ChainBatch* CursorChain::Push(bool commits, bool stopped) {
  WHARF_ASSERT(batches_.size() < batches_max_);
  std::unique_ptr<ChainBatch> batch = std::move(draft_);
  draft_ = TakeRecord();
  draft_->partitions.resize(head_.size());
  batch->number = next_number_++;
  batch->commits = commits;
  batch->stopped = stopped;
  batch->outcome.reset();
  batch->settled.store(commits ? 0 : 1, std::memory_order_relaxed);
  WHARF_DASSERT(batches_.empty() || batches_.back()->number < batch->number);
  // The head moves on at once: the next batch builds on this one.
  for (size_t i = 0; i < head_.size(); ++i) {
    WHARF_ASSERT(batch->partitions[i].cursor.position >= head_[i].position);
    head_[i] = batch->partitions[i].cursor;
  }
  ChainBatch* pushed = batch.get();
  batches_.push_back(std::move(batch));
  max_in_flight_ = std::max<uint32_t>(max_in_flight_, static_cast<uint32_t>(batches_.size()));
  in_flight_ = true;
  CheckInvariants();
  return pushed;
}

bool CursorChain::CanAppend() const {
  return batches_.size() < batches_max_ && failure_ == nullptr &&
         (batches_.empty() || !batches_.back()->stopped);
}

void CursorChain::AwaitSettled() const {
  for (const auto& batch : batches_) {
    while (batch->settled.load(std::memory_order_acquire) == 0) FutexWait(&batch->settled, 0);
  }
}

void CursorChain::Complete(uint64_t number, const Status& status) {
  auto it = std::find_if(batches_.begin(), batches_.end(),
                         [number](const auto& batch) { return batch->number == number; });
  WHARF_ASSERT(it != batches_.end() && (*it)->commits && !(*it)->outcome.has_value());
  (*it)->outcome = status;
  (*it)->settled.store(1, std::memory_order_release);
}

void CursorChain::Settle(
    const std::function<void(const ChainBatch&)>& succeeded,
    const std::function<void(const ChainBatch&, bool successor_committed)>& failed) {
  while (!batches_.empty()) {
    std::unique_ptr<ChainBatch>& batch = batches_.front();
    if (batch->commits && !batch->outcome.has_value()) break;  // in order: wait for it
    const bool ok = !batch->commits || batch->outcome->ok();
    if (failure_ != nullptr) {
      // After a refused batch: refused too (its cursor compare-and-set expected the refused
      // batch's cursor), or, when the refused batch's outcome is unknown because it reached the
      // WAL, perhaps committed on top of it. Either way it is discarded.
      if (batch->commits && ok) {
        // Only an earlier batch's unknown outcome, or somebody writing the very cursor bytes a
        // later batch expects, lets one through. The store stays whole either way (each batch's
        // effects commit with its own compare-and-set); the lane reloads its cursors.
        WHARF_DASSERT(!failure_->outcome->IsConflict());
        successor_committed_ = true;
      }
      free_.push_back(std::move(batch));
    } else if (ok) {
      for (size_t i = 0; i < durable_.size(); ++i) {
        WHARF_DASSERT(batch->partitions[i].cursor.position >= durable_[i].position);
        durable_[i] = batch->partitions[i].cursor;
      }
      succeeded(*batch);
      free_.push_back(std::move(batch));
    } else {
      failure_ = std::move(batch);
    }
    batches_.pop_front();
  }
  in_flight_ = !batches_.empty();
  CheckInvariants();
  if (failure_ == nullptr || !batches_.empty()) return;
  // Nothing is in flight any more: start again from what is durable.
  std::unique_ptr<ChainBatch> failure = std::move(failure_);
  const bool successor_committed = successor_committed_;
  successor_committed_ = false;
  head_ = durable_;
  failed(*failure, successor_committed);
  free_.push_back(std::move(failure));
}

void CursorChain::CheckInvariants() const {
  WHARF_DASSERT(head_.size() == durable_.size());
  for (size_t i = 0; i < head_.size(); ++i) {
    WHARF_DASSERT(durable_[i].position <= head_[i].position);
  }
  WHARF_DASSERT(std::is_sorted(batches_.begin(), batches_.end(),
                               [](const auto& a, const auto& b) { return a->number < b->number; }));
}

}  // namespace wharf::internal
