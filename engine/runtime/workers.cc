#include "engine/runtime/workers.h"

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"

namespace wharf::internal {

bool WorkerPool::Worker::InFlight() {
  MutexLock lock(&lanes_mutex);
  return std::any_of(lanes.begin(), lanes.end(),
                     [](const Lane* lane) { return lane->in_flight(); });
}

void WorkerPool::Worker::Wait(int64_t timeout_ms) {
  if (timeout_ms < 0) {
    wake.wait();
  } else {
    wake.wait(std::max<int64_t>(timeout_ms, 1) * 1000);
  }
  wakeups.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// Claims a lane of the calling worker's, waiting for a thief that holds it for a moment.
void ClaimLane(Lane* lane) {
  while (!lane->TryClaim()) std::this_thread::yield();
}

}  // namespace

void WorkerPool::ApplyCompletions(Worker* worker) {
  LaneCompletion completion;
  while (worker->completions.try_dequeue(completion)) {
    Lane* lane = completion.lane;
    // Committed before the lane moved: its worker now applies it (in batch order, whatever order
    // completions arrive in). Read without the claim, which that worker may hold for a whole
    // batch; a lane moving back meanwhile gets it forwarded once more.
    if (const uint32_t owner = lane->worker(); owner != worker->index) {
      workers_[owner]->Post(completion);
      continue;
    }
    ClaimLane(lane);  // ours: only a thief holds it, for a moment
    if (lane->worker() == worker->index) {
      lane->Complete(completion.batch, completion.status);
      lane->ReleaseClaim();
    } else {
      lane->ReleaseClaim();
      workers_[lane->worker()]->Post(completion);  // the thief took it just now
    }
  }
}

void WorkerPool::Start(uint32_t count, const std::vector<std::unique_ptr<Lane>>& lanes) {
  WHARF_ASSERT(workers_.empty() && count >= 1);
  for (uint32_t i = 0; i < count; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->index = i;
    for (const auto& lane : lanes) {
      WHARF_ASSERT(lane->worker() < count);
      if (lane->worker() != i) continue;
      lane->set_completions(worker.get());
      MutexLock lock(&worker->lanes_mutex);  // uncontended: its thread starts below
      worker->lanes.push_back(lane.get());
    }
    workers_.push_back(std::move(worker));
  }
  for (const auto& worker : workers_) {
    worker->thread = std::thread([this, w = worker.get()] {
      io::NameThisThread("wharf-worker-" + std::to_string(w->index));
      Loop(w);
    });
  }
}

void WorkerPool::Notify(const std::vector<uint8_t>& wake, const std::vector<uint8_t>& skip) {
  WHARF_DASSERT(wake.size() == workers_.size() && skip.size() == workers_.size());
  const int64_t now_ms = SteadyMs();
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker* worker = workers_[i].get();
    int64_t none = 0;
    // A new skip period also needs a signal, once: the worker sets its wait to the deadline.
    bool skip_started = skip[i] && worker->skip_since_ms.compare_exchange_strong(none, now_ms);
    if (wake[i] || skip_started) worker->wake.signal();
  }
}

void WorkerPool::WakeAll() {
  for (const auto& worker : workers_) worker->wake.signal();
}

void WorkerPool::Pause() {
  if (workers_.empty()) return;
  {
    MutexLock lock(&pause_mutex_);
    pause_requested_ = true;
  }
  WakeAll();
  MutexLock lock(&pause_mutex_);
  pause_cv_.Wait(&pause_mutex_, [this]() WHARF_REQUIRES(pause_mutex_) {
    return paused_count_ == workers_.size();
  });
}

void WorkerPool::Resume() {
  if (workers_.empty()) return;
  MutexLock lock(&pause_mutex_);
  pause_requested_ = false;
  pause_cv_.SignalAll();
}

void WorkerPool::Stop() {
  stopping_.store(true);
  WakeAll();
  for (const auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

bool WorkerPool::AnyInFlight() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [](const auto& worker) { return worker->InFlight(); });
}

uint64_t WorkerPool::wakeups() const {
  uint64_t sum = 0;
  for (const auto& worker : workers_) sum += worker->wakeups.load();
  return sum;
}

