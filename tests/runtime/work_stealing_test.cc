// Lanes follow the load (engine/runtime/workers.h): a worker with nothing to run takes a lane with
// work from a worker running several, with one thread per lane at a time and per-lane order kept.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/runtime/runtime_impl.h"
#include "engine/store/codec.h"
#include "test_util.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;
using testing::WaitFor;

constexpr uint32_t kPartitions = 4;

// A key of `partition` (of kPartitions).
std::string KeyOf(uint32_t partition) {
  for (int i = 0;; ++i) {
    std::string key = "key-" + std::to_string(i);
    if (codec::PartitionOfKey(key, kPartitions) == partition) return key;
  }
}

// What the handler saw of one partition.
struct PartitionLog {
  std::vector<uint64_t> ids;          // in handling order
  std::set<std::thread::id> threads;  // that handled its facts
  int inside = 0;                     // handler calls running now
  int overlaps = 0;                   // calls that found another one of the partition running
};

TEST(WorkStealingTest, AnIdleWorkerTakesAHotLaneAndOrderHolds) {
  TempDir dir;
  EngineOptions engine_options;
  engine_options.partitions = kPartitions;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), engine_options, &engine));
  ASSERT_OK(engine->DeclareTypes({"A"}));

  // Round robin puts the lanes of partitions 0 and 2 on worker 0 and those of 1 and 3 on worker
  // 1: facts only in 0 and 2 leave worker 1 idle unless it takes one of them.
  constexpr int kFactsPerPartition = 2000;
  const std::string hot[] = {KeyOf(0), KeyOf(2)};
  std::vector<uint64_t> committed[2];
  for (int i = 0; i < kFactsPerPartition; i += 10) {
    for (int h = 0; h < 2; ++h) {
      Txn txn = engine->Begin();
      for (int f = 0; f < 10; ++f) ASSERT_OK(txn.Emit("A", hot[h], "p"));
      CommitResult result;
      ASSERT_OK(txn.Commit(&result));
      for (uint64_t id = result.first_fact_id; id <= result.last_fact_id; ++id) {
        committed[h].push_back(id);
      }
    }
  }

  RuntimeOptions options;
  options.workers = 2;
  options.assignment = Assignment::kRoundRobin;
  std::mutex mutex;
  std::map<uint32_t, PartitionLog> logs;
  std::atomic<int> handled{0};
  Runtime runtime(engine.get(), options);
  ConsumerOptions consumer_options;
  consumer_options.batch_facts = 10;
  ASSERT_OK(runtime.Project(
      "p", {"A"},
      [&](const Fact& fact, Effects& effects) {
        {
          std::lock_guard lock(mutex);
          PartitionLog& log = logs[fact.partition];
          if (log.inside++ > 0) ++log.overlaps;
          log.ids.push_back(fact.id);
          log.threads.insert(std::this_thread::get_id());
        }
        // The work: short, so that a lane has several batches in flight when it moves (their
        // order across the move is what the committer must keep).
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        {
          std::lock_guard lock(mutex);
          --logs[fact.partition].inside;
        }
        ++handled;
        return effects.Put("seen", std::to_string(fact.id), "1").ok() ? Outcome::kHandled
                                                                      : Outcome::kFailed;
      },
      consumer_options));
  ASSERT_OK(runtime.Start());
  ASSERT_TRUE(WaitFor([&] { return handled.load() >= 2 * kFactsPerPartition; }));
  const uint64_t steals = internal::RuntimeInternal::Impl(runtime)->steals_for_testing();
  ASSERT_OK(runtime.Stop());

  EXPECT_GE(steals, 1u) << "worker 1 never took a lane";
  std::set<std::thread::id> threads;
  for (int h = 0; h < 2; ++h) {
    const PartitionLog& log = logs[h == 0 ? 0 : 2];
    EXPECT_EQ(log.ids, committed[h]) << "partition " << (h == 0 ? 0 : 2) << ": out of order, "
                                     << "missing or repeated facts";
    EXPECT_EQ(log.overlaps, 0) << "two threads ran one lane at once";
    threads.insert(log.threads.begin(), log.threads.end());
  }
  EXPECT_EQ(threads.size(), 2u) << "one worker handled both hot partitions";
  // Every effect committed exactly once, with the cursor.
  for (int h = 0; h < 2; ++h) {
    for (const uint64_t id : committed[h]) {
      std::string value;
      ASSERT_OK(engine->Get("seen", std::to_string(id), &value));
    }
  }
  EXPECT_EQ(handled.load(), 2 * kFactsPerPartition);
  ASSERT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
