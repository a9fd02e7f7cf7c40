// Leases: several runtime instances on one engine share its consumers fairly, hand them over
// when an instance stops or dies, and fence a stalled former holder so no fact is applied twice.
#include <map>
#include <mutex>
#include <thread>

#include "engine/open/open_engine.h"
#include "engine/runtime/runtime_impl.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

using testing::WaitFor;

struct Traces {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  TraceFn fn() {
    return [this](const TraceEvent& event) {
      std::lock_guard lock(mutex);
      if (std::getenv("WHARF_TRACE")) {
        std::fprintf(stderr, "trace %s %s %llu %s\n", event.name.c_str(), event.consumer.c_str(),
                     static_cast<unsigned long long>(event.fact_id), event.reason.c_str());
      }
      events.push_back(event);
    };
  }
  int Count(const std::string& name) {
    std::lock_guard lock(mutex);
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [&](const TraceEvent& e) { return e.name == name; }));
  }
};

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    EngineOptions options;
    options.partitions = 4;
    internal::EngineHooks hooks;
    hooks.clock_ms = [this] { return now_ms_.load(); };
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }

  // A counting projection per consumer: count/<consumer>/<key> is read, incremented and written
  // with the cursor (batch 1), so an application twice would show as a count too high.
  std::unique_ptr<Runtime> MakeInstance(const std::string& id, int consumers, uint32_t lease_ms,
                                        uint32_t renew_ms, uint32_t workers = 2) {
    RuntimeOptions options;
    options.instance = id;
    options.workers = workers;
    options.lease_ms = lease_ms;
    options.renew_ms = renew_ms;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 5;
    options.trace = traces_.fn();
    auto runtime = std::make_unique<Runtime>(engine_.get(), options);
    ConsumerOptions one;
    one.batch_facts = 1;
    for (int c = 0; c < consumers; ++c) {
      std::string name = "c" + std::to_string(c);
      EXPECT_OK(runtime->Project(
          name, {"A"},
          [this, name](const Fact& fact, Effects& effects) {
            // Only the first delivery of the stall fact stalls (the holder that gets fenced).
            if (stall_fact_ != 0 && fact.id == stall_fact_ && name == stall_consumer_ &&
                !stalled_.exchange(true)) {
              while (!unstall_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            std::string table = "count/" + name, count;
            Status s = effects.Get(table, fact.key, &count);
            int n = s.ok() ? std::stoi(count) : 0;
            EXPECT_OK(effects.Put(table, fact.key, std::to_string(n + 1)));
            return Outcome::kHandled;
          },
          one));
    }
    return runtime;
  }

  static bool Holds(Runtime& runtime, const std::string& consumer_id) {
    for (const auto& consumer : internal::RuntimeInternal::Impl(runtime)->consumers_for_testing()) {
      if (consumer->id == consumer_id) return consumer->owned.load();
    }
    return false;
  }

  static int Held(Runtime& runtime) {
    int held = 0;
    for (const auto& consumer : internal::RuntimeInternal::Impl(runtime)->consumers_for_testing()) {
      held += consumer->owned.load();
    }
    return held;
  }

  void CommitFacts(int count) {
    for (int i = 0; i < count; ++i) {
      Txn txn = engine_->Begin();
      ASSERT_OK(txn.Emit("A", "k" + std::to_string(i % 5), "x"));
      ASSERT_OK(txn.Commit());
      ++committed_;
    }
  }

  // Facts consumer `c` has counted (each once, if delivery is exactly once).
  int Counted(int c) {
    int total = 0;
    for (const std::string& key : keys_) {
      std::string count;
      Status s = engine_->Get("count/c" + std::to_string(c), key, &count);
      total += s.ok() ? std::stoi(count) : 0;
    }
    return total;
  }
  bool AllCounted(int consumers) {
    for (int c = 0; c < consumers; ++c) {
      if (Counted(c) != committed_) return false;
    }
    return true;
  }
  // Every consumer counted every fact exactly once.
  void ExpectExactlyOnce(int consumers) {
    for (int c = 0; c < consumers; ++c) EXPECT_EQ(Counted(c), committed_) << "consumer c" << c;
  }

  TempDir dir_;
  std::atomic<int64_t> now_ms_{1'000'000};
  std::unique_ptr<Engine> engine_;
  Traces traces_;
  int committed_ = 0;
  std::vector<std::string> keys_{"k0", "k1", "k2", "k3", "k4"};  // every key a fact has
  std::string stall_consumer_ = "c0";
  std::atomic<uint64_t> stall_fact_{0};
  std::atomic<bool> stalled_{false}, unstall_{false};
};

// Three instances, nine consumers: three each; a clean stop moves its consumers at once; a dead
// instance's consumers move after its leases expire; no effect applied twice, no fact skipped.
TEST_F(LeaseTest, FairShareStopAndDeath) {
  constexpr uint32_t kLeaseMs = 2'000, kRenewMs = 50;
  auto a = MakeInstance("a", 9, kLeaseMs, kRenewMs);
  auto b = MakeInstance("b", 9, kLeaseMs, kRenewMs);
  auto c = MakeInstance("c", 9, kLeaseMs, kRenewMs);
  ASSERT_OK(a->Start());
  ASSERT_TRUE(WaitFor([&] { return Held(*a) == 9; }));
  CommitFacts(30);
  ASSERT_OK(b->Start());
  ASSERT_OK(c->Start());
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return Held(*a) == 3 && Held(*b) == 3 && Held(*c) == 3; }))
      << Held(*a) << " " << Held(*b) << " " << Held(*c);
  auto balanced_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - started)
                         .count();
  std::printf("fair share reached %lld ms after two instances joined (renew_ms %u)\n",
              static_cast<long long>(balanced_ms), kRenewMs);
  CommitFacts(30);

  ASSERT_OK(b->Stop());  // releases at once
  ASSERT_TRUE(WaitFor([&] { return Held(*a) + Held(*c) == 9; }));
  EXPECT_GE(traces_.Count("lease-released"), 3);
  CommitFacts(30);

  internal::RuntimeInternal::Impl(*c)->AbandonForTesting();  // dies: no release
  int held_by_a = Held(*a);
  EXPECT_LT(held_by_a, 9);
  std::this_thread::sleep_for(std::chrono::milliseconds(5 * kRenewMs));
  EXPECT_EQ(Held(*a), held_by_a) << "a dead instance's leases moved before they expired";
  now_ms_ += kLeaseMs + 1;  // the dead instance's leases and heartbeat expire
  ASSERT_TRUE(WaitFor([&] { return Held(*a) == 9; }));
  CommitFacts(30);
  ASSERT_TRUE(WaitFor([&] { return AllCounted(9); }));
  ASSERT_OK(a->Stop());
  ExpectExactlyOnce(9);
}

