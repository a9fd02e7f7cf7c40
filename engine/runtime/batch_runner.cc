// BatchRunner: one fact's delivery under the failure policy, attempts and retries, and the
// fallbacks for what the store refuses.
#include "engine/runtime/batch_runner.h"

#include <algorithm>
#include <exception>

#include "engine/base/assert.h"
#include "engine/base/exception_text.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/cursor_chain.h"
#include "engine/runtime/effects.h"
#include "engine/runtime/handler_scope.h"
#include "engine/store/codec.h"
#include "engine/store/tables/dead_letters.h"

namespace wharf::internal {

namespace {

// The size of a transaction before a fact's effects: what Truncate() restores.
struct TxnMark {
  size_t writes = 0;
  size_t facts = 0;
  size_t bytes = 0;
};

TxnMark MarkOf(const TxnRep& rep) { return {rep.writes.size(), rep.facts.size(), rep.bytes}; }

void Truncate(TxnRep* rep, const TxnMark& mark) {
  WHARF_DASSERT(rep->writes.size() >= mark.writes && rep->facts.size() >= mark.facts);
  WHARF_DASSERT(rep->bytes >= mark.bytes);
  rep->writes.resize(mark.writes);
  rep->facts.resize(mark.facts);
  rep->bytes = mark.bytes;
}

const char* OutcomeTraceName(Outcome outcome) {
  return outcome == Outcome::kRejected ? "handler-rejected" : "handler-failed";
}

void Count(LaneCounters* counters, Outcome outcome, bool failed) {
  if (failed) {
    counters->failed.Add();
    return;
  }
  switch (outcome) {
    case Outcome::kHandled:
      counters->handled.Add();
      break;
    case Outcome::kRejected:
      counters->rejected.Add();
      break;
    case Outcome::kRetry:
      counters->retry.Add();
      break;
    case Outcome::kFailed:
      counters->failed.Add();
      break;
  }
}

}  // namespace

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

BatchRunner::BatchRunner(EngineCore* core, const RuntimeOptions* options, Tracer* trace,
                         Consumer* consumer, const CursorChain* chain,
                         const RelayBatch* relay_batch)
    : core_(core),
      options_(options),
      trace_(trace),
      consumer_(consumer),
      chain_(chain),
      relay_batch_(relay_batch) {
  WHARF_ASSERT(core_ != nullptr && options_ != nullptr && trace_ != nullptr);
  WHARF_ASSERT(consumer_->durable() && chain_ != nullptr);
  WHARF_ASSERT((consumer_->relay != nullptr) == (relay_batch_ != nullptr));
}

HandlerCall BatchRunner::CallHandler(const Fact& fact, Txn* txn) {
  HandlerCall call;
  EffectsImpl effects_impl(txn, consumer_, &fact, chain_);
  try {
    HandlerScope scope(&call.given, AttemptsOf(fact.id) + 1);
    if (relay_batch_ != nullptr) {
      // Relay: the broker's answer for the fact, published with its batch.
      call.outcome = relay_batch_->OutcomeOf(fact, &call.given);
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

BatchRunner::Step BatchRunner::Deliver(const Fact& fact, const UpcastBatch& upcast, Txn* txn,
                                       uint32_t* dead) {
  TxnRep* rep = EngineCore::RepOf(*txn);
  if (fact.id == poison_id_) return SettlePoison(rep, fact, dead);
  if (const std::string* error = upcast.Failure(fact)) {
    // An upcaster is a pure function: delivering it again would fail again.
    attempt_ = NoteDelivery(fact);
    Count(&counters_, Outcome::kFailed, /*failed=*/true);
    return SettleFailed(rep, fact, "upcast-failed", Bounded(*error), dead);
  }
  const TxnMark mark = MarkOf(*rep);
  const HandlerCall call = CallHandler(upcast.Delivered(fact), txn);
  if (call.batch_full) {
    // Earlier facts of the batch filled the transaction: commit them, run this one next (not
    // counted: the handler's call is made again, as the same attempt).
    Truncate(rep, mark);
    return Step::kBatchFull;
  }
  attempt_ = NoteDelivery(fact);
  const bool threw = !call.error.empty();
  // What the handler did: a throw counts as failed, and so do effects the store refused.
  Count(&counters_, call.outcome, threw || !call.failure_name.empty());
  if (consumer_->kind == ConsumerKind::kSubscriber) {
    // A subscriber has no effects in the transaction. A relay's rejection is the broker's; its
    // failures are the broker's or the connection's.
    WHARF_DASSERT(MarkOf(*rep).writes == mark.writes);
    const bool relay = relay_batch_ != nullptr;
    if (call.outcome == Outcome::kHandled && !threw) return Step::kPassed;
    if (call.outcome == Outcome::kRejected && !threw) {
      return SettleFailed(rep, fact, relay ? "broker-rejected" : "handler-rejected",
                          call.Reason("rejected"), dead);
    }
    std::string reason = call.Reason(call.outcome == Outcome::kRetry ? "retry" : "failed");
    const char* failed_name = relay ? "relay-failed" : "subscriber-failed";
    if (AttemptsExhausted(attempt_)) {
      return SettleFailed(rep, fact, "attempts-exhausted",
                          ExhaustedReason(attempt_, failed_name, reason), dead);
    }
    NoteRetry(fact, attempt_, failed_name + (": " + reason));
    (*trace_)(TraceEvent::Level::kWarning, failed_name, consumer_, fact.id, std::move(reason),
              attempt_);
    return Step::kRetryLater;
  }
  if (call.outcome == Outcome::kHandled && !threw && call.failure_name.empty()) {
    return Step::kPassed;
  }
  Truncate(rep, mark);  // a failed fact's effects are not applied
  if (call.outcome == Outcome::kRetry && !threw) {
    std::string reason = call.Reason("retry requested");
    if (AttemptsExhausted(attempt_)) {
      return SettleFailed(rep, fact, "attempts-exhausted",
                          ExhaustedReason(attempt_, "handler-retry", reason), dead);
    }
    NoteRetry(fact, attempt_, "handler-retry: " + reason);
    (*trace_)(TraceEvent::Level::kInfo, "handler-retry", consumer_, fact.id, std::move(reason),
              attempt_);
    return Step::kRetryLater;
  }
  if (!call.failure_name.empty()) {
    return SettleFailed(rep, fact, call.failure_name, Bounded(call.failure.ToString()), dead);
  }
  return SettleFailed(rep, fact, OutcomeTraceName(call.outcome),
                      call.Reason(call.outcome == Outcome::kRejected ? "rejected" : "failed"),
                      dead);
}

BatchRunner::Step BatchRunner::SettlePoison(TxnRep* rep, const Fact& fact, uint32_t* dead) {
  // Committed alone, the store still refused this fact's effects: settle it without them.
  std::string reason = "the store refused this fact's effects (" + poison_reason_ +
                       "); it is settled as failed without them";
  attempt_ = AttemptsOf(fact.id);  // not delivered again: the store refused its effects
  const bool added = AddDeadLetter(rep, fact, attempt_, "store-rejected", reason,
                                   /*counted=*/false);
  WHARF_ASSERT(added);  // not counted toward the transaction's bytes: never refused
  ++*dead;
  failure_.Failed("store-rejected: " + reason, core_->NowMs());
  (*trace_)(TraceEvent::Level::kWarning, "store-rejected", consumer_, fact.id, std::move(reason));
  return Step::kDeadLettered;
}

BatchRunner::Step BatchRunner::SettleFailed(TxnRep* rep, const Fact& fact, const std::string& name,
                                            std::string reason, uint32_t* dead) {
  [[maybe_unused]] const size_t writes_before = rep->writes.size();
  if (!AddDeadLetter(rep, fact, attempt_, name, reason)) {
    WHARF_DASSERT(rep->writes.size() == writes_before);  // nothing added
    return Step::kBatchFull;
  }
  ++*dead;
  failure_.Failed(name + ": " + reason, core_->NowMs());
  (*trace_)(TraceEvent::Level::kWarning, name, consumer_, fact.id, std::move(reason), attempt_);
  return Step::kDeadLettered;
}

bool BatchRunner::AddDeadLetter(TxnRep* rep, const Fact& fact, uint32_t attempt,
                                std::string_view name, std::string_view reason,
                                bool counted) const {
  WHARF_DASSERT(!name.empty());
  WriteOp write{kDead, false, tables::dead_letters::Key(consumer_->id, fact.id),
                tables::dead_letters::EncodeValue(std::string(name) + ": " + std::string(reason),
                                                  codec::EncodeFact(fact), attempt)};
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

uint32_t BatchRunner::NoteDelivery(const Fact& fact) {
  // Batches deliver in id order and start again from the position: the ids are kept sorted.
  auto it = std::lower_bound(attempts_.begin(), attempts_.end(), fact.id,
                             [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
  counters_.delivered.Add();
  if (it != attempts_.end() && it->fact_id == fact.id) {
    counters_.retries.Add();
    return ++it->count;
  }
  attempts_.insert(it,
                   Attempts{fact.id, static_cast<uint32_t>(chain_->IndexOf(fact.partition)), 1});
  return 1;
}

uint32_t BatchRunner::AttemptsOf(uint64_t fact_id) const {
  auto it = std::lower_bound(attempts_.begin(), attempts_.end(), fact_id,
                             [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
  return it != attempts_.end() && it->fact_id == fact_id ? it->count : 0;
}

bool BatchRunner::AttemptsExhausted(uint32_t attempt) const {
  const uint32_t most = consumer_->options.max_attempts;
  return most != 0 && attempt >= most;
}

std::string BatchRunner::ExhaustedReason(uint32_t attempt, std::string_view name,
                                         std::string_view reason) const {
  WHARF_DASSERT(AttemptsExhausted(attempt));
  return Bounded(std::to_string(attempt) + " deliveries failed (max_attempts " +
                 std::to_string(consumer_->options.max_attempts) +
                 "); the last: " + std::string(name) + ": " + std::string(reason));
}

void BatchRunner::Resume(const tables::retries::RetryRecord& record, size_t index) {
  WHARF_ASSERT(index < chain_->partitions() && record.fact_id != 0);
  // A fact this consumer kept failing before (another instance, or before a restart): its
  // attempts go on counting from there.
  auto it = std::lower_bound(attempts_.begin(), attempts_.end(), record.fact_id,
                             [](const Attempts& a, uint64_t id) { return a.fact_id < id; });
  if (it != attempts_.end() && it->fact_id == record.fact_id) {
    it->count = std::max(it->count, record.attempts);
  } else {
    attempts_.insert(it, Attempts{record.fact_id, static_cast<uint32_t>(index), record.attempts});
  }
  if (retry_fact_id_ != record.fact_id) {
    retry_fact_id_ = record.fact_id;
    retry_index_ = index;
    retry_since_ms_ = record.first_ms;
    retry_error_ = record.last_error;
    retry_last_ms_ = record.last_ms;
    failure_.Retrying(record.fact_id, record.attempts, record.first_ms, record.last_error,
                      record.last_ms);
  }
}

void BatchRunner::ForgetPassed() {
  std::erase_if(attempts_, [this](const Attempts& a) {
    return a.fact_id <= chain_->durable(a.index).position;
  });
  if (retry_fact_id_ != 0 && retry_fact_id_ <= chain_->durable(retry_index_).position) {
    retry_fact_id_ = 0;
    failure_.ClearRetrying();
  }
}

void BatchRunner::NoteRetry(const Fact& fact, uint32_t attempt, const std::string& error) {
  WHARF_DASSERT(attempt > 0 && !error.empty());
  const int64_t now_ms = core_->NowMs();
  if (retry_fact_id_ != fact.id) {
    retry_fact_id_ = fact.id;
    retry_index_ = chain_->IndexOf(fact.partition);
    retry_since_ms_ = now_ms;
  }
  retry_error_ = error;
  retry_last_ms_ = now_ms;
  failure_.Retrying(fact.id, attempt, retry_since_ms_, error, now_ms);
}

tables::retries::RetryRecord BatchRunner::RetryRecord(uint32_t attempt) const {
  WHARF_DASSERT(retry_fact_id_ != 0);  // NoteRetry ran for the fact waited for
  tables::retries::RetryRecord record;
  record.fact_id = retry_fact_id_;
  record.attempts = attempt;
  record.first_ms = retry_since_ms_;
  record.last_ms = retry_last_ms_;
  record.last_error = retry_error_;
  return record;
}

void BatchRunner::BackOff() {
  backoff_ms_ = backoff_ms_ == 0 ? options_->backoff_initial_ms
                                 : std::min(backoff_ms_ * 2, options_->backoff_max_ms);
  WHARF_DASSERT(backoff_ms_ <= std::max(options_->backoff_initial_ms, options_->backoff_max_ms));
  retry_at_ms_ = SteadyMs() + backoff_ms_;
}

void BatchRunner::WaitAfterReadFailure() { retry_at_ms_ = SteadyMs() + options_->backoff_max_ms; }

void BatchRunner::Committed(uint64_t last_id) {
  if (retry_at_ms_ <= SteadyMs()) backoff_ms_ = 0;
  if (poison_id_ != 0 && last_id >= poison_id_) poison_id_ = 0;
}

uint32_t BatchRunner::BatchLimit(uint64_t furthest) const {
  WHARF_DASSERT(consumer_->batch_facts > 0);
  return furthest < single_until_ ? 1 : consumer_->batch_facts;
}

BatchRunner::Recovery BatchRunner::OnBatchFailed(const ChainBatch& batch) {
  WHARF_ASSERT(batch.commits && batch.outcome.has_value() && !batch.outcome->ok());
  const Status& status = *batch.outcome;
  Consumer* consumer = consumer_;
  if (status.IsClosed()) return Recovery::kNone;
  if (status.IsConflict() && status.subcode() == Status::SubCode::kLeaseFenced) {
    // Another instance acquired the consumer while this batch ran: its commit is refused, so the
    // facts are applied once, by the new holder. (If this instance has re-acquired it since, its
    // newer lease stands; only the stale batch is dropped.)
    if (consumer->epoch.load() == batch.epoch) consumer->owned.store(false);
    (*trace_)(TraceEvent::Level::kWarning, "refused-stale-epoch", consumer, 0, status.message());
    return Recovery::kNone;
  }
  if (status.IsConflict() && status.subcode() == Status::SubCode::kReadConflict) {
    // Another writer changed state the batch read: its facts run again from the durable
    // position (already the head), on the current rows.
    (*trace_)(TraceEvent::Level::kInfo, "read-conflict", consumer, 0, status.message());
    return Recovery::kNone;
  }
  if (status.IsConflict()) {
    // Somebody else moved the cursor (an operator, or another instance): start from theirs.
    (*trace_)(TraceEvent::Level::kWarning, "cursor-conflict", consumer, 0, status.message());
    return Recovery::kReloadCursors;
  }
  if (status.IsInvalidArgument() || status.IsCorruption()) {
    // The store refuses these bytes and would again: narrow down to the fact that causes it.
    if (batch.taken > 1) {
      (*trace_)(TraceEvent::Level::kInfo, "batch-refused", consumer, 0,
                status.message() + "; retrying one fact at a time");
      single_until_ = batch.last_id;
    } else {
      poison_id_ = batch.last_id;
      poison_reason_ = status.ToString();
    }
    return Recovery::kNone;
  }
  // Transient (I/O error, busy): keep the cursor and retry after a backoff.
  BackOff();
  (*trace_)(TraceEvent::Level::kWarning, "transient-error", consumer, 0, status.ToString());
  return Recovery::kNone;
}

}  // namespace wharf::internal
