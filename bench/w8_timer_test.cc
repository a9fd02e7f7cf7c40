// DelayTimer (W8-slow-subscriber's stand-in for a network client's event loop): items complete at
// their deadline, never early, in deadline order; an earlier item wakes the sleeping thread; Stop
// drops what is not due.
#include "bench/w8_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/producer_driver.h"

namespace wharf::bench {
namespace {

constexpr uint64_t kMs = 1'000'000;

struct Completion {
  uint64_t tag;
  uint64_t deadline_ns;
  uint64_t done_ns;
};

class Recorder {
 public:
  DelayTimer::DueFn Fn() {
    return [this](DelayTimer::Item& item) {
      std::lock_guard lock(mutex_);
      done_.push_back({item.tag, item.deadline_ns, NowNs()});
    };
  }
  std::vector<Completion> done() {
    std::lock_guard lock(mutex_);
    return done_;
  }
  bool WaitFor(size_t count, uint64_t timeout_ns) {
    const uint64_t end_ns = NowNs() + timeout_ns;
    while (done().size() < count) {
      if (NowNs() > end_ns) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::vector<Completion> done_;
};

TEST(DelayTimerTest, CompletesInDeadlineOrderNeverEarly) {
  Recorder recorder;
  DelayTimer timer(recorder.Fn());
  // Scheduled out of order, from two threads, all due well after the last is scheduled (a thread
  // descheduled on a busy machine must not see an earlier item come due only after a later one
  // ran).
  const uint64_t base_ns = NowNs() + 300 * kMs;
  std::thread other([&] {
    for (uint64_t i = 0; i < 100; i += 2) timer.ScheduleAt(base_ns + (30 - i % 30) * kMs, i, {});
  });
  for (uint64_t i = 1; i < 100; i += 2) timer.ScheduleAt(base_ns + (30 - i % 30) * kMs, i, {});
  other.join();
  ASSERT_TRUE(recorder.WaitFor(100, 10'000 * kMs));
  const std::vector<Completion> done = recorder.done();
  ASSERT_EQ(done.size(), 100u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_GE(done[i].done_ns, done[i].deadline_ns) << "item " << done[i].tag << " early";
    if (i > 0) {
      EXPECT_GE(done[i].deadline_ns, done[i - 1].deadline_ns) << "out of order at " << i;
    }
  }
  EXPECT_EQ(timer.completed(), 100u);
}

// The thread sleeps until the far item is due; a nearer one scheduled afterwards must wake it.
TEST(DelayTimerTest, EarlierItemWakesTheSleepingThread) {
  Recorder recorder;
  DelayTimer timer(recorder.Fn());
  timer.ScheduleAt(NowNs() + 3'000 * kMs, 1, {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread sleeps for item 1
  const uint64_t near_ns = NowNs() + 10 * kMs;
  timer.ScheduleAt(near_ns, 2, {});
  ASSERT_TRUE(recorder.WaitFor(1, 10'000 * kMs));
  const Completion first = recorder.done().front();
  EXPECT_EQ(first.tag, 2u);
  // Far below the 3 s of item 1, with room for a loaded machine.
  EXPECT_LT(first.done_ns - near_ns, 1'000 * kMs);
}

TEST(DelayTimerTest, StopDropsItemsNotDue) {
  Recorder recorder;
  DelayTimer timer(recorder.Fn());
  timer.ScheduleAt(NowNs() + 60'000 * kMs, 1, {});
  timer.ScheduleAt(NowNs(), 2, {});
  ASSERT_TRUE(recorder.WaitFor(1, 10'000 * kMs));
  const uint64_t stop_ns = NowNs();
  timer.Stop();
  EXPECT_LT(NowNs() - stop_ns, 5'000 * kMs);
  ASSERT_EQ(recorder.done().size(), 1u);
  EXPECT_EQ(recorder.done().front().tag, 2u);
  timer.Stop();  // idempotent
}

TEST(DelayTimerTest, CapacityProbeCompletesEveryItem) {
  std::atomic<uint64_t> seen{0};
  std::string error;
  const double per_s = MeasureDelayTimerCapacity(
      10000, [&](DelayTimer::Item&) { seen.fetch_add(1); }, &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(seen.load(), 10000u);
  EXPECT_GT(per_s, 0);
}

}  // namespace
}  // namespace wharf::bench