// A holder stalled inside a handler past its lease: another instance takes over (new epoch) and
// applies the fact; the stalled holder's late commit is refused by the fence.
TEST_F(LeaseTest, StalledHolderIsFencedByEpoch) {
  auto a = MakeInstance("a", 1, /*lease_ms=*/120'000, /*renew_ms=*/60'000);
  ASSERT_OK(a->Start());
  ASSERT_TRUE(WaitFor([&] { return Held(*a) == 1; }));
  CommitFacts(3);
  ASSERT_TRUE(WaitFor([&] {
    std::string count;
    return engine_->Get("count/c0", "k2", &count).ok();
  }));
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("A", "k0", "stall"));
  CommitResult result;
  stall_fact_ = engine_->last_lsn() + 1;
  ASSERT_OK(txn.Commit(&result));
  ++committed_;
  ASSERT_EQ(result.first_fact_id, stall_fact_.load());
  ASSERT_TRUE(WaitFor([&] { return stalled_.load(); }));

  // a stalls as a whole (its lease thread too, as in a paused process), and its lease and
  // heartbeat expire meanwhile.
  internal::RuntimeInternal::Impl(*a)->PauseLeasesForTesting();
  now_ms_ += 200'000;
  auto b = MakeInstance("b", 1, /*lease_ms=*/120'000, /*renew_ms=*/50);
  ASSERT_OK(b->Start());
  ASSERT_TRUE(WaitFor([&] { return Held(*b) == 1; }));
  // b applies the stalled fact itself (its handler does not stall: only a's first call waits).
  ASSERT_TRUE(WaitFor([&] {
    uint64_t cursor = 0;
    return GetCursor(*engine_, "c0", engine_->PartitionOf("k0"), &cursor).ok() &&
           cursor >= result.first_fact_id;
  }));
  unstall_ = true;
  ASSERT_TRUE(WaitFor([&] { return traces_.Count("refused-stale-epoch") >= 1; }));
  ASSERT_OK(b->Stop());
  a->Stop().PermitUncheckedError();
  ExpectExactlyOnce(1);
}

