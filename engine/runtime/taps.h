// Taps: consumers that see facts as they become durable, at most once, with no cursor (SPEC.md
// §4). Each tap has a bounded inbox and a thread of its own; a tap whose inbox is full is severed
// (its inbox dropped, on_severed called) rather than let memory grow or delay anyone else.
//
// Thread safety: Dispatch runs on the engine's sync thread (the durable listener); Start/Stop on
// the runtime's control thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>  // before the semaphore: it needs its macros
#include <concurrentqueue/lightweightsemaphore.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "engine/commit/mpsc_queue.h"
#include "engine/runtime/consumer.h"
#include "engine/runtime/tail_cache.h"
#include "engine/runtime/trace.h"

namespace wharf::internal {

class Taps {
 public:
  explicit Taps(Tracer* trace) : trace_(trace) {}
  ~Taps() { Stop(); }
  Taps(const Taps&) = delete;
  Taps& operator=(const Taps&) = delete;

  // Starts a thread for each tap among `consumers` (which outlive this).
  void Start(const std::vector<std::unique_ptr<Consumer>>& consumers);
  // Queues to each tap the facts it takes.
  void Dispatch(const std::vector<FactPtr>& facts);
  void Stop();

 private:
  struct Tap {
    Consumer* consumer = nullptr;
    MpscQueue<FactPtr> inbox;
    std::atomic<uint32_t> queued{0};
    std::atomic<bool> severed{false};
    moodycamel::LightweightSemaphore wake{0, kWakeSpins};
    std::thread thread;
  };
  void Loop(Tap* tap);
  // Runs the tap's handler on the queued facts; false once the tap is severed.
  bool RunQueued(Tap* tap);

  Tracer* const trace_;
  std::vector<std::unique_ptr<Tap>> taps_;
  std::atomic<bool> stopping_{false};
};

}  // namespace wharf::internal
