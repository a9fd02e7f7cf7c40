// WorkerPool: the threads that run lanes. Each lane belongs to one worker (assignment.h); a
// worker runs its lanes' batches, applies their commits' completions, persists positions advanced
// over skipped facts, and sleeps until something concerns it.
//
// A sleeping worker is woken for everything it must look at: a durable fact one of its lanes
// takes (Notify), a commit completion (its CompletionSink), a lease acquisition (WakeAll), pause
// and stop. Deadlines (retry backoff, cursor persistence, skips) are its own wait timeouts. There
// is no poll.
//
// Thread safety: Start/Pause/Resume/Stop from the runtime's control thread; Notify and WakeAll
// from any thread once Start returned.
#pragma once

#include <concurrentqueue/concurrentqueue.h>  // before the semaphore: it needs its macros
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/commit/mpsc_queue.h"
#include "engine/runtime/lane.h"

namespace wharf::internal {

class WorkerPool {
 public:
  // `abandoned`: the runtime stops as if its process died (no cursor persistence).
  WorkerPool(EngineCore* core, const RuntimeOptions* options, const std::atomic<bool>* abandoned)
      : core_(core), options_(options), abandoned_(abandoned) {}
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts `count` workers, each running the lanes assigned to it (Lane::worker() < count).
  void Start(uint32_t count, const std::vector<std::unique_ptr<Lane>>& lanes);
  size_t size() const { return workers_.size(); }

  // Durable facts arrived: worker i has a lane that takes one if wake[i], a lane that only passes
  // them if skip[i] (it skips them by its skip deadline). Both have size() entries.
  void Notify(const std::vector<uint8_t>& wake, const std::vector<uint8_t>& skip);
  void WakeAll();
  // Waits until every worker has finished its batches in flight and is parked / lets them go on.
  void Pause();
  void Resume();
  // Lets the batches in flight finish, persists what was skipped in memory, joins the threads.
  void Stop();
  // Returns from waiting, summed over the workers (tests count them).
  uint64_t wakeups() const;

 private:
  struct Worker : CompletionSink {
    uint32_t index = 0;
    std::vector<Lane*> lanes;
    MpscQueue<LaneCompletion> completions;
    moodycamel::LightweightSemaphore wake{0, kWakeSpins};
    // SteadyMs when facts that none of its lanes takes first arrived since its last skip pass (0:
    // none): the worker skips them by skip_since_ms + cursor_persist_ms / 2 and persists the
    // advanced cursors by skip_since_ms + cursor_persist_ms.
    std::atomic<int64_t> skip_since_ms{0};
    std::atomic<uint64_t> wakeups{0};
    std::thread thread;

    void Post(LaneCompletion completion) override {
      completions.enqueue(completion);
      wake.signal();
    }
    void Wake() override { wake.signal(); }
    bool InFlight() const;
    void Wait(int64_t timeout_ms);  // < 0: no timeout
    void ApplyCompletions();
  };
  void Loop(Worker* worker);
  // Parks the worker while a pause is requested (its batches in flight finished first); true
  // when it was parked.
  bool ParkIfPaused(Worker* worker);
  // One pass over the worker's lanes; returns whether it did work, and the earliest deadline.
  bool RunLanes(Worker* worker, int64_t now_ms, int64_t* next_ms);
  // A windowed lane's pass (Lane::RunWindow), persisting skipped facts when due.
  bool RunWindowedLane(Lane* lane, int64_t now_ms, int64_t* next_ms);
  void Finish(Worker* worker);

  EngineCore* const core_;
  const RuntimeOptions* const options_;
  const std::atomic<bool>* const abandoned_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stopping_{false};
  std::mutex pause_mutex_;
  std::condition_variable pause_cv_;
  bool pause_requested_ = false;  // guarded by pause_mutex_
  uint32_t paused_count_ = 0;     // guarded by pause_mutex_
};

}  // namespace wharf::internal
