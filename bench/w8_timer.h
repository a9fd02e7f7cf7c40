// DelayTimer: one thread that completes work at its deadline — the event loop of a network client
// whose calls each take a fixed time. W8-slow-subscriber's handler hands every Delivery here to be
// done 5 ms after the handler started it, so that up to key_concurrency x lanes facts wait at
// once without a thread each.
//
// One mutex-guarded vector of arrivals (the schedulers touch nothing else), a deadline heap owned
// by the timer thread, and a condition variable the thread sleeps on until the earliest deadline.
// A scheduler signals only when its deadline is earlier than the one the thread sleeps for (with a
// fixed delay: only when the thread was idle). Items are completed in deadline order, never early
// and at most `slack_ns` plus the wake-up latency late: after a wake the thread sleeps at least
// `slack_ns`, so that at high rates it completes items in groups instead of waking for each.
//
// Thread safety: ScheduleAt from any thread; the rest from the owner. `on_due` runs on the timer
// thread, one item at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "wharf/runtime.h"

namespace wharf::bench {

class DelayTimer {
 public:
  struct Item {
    uint64_t deadline_ns = 0;  // NowNs() clock (steady)
    uint64_t tag = 0;          // the scheduler's own data (W8: the fact's key index)
    Delivery delivery;         // may be empty (the capacity probe)
  };
  using DueFn = std::function<void(Item& item)>;

  static constexpr uint64_t kDefaultSlackNs = 50'000;  // Linux's default timer slack

  explicit DelayTimer(DueFn on_due, uint64_t slack_ns = kDefaultSlackNs);
  DelayTimer(const DelayTimer&) = delete;
  DelayTimer& operator=(const DelayTimer&) = delete;
  // Stop(): items not yet due are dropped (their deliveries are never done by it).
  ~DelayTimer();

  void ScheduleAt(uint64_t deadline_ns, uint64_t tag, Delivery delivery);
  // Joins the thread; idempotent.
  void Stop();

  // Items completed so far, and how late they were in all (ns past their deadlines, measured
  // before on_due of each group of items due at once). Timer thread's counters: read after Stop()
  // or as an estimate.
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  uint64_t late_ns_total() const { return late_ns_total_.load(std::memory_order_relaxed); }
  // Times the thread woke up and found items due.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }

 private:
  struct Later {
    bool operator()(const Item& a, const Item& b) const { return a.deadline_ns > b.deadline_ns; }
  };
  static constexpr uint64_t kNever = UINT64_MAX;

  void Loop();

  const DueFn on_due_;
  const uint64_t slack_ns_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Item> incoming_;              // guarded by mutex_
  uint64_t incoming_earliest_ns_ = kNever;  // guarded by mutex_: earliest deadline in incoming_
  uint64_t sleep_until_ns_ = 0;             // guarded by mutex_: 0 while awake, kNever while idle
  bool stop_ = false;                       // guarded by mutex_
  std::priority_queue<Item, std::vector<Item>, Later> heap_;  // the timer thread's
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> late_ns_total_{0};
  std::atomic<uint64_t> wakeups_{0};
  std::thread thread_;  // last: started once everything above exists
};

// The timer's own capacity: `items` dummy items (empty deliveries, `on_due` the caller's) all due
// at one deadline shortly after they were scheduled; returns the completions per second of the
// timer thread from that deadline to the last completion (0 with *error set if the scheduling
// took longer than the lead time).
double MeasureDelayTimerCapacity(uint64_t items, const DelayTimer::DueFn& on_due,
                                 std::string* error);

}  // namespace wharf::bench
