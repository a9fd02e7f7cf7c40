// Lane processing: collect a batch, run handlers under the failure policy, commit effects and the
// cursor advance atomically, and apply the commit's outcome.
#include "engine/runtime/lane.h"

#include <algorithm>
#include <exception>

#include "engine/base/assert.h"
#include "engine/base/atomic_max.h"
#include "engine/base/exception_text.h"
#include "engine/base/futex.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/effects.h"
#include "engine/runtime/handler_scope.h"
#include "engine/runtime/leases.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
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

// The size of a transaction before a fact's effects: what Truncate() restores.
struct TxnMark {
  size_t writes = 0;
  size_t facts = 0;
  size_t bytes = 0;
};

namespace {

void Truncate(TxnRep* rep, const TxnMark& mark) {
  WHARF_DASSERT(rep->writes.size() >= mark.writes && rep->facts.size() >= mark.facts);
  rep->writes.resize(mark.writes);
  rep->facts.resize(mark.facts);
  rep->bytes = mark.bytes;
}

const char* OutcomeTraceName(Outcome outcome) {
  return outcome == Outcome::kRejected ? "handler-rejected" : "handler-failed";
}

}  // namespace

Lane::Lane(const LaneContext& context, Consumer* consumer, std::vector<uint32_t> partitions)
    : context_(context), consumer_(consumer), partitions_(std::move(partitions)) {
  WHARF_ASSERT(consumer_->durable() && !partitions_.empty());
  const size_t n = partitions_.size();
  position_.assign(n, 0);
  persisted_.assign(n, 0);
  persisted_bytes_.assign(n, std::nullopt);
  scanned_to_.assign(n, 0);
  pending_position_.assign(n, 0);
  pending_scanned_.assign(n, 0);
  lag_ = std::make_unique<PartitionLag[]>(n);
  stored_retry_.assign(n, 0);
  pending_stored_retry_.assign(n, 0);
  pending_passed_.assign(n, 0);
  pending_head_ms_.assign(n, kHeadUnknown);
  durable_.position.assign(n, 0);
  durable_.persisted.assign(n, 0);
  durable_.persisted_bytes.assign(n, std::nullopt);
  durable_.scanned.assign(n, 0);
  durable_.stored_retry.assign(n, 0);
  if (consumer_->subscribe_async) InitWindow();
}

bool Lane::CanPipeline() const {
  // Batches in flight were submitted by one thread: the committer's queue keeps one producer's
  // transactions in order, not those of two (a lane that moved to another worker drains first).
  return batches_.size() < context_.options->lane_batches_in_flight && chain_failure_ == nullptr &&
         (batches_.empty() || (!batches_.back()->stopped && submitter_ == worker())) &&
         !recount_requested() && loaded_generation_ == consumer_->generation.load();
}

void Lane::AwaitBatchesInFlight() const {
  for (const auto& batch : batches_) {
    while (batch->settled.load(std::memory_order_acquire) == 0) FutexWait(&batch->settled, 0);
  }
}

void Lane::BeginBatch() {
  batch_owned_ = consumer_->owned.load();
  batch_epoch_ = consumer_->epoch.load();
}

void Lane::BackOff() {
  backoff_ms_ = backoff_ms_ == 0 ? context_.options->backoff_initial_ms
                                 : std::min(backoff_ms_ * 2, context_.options->backoff_max_ms);
  retry_at_ms_ = SteadyMs() + backoff_ms_;
}

size_t Lane::IndexOf(uint32_t partition) const {
  auto it = std::find(partitions_.begin(), partitions_.end(), partition);
  WHARF_ASSERT(it != partitions_.end());  // a lane reads only its own partitions
  return static_cast<size_t>(it - partitions_.begin());
}

bool Lane::ReloadCursorsIfNeeded() {
  uint64_t generation = consumer_->generation.load();
  if (loaded_generation_ == generation && !reload_needed_) return true;
  Status s = LoadCursors();
  if (!s.ok()) {
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0, s.ToString());
    retry_at_ms_ = SteadyMs() + context_.options->backoff_max_ms;
    return false;
  }
  loaded_generation_ = generation;
  reload_needed_ = false;
  return true;
}

bool Lane::HasWork() const {
  if (poison_id_ != 0) return true;
  const uint64_t wanted = wanted_to_.load(std::memory_order_acquire);
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (wanted > scanned_to_[i] && context_.cache->high(partitions_[i]) > scanned_to_[i]) {
      return true;
    }
  }
  return false;
}

