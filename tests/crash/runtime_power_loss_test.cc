// Exactly-once delivery across power loss.
//
// A producer commits facts while a projection, a reaction and a subscriber run on a two-worker
// pool with pipelined lanes (several batches of a lane in flight: the test checks that some cut
// met them); the fault-injecting file system cuts power at a random moment, unsynced bytes are
// dropped, and the database is reopened. After every recovery:
//   - the counter projection (batch 1, a read-modify-write effect per key) has counted each fact at
//     or below its cursor exactly once: a count above the number of facts would be an effect
//     applied twice, below a lost one;
//   - the rows projection (batch 100) has an effect row for every fact at or below its cursor and
//     none above it (effects never commit without their cursor advance);
//   - the reaction has emitted exactly one B fact per A fact at or below its cursor;
//   - the subscriber saw each partition's facts in increasing order while commits succeeded.
// At the end a final drain must have delivered every A fact to the subscriber at least once.
// WHARF_SEED=<n> replays a run.
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/runtime/runtime_impl.h"
#include "io/fault/fault_fs.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

constexpr int kKeys = 8;

class RuntimePowerLossTest : public ::testing::Test {
 protected:
  void OpenEngine() {
    EngineOptions options;
    options.partitions = 4;
    options.memtable_bytes = 1u << 20;
    // Verify counts every fact still in the outbox: no retention here (its own crash test is
    // retention_power_loss_test).
    options.retention_interval_ms = 0;
    internal::StoreHooks hooks{fs_, fs_.get()};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  }

  std::unique_ptr<Runtime> MakeRuntime() {
    RuntimeOptions options;
    options.workers = 2;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 10;
    options.trace = [](const TraceEvent&) {};  // power-loss errors are expected here
    auto runtime = std::make_unique<Runtime>(engine_.get(), options);
    ConsumerOptions one;
    one.batch_facts = 1;
    EXPECT_OK(runtime->Project(
        "counter", {"A"},
        [](const Fact& fact, Effects& effects) {
          std::string count;
          Status s = effects.Get("count", fact.key, &count);
          if (!s.ok() && !s.IsNotFound()) return Outcome::kRetry;
          int64_t n = s.ok() ? std::stoll(count) : 0;
          EXPECT_OK(effects.Put("count", fact.key, std::to_string(n + 1)));
          return Outcome::kHandled;
        },
        one));
    EXPECT_OK(runtime->Project("rows", {"A"}, [](const Fact& fact, Effects& effects) {
      EXPECT_OK(effects.Put("rows", std::to_string(fact.id), fact.payload));
      return Outcome::kHandled;
    }));
    EXPECT_OK(runtime->React("react", {"A"}, [](const Fact& fact, Effects& effects) {
      EXPECT_OK(effects.Emit("B", fact.key, std::to_string(fact.id)));
      return Outcome::kHandled;
    }));
    EXPECT_OK(runtime->Subscribe("sub", {"A"}, [this](const Fact& fact) {
      std::lock_guard lock(mutex_);
      auto& run = run_seen_[fact.partition];
      // Once power is cut, commits fail and the lane redelivers from its cursor (at least once):
      // order is checked while commits succeed.
      if (!fs_->IsCut()) {
        EXPECT_TRUE(run.empty() || run.back() < fact.id)
            << "subscriber order violated in partition " << fact.partition;
        run.push_back(fact.id);
      }
      delivered_.insert(fact.id);
      return Outcome::kHandled;
    }));
    return runtime;
  }

  uint64_t Cursor(const std::string& consumer, uint32_t partition) {
    uint64_t cursor = 0;
    EXPECT_OK(GetCursor(*engine_, consumer, partition, &cursor));
    return cursor;
  }

