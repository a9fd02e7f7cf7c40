// The engine's own metrics (engine/metrics/engine_metrics.h) read through ReadMetrics: the
// committer's counters and histograms equal what the test committed, its latencies lie within a
// stopwatch around the calls, and retention's and RocksDB's figures follow what the test did.
#include <rocksdb/db.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/core/engine_core.h"
#include "engine/open/open_engine.h"
#include "engine/retention/retention.h"
#include "engine/store/tables/cursors.h"
#include "io/fault/fault_fs.h"
#include "io/wal/wal_fs.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

using internal::EngineCore;
using internal::EngineInternal;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

// The observations of `histogram` at or below `bound` (its cumulative count at the lowest bucket
// bound >= `bound`, or every observation past the last).
uint64_t CountAtOrBelow(const Histogram& histogram, double bound) {
  for (size_t i = 0; i < histogram.upper_bounds.size(); ++i) {
    if (histogram.upper_bounds[i] >= bound) return histogram.cumulative_counts[i];
  }
  return histogram.count;
}

// The invariants of any cumulative histogram.
void ExpectWellFormed(const Histogram& histogram) {
  ASSERT_EQ(histogram.upper_bounds.size(), histogram.cumulative_counts.size());
  for (size_t i = 1; i < histogram.upper_bounds.size(); ++i) {
    EXPECT_LT(histogram.upper_bounds[i - 1], histogram.upper_bounds[i]);
    EXPECT_LE(histogram.cumulative_counts[i - 1], histogram.cumulative_counts[i]);
  }
  if (!histogram.cumulative_counts.empty()) {
    EXPECT_LE(histogram.cumulative_counts.back(), histogram.count);
  }
}

