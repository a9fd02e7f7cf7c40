// Per-key ordered concurrency (`key_concurrency`), asynchronous subscribers (SubscribeAsync,
// Delivery), delivery attempts and `max_attempts`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/runtime/key_window.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

using testing::WaitFor;

// Completes deliveries on its own thread after a delay, as a network call would.
class Completer {
 public:
  explicit Completer(std::function<Outcome(const Delivery&)> outcome_of)
      : outcome_of_(std::move(outcome_of)), thread_([this] { Run(); }) {}
  ~Completer() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Later(Delivery delivery, int delay_us) {
    std::lock_guard lock(mutex_);
    due_.emplace(std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us),
                 std::move(delivery));
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (first->first > std::chrono::steady_clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      Delivery delivery = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      delivery.Done(outcome_of_(delivery)).PermitUncheckedError();
      lock.lock();
    }
  }
  std::function<Outcome(const Delivery&)> outcome_of_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, Delivery> due_;
  bool stop_ = false;
  std::thread thread_;
};

class KeyConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.partitions = 1;  // every key in one lane: concurrency is within the lane
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }
  RuntimeOptions Options() {
    RuntimeOptions options;
    options.workers = 1;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    options.trace = [this](const TraceEvent& event) {
      std::lock_guard lock(mutex_);
      traces_.push_back(event);
    };
    return options;
  }
  // Commits facts of type A, one per key in turn: `rounds` x `keys` facts ("k0".."kN").
  std::vector<uint64_t> CommitRounds(int rounds, int keys) {
    std::vector<uint64_t> ids;
    for (int round = 0; round < rounds; ++round) {
      Txn txn = engine_->Begin();
      for (int k = 0; k < keys; ++k) {
        EXPECT_OK(txn.Emit("A", "k" + std::to_string(k), std::to_string(round)));
      }
      CommitResult result;
      EXPECT_OK(txn.Commit(&result));
      for (uint64_t id = result.first_fact_id; id <= result.last_fact_id; ++id) ids.push_back(id);
    }
    return ids;
  }
  uint64_t Cursor(const std::string& consumer) {
    uint64_t cursor = 0;
    EXPECT_OK(GetCursor(*engine_, consumer, 0, &cursor));
    return cursor;
  }
  int TraceCount(const std::string& name) {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count_if(traces_.begin(), traces_.end(),
                                          [&](const TraceEvent& e) { return e.name == name; }));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::vector<TraceEvent> traces_;
};

// Checks per-key order and overlap as deliveries start and finish.
struct OrderCheck {
  std::mutex mutex;
  std::map<std::string, uint64_t> last_started;  // per key: the newest fact handed over
  std::map<std::string, int> running;            // per key: facts in the handler
  std::map<uint64_t, int> deliveries;            // per fact id
  int in_handler = 0;
  int most_in_handler = 0;
  std::vector<std::string> violations;

  void Start(const Fact& fact) {
    std::lock_guard lock(mutex);
    if (running[fact.key]++ != 0) violations.push_back("overlap on key " + fact.key);
    uint64_t& last = last_started[fact.key];
    if (fact.id < last) violations.push_back("key " + fact.key + " went back");
    last = fact.id;
    ++deliveries[fact.id];
    most_in_handler = std::max(most_in_handler, ++in_handler);
  }
  void Finish(const Fact& fact) {
    std::lock_guard lock(mutex);
    --running[fact.key];
    --in_handler;
  }
};

