// Power loss while online retention runs.
//
// A producer commits one fact per transaction while a projection and a subscriber deliver and the
// engine's retention passes run every few milliseconds (small memtables: flushes, compactions and
// file deletions happen during the run); the fault-injecting file system cuts power at a random
// moment, unsynced bytes are dropped, and the database is reopened. After every recovery:
//   - no retention floor is above any consumer's durable cursor: without a bound, no fact a
//     consumer has not passed was removed;
//   - every acknowledged fact above its partition's floor is still readable, and every one at or
//     below it was passed by both consumers (its effect row exists);
//   - the projection's effects were applied exactly once: per key, the counter it increments
//     equals the number of fact rows it wrote for that key (rows are idempotent puts, the counter
//     is not), and no row is above its cursor; every readable fact at or below the cursor has
//     its row;
//   - nothing partial: every readable fact decodes (checksums verified).
// WHARF_SEED=<n> replays a run.
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/store/codec.h"
#include "engine/store/tables/retention.h"
#include "engine/store/tables/scan.h"
#include "engine/store/tables/state.h"
#include "io/fault/fault_fs.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using internal::EngineCore;
using internal::EngineInternal;
using testing::TempDir;

constexpr int kKeys = 8;
constexpr uint32_t kPartitions = 4;

class RetentionPowerLossTest : public ::testing::Test {
 protected:
  // `retention`: passes every 3 ms; without, none (what Verify reads must not move under it).
  void OpenEngine(bool retention = true) {
    EngineOptions options;
    options.partitions = kPartitions;
    options.memtable_bytes = 1u << 20;
    options.retention_interval_ms = retention ? 3 : 0;
    internal::StoreHooks hooks{fs_, fs_.get()};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }

  std::unique_ptr<Runtime> MakeRuntime() {
    RuntimeOptions options;
    options.workers = 2;
    options.backoff_initial_ms = 1;
    options.backoff_max_ms = 10;
    options.trace = [](const TraceEvent&) {};  // power-loss errors are expected here
    auto runtime = std::make_unique<Runtime>(engine_.get(), options);
    EXPECT_OK(runtime->Project("proj", {"A"}, [](const Fact& fact, Effects& effects) {
      std::string count;
      Status s = effects.Get("count", fact.key, &count);
      if (!s.ok() && !s.IsNotFound()) return Outcome::kRetry;
      const int64_t n = s.ok() ? std::stoll(count) : 0;
      EXPECT_OK(effects.Put("count", fact.key, std::to_string(n + 1)));
      EXPECT_OK(effects.Put("rows", RowKey(fact.id), fact.key));
      return Outcome::kHandled;
    }));
    EXPECT_OK(runtime->Subscribe("sub", {"A"}, [](const Fact&) { return Outcome::kHandled; }));
    return runtime;
  }

  static std::string RowKey(uint64_t id) {
    char key[24];
    std::snprintf(key, sizeof(key), "%016llx", static_cast<unsigned long long>(id));
    return key;
  }

  uint64_t Cursor(const std::string& consumer, uint32_t partition) {
    uint64_t cursor = 0;
    EXPECT_OK(GetCursor(*engine_, consumer, partition, &cursor));
    return cursor;
  }

