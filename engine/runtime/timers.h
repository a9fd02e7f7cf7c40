// Timers: facts committed with a future deliver_at_ms wait in the timers family; when due they
// are released as new facts of the outbox (their id is new; scheduled_id keeps the one their
// producer was given, and commit_ms is kept).
//
// Thread safety: ReleaseDueTimers is safe from any thread and any instance (each release is a
// transaction that checks the timers it removes). TimerThread: Start/Stop from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <thread>

#include "engine/base/mutex.h"
#include "engine/runtime/trace.h"
#include "wharf/status.h"

namespace wharf::internal {

class EngineCore;

// Releases the timers due at the engine's clock, kTimersPerTxn per transaction, for at most
// kRoundsMax transactions (what is left waits for the next call). *released (optional): how many.
Status ReleaseDueTimers(EngineCore* core, size_t* released);

// Calls ReleaseDueTimers every tick_ms on a thread of its own (RuntimeOptions::timer_tick_ms).
class TimerThread {
 public:
  TimerThread(EngineCore* core, uint32_t tick_ms, Tracer* trace)
      : core_(core), tick_ms_(tick_ms), trace_(trace) {}
  ~TimerThread() { Stop(); }
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  void Start();
  void Stop();

 private:
  void Loop();

  EngineCore* const core_;
  const uint32_t tick_ms_;
  Tracer* const trace_;
  std::thread thread_;
  Mutex mutex_;
  CondVar cv_;
  bool stopping_ WHARF_GUARDED_BY(mutex_) = false;
};

}  // namespace wharf::internal