bool Lane::HasUnscanned() const {
  if (poison_id_ != 0) return true;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (context_.cache->high(partitions_[i]) > scanned_to_[i]) return true;
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
  for (const Fact& fact : *facts) entries->push_back(FactPtr(facts, &fact));
  *covered = facts->size() == chunk ? facts->back().id : durable;
  return Status::OK();
}

Status Lane::CollectBatch(uint32_t limit, std::vector<FactPtr>* entries) {
  const uint64_t durable = context_.core->committer()->durable_lsn();
  const size_t chunk = std::max<size_t>(kReadChunkMin, limit);
  uint64_t cutoff = durable;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    uint64_t covered = 0;
    Status s = ReadAfter(i, position_[i], durable, chunk, entries, &covered);
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
    pending_scanned_[i] = std::max(scanned_to_[i], cutoff);
  }
  return Status::OK();
}

// What a handler call produced.
struct HandlerCall {
  Outcome outcome = Outcome::kFailed;
  std::string error;  // the handler threw
  std::string given;  // the reason it gave (SetFailureReason)
  bool batch_full = false;
  std::string failure_name;  // an effect the store refused ("store-rejected", ...)
  Status failure;
  // What the handler said, else the throw, else what it returned.
  std::string Reason(const char* fallback) const {
    return Bounded(!given.empty() ? given : !error.empty() ? error : std::string(fallback));
  }
};

HandlerCall Lane::CallHandler(const Fact& fact, Txn* txn) {
  HandlerCall call;
  EffectsImpl effects_impl(txn, consumer_, &fact, this);
  try {
    HandlerScope scope(&call.given, AttemptsOf(fact.id) + 1);
    if (consumer_->relay != nullptr) {
      // Relay: the broker's answer for the fact, published with its batch (RunBatch).
      call.outcome = relay_batch_.OutcomeOf(fact, &call.given);
    } else if (consumer_->kind == ConsumerKind::kSubscriber) {
      call.outcome = consumer_->subscribe(fact);
    } else {
      Effects effects = effects_impl.MakeEffects();
      call.outcome = consumer_->project(fact, effects);
    }
  } catch (const std::exception& e) {
    call.error = std::string("handler threw: ") + ExceptionText(e);
  } catch (...) {
    call.error = "handler threw a non-standard exception";
  }
  call.batch_full = effects_impl.batch_full();
  call.failure_name = effects_impl.failure_name();
  call.failure = effects_impl.failure();
  return call;
}

