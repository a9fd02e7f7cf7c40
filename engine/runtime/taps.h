// Taps: consumers that see facts as they become durable, at most once, with no cursor. Each
// tap has a bounded inbox and a thread of its own; a tap whose inbox is full is severed
// (its inbox dropped, on_severed called) rather than let memory grow or delay anyone else.
//
// Thread safety: Dispatch runs on the engine's sync thread (the durable listener); Start/Stop on
// the runtime's control thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>  // before the semaphore: it needs its macros
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/commit/mpsc_queue.h"  // kWakeSpins
#include "engine/runtime/consumer.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/trace.h"

namespace wharf::internal {

class EngineCore;

class Taps {
 public:
  // `core` (which outlives this) holds the declared types: a tap receives facts upcast like any
  // consumer, on its own thread.
  Taps(const EngineCore* core, Tracer* trace) : core_(core), trace_(trace) {}
  ~Taps() { Stop(); }
  Taps(const Taps&) = delete;
  Taps& operator=(const Taps&) = delete;

  // Starts a thread for each tap among `consumers` (which outlive this).
  void Start(const std::vector<std::unique_ptr<Consumer>>& consumers);
  // Queues to each tap the facts it takes.
  void Dispatch(const std::vector<FactPtr>& facts);
  void Stop();

 private:
  // A tap's inbox, in the order facts were dispatched. Not an MpscQueue: durable notices come
  // from different threads (the sync backend's, a producer committing inline), and moodycamel
  // interleaves the items of different producers in any order, which delivered a partition's
  // facts out of order. A tap carries little; a mutex is cheap enough.
  class Inbox {
   public:
    void enqueue(FactPtr fact) {
      MutexLock lock(&mutex_);
      facts_.push_back(std::move(fact));
    }
    bool try_dequeue(FactPtr& fact) {
      MutexLock lock(&mutex_);
      if (facts_.empty()) return false;
      fact = std::move(facts_.front());
      facts_.pop_front();
      return true;
    }

   private:
    Mutex mutex_;
    std::deque<FactPtr> facts_ WHARF_GUARDED_BY(mutex_);
  };
  struct Tap {
    Consumer* consumer = nullptr;
    Inbox inbox;
    std::atomic<uint32_t> queued{0};
    std::atomic<bool> severed{false};
    moodycamel::LightweightSemaphore wake{0, kWakeSpins};
    std::thread thread;
  };
  void Loop(Tap* tap);
  // Runs the tap's handler on the queued facts; false once the tap is severed.
  bool RunQueued(Tap* tap);

  const EngineCore* const core_;
  Tracer* const trace_;
  std::vector<std::unique_ptr<Tap>> taps_;
  std::atomic<bool> stopping_{false};
};

}  // namespace wharf::internal