class EngineMetricsTest : public ::testing::Test {
 protected:
  void Open(EngineOptions options = {}, std::function<int64_t()> clock_ms = {}) {
    options.partitions = 4;
    options.retention_interval_ms = 0;  // passes only when a test asks
    internal::EngineHooks hooks(internal::StoreHooks{fs_, fs_.get()});
    hooks.clock_ms = std::move(clock_ms);
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }
  EngineCore* core() { return EngineInternal::Core(*engine_).get(); }
  MetricsSnapshot Read() {
    MetricsSnapshot snapshot;
    EXPECT_OK(ReadMetrics(*engine_, &snapshot));
    return snapshot;
  }
  // A consumer's cursors at `fact_id` in every partition.
  void SetAllCursors(const std::string& consumer, uint64_t fact_id) {
    for (uint32_t p = 0; p < engine_->partitions(); ++p) {
      internal::TxnRep rep;
      rep.writes.push_back(internal::WriteOp{internal::kCursors, false,
                                             tables::cursors::Key(consumer, p),
                                             tables::cursors::EncodeValue(fact_id, 0)});
      ASSERT_OK(core()->Commit(&rep));
    }
  }
  // Commits `facts` facts of `payload_bytes` in one transaction.
  Status CommitFacts(int facts, size_t payload_bytes = 100) {
    Txn txn = engine_->Begin();
    for (int i = 0; i < facts; ++i) {
      Status s = txn.Emit("A", "key-" + std::to_string(i), std::string(payload_bytes, 'p'));
      if (!s.ok()) return s;
    }
    return txn.Commit();
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
};

// Producers on several threads: the counters equal what they committed, every commit's latency is
// in the histogram and within the stopwatch around its Commit(), and the facts of the sync rounds
// add up to the facts committed.
TEST_F(EngineMetricsTest, CommitCountersAndLatenciesMatchWhatWasCommitted) {
  Open();
  const MetricsSnapshot before = Read();
  constexpr int kThreads = 4, kCommits = 40, kFactsPerCommit = 3;
  constexpr size_t kPayloadBytes = 100;
  std::vector<std::vector<double>> stopwatch_s(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        const auto start = Clock::now();
        EXPECT_OK(CommitFacts(kFactsPerCommit, kPayloadBytes));
        stopwatch_s[t].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const MetricsSnapshot after = Read();
  const CommitMetrics& a = after.commits;
  const CommitMetrics& b = before.commits;
  constexpr uint64_t kTxns = kThreads * kCommits;
  constexpr uint64_t kFacts = kTxns * kFactsPerCommit;
  EXPECT_EQ(a.transactions_total - b.transactions_total, kTxns);
  EXPECT_EQ(a.facts_total - b.facts_total, kFacts);
  // Sealed records hold the payloads and more (type, key, header, checksum).
  EXPECT_GT(a.bytes_total - b.bytes_total, kFacts * kPayloadBytes);
  EXPECT_EQ(a.refused_total, 0u);
  EXPECT_EQ(a.failed_total, 0u);
  EXPECT_EQ(a.busy_total, 0u);
  EXPECT_GE(a.sync_rounds_total - b.sync_rounds_total, 1u);
  EXPECT_LE(a.sync_rounds_total - b.sync_rounds_total, kTxns);
  EXPECT_EQ(a.durable_lsn, kFacts);
  EXPECT_EQ(a.last_lsn, kFacts);
  EXPECT_EQ(a.queue_depth, 0u);
  EXPECT_EQ(a.producers_waiting, 0u);

  // Commit latency: one observation per transaction, each within its stopwatch.
  ExpectWellFormed(a.commit_seconds);
  EXPECT_EQ(a.commit_seconds.count - b.commit_seconds.count, kTxns);
  double stopwatch_total_s = 0;
  std::vector<double> all_s;
  for (const auto& times : stopwatch_s) {
    for (double s : times) {
      stopwatch_total_s += s;
      all_s.push_back(s);
    }
  }
  const double latency_sum_s = a.commit_seconds.sum - b.commit_seconds.sum;
  EXPECT_GT(latency_sum_s, 0);
  EXPECT_LE(latency_sum_s, stopwatch_total_s);
  // Every commit that took at most a bucket's bound by the stopwatch is in that bucket or a
  // lower one: the histogram may hold more observations under a bound, never fewer.
  for (size_t i = 0; i < a.commit_seconds.upper_bounds.size(); ++i) {
    const double bound = a.commit_seconds.upper_bounds[i];
    const uint64_t by_stopwatch =
        std::count_if(all_s.begin(), all_s.end(), [&](double s) { return s <= bound; });
    EXPECT_GE(a.commit_seconds.cumulative_counts[i] - CountAtOrBelow(b.commit_seconds, bound),
              by_stopwatch)
        << "le=" << bound;
  }

  // Sync rounds: one observation each; their facts add up to the facts committed (durability=sync
  // acknowledges every fact through a round).
  ExpectWellFormed(a.sync_seconds);
  ExpectWellFormed(a.sync_facts);
  EXPECT_EQ(a.sync_seconds.count - b.sync_seconds.count, a.sync_rounds_total - b.sync_rounds_total);
  EXPECT_EQ(a.sync_facts.count - b.sync_facts.count, a.sync_rounds_total - b.sync_rounds_total);
  EXPECT_EQ(a.sync_facts.sum - b.sync_facts.sum, static_cast<double>(kFacts));
  EXPECT_GT(a.sync_seconds.sum - b.sync_seconds.sum, 0);
  EXPECT_LE(a.sync_seconds.sum - b.sync_seconds.sum, stopwatch_total_s);
  // The committer's stats() (benches) read the same counters.
  const internal::CommitterStats stats = core()->committer()->stats();
  EXPECT_EQ(stats.commits, a.transactions_total);
  EXPECT_EQ(stats.facts, a.facts_total);
  EXPECT_EQ(stats.syncs, a.sync_rounds_total);
}

// A transaction whose precondition fails is refused (not committed, not failed); one answered
// with an I/O error is failed.
TEST_F(EngineMetricsTest, RefusedAndFailedCommitsAreCountedApart) {
  Open();
  const MetricsSnapshot before = Read();
  internal::TxnRep refused;
  refused.checks.push_back(internal::CheckOp{internal::kCursors, tables::cursors::Key("c", 0),
                                             std::string("not there"), "cursor of c/0"});
  EXPECT_TRUE(core()->Commit(&refused).IsConflict());
  MetricsSnapshot after = Read();
  EXPECT_EQ(after.commits.refused_total - before.commits.refused_total, 1u);
  EXPECT_EQ(after.commits.transactions_total, before.commits.transactions_total);
  EXPECT_EQ(after.commits.failed_total, 0u);

  // A full disk: the WAL write fails, and the commit's outcome is unknown.
  fs_->SetNoSpace(true);
  uint64_t io_errors = 0;
  for (int i = 0; i < 3; ++i) {
    Status s = CommitFacts(1);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    if (s.IsIOError()) ++io_errors;
  }
  fs_->SetNoSpace(false);
  after = Read();
  EXPECT_EQ(after.commits.failed_total, io_errors);
  EXPECT_EQ(after.commits.refused_total - before.commits.refused_total, 1u);
  EXPECT_EQ(after.commits.transactions_total, before.commits.transactions_total);
}

// A read conflict is a refusal, counted apart too; the window the committer keeps for it shows.
TEST_F(EngineMetricsTest, ReadConflictsAndTheConflictWindowAreCounted) {
  Open();
  const MetricsSnapshot before = Read();
  EXPECT_EQ(before.commits.conflict_window_bytes, 0u);  // nothing read: nothing kept
  Txn reader = engine_->Begin();
  std::string value;
  EXPECT_TRUE(reader.Get("t", "k", &value).IsNotFound());
  Txn writer = engine_->Begin();
  ASSERT_OK(writer.Put("t", "k", "1"));
  ASSERT_OK(writer.Commit());  // tracked: a transaction that read is open
  ASSERT_OK(reader.Put("t", "k", "2"));
  Status s = reader.Commit();
  EXPECT_TRUE(s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict) << s.ToString();
  const MetricsSnapshot after = Read();
  EXPECT_EQ(after.commits.read_conflicts_total - before.commits.read_conflicts_total, 1u);
  EXPECT_EQ(after.commits.refused_total - before.commits.refused_total, 1u);
  EXPECT_GT(after.commits.conflict_window_bytes, 0u);
}

// With when_full=error a Submit that finds the queue full is refused with Busy and counted. Made
// deterministic by committing from a commit callback under durability=buffered: the callback runs
// on the committer thread, so the transaction it enqueues first stays queued (holding the only
// slot) while it submits the second.
TEST_F(EngineMetricsTest, BusyRefusalsAreCounted) {
  EngineOptions options;
  options.queue_capacity = 1;
  options.when_full = WhenFull::kError;
  options.durability = Durability::kBuffered;
  Open(options);
  std::atomic<int> answered{0};
  Status second = Status::OK();
  std::atomic<bool> tried{false};
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("A", "k", "p"));
  ASSERT_OK(txn.CommitAsync([&](const Status& status, const CommitResult&) {
    EXPECT_OK(status);
    Txn first = engine_->Begin();
    EXPECT_OK(first.Emit("A", "k", "p"));
    EXPECT_OK(first.CommitAsync([&](const Status& s, const CommitResult&) {
      EXPECT_OK(s);
      ++answered;
    }));
    Txn then = engine_->Begin();
    EXPECT_OK(then.Emit("A", "k", "p"));
    second = then.CommitAsync([](const Status&, const CommitResult&) {});
    tried = true;
    ++answered;
  }));
  for (int i = 0; i < 5000 && answered.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(answered.load(), 2);
  ASSERT_TRUE(tried.load());
  EXPECT_TRUE(second.IsBusy()) << second.ToString();
  const MetricsSnapshot after = Read();
  EXPECT_EQ(after.commits.busy_total, 1u);
  EXPECT_EQ(after.commits.transactions_total, 3u);  // DeclareTypes, and the two async commits
}

// The WAL spare's fields are the WAL file system's: a WAL created from a spare is counted, and the
// next spare is reported ready once built.
TEST_F(EngineMetricsTest, WalSpareStateIsReported) {
  EngineOptions options;
  options.memtable_bytes = 16u << 20;
  options.wal_prefill_bytes = 1u << 20;  // the first WAL asks for a spare after 128 KiB
  Open(options);
  const io::WalFileSystem* wal_fs = core()->store()->wal_fs();
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Read().commits.wal_spares_used_total == 0 && Clock::now() < deadline) {
    ASSERT_OK(CommitFacts(1, 1000));
  }
  ASSERT_GE(wal_fs->spare_wals(), 1u) << "no WAL was created from a spare";
  EXPECT_EQ(Read().commits.wal_spares_used_total, wal_fs->spare_wals());
  // Taking the spare asked for the next one.
  while (!Read().commits.wal_spare_ready && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(Read().commits.wal_spare_ready);
}

// Retention's counters follow its passes: passes (not dry runs), failed passes, facts and bytes
// removed as the passes reported them; a consumer's loss under a bound is listed from its record.
TEST_F(EngineMetricsTest, RetentionCountsPassesRemovalsAndLosses) {
  std::atomic<int64_t> now_ms{1'000'000};
  EngineOptions options;
  options.retention_max_age_ms = 60'000;
  Open(options, [&now_ms] { return now_ms.load(); });
  for (int i = 0; i < 4; ++i) ASSERT_OK(CommitFacts(10));  // facts 1..40
  SetAllCursors("a", 20);
  TrimReport report;
  ASSERT_OK(TrimPassed(*engine_, &report));
  ASSERT_EQ(report.fact_count, 20u);
  RetentionMetrics r = Read().retention;
  EXPECT_EQ(r.passes_total, 1u);
  EXPECT_EQ(r.failed_passes_total, 0u);
  EXPECT_EQ(r.facts_removed_total, 20u);
  EXPECT_EQ(r.bytes_removed_total, report.bytes);
  EXPECT_GT(r.bytes_removed_total, 20u * 100);
  EXPECT_TRUE(r.dropped.empty());
  const uint64_t first_bytes = report.bytes;

  // A dry run is no pass.
  TrimOptions dry;
  dry.dry_run = true;
  ASSERT_OK(TrimPassed(*engine_, &report, dry));
  EXPECT_EQ(Read().retention.passes_total, 1u);

  // Under the age bound (a pass of the engine's own kind), the old facts go although "a" had not
  // passed facts 21..40: its loss is recorded.
  now_ms += 70'000;
  ASSERT_OK(CommitFacts(10));  // young: kept
  internal::RetentionPassOptions bounded;
  bounded.bounded = true;
  ASSERT_OK(RetentionOf(*core())->Pass(bounded, &report));
  ASSERT_EQ(report.fact_count, 20u);
  r = Read().retention;
  EXPECT_EQ(r.passes_total, 2u);
  EXPECT_EQ(r.facts_removed_total, 40u);
  EXPECT_EQ(r.bytes_removed_total, first_bytes + report.bytes);
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].consumer, "a");
  EXPECT_EQ(r.dropped[0].facts_total, 20u);

