// Lane processing: collect a batch, run handlers under the failure policy, commit effects and the
// cursor advance atomically, and apply the commit's outcome.
#include "engine/runtime/lane.h"

#include <algorithm>
#include <exception>

#include "engine/base/assert.h"
#include "engine/base/atomic_max.h"
#include "engine/base/futex.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/leases.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/retries.h"

namespace wharf {
namespace internal {

thread_local std::string* t_failure_reason = nullptr;
thread_local uint32_t t_delivery_attempt = 0;

}  // namespace internal

void SetFailureReason(std::string_view reason) {
  if (internal::t_failure_reason == nullptr) return;  // not inside a handler
  internal::t_failure_reason->assign(reason.substr(0, kFailureReasonBytesMax));
}

uint32_t DeliveryAttempt() { return internal::t_delivery_attempt; }

namespace internal {
namespace {

// Facts read per partition per batch, at most (taken or skipped).
constexpr size_t kReadChunkMin = 64;

}  // namespace

Lane::Lane(const LaneContext& context, Consumer* consumer, std::vector<uint32_t> partitions)
    : context_(context),
      consumer_(consumer),
      partitions_(std::move(partitions)),
      chain_(partitions_, context_.options->lane_batches_in_flight),
      runner_(context_.core, context_.options, context_.trace, consumer_, &chain_,
              consumer_->relay != nullptr ? &relay_batch_ : nullptr) {
  WHARF_ASSERT(consumer_->durable() && !partitions_.empty());
  WHARF_ASSERT(context_.core != nullptr && context_.cache != nullptr && context_.trace != nullptr);
  lag_ = std::make_unique<PartitionLag[]>(partitions_.size());
  collected_scanned_.assign(partitions_.size(), 0);
  if (consumer_->subscribe_async) InitWindow();
}

bool Lane::CanPipeline() const {
  // Batches in flight were submitted by one thread: the committer's queue keeps one producer's
  // transactions in order, not those of two (a lane that moved to another worker drains first).
  return chain_.CanAppend() && (chain_.empty() || submitter_ == worker()) && !recount_requested() &&
         loaded_generation_ == consumer_->generation.load();
}

ChainBatch& Lane::BeginBatch() {
  return chain_.Draft(consumer_->owned.load(), consumer_->epoch.load());
}

bool Lane::ReloadCursorsIfNeeded() {
  uint64_t generation = consumer_->generation.load();
  if (loaded_generation_ == generation && !reload_needed_) return true;
  Status s = LoadCursors();
  if (!s.ok()) {
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0, s.ToString());
    runner_.WaitAfterReadFailure();
    return false;
  }
  WHARF_DASSERT(chain_.empty());  // loaded only with nothing in flight
  loaded_generation_ = generation;
  reload_needed_ = false;
  return true;
}

bool Lane::HasWork() const {
  if (runner_.HasPoison()) return true;
  const uint64_t wanted = wanted_to_.load(std::memory_order_acquire);
  for (size_t i = 0; i < partitions_.size(); ++i) {
    const uint64_t scanned = chain_.head(i).scanned;
    if (wanted > scanned && context_.cache->high(partitions_[i]) > scanned) return true;
  }
  return false;
}

bool Lane::HasUnscanned() const {
  if (runner_.HasPoison()) return true;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (context_.cache->high(partitions_[i]) > chain_.head(i).scanned) return true;
  }
  return false;
}

void Lane::Want(uint64_t fact_id) { RaiseAtomic(wanted_to_, fact_id); }  // seq_cst: runtime.cc

Status Lane::ReadAfter(size_t index, uint64_t after, uint64_t durable, size_t chunk,
                       std::vector<FactPtr>* entries, uint64_t* covered) const {
  const uint32_t partition = partitions_[index];
  // Facts at or below the retention floor are removed (a bound may pass the position).
  const uint64_t from = std::max(after, context_.core->store()->floors()->Get(partition)) + 1;
  if (context_.cache->Read(partition, from, durable, chunk, entries, covered)) return Status::OK();
  // One allocation for the chunk: each entry shares the vector's ownership (aliasing).
  auto facts = std::make_shared<std::vector<Fact>>();
  facts->reserve(chunk);
  Status s = context_.core->ReadFacts(partition, from, durable, chunk, facts.get());
  if (!s.ok()) return s;
  WHARF_DASSERT(facts->size() <= chunk && (facts->empty() || facts->front().id >= from));
  for (const Fact& fact : *facts) entries->push_back(FactPtr(facts, &fact));
  *covered = facts->size() == chunk ? facts->back().id : durable;
  return Status::OK();
}