bool WorkerPool::ParkIfPaused(Worker* worker) {
  {
    MutexLock lock(&pause_mutex_);
    if (!pause_requested_) return false;
  }
  // Every worker's: a completion of a lane that moved may pass through this worker. Its own
  // lanes' completions wake it; the others' end is polled (a pause or a stop, briefly).
  while (AnyInFlight()) {
    worker->Wait(worker->InFlight() ? 1000 : 1);
    ApplyCompletions(worker);
  }
  MutexLock lock(&pause_mutex_);
  ++paused_count_;
  pause_cv_.SignalAll();
  pause_cv_.Wait(&pause_mutex_,
                 [this]() WHARF_REQUIRES(pause_mutex_) { return !pause_requested_; });
  --paused_count_;
  return true;
}

bool WorkerPool::RunLanes(Worker* worker, int64_t now_ms, int64_t* next_ms, bool* backlog) {
  const int64_t persist_ms = options_->cursor_persist_ms;
  worker->CopyLanes(&worker->pass_lanes);
  // Facts none of the lanes takes: skip them once their deadline is due (with their cursors
  // then persisted within cursor_persist_ms of the first one's arrival).
  int64_t skip_since_ms = worker->skip_since_ms.load();
  bool start_skipping = false;
  if (skip_since_ms != 0) {
    if (now_ms >= skip_since_ms + persist_ms / 2 &&
        worker->skip_since_ms.compare_exchange_strong(skip_since_ms, 0)) {
      start_skipping = true;
    } else {
      *next_ms = std::min(*next_ms, skip_since_ms + persist_ms / 2);
      skip_since_ms = 0;
    }
  }
  bool did_work = false;
  uint32_t busy_lanes = 0;
  for (Lane* lane : worker->pass_lanes) {
    if (!lane->TryClaim()) continue;  // a thief is taking it
    if (lane->worker() == worker->index) {
      if (start_skipping && lane->HasUnscanned()) lane->set_skipping(true);
      if (RunLane(lane, now_ms, skip_since_ms, next_ms)) {
        did_work = true;
        if (lane->movable()) ++busy_lanes;  // an idle worker could take this one
      }
      *backlog = *backlog || lane->HasWork();  // perhaps waiting for its batches in flight
    }
    lane->ReleaseClaim();
  }
  worker->busy_lanes.store(busy_lanes, std::memory_order_relaxed);
  if (busy_lanes >= 2) WakeIdle(worker);
  return did_work;
}

bool WorkerPool::RunLane(Lane* lane, int64_t now_ms, int64_t skip_since_ms, int64_t* next_ms) {
  if (lane->windowed()) return RunWindowedLane(lane, now_ms, next_ms);
  const int64_t persist_ms = options_->cursor_persist_ms;
  bool did_work = false;
  if (!lane->in_flight()) {
    lane->RecountIfRequested();  // a snapshot asked for the lag (first time, or after a gap)
  } else if (!lane->CanPipeline()) {
    return false;  // its batches in flight complete first (then a requested lag count runs)
  }
  if (!lane->consumer()->owned.load()) return false;
  if (lane->ReloadCursorsIfNeeded() && lane->retry_at_ms() <= now_ms) {
    if (lane->HasWork() || (lane->skipping() && lane->HasUnscanned())) {
      did_work = lane->RunBatch(/*blocking=*/false);
      lane->BackdateDirty(skip_since_ms);  // skipped facts waited since then
    } else {
      lane->set_skipping(false);
      did_work = lane->PersistIfDue(/*force=*/false, /*blocking=*/false);
    }
  }
  if (lane->retry_at_ms() > now_ms) *next_ms = std::min(*next_ms, lane->retry_at_ms());
  if (lane->dirty_since_ms() != 0) {
    *next_ms = std::min(*next_ms, lane->dirty_since_ms() + persist_ms);
  }
  return did_work;
}

