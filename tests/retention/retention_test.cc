// Online retention (engine/retention/retention.h): floors raised through the committer, facts
// dropped by the outbox's compaction filter (flushes included), whole files deleted and removed
// ranges compacted, registered consumers kept, bounds by bytes and age with the losses recorded
// and traced, and all of it next to producers and runtimes.
#include "engine/retention/retention.h"

#include <rocksdb/db.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/outbox.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using internal::EngineCore;
using internal::EngineInternal;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    EngineOptions options = options_;
    options.partitions = kPartitions;
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks_, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A", "B"}));
  }
  void Reopen() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
    Open();
  }
  EngineCore* core() { return EngineInternal::Core(*engine_).get(); }
  rocksdb::DB* db() { return core()->store()->db(); }
  rocksdb::ColumnFamilyHandle* outbox() { return core()->store()->cf(internal::kOutbox); }

  // Commits `count` facts of `type`, `per_txn` to a transaction, keys spread over partitions.
  uint64_t CommitFacts(int count, const std::string& type = "A", size_t payload_bytes = 100,
                       int per_txn = 100) {
    uint64_t last = 0;
    const std::string payload(payload_bytes, 'p');
    for (int i = 0; i < count;) {
      Txn txn = engine_->Begin();
      for (int k = 0; k < per_txn && i < count; ++k, ++i) {
        EXPECT_OK(txn.Emit(type, "key-" + std::to_string(i % 64), payload));
      }
      CommitResult result;
      EXPECT_OK(txn.Commit(&result));
      last = result.last_fact_id;
    }
    return last;
  }
  // Facts readable in all partitions.
  size_t VisibleFacts() {
    size_t count = 0;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      std::vector<Fact> facts;
      EXPECT_OK(engine_->ReadFacts(p, 0, 1u << 30, &facts));
      count += facts.size();
    }
    return count;
  }
  // Facts physically in the outbox's memtables and table files, removed or not.
  uint64_t StoredFacts() {
    uint64_t count = 0;
    rocksdb::ReadOptions read;
    std::unique_ptr<rocksdb::Iterator> it(db()->NewIterator(read, outbox()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++count;
    EXPECT_TRUE(it->status().ok());
    return count;
  }
  uint64_t OutboxFileBytes() {
    uint64_t bytes = 0;
    EXPECT_TRUE(db()->GetIntProperty(outbox(), rocksdb::DB::Properties::kLiveSstFilesSize, &bytes));
    return bytes;
  }
  void FlushOutbox() {
    rocksdb::FlushOptions flush;
    ASSERT_TRUE(db()->Flush(flush, outbox()).ok());
  }
  void SetAllCursors(const std::string& consumer, uint64_t fact_id) {
    // A consumer's cursors in every partition (SetCursor needs them to exist).
    for (uint32_t p = 0; p < kPartitions; ++p) {
      internal::TxnRep rep;
      rep.writes.push_back(internal::WriteOp{internal::kCursors, false,
                                             tables::cursors::Key(consumer, p),
                                             tables::cursors::EncodeValue(fact_id, 0)});
      ASSERT_OK(core()->Commit(&rep));
    }
  }

  EngineOptions options_ = [] {
    EngineOptions o;
    o.retention_interval_ms = 0;  // passes only when a test asks, unless it sets an interval
    return o;
  }();
  internal::EngineHooks hooks_;  // a test's clock
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

// A trim raises the floors to what every consumer passed: those facts are no longer read, the
// floors survive a reopen, and facts beyond them stay.
TEST_F(RetentionTest, TrimRaisesDurableFloorsAndReadsStartAboveThem) {
  const uint64_t first = CommitFacts(400);
  SetAllCursors("slow", first / 2);
  SetAllCursors("fast", first);
  CommitFacts(100);
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.consumer_count, 2u);
  EXPECT_GT(report.fact_count, 150u);
  EXPECT_LT(report.fact_count, 250u);
  for (const TrimPartition& partition : report.partitions) {
    EXPECT_LE(partition.trim_point, first / 2);
  }
  const size_t visible = VisibleFacts();
  EXPECT_EQ(visible, 500u - report.fact_count);
  Reopen();
  EXPECT_EQ(VisibleFacts(), visible);
  // A second trim finds nothing new.
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.fact_count, 0u);
}

