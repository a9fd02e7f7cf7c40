// Windowed lanes: a subscriber with key_concurrency > 1 or an asynchronous handler. Facts are
// read into a KeyWindow, handed to the handler in per-key order (up to key_concurrency at once),
// finished by their Delivery (any thread, through the lane's inbox), and the cursor is committed
// over the contiguous prefix of finished facts — with the dead letters of the facts in it — as a
// batch of the lane's pipeline (lane.cc: PushBatch, CommitBatch, Settle).
//
// Why this keeps the guarantees:
//  - per-key order: a fact is handed over only as the oldest unfinished fact of its key in the
//    window (KeyWindow), and a failed fact stays the oldest of its key while it backs off;
//  - at least once: the cursor never passes an unfinished fact (the committed prefix ends before
//    the first one), so a crash delivers again every fact not finished before it;
//  - a lane's facts are in the window at most once: facts are read after the window's newest one
//    (window_read_to_), and the window is forgotten whenever the lane's position is reloaded
//    (LoadCursors: lease acquired, cursor moved), its running deliveries abandoned (their Done
//    is refused).
#include <algorithm>
#include <climits>
#include <exception>

#include "engine/base/assert.h"
#include "engine/base/exception_text.h"
#include "engine/core/engine_core.h"
#include "engine/runtime/handler_scope.h"
#include "engine/runtime/lane.h"