Status Lane::CollectBatch(uint32_t limit, std::vector<FactPtr>* entries) {
  WHARF_DASSERT(limit > 0 && entries->empty());
  const uint64_t durable = context_.core->committer()->durable_lsn();
  const size_t chunk = std::max<size_t>(kReadChunkMin, limit);
  uint64_t cutoff = durable;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    uint64_t covered = 0;
    Status s = ReadAfter(i, chain_.head(i).position, durable, chunk, entries, &covered);
    if (!s.ok()) return s;
    cutoff = std::min(cutoff, covered);
  }
  // Merge the partitions (global ordering) and keep what every partition is complete up to.
  if (partitions_.size() > 1) {
    std::sort(entries->begin(), entries->end(),
              [](const FactPtr& a, const FactPtr& b) { return a->id < b->id; });
  }
  auto end = std::find_if(entries->begin(), entries->end(),
                          [&](const FactPtr& fact) { return fact->id > cutoff; });
  entries->erase(end, entries->end());
  WHARF_DASSERT(std::is_sorted(entries->begin(), entries->end(),
                               [](const FactPtr& a, const FactPtr& b) { return a->id < b->id; }));
  // Stop after `limit` facts the consumer takes.
  uint32_t taken = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    if (consumer_->Takes(*(*entries)[i]) && ++taken == limit) {
      if (i + 1 < entries->size()) cutoff = (*entries)[i]->id;
      entries->resize(i + 1);
      break;
    }
  }
  for (size_t i = 0; i < partitions_.size(); ++i) {
    collected_scanned_[i] = std::max(chain_.head(i).scanned, cutoff);
  }
  return Status::OK();
}

void Lane::RecountIfRequested() {
  if (!recount_.load(std::memory_order_relaxed)) return;
  recount_.store(false, std::memory_order_relaxed);
  Status counted = RecountLag();
  if (!counted.ok()) {
    RequestRecount();  // next time
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0,
                      "counting the lag: " + counted.ToString());
  }
}

bool Lane::RunBatch(bool blocking) {
  // Marked before the lease is read (BeginBatch), both sequentially consistent: a hand-over
  // clears Consumer::owned and then looks at busy(), so either it waits for this batch or this
  // batch sees the consumer handed over.
  handling_.store(true);
  struct Unmark {
    std::atomic<bool>* handling;
    ~Unmark() { handling->store(false); }
  } unmark{&handling_};
  const bool relay = consumer_->relay != nullptr;
  if (relay && relay_batch_.started()) {
    // Its relay's threads publish the batch and wake the worker when they are done.
    if (!blocking && !relay_batch_.finished()) return false;
    return SettlePublished(blocking);
  }
  RecountIfRequested();
  const uint32_t limit = runner_.BatchLimit(chain_.FurthestPosition());
  const ChainBatch& draft = BeginBatch();
  if (!blocking && !draft.owned) return false;  // handed over meanwhile (Drain ignores leases)
  std::vector<FactPtr> entries;
  Status s = CollectBatch(limit, &entries);
  if (!s.ok()) {
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0, s.ToString());
    runner_.WaitAfterReadFailure();
    return false;
  }
  if (entries.empty()) {
    for (size_t i = 0; i < partitions_.size(); ++i) chain_.RaiseScanned(i, collected_scanned_[i]);
    return false;
  }
  WHARF_DASSERT(entries.size() <= std::max<size_t>(kReadChunkMin, limit) * partitions_.size());
  upcast_.Prepare(*context_.core->types(), *consumer_, entries);
  if (relay && !blocking) {
    // Broker I/O never holds the worker: the relay's threads publish the facts the batch takes,
    // and it is settled (SettlePublished) once they are done.
    relay_from_ = chain_.HeadPositions();
    relay_scanned_ = collected_scanned_;
    CompletionSink* worker = completions_;
    if (relay_batch_.Start(*consumer_, upcast_, consumer_->relay_publisher.get(), &entries,
                           [worker] { worker->Wake(); })) {
      return true;
    }
  } else if (relay) {
    relay_batch_.Publish(*consumer_, upcast_, entries);  // Drain: on its own thread
  }
  for (size_t i = 0; i < partitions_.size(); ++i) {
    chain_.draft().partitions[i].cursor.scanned = collected_scanned_[i];
  }
  return HandleBatch(entries, blocking);
}