TEST_F(RetentionTest, DryRunChangesNothing) {
  const uint64_t last = CommitFacts(300);
  SetAllCursors("done", last);
  TrimReport report;
  TrimOptions dry;
  dry.dry_run = true;
  ASSERT_OK(TrimPassed(*engine_, &report, dry));
  EXPECT_EQ(report.fact_count, 300u);
  EXPECT_EQ(VisibleFacts(), 300u);
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.fact_count, 300u);
  EXPECT_EQ(VisibleFacts(), 0u);
}

// Facts removed while still in the memtable never reach a table file: the filter runs at flush.
TEST_F(RetentionTest, FactsRemovedBeforeTheirFlushAreNeverWritten) {
  const uint64_t last = CommitFacts(2000);
  SetAllCursors("done", last);
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  ASSERT_EQ(report.fact_count, 2000u);
  EXPECT_EQ(StoredFacts(), 2000u);  // still in the memtable, invisible
  FlushOutbox();
  EXPECT_EQ(StoredFacts(), 0u);
  // RocksDB may keep an empty table file; the 2000 facts would take over 200 KiB.
  EXPECT_LT(OutboxFileBytes(), 64u << 10);
}

// Space comes back within the pass: facts already in table files are compacted away (or their
// files deleted), not left until RocksDB happens to rewrite them.
TEST_F(RetentionTest, SpaceOfRemovedFactsComesBackWithinThePass) {
  uint64_t last = 0;
  for (int round = 0; round < 4; ++round) {
    last = CommitFacts(5000, "A", 1000);
    FlushOutbox();
  }
  const uint64_t before = OutboxFileBytes();
  ASSERT_GT(before, 15u << 20);
  SetAllCursors("done", last);
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.fact_count, 20000u);
  EXPECT_LT(OutboxFileBytes(), 1u << 20);
  EXPECT_EQ(StoredFacts(), 0u);
}

// A consumer registered with a runtime holds its facts before it ever delivers: through the
// engine's own passes and an explicit trim.
TEST_F(RetentionTest, RegisteredConsumerKeepsItsFactsBeforeItFirstRuns) {
  options_.retention_interval_ms = 20;
  Reopen();
  {
    RuntimeOptions runtime_options;
    runtime_options.workers = 0;  // registers, delivers nothing
    Runtime runtime(engine_.get(), runtime_options);
    ASSERT_OK(runtime.Subscribe("new", {"A"}, [](const Fact&) { return Outcome::kHandled; }));
    ASSERT_OK(runtime.Start());
  }
  const uint64_t last = CommitFacts(500);
  SetAllCursors("done", last);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // several passes
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.fact_count, 0u);
  EXPECT_EQ(VisibleFacts(), 500u);
  // Once it delivered everything, the engine's own pass removes the facts.
  {
    Runtime runtime(engine_.get(), RuntimeOptions());
    ASSERT_OK(runtime.Subscribe("new", {"A"}, [](const Fact&) { return Outcome::kHandled; }));
    ASSERT_OK(runtime.Drain());
  }
  for (int i = 0; i < 500 && VisibleFacts() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(VisibleFacts(), 0u);
}

// Without consumers nothing is known passed: nothing is removed.
TEST_F(RetentionTest, NoConsumersNoRemovalWithoutABound) {
  CommitFacts(100);
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  EXPECT_EQ(report.consumer_count, 0u);
  EXPECT_EQ(report.fact_count, 0u);
  EXPECT_EQ(VisibleFacts(), 100u);
}