bool WorkerPool::RunWindowedLane(Lane* lane, int64_t now_ms, int64_t* next_ms) {
  // Deliveries go on while commits are in flight; the window's commit waits for its turn
  // (CanPipeline), and a reload of the cursors for the pipeline to drain.
  if (!lane->in_flight()) lane->RecountIfRequested();
  if (!lane->consumer()->owned.load()) return false;
  if (!lane->in_flight() && !lane->ReloadCursorsIfNeeded()) return false;
  bool did_work = false;
  if (lane->retry_at_ms() <= now_ms) {
    did_work = lane->RunWindow(/*blocking=*/false, now_ms, next_ms);
    if (!did_work) did_work = lane->PersistIfDue(/*force=*/false, /*blocking=*/false);
  }
  if (lane->retry_at_ms() > now_ms) *next_ms = std::min(*next_ms, lane->retry_at_ms());
  if (lane->dirty_since_ms() != 0) {
    *next_ms = std::min(*next_ms, lane->dirty_since_ms() + options_->cursor_persist_ms);
  }
  return did_work;
}

bool WorkerPool::Steal(Worker* thief, int64_t now_ms) {
  for (const auto& victim : workers_) {
    if (victim.get() == thief || victim->busy_lanes.load(std::memory_order_relaxed) < 2) continue;
    for (Lane* lane : victim->Lanes()) {
      if (!lane->movable() || !lane->TryClaim()) continue;  // claimed: running now
      // Under the claim: the lane's state is what its worker left it.
      const bool take = lane->worker() == victim->index && !stopping_.load() &&
                        lane->consumer()->owned.load() && lane->retry_at_ms() <= now_ms &&
                        (!lane->in_flight() || lane->CanPipeline()) && lane->HasWork();
      if (take) {
        MutexLockPair lock(&victim->lanes_mutex, &thief->lanes_mutex);
        victim->lanes.erase(std::find(victim->lanes.begin(), victim->lanes.end(), lane));
        thief->lanes.push_back(lane);
        lane->set_completions(thief);
        lane->set_worker(thief->index);  // after the sink: a completion forwarded here finds it
      }
      lane->ReleaseClaim();
      if (take) {
        steals_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
  }
  return false;
}

void WorkerPool::WakeIdle(const Worker* busy) {
  for (const auto& worker : workers_) {
    if (worker.get() != busy && worker->idle.load(std::memory_order_relaxed)) {
      worker->wake.signal();
      return;
    }
  }
}

void WorkerPool::Loop(Worker* worker) {
  while (true) {
    ApplyCompletions(worker);
    if (stopping_.load()) break;
    if (ParkIfPaused(worker)) continue;
    const int64_t now_ms = SteadyMs();
    int64_t next_ms = INT64_MAX;  // the earliest deadline of this worker's lanes
    bool backlog = false;         // a lane of the worker has facts to deliver
    if (RunLanes(worker, now_ms, &next_ms, &backlog)) continue;
    // Only a worker whose lanes are all caught up takes one: one merely waiting for its commits
    // would take lanes back and forth, each move draining the lane's pipeline.
    if (!backlog && workers_.size() > 1 && Steal(worker, now_ms)) continue;
    worker->idle.store(!backlog, std::memory_order_relaxed);
    worker->Wait(next_ms == INT64_MAX ? -1 : next_ms - now_ms);
    worker->idle.store(false, std::memory_order_relaxed);
  }
  Finish(worker);
}

void WorkerPool::Finish(Worker* worker) {
  // Stop: relays' publishes in progress are cancelled (bounded by their timeout_ms, whatever the
  // broker does), the batches in flight finish, then what a relay published in full is
  // committed and what was skipped in memory persisted. No lane moves any more (stopping_), but
  // one may have moved just before: each is finished by the worker it belongs to.
  for (Lane* lane : worker->Lanes()) {
    if (!lane->movable()) lane->StopPublishing();  // relays' lanes never move
  }
  while (AnyInFlight()) {  // every worker's: see ParkIfPaused
    worker->Wait(worker->InFlight() ? 1000 : 1);
    ApplyCompletions(worker);
  }
  const bool orderly = core_->CheckOpen().ok() && !abandoned_->load();
  for (Lane* lane : worker->Lanes()) {
    ClaimLane(lane);
    if (lane->worker() != worker->index) {  // stolen just before the stop: its thief finishes it
      lane->ReleaseClaim();
      continue;
    }
    const bool owned = lane->consumer()->owned.load();
    lane->FinishPublished(orderly && owned);
    if (orderly && owned) lane->PersistIfDue(/*force=*/true, /*blocking=*/true);
    lane->ReleaseClaim();
  }
}

}  // namespace wharf::internal