bool Lane::SettlePublished(bool blocking) {
  std::vector<FactPtr> entries;
  relay_batch_.Take(&entries);
  if (chain_.HeadPositions() != relay_from_) {
    // The position moved while the batch was published (an earlier batch's commit was refused,
    // or the cursors were read again): collect again from there; the broker recognises what it
    // already holds.
    return true;
  }
  ChainBatch& draft = BeginBatch();
  WHARF_DASSERT(relay_scanned_.size() == partitions_.size());
  for (size_t i = 0; i < partitions_.size(); ++i) {
    draft.partitions[i].cursor.scanned = relay_scanned_[i];
  }
  return HandleBatch(entries, blocking);
}

void Lane::StopPublishing() {
  if (consumer_->relay_publisher != nullptr) consumer_->relay_publisher->Stop();
}

void Lane::FinishPublished(bool commit) {
  if (!relay_batch_.started()) return;
  if (commit && relay_batch_.Answered()) {
    SettlePublished(/*blocking=*/true);
    return;
  }
  // Interrupted (or not to be committed): published again when the relay next runs.
  std::vector<FactPtr> dropped;
  relay_batch_.Take(&dropped);
}

bool Lane::HandleBatch(const std::vector<FactPtr>& entries, bool blocking) {
  ChainBatch& draft = chain_.draft();
  WHARF_DASSERT(draft.taken == 0 && draft.dead == 0);  // a fresh draft (BeginBatch)
  // A lane whose oldest pending fact is not known (it passed all it had read) learns it here.
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (lag_[i].head_commit_ms.load(std::memory_order_relaxed) != kHeadUnknown) continue;
    for (const FactPtr& entry : entries) {
      if (entry->partition == partitions_[i] && consumer_->Takes(*entry)) {
        int64_t unknown = kHeadUnknown;
        lag_[i].head_commit_ms.compare_exchange_strong(unknown, entry->commit_ms);
        break;
      }
    }
  }

  // A relay's facts were published at once (pipelined); each is settled below with the broker's
  // answer as its outcome.
  Txn txn = context_.core->Begin();
  bool stopped = false;  // a fact must be retried later: back off
  bool full = false;     // the transaction is full: the next batch starts at once
  size_t next = 0;       // entries before it were passed
  for (; next < entries.size(); ++next) {
    const Fact& fact = *entries[next];
    const size_t index = chain_.IndexOf(fact.partition);
    if (!consumer_->Takes(fact)) {
      chain_.DraftPass(index, fact.id, /*taken=*/false);
      continue;
    }
    const BatchRunner::Step step = runner_.Deliver(fact, upcast_, &txn, &draft.dead);
    if (step == BatchRunner::Step::kBatchFull) {
      full = true;
      break;
    }
    ++draft.taken;
    if (step == BatchRunner::Step::kRetryLater) {
      stopped = true;
      break;
    }
    chain_.DraftPass(index, fact.id, /*taken=*/true);
  }
  // The oldest fact each partition keeps pending, when the batch read it.
  for (size_t j = next; j < entries.size(); ++j) {
    const Fact& fact = *entries[j];
    BatchPartition& partition = draft.partitions[chain_.IndexOf(fact.partition)];
    if (partition.head_ms == kHeadUnknown && consumer_->Takes(fact)) {
      partition.head_ms = fact.commit_ms;
    }
  }
  WHARF_DASSERT(draft.dead <= draft.taken);  // each dead letter settles a fact taken
  if (stopped) runner_.BackOff();
  return FinishBatch(&txn, stopped, full, blocking);
}

