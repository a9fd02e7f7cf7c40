#include "engine/runtime/timers.h"

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"
#include "engine/store/codec.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/timers.h"

namespace wharf::internal {
namespace {

constexpr size_t kTimersPerTxn = 1000;
// A call releases at most kRoundsMax * kTimersPerTxn timers (or retries a conflict as often).
constexpr size_t kRoundsMax = 1000;

// Adds to `rep` the release of up to kTimersPerTxn due timers.
Status AddDueTimers(EngineCore* core, TxnRep* rep) {
  tables::Scan scan(core->store()->db(), core->store()->cf(kTimers),
                    tables::timers::DueRange(core->NowMs()));
  for (scan.SeekToFirst(); scan.Valid() && rep->facts.size() < kTimersPerTxn; scan.Next()) {
    Fact fact;
    Status s = codec::DecodeFact(scan.value(), &fact);
    if (!s.ok()) return Status::Corruption("timer: " + s.message());
    int64_t due_ms = 0;
    // Released at a new id; it carries the id its producer was given (the timer's), and keeps
    // its commit time.
    if (!tables::timers::DecodeKey(scan.key(), &due_ms, &fact.scheduled_id)) {
      return Status::Corruption("timer key of " + std::to_string(scan.key().size()) + " bytes");
    }
    std::string key(scan.key()), record(scan.value());
    rep->checks.push_back({kTimers, key, std::move(record), "timer"});
    rep->writes.push_back({kTimers, true, std::move(key), {}});
    rep->facts.push_back({fact.partition, 0, codec::EncodeFact(fact), /*stamp_commit_ms=*/false});
  }
  return FromRocks(scan.status(), "read timers");
}

}  // namespace

Status ReleaseDueTimers(EngineCore* core, size_t* released) {
  if (released) *released = 0;
  Status s = core->CheckOpen();
  if (!s.ok()) return s;
  for (size_t round = 0; round < kRoundsMax; ++round) {
    Txn txn = core->Begin();
    TxnRep* rep = EngineCore::RepOf(txn);
    s = AddDueTimers(core, rep);
    if (!s.ok()) return s;
    const size_t count = rep->facts.size();
    WHARF_ASSERT(count <= kTimersPerTxn && rep->writes.size() == count);
    if (count == 0) return Status::OK();
    s = txn.Commit();
    if (s.IsConflict()) continue;  // another instance released some of them: look again
    if (!s.ok()) return s;
    if (released) *released += count;
    if (count < kTimersPerTxn) return Status::OK();
  }
  return Status::OK();  // the rest waits for the next call
}

void TimerThread::Start() {
  WHARF_ASSERT(!thread_.joinable());
  thread_ = std::thread([this] {
    io::NameThisThread("wharf-timers");
    Loop();
  });
}

void TimerThread::Stop() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void TimerThread::Loop() {
  while (true) {
    {
      MutexLock lock(&mutex_);
      if (stopping_) return;
      cv_.WaitFor(&mutex_, std::chrono::milliseconds(tick_ms_));
      if (stopping_) return;
    }
    Status s = ReleaseDueTimers(core_, nullptr);
    if (!s.ok() && !s.IsClosed()) {
      (*trace_)(TraceEvent::Level::kWarning, "timer-release-failed", nullptr, 0, s.ToString());
    }
  }
}

}  // namespace wharf::internal
