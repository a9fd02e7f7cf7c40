#include "bench/w8_timer.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "bench/producer_driver.h"

namespace wharf::bench {

DelayTimer::DelayTimer(DueFn on_due, uint64_t slack_ns)
    : on_due_(std::move(on_due)), slack_ns_(slack_ns), thread_([this] { Loop(); }) {
  // Named, so that a profile (and W8's CPU by thread) tells it from the runner's other threads.
  pthread_setname_np(thread_.native_handle(), "w8-timer");
}

DelayTimer::~DelayTimer() { Stop(); }

void DelayTimer::ScheduleAt(uint64_t deadline_ns, uint64_t tag, Delivery delivery) {
  std::lock_guard lock(mutex_);
  incoming_.push_back(Item{deadline_ns, tag, std::move(delivery)});
  incoming_earliest_ns_ = std::min(incoming_earliest_ns_, deadline_ns);
  // The thread sleeps until later than this item is due (or idles): wake it. Otherwise it takes
  // the item when it wakes for an earlier one.
  if (deadline_ns < sleep_until_ns_) arrived_.notify_one();
}

void DelayTimer::Stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    arrived_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void DelayTimer::Loop() {
  std::vector<Item> arrived;
  uint64_t earliest_wake_ns = 0;  // after each group completed: then + slack
  while (true) {
    {
      std::unique_lock lock(mutex_);
      while (true) {
        if (stop_) return;
        const uint64_t due_ns =
            std::min(heap_.empty() ? kNever : heap_.top().deadline_ns, incoming_earliest_ns_);
        const uint64_t target_ns = std::max(due_ns, earliest_wake_ns);
        if (target_ns <= NowNs()) break;
        sleep_until_ns_ = target_ns;
        if (target_ns == kNever) {
          arrived_.wait(lock);
        } else {
          arrived_.wait_until(
              lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(target_ns)));
        }
        sleep_until_ns_ = 0;
      }
      arrived.swap(incoming_);
      incoming_earliest_ns_ = kNever;
    }
    for (Item& item : arrived) heap_.push(std::move(item));
    arrived.clear();
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    uint64_t now_ns = NowNs();
    uint64_t completed = 0, late_ns = 0;
    while (!heap_.empty() && heap_.top().deadline_ns <= now_ns) {
      // priority_queue::top is const: the item is moved out through a cast, then popped.
      Item item = std::move(const_cast<Item&>(heap_.top()));
      heap_.pop();
      late_ns += now_ns - item.deadline_ns;
      on_due_(item);
      ++completed;
      // Items falling due while a long group completes join it.
      if ((completed & 63) == 0) now_ns = NowNs();
    }
    completed_.fetch_add(completed, std::memory_order_relaxed);
    late_ns_total_.fetch_add(late_ns, std::memory_order_relaxed);
    earliest_wake_ns = NowNs() + slack_ns_;
  }
}

double MeasureDelayTimerCapacity(uint64_t items, const DelayTimer::DueFn& on_due,
                                 std::string* error) {
  // Long enough for one thread to schedule a few hundred thousand items first.
  constexpr uint64_t kLeadNs = 500'000'000;
  std::atomic<uint64_t> last_ns{0};
  DelayTimer timer([&](DelayTimer::Item& item) {
    on_due(item);
    last_ns.store(NowNs(), std::memory_order_relaxed);
  });
  const uint64_t deadline_ns = NowNs() + kLeadNs;
  for (uint64_t i = 0; i < items; ++i) timer.ScheduleAt(deadline_ns, i, Delivery());
  if (NowNs() >= deadline_ns) {
    *error = "scheduling " + std::to_string(items) + " items took longer than the lead time";
    return 0;
  }
  while (timer.completed() < items) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  timer.Stop();
  const uint64_t end_ns = last_ns.load();
  if (end_ns <= deadline_ns) return 0;
  return static_cast<double>(items) / (static_cast<double>(end_ns - deadline_ns) / 1e9);
}

}  // namespace wharf::bench