bool Lane::FinishBatch(Txn* txn, bool stopped, bool full, bool blocking) {
  WHARF_DASSERT(!(stopped && full));  // a batch ends for one reason
  ChainBatch& draft = chain_.draft();
  uint64_t last_id = 0;
  for (BatchPartition& partition : draft.partitions) {
    // Stopped or full: look again from where the batch stopped.
    if (stopped || full) partition.cursor.scanned = partition.cursor.position;
    last_id = std::max(last_id, partition.cursor.position);
  }
  draft.last_id = last_id;
  TxnRep* rep = EngineCore::RepOf(*txn);
  const bool passed_any = chain_.DraftMoves();
  if (!passed_any && rep->writes.empty() && !stopped) return true;
  if (draft.taken == 0 && !stopped) {
    // Only skipped facts: advance in memory (after the batches in flight before it); persisted
    // within cursor_persist_ms or on stop.
    AdvanceInMemory();
    return true;
  }
  AddCursorWrites(rep);
  if (stopped) AddRetryRecord(rep, runner_.attempt());
  const bool committed = CommitBatch(txn, stopped, blocking).ok();
  // Stopped at its first fact, the batch only stored the failure: nothing ran.
  return stopped ? committed && passed_any : true;
}

void Lane::AddRetryRecord(TxnRep* rep, uint32_t attempt) {
  const size_t index = runner_.retry_index();
  // The fact waited for is not passed: the batch stops before it (the window's cursor too).
  WHARF_DASSERT(runner_.retry_fact_id() != 0 && index < partitions_.size());
  WHARF_DASSERT(runner_.retry_fact_id() > chain_.draft().partitions[index].cursor.position);
  rep->writes.push_back({kMeta, false, tables::retries::Key(consumer_->id, partitions_[index]),
                         tables::retries::EncodeValue(runner_.RetryRecord(attempt))});
  chain_.draft().partitions[index].cursor.stored_retry = runner_.retry_fact_id();
}

void Lane::AddCursorWrites(TxnRep* rep) {
  const ChainBatch& draft = chain_.draft();
  // Drain() ignores leases: only a batch started under the lease is fenced by it.
  if (draft.owned) AddLeaseFence(context_.options->instance, consumer_->id, draft.epoch, rep);
  chain_.AddCursorWrites(consumer_->id, rep);
}

void Lane::AdvanceInMemory() {
  WHARF_DASSERT(chain_.draft().taken == 0 && chain_.draft().dead == 0);
  chain_.Push(/*commits=*/false, /*stopped=*/false);
  Settle();
}

Status Lane::CommitBatch(Txn* txn, bool stopped, bool blocking) {
  ChainBatch* batch = chain_.Push(/*commits=*/true, stopped);
  const uint64_t number = batch->number;
  if (blocking) {
    WHARF_ASSERT(chain_.size() == 1);  // Drain and Stop do not pipeline
    Status s = txn->Commit();
    Complete(number, s);
    return s;
  }
  WHARF_ASSERT(completions_ != nullptr);  // a lane run by a worker has its worker's sink
  WHARF_DASSERT(chain_.size() == 1 || submitter_ == worker());  // CanPipeline
  submitter_ = worker();
  Status s = txn->CommitAsync(
      [sink = completions_, this, batch, number](const Status& status, const CommitResult&) {
        // The record lives until its completion is applied, which this post comes before.
        batch->settled.store(1, std::memory_order_release);
        FutexWakeAll(&batch->settled);
        sink->Post({this, number, status});
      });
  if (!s.ok()) Complete(number, s);  // not accepted: the callback will not run
  return s;
}

void Lane::Complete(uint64_t number, const Status& status) {
  chain_.Complete(number, status);
  Settle();
}

void Lane::Settle() {
  chain_.Settle([this](const ChainBatch& batch) { ApplySucceeded(batch); },
                [this](const ChainBatch& batch, bool successor_committed) {
                  ApplyFailed(batch, successor_committed);
                });
}