// Under an age bound old facts go even though a consumer has not passed them; the consumer's
// loss is recorded (counting only the types it takes) and traced by its runtime.
TEST_F(RetentionTest, AgeBoundRemovesOldFactsAndRecordsTheLoss) {
  std::atomic<int64_t> now_ms{1'000'000};
  hooks_.clock_ms = [&now_ms] { return now_ms.load(); };
  options_.retention_interval_ms = 10;
  options_.retention_max_age_ms = 60'000;
  Reopen();
  std::mutex traces_mutex;
  std::vector<TraceEvent> drops;
  RuntimeOptions runtime_options;
  runtime_options.workers = 0;  // the consumer never delivers: it is stuck at 0
  runtime_options.trace = [&](const TraceEvent& event) {
    std::lock_guard lock(traces_mutex);
    if (event.name == "retention-dropped") drops.push_back(event);
  };
  Runtime runtime(engine_.get(), runtime_options);
  ASSERT_OK(runtime.Subscribe("stuck", {"A"}, [](const Fact&) { return Outcome::kRetry; }));
  ASSERT_OK(runtime.Start());
  CommitFacts(300, "A");
  CommitFacts(100, "B");
  now_ms += 30'000;
  const uint64_t young = CommitFacts(50, "A");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(VisibleFacts(), 450u);  // nothing is old enough yet
  now_ms += 40'000;                 // the first 400 are 70 s old, the last 50 only 40 s
  for (int i = 0; i < 500 && VisibleFacts() > 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(VisibleFacts(), 50u);
  std::vector<RetentionLoss> losses;
  ASSERT_OK(ListRetentionLosses(*engine_, &losses));
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].consumer, "stuck");
  EXPECT_EQ(losses[0].fact_count, 300u);  // the 100 B facts were not its own
  EXPECT_EQ(losses[0].last_ms, 1'070'000u);
  EXPECT_LT(losses[0].last_to_id, young);
  ASSERT_OK(runtime.Stop());
  std::lock_guard lock(traces_mutex);
  ASSERT_FALSE(drops.empty());
  uint64_t traced = 0;
  for (const TraceEvent& event : drops) {
    EXPECT_EQ(event.consumer, "stuck");
    EXPECT_NE(event.reason.find("had not passed"), std::string::npos) << event.reason;
    traced += std::stoull(event.reason.substr(event.reason.find("removed ") + 8));
  }
  EXPECT_EQ(traced, 300u);
}

// Under a byte bound the database directory stays near the bound with a stuck consumer; the
// oldest facts go first.
TEST_F(RetentionTest, ByteBoundKeepsTheDirectoryNearTheBound) {
  options_.retention_interval_ms = 20;
  options_.retention_max_bytes = 24u << 20;
  options_.memtable_bytes = 4u << 20;
  options_.wal_prefill_bytes = 0;
  Reopen();
  SetAllCursors("stuck", 0);
  uint64_t last = 0;
  for (int round = 0; round < 12; ++round) {
    last = CommitFacts(4000, "A", 1000);  // ~4 MiB a round, 48 MiB in all
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The engine's passes bring it back under the bound soon after the last commit (the wait is
  // bounded only to fail instead of hanging).
  uint64_t directory = UINT64_MAX;
  for (int i = 0; i < 1500; ++i) {
    directory = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_.db(), ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code entry_ec;  // a file compacted away meanwhile counts 0
      if (!it->is_regular_file(entry_ec)) continue;
      const uint64_t size = it->file_size(entry_ec);
      if (!entry_ec) directory += size;
    }
    if (directory < options_.retention_max_bytes * 13 / 10) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LT(directory, options_.retention_max_bytes * 13 / 10);
  uint64_t newest = 0;
  for (uint32_t p = 0; p < kPartitions; ++p) {
    std::vector<Fact> facts;
    ASSERT_OK(engine_->ReadFacts(p, 0, 1u << 20, &facts));
    if (!facts.empty()) newest = std::max(newest, facts.back().id);
  }
  EXPECT_EQ(newest, last) << "the newest facts stay";
  std::vector<RetentionLoss> losses;
  ASSERT_OK(ListRetentionLosses(*engine_, &losses));
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_GT(losses[0].fact_count, 10000u);
}

}  // namespace
}  // namespace wharf
