// The steady state of online retention, as a functional test (the timed version is the W6-steady
// workload in bench/): producers commit while two projections and a subscriber keep up and
// retention runs on a short interval. What must hold, whatever the machine's speed:
//   - the facts every consumer passed are removed: the outbox ends up holding a small part of
//     what was committed, and the store's table files far fewer bytes than were committed;
//   - nothing a consumer still needed was removed: each projection wrote a row for every fact,
//     the subscriber saw every fact, in order within its partition, and no consumer lost any;
//   - an operator's stat, cursor list and trims over the admin socket, meanwhile, all succeed.
// Nothing here is timed: every wait is "until it holds", bounded only to fail instead of hanging.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/admin_client.h"
#include "wharf/engine.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

constexpr char kType[] = "OrderCreated";
constexpr char kRowsA[] = "rows_a";
constexpr char kRowsB[] = "rows_b";
constexpr int kProducers = 2;
constexpr int kTxnsPerProducer = 1000;
constexpr int kFactsPerTxn = 10;
constexpr uint64_t kFacts = uint64_t{kProducers} * kTxnsPerProducer * kFactsPerTxn;  // 20 000
// Incompressible 1 KiB payloads: the facts' bytes dwarf the store's own files (20 MiB in all).
constexpr size_t kPayloadBytes = 1024;
constexpr int kKeys = 64;
// Bounds on waiting for something that must happen (generous: sanitizer builds on 2 busy cores).
constexpr auto kWaitMax = std::chrono::seconds(120);

// Bytes of the RocksDB table files (*.sst) under `dir`. The write-ahead log is left out: RocksDB
// keeps it until every family flushed past it, up to its own fixed bound (max_total_wal_size),
// which this test's 20 MiB never reaches; what retention frees is the outbox's table files.
uint64_t TableFileBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".sst") continue;
    std::error_code size_ec;
    const uint64_t size = it->file_size(size_ec);
    if (!size_ec) bytes += size;  // a file compacted away meanwhile counts 0
  }
  return bytes;
}

std::string RowKey(uint64_t fact_id) {
  char key[24];
  std::snprintf(key, sizeof(key), "f%016" PRIx64, fact_id);
  return key;
}