  void Verify(const std::map<uint64_t, std::string>& acked) {
    EngineCore* core = EngineInternal::Core(*engine_).get();
    std::vector<uint64_t> floors;
    ASSERT_OK(tables::retention::ReadFloors(core->store()->db(), core->store()->cf(internal::kMeta),
                                            kPartitions, &floors));
    std::map<uint64_t, uint32_t> readable;  // id -> partition
    for (uint32_t p = 0; p < kPartitions; ++p) {
      EXPECT_LE(floors[p], Cursor("proj", p)) << "partition " << p << " floor passed proj";
      EXPECT_LE(floors[p], Cursor("sub", p)) << "partition " << p << " floor passed sub";
      std::vector<Fact> facts;
      ASSERT_OK(engine_->ReadFacts(p, 0, SIZE_MAX, &facts));
      for (const Fact& fact : facts) {
        EXPECT_GT(fact.id, floors[p]);
        readable[fact.id] = p;
        std::string value;
        const bool row = engine_->Get("rows", RowKey(fact.id), &value).ok();
        EXPECT_EQ(row, fact.id <= Cursor("proj", p)) << "row of fact " << fact.id;
      }
    }
    for (const auto& [id, key] : acked) {
      const uint32_t p = core->PartitionFor(key);
      if (id > floors[p]) {
        std::string value;
        EXPECT_TRUE(readable.count(id))
            << "acknowledged fact " << id << " lost (partition " << p << ", floor " << floors[p]
            << ", proj at " << Cursor("proj", p) << ", sub at " << Cursor("sub", p)
            << ", effect row "
            << (engine_->Get("rows", RowKey(id), &value).ok() ? "present" : "absent")
            << ", durable lsn " << core->committer()->durable_lsn() << ")";
      } else {
        std::string value;
        EXPECT_OK(engine_->Get("rows", RowKey(id), &value))
            << "removed fact " << id << " was never projected";
      }
    }
    // Exactly once: per key, the counter equals the rows of that key.
    std::map<std::string, int64_t> rows_per_key;
    ASSERT_OK(tables::ForEach(core->store()->db(), core->store()->cf(internal::kState),
                              tables::PrefixRange(tables::state::Key("rows", "")), "rows",
                              [&](std::string_view, std::string_view sealed) {
                                std::string_view body;
                                Status s = codec::Unseal(sealed, &body);
                                if (s.ok()) rows_per_key[std::string(body)]++;
                                return s;
                              }));
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = "key-" + std::to_string(k);
      std::string count;
      Status s = engine_->Get("count", key, &count);
      const int64_t stored = s.ok() ? std::stoll(count) : 0;
      EXPECT_EQ(stored, rows_per_key[key]) << "counter of " << key << " (applied twice or lost)";
    }
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
};

TEST_F(RetentionPowerLossTest, NothingUnpassedIsRemovedAndEffectsStayExactlyOnce) {
  const char* seed_text = std::getenv("WHARF_SEED");
  const uint64_t seed = seed_text ? std::strtoull(seed_text, nullptr, 10) : std::random_device()();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Each cut reopens the engine, several times slower under the sanitizers.
  constexpr int kCuts = testing::kSanitized ? 12 : 30;
  std::map<uint64_t, std::string> acked;  // fact id -> key, every acknowledged commit
  uint64_t removed_at_some_point = 0;
  OpenEngine();
  for (int cut = 0; cut < kCuts; ++cut) {
    auto runtime = MakeRuntime();
    ASSERT_OK(runtime->Start());
    std::atomic<bool> stop{false};
    std::atomic<int> acknowledged{0};
    std::mutex acked_mutex;
    std::thread producer([&, local_seed = rng()] {
      std::mt19937 local(static_cast<uint32_t>(local_seed));
      const std::string payload(200, 'x');
      while (!stop.load()) {
        Txn txn = engine_->Begin();
        const std::string key = "key-" + std::to_string(local() % kKeys);
        EXPECT_OK(txn.Emit("A", key, payload));
        CommitResult result;
        if (!txn.Commit(&result).ok()) break;
        std::lock_guard lock(acked_mutex);
        acked[result.last_fact_id] = key;
        acknowledged++;
      }
    });
    for (int i = 0; i < 5000 && acknowledged.load() < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    fs_->Cut();
    stop = true;
    producer.join();
    runtime->Stop().PermitUncheckedError();
    runtime.reset();
    engine_->Close().PermitUncheckedError();
    engine_.reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    OpenEngine(/*retention=*/false);
    ASSERT_NO_FATAL_FAILURE(Verify(acked)) << "after cut " << cut;
    std::vector<uint64_t> floors;
    EngineCore* core = EngineInternal::Core(*engine_).get();
    ASSERT_OK(tables::retention::ReadFloors(core->store()->db(), core->store()->cf(internal::kMeta),
                                            kPartitions, &floors));
    for (uint64_t floor : floors) removed_at_some_point = std::max(removed_at_some_point, floor);
    ASSERT_OK(engine_->Close());
    engine_.reset();
    OpenEngine();
  }
  // The test is about retention running: it must have removed facts.
  EXPECT_GT(removed_at_some_point, 0u);
}

}  // namespace
}  // namespace wharf