  // A pass whose floors cannot be committed (a full disk) fails and removes nothing.
  SetAllCursors("a", 50);
  fs_->SetNoSpace(true);
  EXPECT_FALSE(TrimPassed(*engine_, &report).ok());
  fs_->SetNoSpace(false);
  r = Read().retention;
  EXPECT_EQ(r.passes_total, 2u);
  EXPECT_EQ(r.failed_passes_total, 1u);
  EXPECT_EQ(r.facts_removed_total, 40u);
}

// RocksDB's figures after flushes, a compaction and reads of flushed facts.
TEST_F(EngineMetricsTest, StoreMetricsFollowFlushesCompactionsAndReads) {
  Open();
  const StoreMetrics before = Read().store;
  rocksdb::DB* db = core()->store()->db();
  rocksdb::ColumnFamilyHandle* outbox = core()->store()->cf(internal::kOutbox);
  // Two flushed tables of overlapping key ranges (every partition in each).
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 20; ++i) ASSERT_OK(CommitFacts(10, 500));
    EXPECT_GT(Read().store.memtable_bytes, 0u);
    ASSERT_TRUE(db->Flush(rocksdb::FlushOptions(), outbox).ok());
  }
  StoreMetrics after = Read().store;
  EXPECT_GT(after.live_sst_bytes, 400u * 500);
  EXPECT_GT(after.flush_bytes_total - before.flush_bytes_total, 400u * 500);
  EXPECT_GE(after.directory_bytes, after.live_sst_bytes);
  EXPECT_FALSE(after.writes_stopped);

  rocksdb::CompactRangeOptions compact;
  ASSERT_TRUE(db->CompactRange(compact, outbox, nullptr, nullptr).ok());
  after = Read().store;
  EXPECT_GT(after.compaction_bytes_total - before.compaction_bytes_total, 400u * 500);

  // The first read of the table's blocks misses the block cache, the second hits it.
  auto read_all = [&] {
    for (uint32_t p = 0; p < engine_->partitions(); ++p) {
      std::vector<Fact> facts;
      ASSERT_OK(engine_->ReadFacts(p, 0, SIZE_MAX, &facts));
    }
  };
  const StoreMetrics cold = Read().store;
  read_all();
  const StoreMetrics warm = Read().store;
  EXPECT_GT(warm.block_cache_misses_total, cold.block_cache_misses_total);
  read_all();
  const StoreMetrics hot = Read().store;
  EXPECT_GT(hot.block_cache_hits_total, warm.block_cache_hits_total);
  EXPECT_EQ(hot.block_cache_misses_total, warm.block_cache_misses_total);
}

}  // namespace
}  // namespace wharf
