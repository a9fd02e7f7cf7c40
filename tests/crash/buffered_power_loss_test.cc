// durability=buffered across power cuts: a commit is acknowledged before its sync, so a cut may
// take it back — but never a fact a consumer was given, and never an id for good.
//
// A producer commits facts with unique payloads in buffered mode (syncs every 20 ms) while a
// subscriber (or a Redis Streams relay to a real redis-server) runs; the fault-injecting file
// system cuts power at a random moment, unsynced bytes are dropped, the database is reopened.
// After every recovery:
//   - every fact the subscriber was given is still there, with the same content;
//   - every acknowledged fact at or below the durable LSN read just before the cut is there;
//   - ids continue above every id acknowledged before the cut, and no id acknowledged in any run
//     is ever acknowledged again for another fact;
//   - (relay) at the end, each partition's stream holds exactly that partition's facts in id
//     order, each entry the fact its id names: no entry id maps to two different facts.
// Also without cuts: a caught-up consumer is woken by the interval's sync (not before it), Drain
// syncs at once, and reads of acknowledged state do not wait for the interval.
// WHARF_SEED=<n> replays a run.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "io/fault/fault_fs.h"
#include "test_util.h"
#include "tools/broker/broker_process.h"
#include "wharf/relay.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::SeedFromEnv;
using testing::TempDir;

constexpr int kCuts = testing::kSanitized ? 4 : 12;
constexpr uint32_t kPartitions = 4;

RuntimeOptions QuietRuntimeOptions() {
  RuntimeOptions options;
  options.workers = 2;
  options.backoff_initial_ms = 1;
  options.backoff_max_ms = 20;
  options.trace = [](const TraceEvent&) {};  // power-loss errors are expected here
  return options;
}

class BufferedPowerLossTest : public ::testing::Test {
 protected:
  void OpenEngine(uint32_t buffered_sync_ms = 20) {
    EngineOptions options;
    options.partitions = kPartitions;
    options.durability = Durability::kBuffered;
    options.buffered_sync_ms = buffered_sync_ms;
    options.memtable_bytes = 1u << 20;
    options.retention_interval_ms = 0;  // every fact stays readable for the checks
    internal::StoreHooks hooks{fs_, fs_.get()};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }

  // Every fact in the store, by id.
  std::map<uint64_t, Fact> AllFacts() {
    std::map<uint64_t, Fact> facts;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      std::vector<Fact> read;
      EXPECT_OK(engine_->ReadFacts(p, 0, SIZE_MAX, &read));
      for (Fact& fact : read) facts.emplace(fact.id, std::move(fact));
    }
    return facts;
  }

  // Commits facts with unique payloads until `stop` or a failed commit; records each
  // acknowledged id and flags an id acknowledged before for another payload.
  void Produce(const std::atomic<bool>& stop, int run, uint64_t seed) {
    std::mt19937 random(static_cast<uint32_t>(seed));
    for (int n = 0; !stop.load(); ++n) {
      Txn txn = engine_->Begin();
      const int facts = 1 + static_cast<int>(random() % 3);
      std::vector<std::string> payloads;
      for (int i = 0; i < facts; ++i) {
        payloads.push_back("r" + std::to_string(run) + "-" + std::to_string(n) + "-" +
                           std::to_string(i));
        EXPECT_OK(txn.Emit("A", "key-" + std::to_string(random() % 16), payloads.back()));
      }
      CommitResult result;
      if (!txn.Commit(&result).ok()) return;  // the power is gone
      std::lock_guard lock(mutex_);
      for (int i = 0; i < facts; ++i) {
        const uint64_t id = result.first_fact_id + i;
        auto [it, added] = acked_.emplace(id, payloads[i]);
        if (!added) {
          ADD_FAILURE() << "id " << id << " handed out twice: to '" << it->second << "', then to '"
                        << payloads[i] << "'";
        }
      }
      ++acked_this_run_;
    }
  }

  // kCuts runs (RunAndCut), `runtime` (what `start` made) dropped after each; some cut must have
  // taken back an acknowledged commit. `before_cut(cut)`, if given, runs after the run's first
  // acknowledged commit and before the random wait that precedes the cut.
  void CutRepeatedly(std::mt19937_64* random, const std::function<Runtime*()>& start,
                     std::unique_ptr<Runtime>* runtime,
                     const std::function<void(int cut)>& before_cut = nullptr) {
    for (int cut = 0; cut < kCuts; ++cut) {
      ASSERT_NO_FATAL_FAILURE(RunAndCut(random, cut, start, before_cut)) << "cut " << cut;
      runtime->reset();
    }
    EXPECT_FALSE(lost_.empty()) << "no cut met an acknowledged, unsynced commit";
  }

  // One run: `start` attaches the consumer, a producer commits, the power is cut at a random
  // moment, the database is reopened on what survived. Then the checks common to both tests.
  void RunAndCut(std::mt19937_64* random, int run, const std::function<Runtime*()>& start,
                 const std::function<void(int cut)>& before_cut) {
    acked_this_run_ = 0;
    Runtime* runtime = start();
    std::atomic<bool> stop{false};
    std::thread producer([&, seed = (*random)()] { Produce(stop, run, seed); });
    // Cut after a first acknowledged commit, within about two sync intervals.
    ASSERT_TRUE(testing::WaitFor([&] { return acked_this_run_.load() > 0; }));
    if (before_cut) before_cut(run);
    std::this_thread::sleep_for(std::chrono::microseconds((*random)() % 40'000));
    // Every fact up to here is synced: it must survive the cut.
    const uint64_t durable_before = engine_->durable_lsn();
    fs_->Cut();
    stop = true;
    producer.join();
    runtime->Stop().PermitUncheckedError();
    engine_->Close().PermitUncheckedError();
    engine_.reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    ASSERT_NO_FATAL_FAILURE(OpenEngine());

    uint64_t acked_max = 0;
    const std::map<uint64_t, Fact> facts = AllFacts();
    std::lock_guard lock(mutex_);
    for (const auto& [id, payload] : acked_) {
      acked_max = std::max(acked_max, id);
      auto it = facts.find(id);
      if (it != facts.end()) {
        EXPECT_EQ(it->second.payload, payload) << "fact " << id << " changed";
      } else if (lost_.insert(id).second) {  // taken back by this cut
        EXPECT_GT(id, durable_before) << "acknowledged fact " << id << " ('" << payload
                                      << "') lost although synced before the cut";
      }
    }
    // Whatever the cut took back, the next id is above every id handed out before it.
    EXPECT_GE(engine_->last_lsn(), acked_max) << "ids acknowledged before the cut may be reused";
    for (const auto& [id, payload] : delivered_) {
      auto it = facts.find(id);
      if (it == facts.end()) {
        ADD_FAILURE() << "fact " << id << " ('" << payload << "') was delivered, then taken back";
      } else {
        EXPECT_EQ(it->second.payload, payload) << "fact " << id << " delivered with other content";
      }
    }
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::map<uint64_t, std::string> acked_;      // every run's acknowledged facts: id -> payload
  std::map<uint64_t, std::string> delivered_;  // every run's deliveries: id -> payload
  std::atomic<int> acked_this_run_{0};
  std::set<uint64_t> lost_;  // acknowledged facts a cut took back (cuts met unsynced commits)
};

// A subscriber records every fact it is given; nothing it saw is ever taken back, and no id is
// handed out twice.
TEST_F(BufferedPowerLossTest, DeliveredFactsSurviveAndIdsAreNeverReused) {
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 random(seed);
  ASSERT_NO_FATAL_FAILURE(OpenEngine());
  std::unique_ptr<Runtime> runtime;
  auto start = [&]() -> Runtime* {
    runtime = std::make_unique<Runtime>(engine_.get(), QuietRuntimeOptions());
    EXPECT_OK(runtime->Subscribe("sub", {"A"}, [this](const Fact& fact) {
      // Given to the consumer: it may already have acted on it.
      std::lock_guard lock(mutex_);
      auto [it, added] = delivered_.emplace(fact.id, fact.payload);
      EXPECT_EQ(it->second, fact.payload) << "fact " << fact.id << " delivered with two contents";
      return Outcome::kHandled;
    }));
    EXPECT_OK(runtime->Start());
    return runtime.get();
  };
  ASSERT_NO_FATAL_FAILURE(CutRepeatedly(&random, start, &runtime));
  std::printf("%zu facts acknowledged, %zu taken back by %d cuts, %zu delivered before the end\n",
              acked_.size(), lost_.size(), kCuts, delivered_.size());
  // Finally everything stored is delivered (Drain syncs first).
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_OK(runtime->Drain());
  ASSERT_OK(runtime->Stop());
  std::lock_guard lock(mutex_);
  for (const auto& [id, fact] : AllFacts()) {
    EXPECT_EQ(delivered_.count(id), 1u) << "fact " << id << " never delivered";
  }
}

// Reads an XRANGE of `stream` as (entry id, field -> value).
std::vector<std::pair<std::string, std::map<std::string, std::string>>> StreamEntries(
    int port, const std::string& stream) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> entries;
  timeval timeout{10, 0};
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (context == nullptr || context->err != 0) {
    ADD_FAILURE() << "cannot connect to redis";
    if (context != nullptr) redisFree(context);
    return entries;
  }
  auto* reply = static_cast<redisReply*>(redisCommand(context, "XRANGE %s - +", stream.c_str()));
  for (size_t i = 0; reply != nullptr && i < reply->elements; ++i) {
    const redisReply* item = reply->element[i];
    auto& [id, fields] = entries.emplace_back();
    id.assign(item->element[0]->str, item->element[0]->len);
    const redisReply* values = item->element[1];
    for (size_t f = 0; f + 1 < values->elements; f += 2) {
      fields[std::string(values->element[f]->str, values->element[f]->len)] =
          std::string(values->element[f + 1]->str, values->element[f + 1]->len);
    }
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(context);
  return entries;
}

// A Redis Streams relay (entry id = fact id) under buffered-mode power cuts: it is never given a
// fact a cut takes back, so no entry id ever names two different facts (Redis would refuse the
// second as a duplicate and the fact would be lost), and nothing synced is lost.
TEST_F(BufferedPowerLossTest, RedisRelayNeverMapsAnEntryIdToTwoFacts) {
  TempDir redis_dir;
  broker::BrokerProcess redis([&](int port) { return broker::RedisArgv(redis_dir.path(), port); });
  ASSERT_TRUE(redis.Start()) << "redis-server did not start (is it installed?)";
  const std::string sink_options =
      "kind=redis_streams;url=redis://127.0.0.1:" + std::to_string(redis.port()) +
      ";stream=b:{partition}";
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 random(seed);
  ASSERT_NO_FATAL_FAILURE(OpenEngine());
  std::unique_ptr<Runtime> runtime;
  auto start = [&]() -> Runtime* {
    std::unique_ptr<RelaySink> sink;
    EXPECT_OK(MakeRelaySink(sink_options, &sink));
    runtime = std::make_unique<Runtime>(engine_.get(), QuietRuntimeOptions());
    ConsumerOptions consumer;
    consumer.batch_facts = 16;
    EXPECT_OK(runtime->Relay("r", {"A"}, std::shared_ptr<RelaySink>(std::move(sink)), consumer));
    EXPECT_OK(runtime->Start());
    return runtime.get();
  };
  auto published = [&] {
    size_t entries = 0;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      entries += StreamEntries(redis.port(), "b:" + std::to_string(p)).size();
    }
    return entries;
  };
  // The first run lasts until the relay has published (a sync came first), so that however the
  // later cuts fall, the relay's output before a cut is checked, not only after the last one.
  auto first_run_publishes = [&](int cut) {
    if (cut == 0) {
      EXPECT_TRUE(testing::WaitFor([&] { return published() > 0; }))
          << "the relay published nothing while the producer committed";
    }
  };
  ASSERT_NO_FATAL_FAILURE(CutRepeatedly(&random, start, &runtime, first_run_publishes));
  const size_t published_in_runs = published();
  EXPECT_GT(published_in_runs, 0u) << "the relay published nothing while the cuts came";
  std::printf("%zu facts acknowledged, %zu taken back by %d cuts, %zu published before the end\n",
              acked_.size(), lost_.size(), kCuts, published_in_runs);
  ASSERT_NO_FATAL_FAILURE(start());
  Status drained;
  for (int i = 0; i < 200 && !(drained = runtime->Drain()).ok(); ++i) {
  }
  ASSERT_OK(drained);
  ASSERT_OK(runtime->Stop());
  const std::map<uint64_t, Fact> facts = AllFacts();
  std::map<uint32_t, std::vector<const Fact*>> by_partition;
  for (const auto& [id, fact] : facts) by_partition[fact.partition].push_back(&fact);
  size_t entries_total = 0;
  for (uint32_t p = 0; p < kPartitions; ++p) {
    const auto entries = StreamEntries(redis.port(), "b:" + std::to_string(p));
    const std::vector<const Fact*>& expected = by_partition[p];
    entries_total += entries.size();
    // Each entry is the fact its id names; a fact missing from the stream (dropped as a
    // "duplicate" of another fact's entry) or an entry of a fact taken back shows here.
    for (const auto& [entry_id, fields] : entries) {
      const uint64_t id = std::stoull(entry_id);
      auto it = facts.find(id);
      if (it == facts.end()) {
        ADD_FAILURE() << "stream entry " << entry_id << " ('" << fields.at("payload")
                      << "') is of a fact the store does not hold";
        continue;
      }
      EXPECT_EQ(fields.at("payload"), it->second.payload)
          << "entry " << entry_id << " names two different facts";
    }
    ASSERT_EQ(entries.size(), expected.size()) << "stream of partition " << p;
    for (size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(entries[i].first, std::to_string(expected[i]->id) + "-0");
    }
  }
  EXPECT_GT(entries_total, 0u);
}

// Without cuts: consumers are woken by the interval's sync and see nothing before it; Drain
// syncs at once; a state read returns acknowledged writes without waiting for the interval.
TEST_F(BufferedPowerLossTest, ConsumersSeeSyncedFactsOnlyAndAreWokenByTheInterval) {
  // An interval longer than the test: only Drain (or close) syncs.
  ASSERT_NO_FATAL_FAILURE(OpenEngine(/*buffered_sync_ms=*/3'600'000));
  std::atomic<uint64_t> received{0};
  uint64_t first_id = 0;
  std::atomic<bool> unsynced_delivery{false};
  auto subscribe = [&](Runtime& runtime) {
    EXPECT_OK(runtime.Subscribe("sub", {"A"}, [&](const Fact& fact) {
      if (engine_->durable_lsn() < fact.id) unsynced_delivery = true;
      received = fact.id;
      return Outcome::kHandled;
    }));
  };
  {
    Runtime runtime(engine_.get(), QuietRuntimeOptions());
    subscribe(runtime);
    ASSERT_OK(runtime.Start());
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Emit("A", "k", "first"));
    ASSERT_OK(txn.Put("t", "k", "v"));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    first_id = result.first_fact_id;
    EXPECT_LT(engine_->durable_lsn(), result.first_fact_id);  // acknowledged, not synced
    std::string value;
    ASSERT_OK(engine_->Get("t", "k", &value));  // acknowledged state: no wait for the interval
    EXPECT_EQ(value, "v");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(received.load(), 0u) << "a fact was delivered before it was synced";
    ASSERT_OK(runtime.Drain());  // syncs, then delivers
    EXPECT_EQ(received.load(), result.first_fact_id);
    EXPECT_GE(engine_->durable_lsn(), result.first_fact_id);
    ASSERT_OK(runtime.Stop());
  }
  ASSERT_OK(engine_->Close());
  engine_.reset();

  // A 20 ms interval: a caught-up subscriber is woken by the interval's sync.
  ASSERT_NO_FATAL_FAILURE(OpenEngine(/*buffered_sync_ms=*/20));
  Runtime runtime(engine_.get(), QuietRuntimeOptions());
  subscribe(runtime);
  ASSERT_OK(runtime.Start());
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("A", "k", "second"));
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  const auto committed = std::chrono::steady_clock::now();
  // The id reservation came down at the clean close: ids go on without a gap.
  EXPECT_EQ(result.first_fact_id, first_id + 1);
  // Bounded wait, not a timing assertion: without a sync on the interval it never arrives.
  ASSERT_TRUE(testing::WaitFor([&] { return received.load() == result.first_fact_id; }, 10'000));
  const auto waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - committed)
                             .count();
  std::printf("delivered %lld ms after the commit (buffered_sync_ms=20)\n",
              static_cast<long long>(waited_ms));
  EXPECT_FALSE(unsynced_delivery.load()) << "a handler ran before its fact was synced";
  ASSERT_OK(runtime.Stop());
}

}  // namespace
}  // namespace wharf