namespace wharf::internal {

namespace {

// Facts read into the window per pass, at most.
constexpr size_t kWindowReadChunk = 256;

// The window holds the running facts, the facts blocked behind an earlier one of their key, and
// the finished ones until the cursor's commit passes them: at 4 x key_concurrency it filled long
// before key_concurrency facts ran (W8, k = 256: ~70 of 256 per lane; 16 x: ~3.5 times more).
uint32_t WindowFacts(const ConsumerOptions& options) {
  if (options.key_window_facts != 0) return options.key_window_facts;
  return std::max<uint32_t>(1024, 16 * options.key_concurrency);
}

}  // namespace

void Lane::InitWindow() {
  // One partition per lane: concurrent delivery is refused for ordering=global at registration.
  WHARF_ASSERT(partitions_.size() == 1 && consumer_->subscribe_async != nullptr);
  window_ = std::make_unique<KeyWindow>();
  inbox_ = std::make_shared<DeliveryInbox>();
}

bool Lane::RunWindow(bool blocking, int64_t now_ms, int64_t* next_ms) {
  WHARF_DASSERT(window_ != nullptr && inbox_ != nullptr);
  bool did = TakeFinishedDeliveries();
  ExpireDeliveries(now_ms, next_ms);
  *next_ms = std::min(*next_ms, window_->ReleaseDue(now_ms));
  did |= FillWindow();
  did |= DispatchWindow(now_ms);
  did |= CommitWindow(blocking);
  *next_ms = std::min(*next_ms, window_->ReleaseDue(now_ms));
  return did;
}

bool Lane::TakeFinishedDeliveries() {
  finished_.clear();
  inbox_->TakeAll(&finished_);
  bool applied = false;
  for (const auto& delivery : finished_) {
    const uint64_t seq = delivery->seq();
    // A delivery of a window since forgotten, or one the lane timed out first: not ours.
    if (!window_->Holds(seq) || window_->at(seq).delivery != delivery) continue;
    ApplyDelivery(seq, *delivery);
    applied = true;
  }
  finished_.clear();
  return applied;
}

void Lane::ExpireDeliveries(int64_t now_ms, int64_t* next_ms) {
  std::vector<uint64_t> expired;
  *next_ms = std::min(*next_ms, window_->TimedOut(now_ms, &expired));
  for (uint64_t seq : expired) {
    KeyWindow::Entry& entry = window_->at(seq);
    // A Done that came first is in the inbox: the next pass applies it.
    if (!entry.delivery->Expire()) continue;
    runner_.counters().failed.Add();
    FailWindowEntry(seq, "handler-timeout",
                    "not done within handler_timeout_ms (" +
                        std::to_string(consumer_->options.handler_timeout_ms) + " ms)");
  }
}

bool Lane::FillWindow() {
  const uint32_t capacity = WindowFacts(consumer_->options);
  if (window_->size() >= capacity) return false;  // back-pressure: the handler is behind
  const uint64_t durable = context_.core->committer()->durable_lsn();
  const uint64_t after = std::max(window_read_to_, chain_.head(0).position);
  chain_.RaiseScanned(0, after);
  if (after >= durable || context_.cache->high(partitions_[0]) <= after) return false;
  std::vector<FactPtr> facts;
  uint64_t covered = 0;
  const size_t chunk = std::min<size_t>(kWindowReadChunk, capacity - window_->size());
  Status s = ReadAfter(0, after, durable, chunk, &facts, &covered);
  if (!s.ok()) {
    (*context_.trace)(TraceEvent::Level::kError, "read-failed", consumer_, 0, s.ToString());
    runner_.WaitAfterReadFailure();
    return false;
  }
  for (FactPtr& fact : facts) {
    if (fact->id > covered) break;
    const bool taken = consumer_->Takes(*fact);
    const uint32_t attempts = taken ? runner_.AttemptsOf(fact->id) : 0;
    window_->Append(std::move(fact), taken, attempts);
  }
  WHARF_DASSERT(window_->size() <= capacity);  // the chunk left room for what was read
  window_read_to_ = std::max(after, covered);
  chain_.RaiseScanned(0, window_read_to_);
  return !facts.empty();
}

bool Lane::DispatchWindow(int64_t now_ms) {
  const ConsumerOptions& options = consumer_->options;
  const std::shared_ptr<const FactTypes> types = context_.core->types();
  bool did = false;
  uint64_t seq = 0;
  while (window_->running() < options.key_concurrency &&
         window_->StartNext(now_ms + options.handler_timeout_ms, &seq)) {
    did = true;
    KeyWindow::Entry& entry = window_->at(seq);
    FactPtr delivered;
    std::string upcast_error;
    if (!UpcastBatch::LiftOne(*types, *consumer_, entry.fact, &delivered, &upcast_error)) {
      // An upcaster is a pure function: delivering it again would fail again.
      runner_.counters().failed.Add();
      upcast_error = Bounded(upcast_error);
      runner_.failure().Failed("upcast-failed: " + upcast_error, context_.core->NowMs());
      (*context_.trace)(TraceEvent::Level::kWarning, "upcast-failed", consumer_, entry.fact->id,
                        upcast_error, entry.attempt);
      window_->Finish(seq, "upcast-failed", std::move(upcast_error));
      continue;
    }
    auto delivery =
        std::make_shared<DeliveryState>(std::move(delivered), entry.attempt, seq, inbox_);
    entry.delivery = delivery;
    runner_.counters().delivered.Add();
    if (entry.attempt > 1) runner_.counters().retries.Add();
    std::string given, threw;
    try {
      HandlerScope scope(&given, entry.attempt);
      consumer_->subscribe_async(delivery->fact(), delivery->Handle());
    } catch (const std::exception& e) {
      threw = std::string("handler threw: ") + ExceptionText(e);
    } catch (...) {
      threw = "handler threw a non-standard exception";
    }
    delivery->given_reason = std::move(given);
    // A throw fails the delivery unless its Done came first (then the Done counts).
    if (!threw.empty()) delivery->Done(Outcome::kFailed, threw).PermitUncheckedError();
    // Deliveries done during the call (a synchronous handler's always are): their keys' next
    // facts may go at once.
    TakeFinishedDeliveries();
  }
  WHARF_DASSERT(window_->running() <= options.key_concurrency);
  return did;
}

void Lane::ApplyDelivery(uint64_t seq, const DeliveryState& delivery) {
  WHARF_DASSERT(window_->Holds(seq));  // TakeFinishedDeliveries checked it
  const Fact& fact = delivery.fact();
  const std::string& given = !delivery.reason().empty() ? delivery.reason() : delivery.given_reason;
  switch (delivery.outcome()) {
    case Outcome::kHandled:
      runner_.counters().handled.Add();
      window_->Finish(seq);
      return;
    case Outcome::kRejected: {
      runner_.counters().rejected.Add();
      std::string reason = Bounded(given.empty() ? "rejected" : given);
      runner_.failure().Failed("handler-rejected: " + reason, context_.core->NowMs());
      (*context_.trace)(TraceEvent::Level::kWarning, "handler-rejected", consumer_, fact.id, reason,
                        delivery.attempt());
      window_->Finish(seq, "handler-rejected", std::move(reason));
      return;
    }
    case Outcome::kRetry:
      runner_.counters().retry.Add();
      FailWindowEntry(seq, "subscriber-failed", Bounded(given.empty() ? "retry" : given));
      return;
    case Outcome::kFailed:
      runner_.counters().failed.Add();
      FailWindowEntry(seq, "subscriber-failed", Bounded(given.empty() ? "failed" : given));
      return;
  }
}

void Lane::FailWindowEntry(uint64_t seq, const char* name, std::string reason) {
  KeyWindow::Entry& entry = window_->at(seq);
  WHARF_DASSERT(entry.fact != nullptr && entry.attempt >= 1);  // it was handed over
  const Fact& fact = *entry.fact;
  const uint32_t attempt = entry.attempt;
  if (runner_.AttemptsExhausted(attempt)) {
    std::string exhausted = runner_.ExhaustedReason(attempt, name, reason);
    runner_.failure().Failed("attempts-exhausted: " + exhausted, context_.core->NowMs());
    (*context_.trace)(TraceEvent::Level::kWarning, "attempts-exhausted", consumer_, fact.id,
                      exhausted, attempt);
    window_->Finish(seq, "attempts-exhausted", std::move(exhausted));
    return;
  }
  // The oldest fact the lane keeps failing is the one its cursor waits for: its attempts are
  // stored with the next commit, so that a restart goes on counting.
  if (runner_.retry_fact_id() == 0 || fact.id <= runner_.retry_fact_id()) {
    runner_.NoteRetry(fact, attempt, std::string(name) + ": " + reason);
    retry_record_due_ = true;
  }
  (*context_.trace)(TraceEvent::Level::kWarning, name, consumer_, fact.id, std::move(reason),
                    attempt);
  // Per fact, doubling from backoff_initial_ms up to backoff_max_ms.
  const uint32_t doublings = std::min<uint32_t>(entry.attempt - 1, 20);
  const uint64_t delay_ms =
      std::min<uint64_t>(static_cast<uint64_t>(context_.options->backoff_initial_ms) << doublings,
                         context_.options->backoff_max_ms);
  window_->Backoff(seq, SteadyMs() + static_cast<int64_t>(delay_ms));
}

bool Lane::CommitWindow(bool blocking) {
  if (!chain_.empty() && (blocking || !CanPipeline())) return false;
  const uint64_t from_seq = window_->SeqAfter(chain_.head(0).position);
  size_t count = window_->FinishedFrom(from_seq);
  const uint64_t retry_fact_id = runner_.retry_fact_id();
  const bool store_retry = retry_record_due_ && retry_fact_id != 0;
  if (count == 0 && !store_retry) return false;
  ChainBatch& draft = BeginBatch();
  Txn txn = context_.core->Begin();
  TxnRep* rep = EngineCore::RepOf(txn);
  for (uint64_t seq = from_seq; seq < from_seq + count; ++seq) {
    KeyWindow::Entry& entry = window_->at(seq);
    const bool finished = entry.state == KeyWindow::State::kFinished;
    // Only the earlier facts' dead letters leave no room: the rest goes next commit.
    if (finished && !entry.dead_name.empty()) {
      if (!runner_.AddDeadLetter(rep, *entry.fact, entry.attempt, entry.dead_name,
                                 entry.dead_reason)) {
        break;
      }
      ++draft.dead;
    }
    if (finished) ++draft.taken;
    chain_.DraftPass(0, entry.fact->id, finished);
  }
  BatchPartition& partition = draft.partitions[0];
  // The oldest fact still pending, when the window holds it.
  for (uint64_t seq = window_->SeqAfter(partition.cursor.position); seq < window_->end_seq();
       ++seq) {
    const KeyWindow::Entry& entry = window_->at(seq);
    if (entry.state == KeyWindow::State::kSkipped) continue;
    partition.head_ms = entry.fact->commit_ms;
    break;
  }
  WHARF_DASSERT(draft.dead <= draft.taken);  // each dead letter settles a finished fact
  draft.last_id = partition.cursor.position;
  retry_record_due_ = false;
  if (draft.taken == 0 && !store_retry) {
    // Only skipped facts: advance in memory, persisted within cursor_persist_ms or on stop.
    AdvanceInMemory();
    return true;
  }
  AddCursorWrites(rep);
  if (store_retry && retry_fact_id > partition.cursor.position) {
    // The record carries the attempts of the fact the cursor now waits for.
    const uint64_t retry_seq = window_->SeqAfter(retry_fact_id - 1);
    if (window_->Holds(retry_seq) && window_->at(retry_seq).fact->id == retry_fact_id) {
      AddRetryRecord(rep, window_->at(retry_seq).attempt);
    }
  }
  if (rep->writes.empty()) {
    AdvanceInMemory();
    return true;
  }
  CommitBatch(&txn, /*stopped=*/false, blocking).PermitUncheckedError();
  return true;
}

void Lane::ResetWindow() {
  for (const auto& delivery : window_->Clear()) delivery->Abandon();
  WHARF_DASSERT(window_->empty() && window_->running() == 0);
  window_read_to_ = chain_.head(0).position;
  retry_record_due_ = false;
}

bool Lane::DrainWindow(bool* stuck) {
  bool did = false;
  while (true) {
    int64_t next_ms = INT64_MAX;
    const int64_t now_ms = SteadyMs();
    const bool moved = RunWindow(/*blocking=*/true, now_ms, &next_ms);
    did |= moved;
    if (window_->empty() && !HasUnscanned()) return did;
    // A fact backs off (its retry is not due before next_ms), or the store failed: report,
    // don't spin.
    bool backing_off = runner_.retry_at_ms() > now_ms;
    for (uint64_t seq = window_->front_seq(); !backing_off && seq < window_->end_seq(); ++seq) {
      backing_off = window_->at(seq).state == KeyWindow::State::kBackoff;
    }
    if (backing_off) {
      *stuck = true;
      return did;
    }
    if (window_->running() > 0) {
      inbox_->WaitForPost(std::clamp<int64_t>(next_ms - now_ms, 1, 100));
    } else if (!moved) {
      return did;  // nothing runs and nothing moved: what is left is not the window's to do
    }
  }
}

void Lane::FinishWindow(bool commit) {
  TakeFinishedDeliveries();
  if (commit && chain_.empty()) CommitWindow(/*blocking=*/true);
  for (const auto& delivery : window_->Clear()) delivery->Abandon();
  inbox_->Close();
}

}  // namespace wharf::internal