TEST(KeyWindowTest, HandsOverTheOldestFactOfEachKeyOnly) {
  using internal::KeyWindow;
  KeyWindow window;
  auto fact = [](uint64_t id, std::string key) {
    auto f = std::make_shared<Fact>();
    f->id = id;
    f->key = std::move(key);
    return internal::FactPtr(f);
  };
  window.Append(fact(1, "a"), true, 0);
  window.Append(fact(2, "b"), true, 0);
  window.Append(fact(3, "a"), true, 0);
  window.Append(fact(4, "x"), false, 0);  // skipped
  window.Append(fact(5, "c"), true, 2);
  uint64_t seq = 0;
  std::vector<uint64_t> started;
  while (window.StartNext(100, &seq)) started.push_back(window.at(seq).fact->id);
  EXPECT_EQ(started, (std::vector<uint64_t>{1, 2, 5}));  // 3 waits for 1 (same key)
  EXPECT_EQ(window.at(window.SeqAfter(4)).attempt, 3u);  // fact 5: 2 before + this one
  EXPECT_EQ(window.running(), 3u);
  EXPECT_EQ(window.FinishedFrom(window.front_seq()), 0u);
  window.Finish(window.SeqAfter(1));  // fact 2 done: nothing before it finished
  EXPECT_EQ(window.FinishedFrom(window.front_seq()), 0u);
  window.Backoff(window.SeqAfter(0), 50);  // fact 1 failed: its key stays blocked
  EXPECT_FALSE(window.StartNext(100, &seq));
  EXPECT_EQ(window.ReleaseDue(49), 50);
  EXPECT_EQ(window.ReleaseDue(50), INT64_MAX);
  ASSERT_TRUE(window.StartNext(100, &seq));
  EXPECT_EQ(window.at(seq).fact->id, 1u);
  EXPECT_EQ(window.at(seq).attempt, 2u);
  window.Finish(seq);
  EXPECT_EQ(window.FinishedFrom(window.front_seq()), 2u);  // facts 1, 2
  ASSERT_TRUE(window.StartNext(100, &seq));                // fact 3: key a is free now
  EXPECT_EQ(window.at(seq).fact->id, 3u);
  std::vector<uint64_t> timed_out;
  EXPECT_EQ(window.TimedOut(99, &timed_out), 100);
  EXPECT_TRUE(timed_out.empty());
  window.TimedOut(100, &timed_out);
  EXPECT_EQ(timed_out.size(), 2u);  // facts 5 and 3
  window.PopBefore(window.SeqAfter(2));
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window.Clear().size(), 0u);  // no delivery states were attached
  EXPECT_TRUE(window.empty());
}

// Asynchronous deliveries completed out of order on another thread: facts of one key never
// overlap and are handed over in id order, other keys run at once, each fact once.
TEST_F(KeyConcurrencyTest, AsyncDeliveriesKeepPerKeyOrderAndRunKeysAtOnce) {
  const std::vector<uint64_t> ids = CommitRounds(40, 25);  // 1000 facts, 25 keys
  OrderCheck check;
  std::mt19937 rng(7);
  std::mutex rng_mutex;
  Completer completer([&](const Delivery& delivery) {
    check.Finish(delivery.fact());
    return Outcome::kHandled;
  });
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.key_concurrency = 16;
  ASSERT_OK(runtime.SubscribeAsync(
      "hooks", {"A"},
      [&](const Fact& fact, Delivery delivery) {
        EXPECT_EQ(delivery.attempt(), 1u);
        EXPECT_EQ(DeliveryAttempt(), 1u);
        check.Start(fact);
        int delay_us;
        {
          std::lock_guard lock(rng_mutex);
          delay_us = static_cast<int>(rng() % 2000);
        }
        completer.Later(std::move(delivery), delay_us);
      },
      options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return Cursor("hooks") == ids.back(); }));
  ASSERT_OK(runtime.Stop());
  std::lock_guard lock(check.mutex);
  EXPECT_TRUE(check.violations.empty()) << check.violations.front();
  EXPECT_EQ(check.deliveries.size(), ids.size());
  for (const auto& [id, count] : check.deliveries) ASSERT_EQ(count, 1) << id;
  EXPECT_GT(check.most_in_handler, 4) << "keys did not run at once";
  EXPECT_LE(check.most_in_handler, 16) << "more than key_concurrency in the handler";
}

// A fact that keeps failing holds back the later facts of its key only; the cursor stays before
// it. With max_attempts it becomes a dead letter after the last attempt and its key moves on.
TEST_F(KeyConcurrencyTest, APoisonFactBlocksOnlyItsKeyUntilAttemptsRunOut) {
  const std::vector<uint64_t> ids = CommitRounds(10, 5);  // k0..k4, 10 facts each
  const uint64_t poison = ids[1 * 5 + 2];                 // round 1 of k2
  for (uint32_t max_attempts : {0u, 3u}) {
    SCOPED_TRACE("max_attempts=" + std::to_string(max_attempts));
    const std::string name = "s" + std::to_string(max_attempts);
    std::mutex mutex;
    std::set<uint64_t> handled;
    std::map<uint64_t, uint32_t> attempts;
    Runtime runtime(engine_.get(), Options());
    ConsumerOptions options;
    options.key_concurrency = 4;
    options.max_attempts = max_attempts;
    ASSERT_OK(runtime.Subscribe(
        name, {"A"},
        [&](const Fact& fact) {
          std::lock_guard lock(mutex);
          attempts[fact.id] = DeliveryAttempt();
          if (fact.id == poison) {
            SetFailureReason("cannot reach the webhook");
            return Outcome::kFailed;
          }
          handled.insert(fact.id);
          return Outcome::kHandled;
        },
        options));
    ASSERT_OK(runtime.Start());
    if (max_attempts == 0) {
      // Every other key finishes; k2 stops at the poison fact.
      ASSERT_TRUE(WaitFor([&] {
        std::lock_guard lock(mutex);
        return handled.size() == ids.size() - 9 && attempts[poison] >= 5;
      }));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_OK(runtime.Stop());
      std::lock_guard lock(mutex);
      for (size_t i = 0; i < ids.size(); ++i) {
        const bool later_of_k2 = i % 5 == 2 && i > 1 * 5 + 2;
        EXPECT_EQ(handled.count(ids[i]) == 1, !later_of_k2 && ids[i] != poison) << i;
      }
      EXPECT_EQ(Cursor(name), ids[1 * 5 + 1]);  // before the poison fact
    } else {
      ASSERT_TRUE(WaitFor([&] { return Cursor(name) == ids.back(); }));
      ASSERT_OK(runtime.Stop());
      std::lock_guard lock(mutex);
      EXPECT_EQ(handled.size(), ids.size() - 1);
      EXPECT_EQ(attempts[poison], 3u);
      std::vector<DeadLetter> letters;
      ASSERT_OK(ListDeadLetters(*engine_, name, &letters));
      ASSERT_EQ(letters.size(), 1u);
      EXPECT_EQ(letters[0].fact.id, poison);
      EXPECT_EQ(letters[0].attempt, 3u);
      EXPECT_NE(letters[0].reason.find("attempts-exhausted: 3 deliveries failed"),
                std::string::npos)
          << letters[0].reason;
      EXPECT_NE(letters[0].reason.find("cannot reach the webhook"), std::string::npos);
    }
  }
}