void Lane::ApplySucceeded(const ChainBatch& batch) {
  WHARF_DASSERT(batch.dead <= batch.taken && batch.partitions.size() == partitions_.size());
  if (batch.commits) {
    dirty_since_ms_ = 0;
    runner_.Committed(batch.last_id);
  } else if (dirty_since_ms_ == 0) {
    dirty_since_ms_ = SteadyMs();  // advanced in memory over skipped facts
  }
  // The window's facts the batch passed are done with (durable, or advanced over in memory).
  if (window_) window_->PopBefore(window_->SeqAfter(batch.partitions[0].cursor.position));
  PublishPassed(batch);
}

void Lane::ApplyFailed(const ChainBatch& batch, bool successor_committed) {
  // The head is back at the durable cursors: nothing is in flight.
  WHARF_DASSERT(chain_.empty() && batch.outcome.has_value() && !batch.outcome->ok());
  if (runner_.OnBatchFailed(batch) == BatchRunner::Recovery::kReloadCursors) {
    Status loaded = LoadCursors();
    if (!loaded.ok()) runner_.WaitAfterReadFailure();
  }
  // A commit whose outcome is unknown (an I/O error once it may have reached the WAL; the
  // committer's recovery then makes whatever was written durable) may have moved the cursors,
  // and so has a batch that committed after it: no batch starts before they are read again.
  const Status& status = *batch.outcome;
  const bool refused = status.IsConflict() || status.IsInvalidArgument() || status.IsCorruption() ||
                       status.IsClosed();
  if (successor_committed || !refused) {
    reload_needed_ = true;
    ReloadCursorsIfNeeded();
  }
}

bool Lane::PersistIfDue(bool force, bool blocking) {
  if (!chain_.empty() || dirty_since_ms_ == 0) return false;
  if (!force && SteadyMs() - dirty_since_ms_ < context_.options->cursor_persist_ms) return false;
  BeginBatch();
  Txn txn = context_.core->Begin();
  AddCursorWrites(EngineCore::RepOf(txn));
  if (EngineCore::RepOf(txn)->writes.empty()) {
    dirty_since_ms_ = 0;
    return false;
  }
  CommitBatch(&txn, /*stopped=*/false, blocking).PermitUncheckedError();
  return true;
}

Status Lane::LoadCursors() {
  WHARF_ASSERT(chain_.empty());  // the head is the durable position
  const std::vector<uint64_t> before = chain_.HeadPositions();
  std::vector<PartitionCursor> cursors(partitions_.size());
  for (size_t i = 0; i < partitions_.size(); ++i) {
    tables::cursors::Stored stored;
    Status s =
        tables::cursors::Read(*context_.core->store(), consumer_->id, partitions_[i], &stored);
    if (!s.ok()) return s;
    PartitionCursor& cursor = cursors[i];
    cursor.position = cursor.persisted = cursor.scanned = stored.fact_id;
    cursor.persisted_bytes = std::move(stored.sealed);
    cursor.stored_retry = chain_.head(i).stored_retry;  // read again below
  }
  chain_.Load(std::move(cursors));
  dirty_since_ms_ = 0;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    const uint64_t position = chain_.head(i).position;
    if (lag_counted() && position != before[i]) AdjustLagForMove(i, before[i]);
    lag_[i].cursor.store(position, std::memory_order_relaxed);
  }
  Status s = LoadRetryRecords();
  if (!s.ok()) return s;
  runner_.ForgetPassed();
  if (window_) ResetWindow();  // its facts were read from the old position
  // Whatever is durable beyond the cursors may hold facts the consumer takes: look at it.
  Want(context_.core->committer()->durable_lsn());
  return Status::OK();
}

Status Lane::LoadRetryRecords() {
  WHARF_DASSERT(chain_.empty());  // read with the cursors
  for (size_t i = 0; i < partitions_.size(); ++i) {
    std::optional<tables::retries::RetryRecord> stored;
    Status s =
        tables::retries::Read(*context_.core->store(), consumer_->id, partitions_[i], &stored);
    if (!s.ok()) return s;
    // Deleted when the cursor passes it, even if stale.
    chain_.SetStoredRetry(i, stored ? stored->fact_id : 0);
    if (stored && stored->fact_id > chain_.head(i).position) runner_.Resume(*stored, i);
  }
  return Status::OK();
}