// Waits until `done()` holds or kWaitMax passed; returns done().
template <typename Done>
bool WaitUntil(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kWaitMax;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

TEST(RetentionSteadyTest, PassedFactsAreRemovedAndNothingACaughtUpConsumerNeeds) {
  TempDir dir;
  EngineOptions options;
  options.retention_interval_ms = 200;
  // 1 MiB outbox memtables: the facts reach table files (about 20 flushes) instead of staying in
  // memory, so the space retention must give back is on disk.
  options.memtable_bytes = 1u << 20;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ASSERT_OK(engine->DeclareTypes({kType}));

  std::mutex mutex;  // guards what the handlers and the trace record
  std::vector<std::string> warnings;
  std::vector<std::string> dropped;
  std::map<uint32_t, std::vector<uint64_t>> subscriber_seen;  // partition -> ids in order
  std::atomic<uint64_t> handled_a{0}, handled_b{0}, handled_subscriber{0};

  RuntimeOptions runtime_options;
  runtime_options.trace = [&](const TraceEvent& event) {
    std::lock_guard<std::mutex> lock(mutex);
    if (event.name == "retention-dropped") dropped.push_back(event.consumer + ": " + event.reason);
    if (event.level != TraceEvent::Level::kInfo) {
      warnings.push_back(event.name + " (" + event.consumer + "): " + event.reason);
    }
  };
  Runtime runtime(engine.get(), runtime_options);
  auto projection = [](const char* table, std::atomic<uint64_t>* handled) {
    return [table, handled](const Fact& fact, Effects& effects) {
      if (!effects.Put(table, RowKey(fact.id), std::string_view(fact.payload).substr(0, 8)).ok()) {
        return Outcome::kFailed;
      }
      handled->fetch_add(1);
      return Outcome::kHandled;
    };
  };
  ASSERT_OK(runtime.Project("steady-rows-a", {kType}, projection(kRowsA, &handled_a)));
  ASSERT_OK(runtime.Project("steady-rows-b", {kType}, projection(kRowsB, &handled_b)));
  ASSERT_OK(runtime.Subscribe("steady-subscriber", {kType}, [&](const Fact& fact) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      subscriber_seen[fact.partition].push_back(fact.id);
    }
    handled_subscriber.fetch_add(1);
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());

  // Producers at a modest pace (a short sleep between commits), recording the ids they got.
  std::array<std::vector<uint64_t>, kProducers> committed_ids;
  std::array<std::string, kProducers> producer_errors;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      uint64_t random = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(p + 1);
      std::string payload(kPayloadBytes, '\0');
      for (int t = 0; t < kTxnsPerProducer; ++t) {
        Txn txn = engine->Begin();
        for (int f = 0; f < kFactsPerTxn; ++f) {
          for (size_t i = 0; i < payload.size(); i += 8) {  // xorshift: incompressible bytes
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            std::memcpy(payload.data() + i, &random, 8);
          }
          const std::string key = "customer-" + std::to_string(random % kKeys);
          Status s = txn.Emit(kType, key, payload);
          if (!s.ok()) {
            producer_errors[p] = s.ToString();
            return;
          }
        }
        CommitResult result;
        Status s = txn.Commit(&result);
        if (!s.ok() || result.last_fact_id - result.first_fact_id + 1 != kFactsPerTxn) {
          producer_errors[p] = "commit: " + s.ToString();
          return;
        }
        for (uint64_t id = result.first_fact_id; id <= result.last_fact_id; ++id) {
          committed_ids[p].push_back(id);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  // Meanwhile an operator administers the live database over the admin socket: stat, cursors and
  // trims, next to the engine's own retention passes.
  std::atomic<bool> producing{true};
  std::atomic<int> admin_calls{0};
  std::string admin_error;
  std::thread admin([&] {
    while (producing.load()) {
      std::unique_ptr<AdminClient> client;
      Status s = AdminClient::Connect(dir.db(), &client);
      StatSnapshot snapshot;
      std::vector<CursorInfo> cursors;
      TrimReport trimmed;
      if (s.ok()) s = client->ReadStat(&snapshot);
      if (s.ok()) s = client->ListCursors(&cursors);
      if (s.ok()) s = client->TrimPassed(&trimmed);
      if (!s.ok()) {
        admin_error = s.ToString();
        return;
      }
      admin_calls.fetch_add(3);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (std::thread& producer : producers) producer.join();
  producing = false;
  admin.join();
  for (const std::string& error : producer_errors) ASSERT_EQ(error, "");
  EXPECT_EQ(admin_error, "");
  EXPECT_GT(admin_calls.load(), 0);

  // Every consumer catches up.
  ASSERT_TRUE(WaitUntil([&] {
    return handled_a.load() >= kFacts && handled_b.load() >= kFacts &&
           handled_subscriber.load() >= kFacts;
  })) << "a "
      << handled_a.load() << ", b " << handled_b.load() << ", subscriber "
      << handled_subscriber.load() << " of " << kFacts;

  // Retention removes what they passed, and the space comes back: the outbox keeps under a tenth
  // of the facts, the table files under a quarter of the bytes committed (without retention both
  // hold them all).
  constexpr uint64_t kCommittedBytes = kFacts * kPayloadBytes;
  StatSnapshot stat;
  uint64_t table_bytes = 0;
  const bool bounded = WaitUntil([&] {
    if (!ReadStat(*engine, &stat).ok()) return false;
    table_bytes = TableFileBytes(dir.db());
    return stat.fact_count <= kFacts / 10 && table_bytes <= kCommittedBytes / 4;
  });
  EXPECT_TRUE(bounded) << "outbox holds " << stat.fact_count << " of " << kFacts
                       << " facts; table files " << table_bytes << " bytes of " << kCommittedBytes
                       << " committed";
  ::testing::Test::RecordProperty("outbox_facts_left", std::to_string(stat.fact_count));
  ::testing::Test::RecordProperty("table_file_bytes", std::to_string(table_bytes));
  ASSERT_OK(runtime.Stop());

  // Nothing a consumer needed was removed: both projections have a row for every fact, the
  // subscriber saw every fact, each partition's facts in increasing order (a redelivery may repeat
  // a tail, never skip or reorder).
  std::vector<uint64_t> all_ids;
  for (const std::vector<uint64_t>& ids : committed_ids) {
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  }
  ASSERT_EQ(all_ids.size(), kFacts);
  size_t missing_rows = 0;
  for (const uint64_t id : all_ids) {
    for (const char* table : {kRowsA, kRowsB}) {
      std::string value;
      if (!engine->Get(table, RowKey(id), &value).ok() || value.size() != 8) ++missing_rows;
    }
  }
  EXPECT_EQ(missing_rows, 0u);
  std::map<uint64_t, int> seen_count;
  for (const auto& [partition, ids] : subscriber_seen) {
    uint64_t highest = 0;
    for (const uint64_t id : ids) {
      if (id > highest) {
        highest = id;
      } else {
        // A redelivered tail: only ids this partition already delivered.
        EXPECT_TRUE(seen_count.contains(id))
            << "partition " << partition << ": fact " << id << " delivered after " << highest;
      }
      ++seen_count[id];
    }
  }
  size_t unseen = 0;
  for (const uint64_t id : all_ids) unseen += seen_count.contains(id) ? 0 : 1;
  EXPECT_EQ(unseen, 0u);

  std::vector<RetentionLoss> losses;
  ASSERT_OK(ListRetentionLosses(*engine, &losses));
  EXPECT_TRUE(losses.empty()) << losses.front().consumer << " lost " << losses.front().fact_count;
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_TRUE(dropped.empty()) << dropped.front();
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_OK(engine->Close());
}

}  // namespace
}  // namespace wharf