// A consumer is handed over while its handler blocks for longer than the lease, with earlier
// batches of its other lanes committed but not applied by the blocked worker (in flight): the
// hand-over never holds the lease thread, so the instance's other lease is renewed meanwhile
// (never lost, never taken by the other instance); the hand-over gives up on the batch within
// lease_ms, and the abandoned batch's late commit is refused by the fence: no effect applied twice.
TEST_F(LeaseTest, SlowHandlerDoesNotBlockHandOver) {
#if defined(WHARF_TSAN) || defined(WHARF_ASAN)
  constexpr uint32_t kLeaseMs = 1'200, kRenewMs = 60;
#else
  constexpr uint32_t kLeaseMs = 400, kRenewMs = 40;
#endif
  // Leases expire by the engine's clock: here it follows real time.
  struct Ticker {
    std::atomic<bool> ticking{true};
    std::thread thread;
    explicit Ticker(std::atomic<int64_t>* now_ms)
        : thread([this, now_ms] {
            while (ticking.load()) {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              *now_ms += 2;
            }
          }) {}
    ~Ticker() {
      ticking = false;
      thread.join();
    }
  } ticker(&now_ms_);
  // One worker: within one pass over its lanes, c1's lanes of partitions 0..2 submit their batch
  // before the lane of partition 3 blocks in the handler, so they stay in flight (their
  // completions are applied by the blocked worker) until the handler returns.
  stall_consumer_ = "c1";
  std::vector<std::string> keys(4);
  for (int i = 0; std::any_of(keys.begin(), keys.end(), [](auto& k) { return k.empty(); }); ++i) {
    std::string key = "p" + std::to_string(i);
    if (keys[engine_->PartitionOf(key)].empty()) keys[engine_->PartitionOf(key)] = key;
  }
  keys_.insert(keys_.end(), keys.begin(), keys.end());
  auto a = MakeInstance("a", 2, kLeaseMs, kRenewMs, /*workers=*/1);
  std::unique_ptr<Runtime> b;
  // On an early return, the blocked handler returns before the runtimes stop (destroyed first).
  struct Unstall {
    std::atomic<bool>* unstall;
    ~Unstall() { *unstall = true; }
  } unstall_on_return{&unstall_};
  ASSERT_OK(a->Start());
  ASSERT_TRUE(WaitFor([&] { return Held(*a) == 2; }));
  CommitFacts(10);
  ASSERT_TRUE(WaitFor([&] { return AllCounted(2); }));
  {
    Txn txn = engine_->Begin();
    for (int p = 0; p < 4; ++p) ASSERT_OK(txn.Emit("A", keys[p], "x"));
    CommitResult result;
    stall_fact_ = engine_->last_lsn() + 4;  // the fact of partition 3
    ASSERT_OK(txn.Commit(&result));
    ASSERT_EQ(result.last_fact_id, stall_fact_.load());
    committed_ += 4;
  }
  ASSERT_TRUE(WaitFor([&] { return stalled_.load(); }));

  b = MakeInstance("b", 2, kLeaseMs, kRenewMs, /*workers=*/1);
  const auto joined = std::chrono::steady_clock::now();
  ASSERT_OK(b->Start());
  // a hands c1 (its last) over: it gives up on the blocked batch within lease_ms.
  ASSERT_TRUE(WaitFor([&] { return Holds(*b, "c1"); }, 10 * kLeaseMs));
  const auto handed_over_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - joined)
                                  .count();
  std::printf("hand-over under a blocked handler took %lld ms (lease_ms %u)\n",
              static_cast<long long>(handed_over_ms), kLeaseMs);
  EXPECT_LE(handed_over_ms, kLeaseMs + 20 * kRenewMs);
  // The handler stays blocked for three leases in all: a's lease of c0 is renewed throughout.
  while (std::chrono::steady_clock::now() - joined < std::chrono::milliseconds(3 * kLeaseMs)) {
    ASSERT_TRUE(Holds(*a, "c0"));
    ASSERT_FALSE(Holds(*b, "c0"));
    std::this_thread::sleep_for(std::chrono::milliseconds(kRenewMs));
  }
  EXPECT_EQ(traces_.Count("lease-lost"), 0);
  unstall_ = true;
  // The abandoned batch's commit is refused (the released lease closed the fence).
  ASSERT_TRUE(WaitFor([&] { return traces_.Count("refused-stale-epoch") >= 1; }));
  CommitFacts(10);
  ASSERT_TRUE(WaitFor([&] { return AllCounted(2); }));
  EXPECT_TRUE(Holds(*a, "c0") && Holds(*b, "c1"));
  ASSERT_OK(b->Stop());
  ASSERT_OK(a->Stop());
  ExpectExactlyOnce(2);
}

