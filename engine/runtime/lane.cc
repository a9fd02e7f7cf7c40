// Lane processing: collect a batch, run handlers under the failure policy, commit effects and the
// cursor advance atomically, and apply the commit's outcome.
#include <algorithm>
#include <exception>

#include "engine/runtime/runtime_impl.h"
#include "engine/store/codec.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"

namespace wharf {
namespace internal {
namespace {

// The reason the handler running on this thread gave (SetFailureReason), while one runs.
thread_local std::string* t_failure_reason = nullptr;

}  // namespace
}  // namespace internal

void SetFailureReason(std::string_view reason) {
  if (internal::t_failure_reason == nullptr) return;  // not inside a handler
  internal::t_failure_reason->assign(reason.substr(0, kFailureReasonBytesMax));
}

namespace internal {
namespace {

// Facts read per partition per batch, at most (taken or skipped).
constexpr size_t kReadChunkMin = 64;

void Truncate(TxnRep* rep, size_t writes, size_t facts, size_t bytes) {
  rep->writes.resize(writes);
  rep->facts.resize(facts);
  rep->bytes = bytes;
}

const char* OutcomeTraceName(Outcome outcome) {
  return outcome == Outcome::kRejected ? "handler-rejected" : "handler-failed";
}

}  // namespace

bool RuntimeImpl::HasWork(const Lane& lane) const {
  if (lane.poison_id != 0) return true;
  const uint64_t wanted = lane.wanted_to.load(std::memory_order_acquire);
  for (size_t i = 0; i < lane.partitions.size(); ++i) {
    if (wanted > lane.scanned_to[i] && cache_->high(lane.partitions[i]) > lane.scanned_to[i]) {
      return true;
    }
  }
  return false;
}

bool RuntimeImpl::HasUnscanned(const Lane& lane) const {
  if (lane.poison_id != 0) return true;
  for (size_t i = 0; i < lane.partitions.size(); ++i) {
    if (cache_->high(lane.partitions[i]) > lane.scanned_to[i]) return true;
  }
  return false;
}

void RuntimeImpl::Want(Lane* lane, uint64_t fact_id) {
  uint64_t current = lane->wanted_to.load(std::memory_order_relaxed);
  while (current < fact_id &&
         !lane->wanted_to.compare_exchange_weak(current, fact_id, std::memory_order_release)) {
  }
}

Status RuntimeImpl::CollectBatch(Lane* lane, uint32_t limit, std::vector<FactPtr>* entries) {
  const uint64_t durable = core_->committer()->durable_lsn();
  const size_t chunk = std::max<size_t>(kReadChunkMin, limit);
  uint64_t cutoff = durable;
  for (size_t i = 0; i < lane->partitions.size(); ++i) {
    uint32_t partition = lane->partitions[i];
    uint64_t from = lane->position[i] + 1;
    uint64_t covered = 0;
    if (!cache_->Read(partition, from, durable, chunk, entries, &covered)) {
      // One allocation for the chunk: each entry shares the vector's ownership (aliasing).
      auto facts = std::make_shared<std::vector<Fact>>();
      facts->reserve(chunk);
      Status s = core_->ReadFacts(partition, from, durable, chunk, facts.get());
      if (!s.ok()) return s;
      for (const Fact& fact : *facts) entries->push_back(FactPtr(facts, &fact));
      covered = facts->size() == chunk ? facts->back().id : durable;
    }
    cutoff = std::min(cutoff, covered);
  }
  // Merge the partitions (global ordering) and keep what every partition is complete up to.
  if (lane->partitions.size() > 1) {
    std::sort(entries->begin(), entries->end(),
              [](const FactPtr& a, const FactPtr& b) { return a->id < b->id; });
  }
  auto end = std::find_if(entries->begin(), entries->end(),
                          [&](const FactPtr& fact) { return fact->id > cutoff; });
  entries->erase(end, entries->end());
  // Stop after `limit` facts the consumer takes.
  uint32_t taken = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    if (lane->consumer->Takes(*(*entries)[i]) && ++taken == limit) {
      if (i + 1 < entries->size()) cutoff = (*entries)[i]->id;
      entries->resize(i + 1);
      break;
    }
  }
  for (size_t i = 0; i < lane->partitions.size(); ++i) {
    lane->pending_scanned[i] = std::max(lane->scanned_to[i], cutoff);
  }
  return Status::OK();
}

namespace {

// Runs one handler call with a slot for its failure reason.
class ReasonScope {
 public:
  explicit ReasonScope(std::string* slot) { t_failure_reason = slot; }
  ~ReasonScope() { t_failure_reason = nullptr; }
  ReasonScope(const ReasonScope&) = delete;
  ReasonScope& operator=(const ReasonScope&) = delete;
};

// A reason as traced and stored: at most kFailureReasonBytesMax bytes, on one line (control
// characters become spaces, so log lines and `wharf dead list` rows stay whole).
std::string Bounded(std::string text) {
  if (text.size() > kFailureReasonBytesMax) text.resize(kFailureReasonBytesMax);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return text;
}

}  // namespace

bool RuntimeImpl::RunBatch(Lane* lane, bool blocking) {
  Consumer* consumer = lane->consumer;
  uint64_t furthest = *std::max_element(lane->position.begin(), lane->position.end());
  uint32_t limit = furthest < lane->single_until ? 1 : consumer->batch_facts;
  BeginBatch(lane);
  std::vector<FactPtr> entries;
  Status s = CollectBatch(lane, limit, &entries);
  if (!s.ok()) {
    Trace(TraceEvent::Level::kError, "read-failed", consumer, 0, s.ToString());
    lane->retry_at_ms = SteadyMs() + options_.backoff_max_ms;
    return false;
  }
  lane->pending_position = lane->position;
  if (entries.empty()) {
    lane->scanned_to = lane->pending_scanned;
    return false;
  }

  Txn txn = core_->Begin();
  TxnRep* rep = EngineCore::RepOf(txn);
  bool stopped = false;  // a fact must be retried later: back off
  bool full = false;     // the transaction is full: the next batch starts at once
  uint32_t taken = 0;
  for (const FactPtr& entry : entries) {
    const Fact& fact = *entry;
    size_t index = std::find(lane->partitions.begin(), lane->partitions.end(), fact.partition) -
                   lane->partitions.begin();
    if (!consumer->Takes(fact)) {
      lane->pending_position[index] = fact.id;
      continue;
    }
    if (fact.id == lane->poison_id) {
      // Committed alone, the store still refused this fact's effects: settle it without them.
      std::string reason = "the store refused this fact's effects (" + lane->poison_reason +
                           "); it is settled as failed without them";
      AddDeadLetter(lane, rep, fact, "store-rejected", reason, /*counted=*/false);
      Trace(TraceEvent::Level::kWarning, "store-rejected", consumer, fact.id, std::move(reason));
      lane->pending_position[index] = fact.id;
      ++taken;
      continue;
    }
    Outcome outcome = Outcome::kFailed;
    std::string error, given;
    size_t writes = rep->writes.size(), facts = rep->facts.size(), bytes = rep->bytes;
    EffectsImpl effects_impl(&txn, consumer, &fact);
    try {
      ReasonScope scope(&given);
      if (consumer->kind == ConsumerKind::kSubscriber) {
        outcome = consumer->subscribe(fact);
      } else {
        Effects effects = effects_impl.MakeEffects();
        outcome = consumer->project(fact, effects);
      }
    } catch (const std::exception& e) {
      error = std::string("handler threw: ") + e.what();
    } catch (...) {
      error = "handler threw a non-standard exception";
    }
    if (effects_impl.batch_full()) {
      // Earlier facts of the batch filled the transaction: commit them, run this one next.
      Truncate(rep, writes, facts, bytes);
      full = true;
      break;
    }
    ++taken;
    // What the handler said, else the throw, else what it returned.
    auto reason = [&](const char* fallback) {
      return Bounded(!given.empty() ? given : !error.empty() ? error : std::string(fallback));
    };
    if (consumer->kind == ConsumerKind::kSubscriber) {
      if (outcome == Outcome::kHandled && error.empty()) {
        lane->pending_position[index] = fact.id;
      } else if (outcome == Outcome::kRejected && error.empty()) {
        if (!AddDeadLetter(lane, rep, fact, "handler-rejected", reason("rejected"))) {
          Truncate(rep, writes, facts, bytes);
          --taken;
          full = true;
          break;
        }
        Trace(TraceEvent::Level::kWarning, "handler-rejected", consumer, fact.id,
              reason("rejected"));
        lane->pending_position[index] = fact.id;
      } else {
        Trace(TraceEvent::Level::kWarning, "subscriber-failed", consumer, fact.id,
              reason(outcome == Outcome::kRetry ? "retry" : "failed"));
        stopped = true;
        break;
      }
      continue;
    }
    if (outcome == Outcome::kHandled && error.empty() && effects_impl.failure_name().empty()) {
      lane->pending_position[index] = fact.id;
      continue;
    }
    Truncate(rep, writes, facts, bytes);
    if (outcome == Outcome::kRetry && error.empty()) {
      Trace(TraceEvent::Level::kInfo, "handler-retry", consumer, fact.id,
            reason("retry requested"));
      stopped = true;
      break;
    }
    std::string name = !effects_impl.failure_name().empty() ? effects_impl.failure_name()
                                                            : OutcomeTraceName(outcome);
    std::string why = !effects_impl.failure_name().empty()
                          ? Bounded(effects_impl.failure().ToString())
                          : reason(outcome == Outcome::kRejected ? "rejected" : "failed");
    if (!AddDeadLetter(lane, rep, fact, name, why)) {
      --taken;
      full = true;
      break;
    }
    Trace(TraceEvent::Level::kWarning, name, consumer, fact.id, std::move(why));
    lane->pending_position[index] = fact.id;
  }
  if (stopped) {
    lane->backoff_ms = lane->backoff_ms == 0
                           ? options_.backoff_initial_ms
                           : std::min(lane->backoff_ms * 2, options_.backoff_max_ms);
    lane->retry_at_ms = SteadyMs() + lane->backoff_ms;
  }
  if (stopped || full) {
    lane->pending_scanned = lane->pending_position;  // look again from where we stopped
  }
  lane->pending_taken = taken;
  lane->pending_last_id = 0;
  for (uint64_t id : lane->pending_position)
    lane->pending_last_id = std::max(lane->pending_last_id, id);
  if (lane->pending_position == lane->position && rep->writes.empty()) {
    return !stopped;  // stopped at the first fact: nothing to commit
  }
  if (taken == 0 && !stopped) {
    // Only skipped facts: advance in memory; persisted within cursor_persist_ms or on stop.
    lane->position = lane->pending_position;
    lane->scanned_to = lane->pending_scanned;
    if (lane->dirty_since_ms == 0) lane->dirty_since_ms = SteadyMs();
    return true;
  }
  AddCursorWrites(lane, rep);
  Status committed = CommitLane(lane, &txn, blocking);
  return committed.ok() || !stopped;
}

void RuntimeImpl::AddCursorWrites(Lane* lane, TxnRep* rep) {
  AddFence(lane, rep);
  const uint64_t epoch = lane->batch_epoch;
  lane->pending_epoch = epoch;
  for (size_t i = 0; i < lane->partitions.size(); ++i) {
    if (lane->pending_position[i] == lane->persisted[i]) continue;
    std::string key = tables::cursors::Key(lane->consumer->id, lane->partitions[i]);
    rep->checks.push_back(
        {kCursors, key, lane->persisted_bytes[i],
         "cursor of " + lane->consumer->id + "/" + std::to_string(lane->partitions[i])});
    rep->writes.push_back({kCursors, false, std::move(key),
                           tables::cursors::EncodeValue(lane->pending_position[i], epoch)});
  }
}

bool RuntimeImpl::AddDeadLetter(Lane* lane, TxnRep* rep, const Fact& fact, std::string_view name,
                                std::string_view reason, bool counted) {
  WriteOp write{kDead, false, tables::dead_letters::Key(lane->consumer->id, fact.id),
                tables::dead_letters::EncodeValue(std::string(name) + ": " + std::string(reason),
                                                  codec::EncodeFact(fact))};
  const size_t bytes = write.key.size() + write.value.size();
  if (counted) {
    // A dead letter is part of what the transaction carries. One that only earlier facts of the
    // batch leave no room for ends the batch before its fact.
    const size_t bytes_max = core_->txn_bytes_max();
    if (rep->bytes > 0 && rep->bytes + bytes > bytes_max && bytes <= bytes_max) return false;
    rep->bytes += bytes;
  }
  rep->writes.push_back(std::move(write));
  return true;
}

Status RuntimeImpl::CommitLane(Lane* lane, Txn* txn, bool blocking) {
  lane->in_flight = true;
  if (blocking) {
    Status s = txn->Commit();
    Complete(lane, s);
    return s;
  }
  Worker* worker = workers_[lane->worker].get();
  Status s = txn->CommitAsync([worker, lane](const Status& status, const CommitResult&) {
    worker->completions.enqueue({lane, status});
    worker->wake.signal();
  });
  if (!s.ok()) Complete(lane, s);
  return s;
}

void RuntimeImpl::Complete(Lane* lane, const Status& status) {
  lane->in_flight = false;
  Consumer* consumer = lane->consumer;
  if (status.ok()) {
    for (size_t i = 0; i < lane->partitions.size(); ++i) {
      if (lane->pending_position[i] != lane->persisted[i]) {
        lane->persisted_bytes[i] =
            tables::cursors::EncodeValue(lane->pending_position[i], lane->pending_epoch);
      }
    }
    lane->position = lane->pending_position;
    lane->persisted = lane->pending_position;
    lane->scanned_to = lane->pending_scanned;
    lane->dirty_since_ms = 0;
    if (lane->retry_at_ms <= SteadyMs()) lane->backoff_ms = 0;
    if (lane->poison_id != 0 && lane->pending_last_id >= lane->poison_id) lane->poison_id = 0;
    return;
  }
  if (status.IsClosed()) return;
  if (status.IsConflict() && status.subcode() == Status::SubCode::kLeaseFenced) {
    // Another instance acquired the consumer while this batch ran: its commit is refused, so the
    // facts are applied once, by the new holder. (If this instance has re-acquired it since, its
    // newer lease stands; only the stale batch is dropped.)
    if (consumer->epoch.load() == lane->batch_epoch) consumer->owned.store(false);
    Trace(TraceEvent::Level::kWarning, "refused-stale-epoch", consumer, 0, status.message());
    return;
  }
  if (status.IsConflict()) {
    // Somebody else moved the cursor (an operator, or another instance): start from theirs.
    Trace(TraceEvent::Level::kWarning, "cursor-conflict", consumer, 0, status.message());
    Status loaded = LoadCursors(lane);
    if (!loaded.ok()) lane->retry_at_ms = SteadyMs() + options_.backoff_max_ms;
    return;
  }
  if (status.IsInvalidArgument() || status.IsCorruption()) {
    // The store refuses these bytes and would again: narrow down to the fact that causes it.
    if (lane->pending_taken > 1) {
      Trace(TraceEvent::Level::kInfo, "batch-refused", consumer, 0,
            status.message() + "; retrying one fact at a time");
      lane->single_until = lane->pending_last_id;
    } else {
      lane->poison_id = lane->pending_last_id;
      lane->poison_reason = status.ToString();
    }
    return;
  }
  // Transient (I/O error, busy): keep the cursor and retry after a backoff.
  lane->backoff_ms = lane->backoff_ms == 0
                         ? options_.backoff_initial_ms
                         : std::min(lane->backoff_ms * 2, options_.backoff_max_ms);
  lane->retry_at_ms = SteadyMs() + lane->backoff_ms;
  Trace(TraceEvent::Level::kWarning, "transient-error", consumer, 0, status.ToString());
}

bool RuntimeImpl::PersistIfDue(Lane* lane, bool force, bool blocking) {
  if (lane->in_flight || lane->dirty_since_ms == 0) return false;
  if (!force && SteadyMs() - lane->dirty_since_ms < options_.cursor_persist_ms) return false;
  BeginBatch(lane);
  Txn txn = core_->Begin();
  lane->pending_position = lane->position;
  lane->pending_scanned = lane->scanned_to;
  lane->pending_taken = 0;
  lane->pending_last_id = 0;
  AddCursorWrites(lane, EngineCore::RepOf(txn));
  if (EngineCore::RepOf(txn)->writes.empty()) {
    lane->dirty_since_ms = 0;
    return false;
  }
  CommitLane(lane, &txn, blocking).PermitUncheckedError();
  return true;
}

Status RuntimeImpl::LoadCursors(Lane* lane) {
  for (size_t i = 0; i < lane->partitions.size(); ++i) {
    std::string key = tables::cursors::Key(lane->consumer->id, lane->partitions[i]), stored;
    rocksdb::Status s = core_->store()->db()->Get(rocksdb::ReadOptions(),
                                                  core_->store()->cf(kCursors), key, &stored);
    uint64_t fact_id = 0, epoch = 0;
    if (s.IsNotFound()) {
      lane->persisted_bytes[i].reset();
    } else if (!s.ok()) {
      return FromRocks(s, "read cursor of " + lane->consumer->id);
    } else {
      Status decoded = tables::cursors::DecodeValue(stored, &fact_id, &epoch);
      if (!decoded.ok()) return decoded;
      lane->persisted_bytes[i] = std::move(stored);
    }
    lane->persisted[i] = fact_id;
    lane->position[i] = fact_id;
    lane->scanned_to[i] = fact_id;
  }
  lane->dirty_since_ms = 0;
  // Whatever is durable beyond the cursors may hold facts the consumer takes: look at it.
  Want(lane, core_->committer()->durable_lsn());
  return Status::OK();
}

}  // namespace internal
}  // namespace wharf