// A delivery not done within handler_timeout_ms is delivered again (attempt 2); the late Done of
// the first is refused, and a second Done of any delivery too.
TEST_F(KeyConcurrencyTest, ATimedOutDeliveryIsDeliveredAgainAndItsLateDoneRefused) {
  const std::vector<uint64_t> ids = CommitRounds(1, 3);
  std::mutex mutex;
  std::vector<Delivery> first;  // deliveries of ids[0] never completed
  std::set<uint64_t> done;
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.key_concurrency = 2;
  options.handler_timeout_ms = 50;
  ASSERT_OK(runtime.SubscribeAsync(
      "slow", {"A"},
      [&](const Fact& fact, Delivery delivery) {
        std::lock_guard lock(mutex);
        if (fact.id == ids[0] && delivery.attempt() == 1) {
          first.push_back(delivery);  // never done: times out
          return;
        }
        EXPECT_OK(delivery.Done(Outcome::kHandled));
        Status again = delivery.Done(Outcome::kHandled);
        EXPECT_TRUE(again.IsInvalidArgument()) << again.ToString();
        EXPECT_NE(again.message().find("done already"), std::string::npos) << again.ToString();
        done.insert(fact.id);
      },
      options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return Cursor("slow") == ids.back(); }));
  ASSERT_OK(runtime.Stop());
  EXPECT_EQ(done.size(), 3u);
  ASSERT_EQ(first.size(), 1u);
  Status late = first[0].Done(Outcome::kHandled);
  EXPECT_TRUE(late.IsInvalidArgument()) << late.ToString();
  EXPECT_NE(late.message().find("timed out"), std::string::npos) << late.ToString();
  EXPECT_EQ(TraceCount("handler-timeout"), 1);
  EXPECT_TRUE(Delivery().Done(Outcome::kHandled).IsInvalidArgument());
  EXPECT_TRUE(Delivery().fact().key.empty());
}

// Deliveries still running when the runtime stops are abandoned (their Done refused) and
// delivered again by the next runtime; finished ones are not.
TEST_F(KeyConcurrencyTest, StopAbandonsRunningDeliveriesAndTheNextRuntimeDeliversThemAgain) {
  const std::vector<uint64_t> ids = CommitRounds(1, 4);
  std::vector<Delivery> held;
  std::mutex mutex;
  {
    Runtime runtime(engine_.get(), Options());
    ConsumerOptions options;
    options.key_concurrency = 8;
    ASSERT_OK(runtime.SubscribeAsync(
        "hooks", {"A"},
        [&](const Fact& fact, Delivery delivery) {
          std::lock_guard lock(mutex);
          if (fact.id == ids[0]) {
            EXPECT_OK(delivery.Done(Outcome::kHandled));
          } else {
            held.push_back(std::move(delivery));
          }
        },
        options));
    ASSERT_OK(runtime.Start());
    ASSERT_TRUE(WaitFor([&] {
      std::lock_guard lock(mutex);
      return held.size() == 3;
    }));
    ASSERT_TRUE(WaitFor([&] { return Cursor("hooks") == ids[0]; }));
    ASSERT_OK(runtime.Stop());
  }
  for (const Delivery& delivery : held) {
    EXPECT_FALSE(delivery.pending());
    Status s = delivery.Done(Outcome::kHandled);
    EXPECT_FALSE(s.ok());
  }
  std::set<uint64_t> again;
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.key_concurrency = 8;
  ASSERT_OK(runtime.SubscribeAsync(
      "hooks", {"A"},
      [&](const Fact& fact, Delivery delivery) {
        std::lock_guard lock(mutex);
        again.insert(fact.id);
        EXPECT_OK(delivery.Done(Outcome::kHandled));
      },
      options));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(again, (std::set<uint64_t>{ids[1], ids[2], ids[3]}));
  EXPECT_EQ(Cursor("hooks"), ids.back());
}