void Lane::PublishPassed(const ChainBatch& batch) {
  WHARF_DASSERT(batch.partitions.size() == partitions_.size());
  runner_.counters().dead_letters.Add(batch.dead);
  for (size_t i = 0; i < partitions_.size(); ++i) {
    const BatchPartition& partition = batch.partitions[i];
    PartitionLag& cell = lag_[i];
    cell.cursor.store(partition.cursor.position, std::memory_order_relaxed);
    if (partition.passed == 0) continue;
    const int64_t passed = partition.passed;
    const int64_t left = cell.facts.fetch_sub(passed) - passed;
    // The oldest pending fact was among those passed: the next is the one the batch stopped at
    // (read), or none, or not known until the next batch reads it.
    if (partition.head_ms != kHeadUnknown) {
      cell.head_commit_ms.store(partition.head_ms);
    } else if (left <= 0) {
      cell.ClearHeadIfCaughtUp();
    } else {
      cell.head_commit_ms.store(kHeadUnknown);
    }
  }
  runner_.ForgetPassed();
}

void Lane::Announce(uint32_t partition, int64_t count, int64_t first_commit_ms) {
  PartitionLag& cell = lag_[chain_.IndexOf(partition)];
  // The first fact pending is the oldest (a lane whose lag is not counted yet is recounted).
  if (cell.facts.fetch_add(count) <= 0) cell.head_commit_ms.store(first_commit_ms);
}

Status Lane::CountTaken(size_t index, uint64_t from, uint64_t to, int64_t* count,
                        int64_t* first_commit_ms) const {
  constexpr size_t kChunkFacts = 4096;
  *count = 0;
  *first_commit_ms = 0;
  std::vector<Fact> facts;
  for (uint64_t next = from + 1; next <= to;) {
    facts.clear();
    Status s = context_.core->ReadFacts(partitions_[index], next, to, kChunkFacts, &facts);
    if (!s.ok()) return s;
    for (const Fact& fact : facts) {
      if (!consumer_->Takes(fact)) continue;
      if (*count == 0) *first_commit_ms = fact.commit_ms;
      ++*count;
    }
    if (facts.size() < kChunkFacts) break;
    next = facts.back().id + 1;
  }
  return Status::OK();
}

Status Lane::RecountLag() {
  for (size_t i = 0; i < partitions_.size(); ++i) {
    PartitionLag& cell = lag_[i];
    int64_t at_cut = 0, count = 0, first_ms = 0;
    const uint64_t horizon = context_.horizon->Cut(cell.facts, &at_cut);
    Status s = CountTaken(i, chain_.head(i).position, horizon, &count, &first_ms);
    if (!s.ok()) return s;
    // What the listener added since the cut stays; what it counted before is replaced.
    cell.facts.fetch_add(count - at_cut);
    if (count > 0) {
      cell.head_commit_ms.store(first_ms);
    } else {
      cell.ClearHeadIfCaughtUp();
    }
    cell.cursor.store(chain_.head(i).position, std::memory_order_relaxed);
  }
  lag_counted_.store(true, std::memory_order_release);
  return Status::OK();
}

void Lane::AdjustLagForMove(size_t index, uint64_t from) {
  PartitionLag& cell = lag_[index];
  const uint64_t to = chain_.head(index).position;
  int64_t count = 0, first_ms = 0;
  Status s = CountTaken(index, std::min(from, to), std::max(from, to), &count, &first_ms);
  if (!s.ok()) {
    RequestRecount();
    return;
  }
  if (to > from) {
    cell.facts.fetch_sub(count);
    if (count > 0) cell.head_commit_ms.store(kHeadUnknown);
    cell.ClearHeadIfCaughtUp();
  } else {
    cell.facts.fetch_add(count);
    if (count > 0) cell.head_commit_ms.store(first_ms);  // older than what was pending
  }
}

}  // namespace internal
}  // namespace wharf