uint32_t Lane::NoteDelivery(const Fact& fact, size_t index) {
  // Batches deliver in id order and start again from the position: the ids are kept sorted.
  auto it = std::lower_bound(attempts_.begin(), attempts_.end(), fact.id,
                             [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
  counters_.delivered.Add();
  if (it != attempts_.end() && it->fact_id == fact.id) {
    counters_.retries.Add();
    return ++it->count;
  }
  attempts_.insert(it, Attempts{fact.id, static_cast<uint32_t>(index), 1});
  return 1;
}

uint32_t Lane::AttemptsOf(uint64_t fact_id) const {
  auto it = std::lower_bound(attempts_.begin(), attempts_.end(), fact_id,
                             [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
  return it != attempts_.end() && it->fact_id == fact_id ? it->count : 0;
}

void Lane::NoteRetry(const Fact& fact, uint32_t attempt, const std::string& error) {
  const int64_t now_ms = context_.core->NowMs();
  if (retry_fact_id_ != fact.id) {
    retry_fact_id_ = fact.id;
    retry_index_ = IndexOf(fact.partition);
    retry_since_ms_ = now_ms;
  }
  retry_error_ = error;
  retry_last_ms_ = now_ms;
  failure_.Retrying(fact.id, attempt, retry_since_ms_, error, now_ms);
}

void Lane::ForgetPassed() {
  const std::vector<uint64_t>& passed = durable_.position;
  std::erase_if(attempts_, [&](const Attempts& a) { return a.fact_id <= passed[a.index]; });
  if (retry_fact_id_ != 0 && retry_fact_id_ <= passed[retry_index_]) {
    retry_fact_id_ = 0;
    failure_.ClearRetrying();
  }
}

Lane::Step Lane::Deliver(const Fact& fact, Txn* txn) {
  TxnRep* rep = EngineCore::RepOf(*txn);
  if (fact.id == poison_id_) {
    // Committed alone, the store still refused this fact's effects: settle it without them.
    std::string reason = "the store refused this fact's effects (" + poison_reason_ +
                         "); it is settled as failed without them";
    attempt_ = AttemptsOf(fact.id);  // not delivered again: the store refused its effects
    AddDeadLetter(rep, fact, "store-rejected", reason, /*counted=*/false);
    failure_.Failed("store-rejected: " + reason, context_.core->NowMs());
    (*context_.trace)(TraceEvent::Level::kWarning, "store-rejected", consumer_, fact.id,
                      std::move(reason));
    return Step::kPassed;
  }
  const TxnMark mark{rep->writes.size(), rep->facts.size(), rep->bytes};
  const HandlerCall call = CallHandler(fact, txn);
  if (call.batch_full) {
    // Earlier facts of the batch filled the transaction: commit them, run this one next (not
    // counted: the handler's call is made again, as the same attempt).
    Truncate(rep, mark);
    return Step::kBatchFull;
  }
  attempt_ = NoteDelivery(fact, IndexOf(fact.partition));
  const bool threw = !call.error.empty();
  // What the handler did: a throw counts as failed, and so do effects the store refused.
  if (threw || !call.failure_name.empty()) {
    counters_.failed.Add();
  } else {
    switch (call.outcome) {
      case Outcome::kHandled:
        counters_.handled.Add();
        break;
      case Outcome::kRejected:
        counters_.rejected.Add();
        break;
      case Outcome::kRetry:
        counters_.retry.Add();
        break;
      case Outcome::kFailed:
        counters_.failed.Add();
        break;
    }
  }
  if (consumer_->kind == ConsumerKind::kSubscriber) {
    // A relay's rejection is the broker's; its failures are the broker's or the connection's.
    const bool relay = consumer_->relay != nullptr;
    if (call.outcome == Outcome::kHandled && !threw) return Step::kPassed;
    if (call.outcome == Outcome::kRejected && !threw) {
      return SettleFailed(rep, mark, fact, relay ? "broker-rejected" : "handler-rejected",
                          call.Reason("rejected"));
    }
    std::string reason = call.Reason(call.outcome == Outcome::kRetry ? "retry" : "failed");
    const char* failed_name = relay ? "relay-failed" : "subscriber-failed";
    if (AttemptsExhausted()) {
      return SettleFailed(rep, mark, fact, "attempts-exhausted",
                          ExhaustedReason(failed_name, reason));
    }
    NoteRetry(fact, attempt_, failed_name + (": " + reason));
    (*context_.trace)(TraceEvent::Level::kWarning, failed_name, consumer_, fact.id,
                      std::move(reason), attempt_);
    return Step::kRetryLater;
  }
  if (call.outcome == Outcome::kHandled && !threw && call.failure_name.empty()) {
    return Step::kPassed;
  }
  Truncate(rep, mark);  // a failed fact's effects are not applied
  if (call.outcome == Outcome::kRetry && !threw) {
    std::string reason = call.Reason("retry requested");
    if (AttemptsExhausted()) {
      return SettleFailed(rep, mark, fact, "attempts-exhausted",
                          ExhaustedReason("handler-retry", reason));
    }
    NoteRetry(fact, attempt_, "handler-retry: " + reason);
    (*context_.trace)(TraceEvent::Level::kInfo, "handler-retry", consumer_, fact.id,
                      std::move(reason), attempt_);
    return Step::kRetryLater;
  }
  if (!call.failure_name.empty()) {
    return SettleFailed(rep, mark, fact, call.failure_name, Bounded(call.failure.ToString()));
  }
  return SettleFailed(rep, mark, fact, OutcomeTraceName(call.outcome),
                      call.Reason(call.outcome == Outcome::kRejected ? "rejected" : "failed"));
}

bool Lane::AttemptsExhausted() const {
  const uint32_t most = consumer_->options.max_attempts;
  return most != 0 && attempt_ >= most;
}

std::string Lane::ExhaustedReason(std::string_view name, std::string_view reason) const {
  return Bounded(std::to_string(attempt_) + " deliveries failed (max_attempts " +
                 std::to_string(consumer_->options.max_attempts) +
                 "); the last: " + std::string(name) + ": " + std::string(reason));
}

Lane::Step Lane::SettleFailed(TxnRep* rep, const TxnMark& mark, const Fact& fact,
                              const std::string& name, std::string reason) {
  if (!AddDeadLetter(rep, fact, name, reason)) {
    Truncate(rep, mark);
    return Step::kBatchFull;
  }
  failure_.Failed(name + ": " + reason, context_.core->NowMs());
  (*context_.trace)(TraceEvent::Level::kWarning, name, consumer_, fact.id, std::move(reason),
                    attempt_);
  return Step::kPassed;
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
  const uint64_t furthest = *std::max_element(position_.begin(), position_.end());
  const uint32_t limit = furthest < single_until_ ? 1 : consumer_->batch_facts;
  BeginBatch();
  if (!blocking && !batch_owned_) return false;  // handed over meanwhile (Drain ignores leases)
  std::vector<FactPtr> entries;
  Status s = CollectBatch(limit, &entries);
  if (!s.ok()) {
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0, s.ToString());
    retry_at_ms_ = SteadyMs() + context_.options->backoff_max_ms;
    return false;
  }
  pending_position_ = position_;
  if (entries.empty()) {
    scanned_to_ = pending_scanned_;
    if (batches_.empty()) durable_.scanned = scanned_to_;  // the head is the durable position
    return false;
  }
  WHARF_DASSERT(entries.size() <= std::max<size_t>(kReadChunkMin, limit) * partitions_.size());
  if (relay && !blocking) {
    // Broker I/O never holds the worker: the relay's threads publish the facts the batch takes,
    // and it is settled (SettlePublished) once they are done.
    relay_from_ = position_;
    relay_scanned_ = pending_scanned_;
    CompletionSink* worker = completions_;
    if (relay_batch_.Start(*consumer_, consumer_->relay_publisher.get(), &entries,
                           [worker] { worker->Wake(); })) {
      return true;
    }
  } else if (relay) {
    relay_batch_.Publish(*consumer_, entries);  // Drain: on its own thread
  }
  return HandleBatch(entries, blocking);
}

bool Lane::SettlePublished(bool blocking) {
  std::vector<FactPtr> entries;
  relay_batch_.Take(&entries);
  if (position_ != relay_from_) {
    // The position moved while the batch was published (an earlier batch's commit was refused,
    // or the cursors were read again): collect again from there; the broker recognises what it
    // already holds.
    return true;
  }
  BeginBatch();
  pending_position_ = position_;
  pending_scanned_ = relay_scanned_;
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
  std::fill(pending_passed_.begin(), pending_passed_.end(), 0);
  std::fill(pending_head_ms_.begin(), pending_head_ms_.end(), kHeadUnknown);
  pending_dead_ = 0;
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
  uint32_t taken = 0;    // facts the consumer takes that the batch settles or stopped at
  size_t next = 0;       // entries before it were passed
  for (; next < entries.size(); ++next) {
    const Fact& fact = *entries[next];
    const size_t index = IndexOf(fact.partition);
    WHARF_DASSERT(fact.id > pending_position_[index]);  // in id order, after the position
    if (!consumer_->Takes(fact)) {
      pending_position_[index] = fact.id;
      continue;
    }
    const Step step = Deliver(fact, &txn);
    if (step == Step::kBatchFull) {
      full = true;
      break;
    }
    ++taken;
    if (step == Step::kRetryLater) {
      stopped = true;
      break;
    }
    pending_position_[index] = fact.id;
    ++pending_passed_[index];
  }
  // The oldest fact each partition keeps pending, when the batch read it.
  for (size_t j = next; j < entries.size(); ++j) {
    const Fact& fact = *entries[j];
    const size_t index = IndexOf(fact.partition);
    if (pending_head_ms_[index] == kHeadUnknown && consumer_->Takes(fact)) {
      pending_head_ms_[index] = fact.commit_ms;
    }
  }
  if (stopped) BackOff();
  return FinishBatch(&txn, taken, stopped, full, blocking);
}

bool Lane::FinishBatch(Txn* txn, uint32_t taken, bool stopped, bool full, bool blocking) {
  if (stopped || full) {
    pending_scanned_ = pending_position_;  // look again from where we stopped
  }
  pending_taken_ = taken;
  pending_last_id_ = *std::max_element(pending_position_.begin(), pending_position_.end());
  TxnRep* rep = EngineCore::RepOf(*txn);
  const bool passed_any = pending_position_ != position_;
  if (!passed_any && rep->writes.empty() && !stopped) return true;
  if (taken == 0 && !stopped) {
    // Only skipped facts: advance in memory (after the batches in flight before it); persisted
    // within cursor_persist_ms or on stop.
    pending_stored_retry_ = stored_retry_;
    PushBatch(/*commits=*/false, /*stopped=*/false);
    Settle();
    return true;
  }
  AddCursorWrites(rep);
  if (stopped) AddRetryRecord(rep);
  const bool committed = CommitBatch(txn, stopped, blocking).ok();
  // Stopped at its first fact, the batch only stored the failure: nothing ran.
  return stopped ? committed && passed_any : true;
}

void Lane::AddRetryRecord(TxnRep* rep) {
  WHARF_DASSERT(retry_fact_id_ != 0);  // NoteRetry ran for the fact the batch stopped at
  tables::retries::RetryRecord record;
  record.fact_id = retry_fact_id_;
  record.attempts = attempt_;
  record.first_ms = retry_since_ms_;
  record.last_ms = retry_last_ms_;
  record.last_error = retry_error_;
  rep->writes.push_back({kMeta, false,
                         tables::retries::Key(consumer_->id, partitions_[retry_index_]),
                         tables::retries::EncodeValue(record)});
  pending_stored_retry_[retry_index_] = retry_fact_id_;
}

void Lane::AddCursorWrites(TxnRep* rep) {
  // Drain() ignores leases: only a batch started under the lease is fenced by it.
  if (batch_owned_) AddLeaseFence(context_.options->instance, consumer_->id, batch_epoch_, rep);
  const uint64_t epoch = batch_epoch_;
  pending_stored_retry_ = stored_retry_;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (pending_position_[i] == persisted_[i]) {
      // Chained to the batches in flight: a cursor one of them writes must be as it leaves it,
      // so that this batch is refused whenever one of them is.
      if (persisted_bytes_[i] != durable_.persisted_bytes[i]) {
        rep->checks.push_back(
            {kCursors, tables::cursors::Key(consumer_->id, partitions_[i]), persisted_bytes_[i],
             "cursor of " + consumer_->id + "/" + std::to_string(partitions_[i])});
      }
      continue;
    }
    if (stored_retry_[i] != 0 && pending_position_[i] >= stored_retry_[i]) {
      // The advance passes the fact it was retrying: its record goes with it.
      rep->writes.push_back(
          {kMeta, true, tables::retries::Key(consumer_->id, partitions_[i]), std::string()});
      pending_stored_retry_[i] = 0;
    }
    std::string key = tables::cursors::Key(consumer_->id, partitions_[i]);
    std::string value = tables::cursors::EncodeValue(pending_position_[i], epoch);
    rep->checks.push_back({kCursors, key, std::move(persisted_bytes_[i]),
                           "cursor of " + consumer_->id + "/" + std::to_string(partitions_[i])});
    // The head: what the next batch's compare-and-set expects (restored if this one fails).
    persisted_[i] = pending_position_[i];
    persisted_bytes_[i] = value;
    rep->writes.push_back({kCursors, false, std::move(key), std::move(value)});
  }
}

bool Lane::AddDeadLetter(TxnRep* rep, const Fact& fact, std::string_view name,
                         std::string_view reason, bool counted) {
  WriteOp write{kDead, false, tables::dead_letters::Key(consumer_->id, fact.id),
                tables::dead_letters::EncodeValue(std::string(name) + ": " + std::string(reason),
                                                  codec::EncodeFact(fact), attempt_)};
  const size_t bytes = write.key.size() + write.value.size();
  if (counted) {
    // A dead letter is part of what the transaction carries. One that only earlier facts of the
    // batch leave no room for ends the batch before its fact.
    const size_t bytes_max = context_.core->txn_bytes_max();
    if (rep->bytes > 0 && rep->bytes + bytes > bytes_max && bytes <= bytes_max) return false;
    rep->bytes += bytes;
  }
  rep->writes.push_back(std::move(write));
  ++pending_dead_;
  return true;
}

Lane::Batch* Lane::PushBatch(bool commits, bool stopped) {
  std::unique_ptr<Batch> batch;
  if (free_batches_.empty()) {
    batch = std::make_unique<Batch>();
  } else {
    batch = std::move(free_batches_.back());
    free_batches_.pop_back();
  }
  batch->number = next_batch_++;
  batch->commits = commits;
  batch->stopped = stopped;
  batch->outcome.reset();
  batch->settled.store(commits ? 0 : 1, std::memory_order_relaxed);
  batch->position = pending_position_;
  batch->scanned = pending_scanned_;
  batch->stored_retry = pending_stored_retry_;
  batch->passed = pending_passed_;
  batch->head_ms = pending_head_ms_;
  batch->dead = pending_dead_;
  batch->taken = pending_taken_;
  batch->last_id = pending_last_id_;
  batch->epoch = batch_epoch_;
  std::fill(pending_passed_.begin(), pending_passed_.end(), 0);
  pending_dead_ = 0;
  // The head moves on at once: the next batch builds on this one.
  position_ = pending_position_;
  scanned_to_ = pending_scanned_;
  stored_retry_ = pending_stored_retry_;
  Batch* pushed = batch.get();
  batches_.push_back(std::move(batch));
  WHARF_ASSERT(batches_.size() <= std::max<size_t>(context_.options->lane_batches_in_flight, 1));
  max_in_flight_ = std::max<uint32_t>(max_in_flight_, static_cast<uint32_t>(batches_.size()));
  in_flight_ = true;
  return pushed;
}

Status Lane::CommitBatch(Txn* txn, bool stopped, bool blocking) {
  Batch* batch = PushBatch(/*commits=*/true, stopped);
  const uint64_t number = batch->number;
  if (blocking) {
    WHARF_ASSERT(batches_.size() == 1);  // Drain and Stop do not pipeline
    Status s = txn->Commit();
    Complete(number, s);
    return s;
  }
  WHARF_ASSERT(completions_ != nullptr);  // a lane run by a worker has its worker's sink
  WHARF_DASSERT(batches_.size() == 1 || submitter_ == worker());  // CanPipeline
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
  auto it = std::find_if(batches_.begin(), batches_.end(),
                         [number](const auto& batch) { return batch->number == number; });
  WHARF_ASSERT(it != batches_.end() && (*it)->commits && !(*it)->outcome.has_value());
  (*it)->outcome = status;
  (*it)->settled.store(1, std::memory_order_release);
  Settle();
}

void Lane::Settle() {
  while (!batches_.empty()) {
    std::unique_ptr<Batch>& batch = batches_.front();
    if (batch->commits && !batch->outcome.has_value()) break;  // in order: wait for it
    const bool succeeded = !batch->commits || batch->outcome->ok();
    if (chain_failure_ != nullptr) {
      // After a refused batch: refused too (its cursor compare-and-set expected the refused
      // batch's cursor), or, when the refused batch's outcome is unknown because it reached the
      // WAL, perhaps committed on top of it. Either way it is discarded; the cursors are
      // reloaded when it committed.
      if (batch->commits && succeeded) {
        // The chained checks refuse what follows a refused batch; only an earlier batch's
        // unknown outcome (cursors reloaded since) or somebody writing the very cursor bytes a
        // later batch expects lets one through. The store stays whole either way (each batch's
        // effects commit with its own compare-and-set); the lane reloads its cursors.
        WHARF_DASSERT(!chain_failure_->outcome->IsConflict());
        chain_successor_committed_ = true;
      }
      free_batches_.push_back(std::move(batch));
    } else if (succeeded) {
      ApplySucceeded(batch.get());
      free_batches_.push_back(std::move(batch));
    } else {
      chain_failure_ = std::move(batch);
    }
    batches_.pop_front();
  }
  in_flight_ = !batches_.empty();
  if (chain_failure_ == nullptr || !batches_.empty()) return;
  // Nothing is in flight any more: start again from what is durable.
  std::unique_ptr<Batch> failed = std::move(chain_failure_);
  const Status& status = *failed->outcome;
  position_ = durable_.position;
  persisted_ = durable_.persisted;
  persisted_bytes_ = durable_.persisted_bytes;
  scanned_to_ = durable_.scanned;
  stored_retry_ = durable_.stored_retry;
  ApplyFailed(*failed);
  // A commit whose outcome is unknown (an I/O error once it may have reached the WAL; the
  // committer's recovery then makes whatever was written durable) may have moved the cursors,
  // and so has a batch that committed after it: no batch starts before they are read again.
  const bool refused = status.IsConflict() || status.IsInvalidArgument() || status.IsCorruption() ||
                       status.IsClosed();
  if (chain_successor_committed_ || !refused) {
    reload_needed_ = true;
    ReloadCursorsIfNeeded();
  }
  chain_successor_committed_ = false;
  free_batches_.push_back(std::move(failed));
}

void Lane::ApplySucceeded(Batch* batch) {
  if (batch->commits) {
    for (size_t i = 0; i < partitions_.size(); ++i) {
      if (batch->position[i] != durable_.persisted[i]) {
        durable_.persisted[i] = batch->position[i];
        durable_.persisted_bytes[i] =
            tables::cursors::EncodeValue(batch->position[i], batch->epoch);
      }
    }
    durable_.stored_retry = batch->stored_retry;
    dirty_since_ms_ = 0;
    if (retry_at_ms_ <= SteadyMs()) backoff_ms_ = 0;
    if (poison_id_ != 0 && batch->last_id >= poison_id_) poison_id_ = 0;
  } else if (dirty_since_ms_ == 0) {
    dirty_since_ms_ = SteadyMs();  // advanced in memory over skipped facts
  }
  durable_.position = batch->position;
  durable_.scanned = batch->scanned;
  // The window's facts the batch passed are done with (durable, or advanced over in memory).
  if (window_) window_->PopBefore(window_->SeqAfter(batch->position[0]));
  PublishPassed(*batch);
}

void Lane::ApplyFailed(const Batch& batch) {
  const Status& status = *batch.outcome;
  Consumer* consumer = consumer_;
  if (status.IsClosed()) return;
  if (status.IsConflict() && status.subcode() == Status::SubCode::kLeaseFenced) {
    // Another instance acquired the consumer while this batch ran: its commit is refused, so the
    // facts are applied once, by the new holder. (If this instance has re-acquired it since, its
    // newer lease stands; only the stale batch is dropped.)
    if (consumer->epoch.load() == batch.epoch) consumer->owned.store(false);
    (*context_.trace)(TraceEvent::Level::kWarning, "refused-stale-epoch", consumer, 0,
                      status.message());
    return;
  }
  if (status.IsConflict() && status.subcode() == Status::SubCode::kReadConflict) {
    // Another writer changed state the batch read: its facts run again from the durable
    // position (already the head), on the current rows.
    (*context_.trace)(TraceEvent::Level::kInfo, "read-conflict", consumer, 0, status.message());
    return;
  }
  if (status.IsConflict()) {
    // Somebody else moved the cursor (an operator, or another instance): start from theirs.
    (*context_.trace)(TraceEvent::Level::kWarning, "cursor-conflict", consumer, 0,
                      status.message());
    Status loaded = LoadCursors();
    if (!loaded.ok()) retry_at_ms_ = SteadyMs() + context_.options->backoff_max_ms;
    return;
  }
  if (status.IsInvalidArgument() || status.IsCorruption()) {
    // The store refuses these bytes and would again: narrow down to the fact that causes it.
    if (batch.taken > 1) {
      (*context_.trace)(TraceEvent::Level::kInfo, "batch-refused", consumer, 0,
                        status.message() + "; retrying one fact at a time");
      single_until_ = batch.last_id;
    } else {
      poison_id_ = batch.last_id;
      poison_reason_ = status.ToString();
    }
    return;
  }
  // Transient (I/O error, busy): keep the cursor and retry after a backoff.
  BackOff();
  (*context_.trace)(TraceEvent::Level::kWarning, "transient-error", consumer, 0, status.ToString());
}

bool Lane::PersistIfDue(bool force, bool blocking) {
  if (!batches_.empty() || dirty_since_ms_ == 0) return false;
  if (!force && SteadyMs() - dirty_since_ms_ < context_.options->cursor_persist_ms) return false;
  BeginBatch();
  Txn txn = context_.core->Begin();
  pending_position_ = position_;
  pending_scanned_ = scanned_to_;
  pending_taken_ = 0;
  pending_last_id_ = 0;
  std::fill(pending_passed_.begin(), pending_passed_.end(), 0);
  std::fill(pending_head_ms_.begin(), pending_head_ms_.end(), kHeadUnknown);
  pending_dead_ = 0;
  AddCursorWrites(EngineCore::RepOf(txn));
  if (EngineCore::RepOf(txn)->writes.empty()) {
    dirty_since_ms_ = 0;
    return false;
  }
  CommitBatch(&txn, /*stopped=*/false, blocking).PermitUncheckedError();
  return true;
}

Status Lane::LoadCursors() {
  WHARF_ASSERT(batches_.empty());  // the head is the durable position
  const std::vector<uint64_t> before = position_;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    tables::cursors::Stored cursor;
    Status s =
        tables::cursors::Read(*context_.core->store(), consumer_->id, partitions_[i], &cursor);
    if (!s.ok()) return s;
    const uint64_t fact_id = cursor.fact_id;
    persisted_bytes_[i] = std::move(cursor.sealed);
    persisted_[i] = fact_id;
    position_[i] = fact_id;
    scanned_to_[i] = fact_id;
  }
  dirty_since_ms_ = 0;
  durable_.position = position_;
  durable_.persisted = persisted_;
  durable_.persisted_bytes = persisted_bytes_;
  durable_.scanned = scanned_to_;
  for (size_t i = 0; i < partitions_.size(); ++i) {
    if (lag_counted() && position_[i] != before[i]) AdjustLagForMove(i, before[i]);
    lag_[i].cursor.store(position_[i], std::memory_order_relaxed);
  }
  Status s = LoadRetryRecords();
  if (!s.ok()) return s;
  ForgetPassed();
  if (window_) ResetWindow();  // its facts were read from the old position
  // Whatever is durable beyond the cursors may hold facts the consumer takes: look at it.
  Want(context_.core->committer()->durable_lsn());
  return Status::OK();
}

Status Lane::LoadRetryRecords() {
  for (size_t i = 0; i < partitions_.size(); ++i) {
    std::optional<tables::retries::RetryRecord> stored;
    Status s =
        tables::retries::Read(*context_.core->store(), consumer_->id, partitions_[i], &stored);
    if (!s.ok()) return s;
    stored_retry_[i] = 0;
    if (!stored) continue;
    const tables::retries::RetryRecord& record = *stored;
    stored_retry_[i] = record.fact_id;  // deleted when the cursor passes it, even if stale
    if (record.fact_id <= position_[i]) continue;
    // A fact this consumer kept failing before (another instance, or before a restart): its
    // attempts go on counting from there.
    auto it = std::lower_bound(attempts_.begin(), attempts_.end(), record.fact_id,
                               [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
    if (it != attempts_.end() && it->fact_id == record.fact_id) {
      it->count = std::max(it->count, record.attempts);
    } else {
      attempts_.insert(it, Attempts{record.fact_id, static_cast<uint32_t>(i), record.attempts});
    }
    if (retry_fact_id_ != record.fact_id) {
      retry_fact_id_ = record.fact_id;
      retry_index_ = i;
      retry_since_ms_ = record.first_ms;
      retry_error_ = record.last_error;
      retry_last_ms_ = record.last_ms;
      failure_.Retrying(record.fact_id, record.attempts, record.first_ms, record.last_error,
                        record.last_ms);
    }
  }
  durable_.stored_retry = stored_retry_;
  return Status::OK();
}

void Lane::PublishPassed(const Batch& batch) {
  counters_.dead_letters.Add(batch.dead);
  for (size_t i = 0; i < partitions_.size(); ++i) {
    PartitionLag& cell = lag_[i];
    cell.cursor.store(batch.position[i], std::memory_order_relaxed);
    if (batch.passed[i] == 0) continue;
    const int64_t passed = batch.passed[i];
    const int64_t left = cell.facts.fetch_sub(passed) - passed;
    // The oldest pending fact was among those passed: the next is the one the batch stopped at
    // (read), or none, or not known until the next batch reads it.
    if (batch.head_ms[i] != kHeadUnknown) {
      cell.head_commit_ms.store(batch.head_ms[i]);
    } else if (left <= 0) {
      cell.ClearHeadIfCaughtUp();
    } else {
      cell.head_commit_ms.store(kHeadUnknown);
    }
  }
  ForgetPassed();
}

void Lane::Announce(uint32_t partition, int64_t count, int64_t first_commit_ms) {
  PartitionLag& cell = lag_[IndexOf(partition)];
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
    Status s = CountTaken(i, position_[i], horizon, &count, &first_ms);
    if (!s.ok()) return s;
    // What the listener added since the cut stays; what it counted before is replaced.
    cell.facts.fetch_add(count - at_cut);
    if (count > 0) {
      cell.head_commit_ms.store(first_ms);
    } else {
      cell.ClearHeadIfCaughtUp();
    }
    cell.cursor.store(position_[i], std::memory_order_relaxed);
  }
  lag_counted_.store(true, std::memory_order_release);
  return Status::OK();
}

void Lane::AdjustLagForMove(size_t index, uint64_t from) {
  PartitionLag& cell = lag_[index];
  const uint64_t to = position_[index];
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
