#include "engine/runtime/workers.h"

#include <algorithm>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"
#include "engine/core/engine_core.h"

namespace wharf::internal {

bool WorkerPool::Worker::InFlight() const {
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

void WorkerPool::Worker::ApplyCompletions() {
  LaneCompletion completion;
  while (completions.try_dequeue(completion)) {
    WHARF_DASSERT(completion.lane->worker() == index);  // only its own lanes post here
    completion.lane->Complete(completion.batch, completion.status);
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
  std::unique_lock lock(pause_mutex_);
  pause_requested_ = true;
  lock.unlock();
  WakeAll();
  lock.lock();
  pause_cv_.wait(lock, [this] { return paused_count_ == workers_.size(); });
}

void WorkerPool::Resume() {
  if (workers_.empty()) return;
  std::lock_guard lock(pause_mutex_);
  pause_requested_ = false;
  pause_cv_.notify_all();
}

void WorkerPool::Stop() {
  stopping_.store(true);
  WakeAll();
  for (const auto& worker : workers_) {
    if (worker->thread.joinable()) worker->thread.join();
  }
}

uint64_t WorkerPool::wakeups() const {
  uint64_t sum = 0;
  for (const auto& worker : workers_) sum += worker->wakeups.load();
  return sum;
}

bool WorkerPool::ParkIfPaused(Worker* worker) {
  std::unique_lock lock(pause_mutex_);
  if (!pause_requested_) return false;
  lock.unlock();
  while (worker->InFlight()) {
    worker->Wait(1000);
    worker->ApplyCompletions();
  }
  lock.lock();
  ++paused_count_;
  pause_cv_.notify_all();
  pause_cv_.wait(lock, [this] { return !pause_requested_; });
  --paused_count_;
  return true;
}

bool WorkerPool::RunLanes(Worker* worker, int64_t now_ms, int64_t* next_ms) {
  const int64_t persist_ms = options_->cursor_persist_ms;
  bool did_work = false;
  // Facts none of the lanes takes: skip them once their deadline is due (with their cursors
  // then persisted within cursor_persist_ms of the first one's arrival).
  int64_t skip_since_ms = worker->skip_since_ms.load();
  if (skip_since_ms != 0) {
    if (now_ms >= skip_since_ms + persist_ms / 2 &&
        worker->skip_since_ms.compare_exchange_strong(skip_since_ms, 0)) {
      for (Lane* lane : worker->lanes) {
        if (lane->HasUnscanned()) lane->set_skipping(true);
      }
    } else {
      *next_ms = std::min(*next_ms, skip_since_ms + persist_ms / 2);
      skip_since_ms = 0;
    }
  }
  for (Lane* lane : worker->lanes) {
    if (lane->windowed()) {
      did_work |= RunWindowedLane(lane, now_ms, next_ms);
      continue;
    }
    if (!lane->in_flight()) {
      lane->RecountIfRequested();  // a snapshot asked for the lag (first time, or after a gap)
    } else if (!lane->CanPipeline()) {
      continue;  // its batches in flight complete first (then a requested lag count runs)
    }
    if (!lane->consumer()->owned.load()) continue;
    if (lane->ReloadCursorsIfNeeded() && lane->retry_at_ms() <= now_ms) {
      if (lane->HasWork() || (lane->skipping() && lane->HasUnscanned())) {
        did_work |= lane->RunBatch(/*blocking=*/false);
        lane->BackdateDirty(skip_since_ms);  // skipped facts waited since then
      } else {
        lane->set_skipping(false);
        did_work |= lane->PersistIfDue(/*force=*/false, /*blocking=*/false);
      }
    }
    if (lane->retry_at_ms() > now_ms) *next_ms = std::min(*next_ms, lane->retry_at_ms());
    if (lane->dirty_since_ms() != 0) {
      *next_ms = std::min(*next_ms, lane->dirty_since_ms() + persist_ms);
    }
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

void WorkerPool::Loop(Worker* worker) {
  while (true) {
    worker->ApplyCompletions();
    if (stopping_.load()) break;
    if (ParkIfPaused(worker)) continue;
    const int64_t now_ms = SteadyMs();
    int64_t next_ms = INT64_MAX;  // the earliest deadline of this worker's lanes
    if (!RunLanes(worker, now_ms, &next_ms)) {
      worker->Wait(next_ms == INT64_MAX ? -1 : next_ms - now_ms);
    }
  }
  Finish(worker);
}

void WorkerPool::Finish(Worker* worker) {
  // Stop: relays' publishes in progress are cancelled (bounded by their timeout_ms, whatever the
  // broker does), the batches in flight finish, then what a relay published in full is
  // committed and what was skipped in memory persisted.
  for (Lane* lane : worker->lanes) lane->StopPublishing();
  while (worker->InFlight()) {
    worker->Wait(1000);
    worker->ApplyCompletions();
  }
  const bool orderly = core_->CheckOpen().ok() && !abandoned_->load();
  for (Lane* lane : worker->lanes) {
    const bool owned = lane->consumer()->owned.load();
    lane->FinishPublished(orderly && owned);
    if (orderly && owned) lane->PersistIfDue(/*force=*/true, /*blocking=*/true);
  }
}

}  // namespace wharf::internal