// Leases of an earlier open of the database are reclaimed at once; an API-only instance holds
// no lease and delivers nothing.
TEST_F(LeaseTest, ReclaimAfterRestartAndApiOnlyInstance) {
  {
    auto a = MakeInstance("a", 2, 120'000, 60'000);
    ASSERT_OK(a->Start());
    ASSERT_TRUE(WaitFor([&] { return Held(*a) == 2; }));
    internal::RuntimeInternal::Impl(*a)->AbandonForTesting();  // the process "dies"
  }
  ASSERT_OK(engine_->Close());
  engine_.reset();
  Open();  // no clock change: the old leases have not expired, yet they are void
  CommitFacts(10);
  RuntimeOptions api_only;
  api_only.workers = 0;
  Runtime api(engine_.get(), api_only);
  std::atomic<int> api_calls{0};
  ASSERT_OK(api.Project("c0", {"A"}, [&](const Fact&, Effects&) {
    api_calls++;
    return Outcome::kHandled;
  }));
  ASSERT_OK(api.Start());
  EXPECT_EQ(Held(api), 0);
  // Delivering nothing means no handler call and no cursor moved, not only no lease held.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(api_calls.load(), 0);
  std::vector<CursorInfo> cursors;
  ASSERT_OK(ListCursors(*engine_, &cursors));
  for (const CursorInfo& cursor : cursors) {
    EXPECT_EQ(cursor.fact_id, 0u) << cursor.consumer << "/" << cursor.partition;
  }
  auto b = MakeInstance("b", 2, 120'000, 60'000);
  ASSERT_OK(b->Start());
  ASSERT_TRUE(WaitFor([&] { return Held(*b) == 2; }));
  ASSERT_TRUE(WaitFor([&] { return AllCounted(2); }));
  ASSERT_OK(b->Stop());
  ExpectExactlyOnce(2);
  EXPECT_EQ(api_calls.load(), 0);
}

}  // namespace
}  // namespace wharf