// The attempts of the fact a lane keeps failing on are stored: a restart goes on counting, so
// max_attempts still gives up.
TEST_F(KeyConcurrencyTest, AttemptsContinueAcrossARestart) {
  const std::vector<uint64_t> ids = CommitRounds(1, 2);
  std::atomic<uint32_t> last_attempt{0};
  auto run = [&](uint32_t until_attempt) {
    RuntimeOptions runtime_options = Options();
    runtime_options.backoff_initial_ms = 100;  // no attempt beyond `until_attempt` before Stop
    runtime_options.backoff_max_ms = 100;
    Runtime runtime(engine_.get(), runtime_options);
    ConsumerOptions options;
    options.key_concurrency = 2;
    options.max_attempts = 6;
    ASSERT_OK(runtime.Subscribe(
        "hooks", {"A"},
        [&](const Fact& fact) {
          if (fact.id != ids[0]) return Outcome::kHandled;
          last_attempt = DeliveryAttempt();
          return Outcome::kRetry;
        },
        options));
    ASSERT_OK(runtime.Start());
    ASSERT_TRUE(WaitFor([&] { return last_attempt.load() >= until_attempt; }));
    ASSERT_OK(runtime.Stop());
  };
  run(3);
  ASSERT_EQ(last_attempt.load(), 3u);
  last_attempt = 0;
  run(4);
  EXPECT_EQ(last_attempt.load(), 4u);  // not 1: the stored record's count goes on
  last_attempt = 0;
  run(6);
  EXPECT_EQ(Cursor("hooks"), ids.back());  // given up after attempt 6
  std::vector<DeadLetter> letters;
  ASSERT_OK(ListDeadLetters(*engine_, "hooks", &letters));
  ASSERT_EQ(letters.size(), 1u);
  EXPECT_EQ(letters[0].attempt, 6u);
}

// Drain delivers everything through an asynchronous handler completed on another thread.
TEST_F(KeyConcurrencyTest, DrainWaitsForAsynchronousDeliveries) {
  const std::vector<uint64_t> ids = CommitRounds(20, 10);
  std::atomic<int> handled{0};
  Completer completer([&](const Delivery&) {
    ++handled;
    return Outcome::kHandled;
  });
  Runtime runtime(engine_.get(), Options());
  ConsumerOptions options;
  options.key_concurrency = 32;
  ASSERT_OK(runtime.SubscribeAsync(
      "hooks", {"A"},
      [&](const Fact&, Delivery delivery) { completer.Later(std::move(delivery), 500); }, options));
  ASSERT_OK(runtime.Drain());
  EXPECT_EQ(handled.load(), static_cast<int>(ids.size()));
  EXPECT_EQ(Cursor("hooks"), ids.back());
}

TEST_F(KeyConcurrencyTest, BadOptionsAreRefusedNamingThem) {
  Runtime runtime(engine_.get(), Options());
  auto subscribe = [&](ConsumerOptions options) {
    return runtime.Subscribe(
        "s", {"A"}, [](const Fact&) { return Outcome::kHandled; }, options);
  };
  ConsumerOptions options;
  options.key_concurrency = 0;
  Status s = subscribe(options);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("key_concurrency 0"), std::string::npos) << s.ToString();
  options.key_concurrency = kKeyConcurrencyMax + 1;
  EXPECT_TRUE(subscribe(options).IsInvalidArgument());
  options.key_concurrency = 8;
  options.ordering = Ordering::kGlobal;
  s = subscribe(options);
  EXPECT_NE(s.message().find("ordering=global"), std::string::npos) << s.ToString();
  options.ordering = Ordering::kPartition;
  options.key_window_facts = 4;
  s = subscribe(options);
  EXPECT_NE(s.message().find("key_window_facts 4"), std::string::npos) << s.ToString();
  options.key_window_facts = 0;
  options.handler_timeout_ms = 0;
  EXPECT_TRUE(subscribe(options).IsInvalidArgument());
  options.handler_timeout_ms = 100;
  s = runtime.Project(
      "p", {"A"}, [](const Fact&, Effects&) { return Outcome::kHandled; }, options);
  EXPECT_NE(s.message().find("for subscribers"), std::string::npos) << s.ToString();
  EXPECT_OK(subscribe(options));
}

}  // namespace
}  // namespace wharf
