// WorkerPool: the threads that run lanes. Each lane belongs to one worker at a time (assignment.h
// places them); a worker runs its lanes' batches, applies their commits' completions, persists
// positions advanced over skipped facts, and sleeps until something concerns it.
//
// Lanes follow the load: a worker whose lanes are all caught up steals a lane with work from a
// worker that ran batches of two or more lanes in its last pass (its other lanes waited
// meanwhile), and such a busy worker wakes an idle one. A lane is run by one thread at a time (its
// claim, Lane::TryClaim), so per-lane order holds; completions of batches committed before a move
// reach the old worker, which forwards them to the lane's new one. Windowed and relay lanes stay
// where they were placed (Lane::movable).
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
#include <memory>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
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
  // Lanes moved to an idle worker so far.
  uint64_t steals() const { return steals_.load(); }

 private:
  struct Worker : CompletionSink {
    uint32_t index = 0;
    Mutex lanes_mutex;
    // A steal moves lanes between workers.
    std::vector<Lane*> lanes WHARF_GUARDED_BY(lanes_mutex);
    MpscQueue<LaneCompletion> completions;
    moodycamel::LightweightSemaphore wake{0, kWakeSpins};
    // SteadyMs when facts that none of its lanes takes first arrived since its last skip pass (0:
    // none): the worker skips them by skip_since_ms + cursor_persist_ms / 2 and persists the
    // advanced cursors by skip_since_ms + cursor_persist_ms.
    std::atomic<int64_t> skip_since_ms{0};
    std::atomic<uint64_t> wakeups{0};
    // Movable lanes that ran a batch in its last pass: two or more, and an idle worker may take
    // one.
    std::atomic<uint32_t> busy_lanes{0};
    std::atomic<bool> idle{false};  // waiting with nothing to run (a busy worker wakes it)
    std::thread thread;

    void Post(LaneCompletion completion) override {
      completions.enqueue(completion);
      wake.signal();
    }
    void Wake() override { wake.signal(); }
    // The worker thread's copy of `lanes` for one pass (reused: no allocation per pass).
    std::vector<Lane*> pass_lanes;
    void CopyLanes(std::vector<Lane*>* out) {
      MutexLock lock(&lanes_mutex);
      out->assign(lanes.begin(), lanes.end());
    }
    std::vector<Lane*> Lanes() {
      std::vector<Lane*> copy;
      CopyLanes(&copy);
      return copy;
    }
    bool InFlight();
    void Wait(int64_t timeout_ms);  // < 0: no timeout
  };
  void Loop(Worker* worker);
  // Any lane of any worker has a batch in flight.
  bool AnyInFlight() const;
  // Applies the completions posted to the worker: its own lanes' under their claims; those of
  // lanes that moved since their batch was committed go on to the lane's worker.
  void ApplyCompletions(Worker* worker);
  // Parks the worker while a pause is requested (its batches in flight finished first); true
  // when it was parked.
  bool ParkIfPaused(Worker* worker);
  // One pass over the worker's lanes; returns whether it did work, the earliest deadline, and
  // whether a lane has facts to deliver (*backlog, also when it waits for its batches in flight).
  bool RunLanes(Worker* worker, int64_t now_ms, int64_t* next_ms, bool* backlog);
  // One lane of the pass (the worker holds its claim); returns whether it did work.
  bool RunLane(Lane* lane, int64_t now_ms, int64_t skip_since_ms, int64_t* next_ms);
  // A windowed lane's pass (Lane::RunWindow), persisting skipped facts when due.
  bool RunWindowedLane(Lane* lane, int64_t now_ms, int64_t* next_ms);
  // An idle worker takes a lane with work from a worker that is running several; true if it did.
  bool Steal(Worker* thief, int64_t now_ms);
  // A worker that ran several lanes in its pass wakes an idle one to take some.
  void WakeIdle(const Worker* busy);
  void Finish(Worker* worker);

  EngineCore* const core_;
  const RuntimeOptions* const options_;
  const std::atomic<bool>* const abandoned_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> steals_{0};
  Mutex pause_mutex_;
  CondVar pause_cv_;
  bool pause_requested_ WHARF_GUARDED_BY(pause_mutex_) = false;
  uint32_t paused_count_ WHARF_GUARDED_BY(pause_mutex_) = 0;
};

}  // namespace wharf::internal