  void Verify() {
    std::map<std::string, int64_t> expected_count;
    std::multiset<std::string> emitted;  // payloads of B: the A ids they react to
    std::vector<Fact> a_facts;
    for (uint32_t p = 0; p < engine_->partitions(); ++p) {
      std::vector<Fact> facts;
      ASSERT_OK(engine_->ReadFacts(p, 0, SIZE_MAX, &facts));
      for (Fact& fact : facts) {
        if (fact.type == "B") {
          EXPECT_EQ(fact.source, "react");
          EXPECT_EQ(fact.depth, 1u);
          emitted.insert(fact.payload);
        } else {
          a_facts.push_back(std::move(fact));
        }
      }
    }
    for (const Fact& fact : a_facts) {
      uint32_t p = fact.partition;
      if (fact.id <= Cursor("counter", p)) expected_count[fact.key]++;
      std::string row;
      Status s = engine_->Get("rows", std::to_string(fact.id), &row);
      if (fact.id <= Cursor("rows", p)) {
        EXPECT_OK(s) << "effect of fact " << fact.id << " lost";
      } else {
        EXPECT_TRUE(s.IsNotFound()) << "effect of fact " << fact.id << " beyond the cursor";
      }
      size_t reactions = emitted.count(std::to_string(fact.id));
      EXPECT_EQ(reactions, fact.id <= Cursor("react", p) ? 1u : 0u) << "reaction to " << fact.id;
    }
    for (int k = 0; k < kKeys; ++k) {
      std::string key = "key-" + std::to_string(k), count;
      Status s = engine_->Get("count", key, &count);
      int64_t stored = s.ok() ? std::stoll(count) : 0;
      ASSERT_EQ(stored, expected_count[key]) << "counter of " << key << " (applied twice or lost)";
    }
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::map<uint32_t, std::vector<uint64_t>> run_seen_;  // this run's deliveries
  std::set<uint64_t> delivered_;                        // every run's deliveries
};

TEST_F(RuntimePowerLossTest, EffectsAppliedExactlyOnceAcrossCuts) {
  const char* seed_text = std::getenv("WHARF_SEED");
  const uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 10) : std::random_device()();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Each cut reopens the engine, several times slower under the sanitizers: 30 cuts there still
  // meet pipelined lanes and every phase of a delivery.
  constexpr int kCuts = testing::kSanitized ? 30 : 100;
  OpenEngine();
  uint32_t most_in_flight = 0;  // batches of one lane in flight at once, in any run
  for (int cut = 0; cut < kCuts; ++cut) {
    {
      std::lock_guard lock(mutex_);
      run_seen_.clear();
    }
    auto runtime = MakeRuntime();
    ASSERT_OK(runtime->Start());
    std::atomic<bool> stop{false};
    std::atomic<int> acknowledged{0};
    std::thread producer([&, local_seed = rng()] {
      std::mt19937 local(static_cast<uint32_t>(local_seed));
      while (!stop.load()) {
        Txn txn = engine_->Begin();
        int facts = 1 + static_cast<int>(local() % 2);
        for (int i = 0; i < facts; ++i) {
          EXPECT_OK(txn.Emit("A", "key-" + std::to_string(local() % kKeys), "payload"));
        }
        if (!txn.Commit().ok()) break;
        acknowledged++;
      }
    });
    // Cut after at least one acknowledged commit, so every cycle has something to lose.
    for (int i = 0; i < 5000 && acknowledged.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 15000));
    fs_->Cut();
    stop = true;
    producer.join();
    runtime->Stop().PermitUncheckedError();
    most_in_flight =
        std::max(most_in_flight,
                 internal::RuntimeInternal::Impl(*runtime)->max_batches_in_flight_for_testing());
    runtime.reset();
    engine_->Close().PermitUncheckedError();
    engine_.reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    OpenEngine();
    ASSERT_NO_FATAL_FAILURE(Verify()) << "after cut " << cut;
  }
  // The cuts met pipelined lanes (lane_batches_in_flight, default 8).
  EXPECT_GE(most_in_flight, 2u);
  // Finally everything is delivered: the subscriber saw every A fact at least once.
  {
    std::lock_guard lock(mutex_);
    run_seen_.clear();
  }
  auto runtime = MakeRuntime();
  ASSERT_OK(runtime->Drain());
  ASSERT_OK(runtime->Stop());
  Verify();
  size_t a_facts = 0;
  for (uint32_t p = 0; p < engine_->partitions(); ++p) {
    std::vector<Fact> facts;
    ASSERT_OK(engine_->ReadFacts(p, 0, SIZE_MAX, &facts));
    for (const Fact& fact : facts) {
      if (fact.type != "A") continue;
      ++a_facts;
      EXPECT_TRUE(delivered_.count(fact.id)) << "subscriber never received fact " << fact.id;
      EXPECT_EQ(Cursor("rows", p) >= fact.id, true);
    }
  }
  EXPECT_GT(a_facts, size_t{kCuts});
}

}  // namespace
}  // namespace wharf
