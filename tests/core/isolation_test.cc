// Serializable transactions (wharf/engine.h, "Isolation"): no lost update, no write skew, no
// phantom, one snapshot per transaction, a bounded conflict window, projections racing the
// application on one row or one range, and clear errors for bad scans and Transact options.
//
// With WHARF_TEST_NO_READ_VALIDATION=1 (the committer validates nothing; core/isolation_util.h)
// every test that expects a refusal fails. The others test what validation must not do or does
// not cover: WritesOutsideScannedRangeAreNoConflict fails when a scan is recorded as its whole
// table, SnapshotReadsNeverMixCommits when Txn::Get and scans read the latest state instead of
// the snapshot, ScanOverlaysOwnWritesAndPages when a scan ignores the transaction's own writes,
// BadScansAndTransactOptionsAreRefusedClearly when the argument checks are skipped.
#include <latch>
#include <mutex>
#include <set>
#include <thread>

#include "core/isolation_util.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::ApplyReadValidationSwitch;
using testing::CounterKey;
using testing::kSanitized;
using testing::TempDir;

bool IsReadConflict(const Status& s) {
  return s.IsConflict() && s.subcode() == Status::SubCode::kReadConflict;
}

// Enough attempts that contention alone never exhausts them here: the tests count on every
// Transact succeeding.
TransactOptions Patient() {
  TransactOptions options;
  options.attempts_max = 1000;
  options.backoff_min_ms = 1;
  options.backoff_max_ms = 10;
  return options;
}

class IsolationTest : public ::testing::Test {
 protected:
  void Open(EngineOptions options = {}) {
    options.partitions = 4;
    options.retention_interval_ms = 0;  // every fact stays readable for the checks
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({std::string(testing::kIncType), "Ev"}));
    ApplyReadValidationSwitch(*engine_);
  }
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open()); }

  void Put(std::string_view table, std::string_view key, std::string_view value) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put(table, key, value));
    ASSERT_OK(txn.Commit());
  }
  void Delete(std::string_view table, std::string_view key) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Delete(table, key));
    ASSERT_OK(txn.Commit());
  }

  // Checks every counter against its Inc facts (isolation_util.h): counters[key] = its expected
  // value.
  void ExpectCounters(const std::map<std::string, uint64_t>& counters) {
    std::vector<Fact> facts;
    ASSERT_OK(testing::ReadAllFacts(*engine_, testing::kIncType, &facts));
    testing::IncsOf incs = testing::GroupIncs(facts);
    std::vector<std::string> problems;
    for (const auto& [key, expected] : counters) {
      uint64_t count = 0;
      ASSERT_OK(testing::ReadCounter(*engine_, key, &count));
      if (count != expected) {
        problems.push_back(key + " is " + std::to_string(count) + ", expected " +
                           std::to_string(expected));
      }
      for (std::string& problem : testing::CounterProblems(key, count, incs[key])) {
        problems.push_back(std::move(problem));
      }
    }
    std::string text;
    for (size_t i = 0; i < problems.size() && i < 8; ++i) text += "\n  " + problems[i];
    EXPECT_TRUE(problems.empty()) << problems.size() << " problems:" << text;
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

constexpr int kThreads = 4;
constexpr int kIncrementsPerThread = kSanitized ? 50 : 200;

// Lost update: kThreads threads increment `counters` counters through Transact; every counter
// ends exact and every value is emitted once.
void TransactIncrements(Engine* engine, int counters, std::map<std::string, uint64_t>* done) {
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIncrementsPerThread; ++i) {
        const std::string key = CounterKey((t + i) % counters);
        uint64_t value = 0;
        Status s = engine->Transact([&](Txn& txn) { return testing::Increment(txn, key, &value); },
                                    nullptr, Patient());
        EXPECT_OK(s);
        if (!s.ok()) return;
        std::lock_guard lock(mutex);
        ++(*done)[key];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST_F(IsolationTest, TransactLosesNoUpdateOnOneCounter) {
  std::map<std::string, uint64_t> done;
  TransactIncrements(engine_.get(), 1, &done);
  EXPECT_EQ(done[CounterKey(0)], uint64_t{kThreads * kIncrementsPerThread});
  ExpectCounters(done);
}

TEST_F(IsolationTest, TransactLosesNoUpdateOnEightCounters) {
  std::map<std::string, uint64_t> done;
  TransactIncrements(engine_.get(), 8, &done);
  EXPECT_EQ(done.size(), 8u);
  ExpectCounters(done);
}

// Without Transact, a plain read-modify-write that raced another commit is refused (nothing of it
// written) and the counter equals the number of commits that succeeded.
TEST_F(IsolationTest, PlainCommitsConflictAndLoseNothing) {
  std::atomic<uint64_t> oks{0}, conflicts{0};
  const std::string key = CounterKey(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrementsPerThread; ++i) {
        Txn txn = engine_->Begin();
        uint64_t value = 0;
        ASSERT_OK(testing::Increment(txn, key, &value));
        Status s = txn.Commit();
        if (s.ok()) {
          ++oks;
        } else if (IsReadConflict(s)) {
          ++conflicts;
          // The message names what was read and then written by another commit.
          EXPECT_NE(s.message().find(key), std::string::npos) << s.ToString();
        } else {
          ADD_FAILURE() << s.ToString();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::printf("%llu commits, %llu read conflicts\n", static_cast<unsigned long long>(oks.load()),
              static_cast<unsigned long long>(conflicts.load()));
  EXPECT_GT(conflicts.load(), 0u) << "4 threads on one counter never raced";
  EXPECT_EQ(oks + conflicts, uint64_t{kThreads * kIncrementsPerThread});
  ExpectCounters({{key, oks.load()}});
}

// Write skew: x + y >= 1 must hold; each transaction reads both and, seeing 2, zeroes its own.
// Both read before either commits (the latch), then both commit at once: one is refused.
TEST_F(IsolationTest, WriteSkewRefusesOneOfTwo) {
  const int rounds = kSanitized ? 8 : 30;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string x = "x" + std::to_string(round), y = "y" + std::to_string(round);
    Txn setup = engine_->Begin();
    ASSERT_OK(setup.Put("duty", x, "1"));
    ASSERT_OK(setup.Put("duty", y, "1"));
    ASSERT_OK(setup.Commit());
    std::latch both_read(2);
    Status outcome[2];
    std::thread threads[2];
    for (int t = 0; t < 2; ++t) {
      threads[t] = std::thread([&, t] {
        Txn txn = engine_->Begin();
        std::string vx, vy;
        Status read = txn.Get("duty", x, &vx);
        if (read.ok()) read = txn.Get("duty", y, &vy);
        both_read.arrive_and_wait();
        if (!read.ok()) {
          outcome[t] = read;
          return;
        }
        if (std::stoi(vx) + std::stoi(vy) >= 2) {
          outcome[t] = txn.Put("duty", t == 0 ? x : y, "0");  // goes off duty: the other is on
        }
        if (outcome[t].ok()) outcome[t] = txn.Commit();
      });
    }
    for (std::thread& thread : threads) thread.join();
    const int oks = outcome[0].ok() + outcome[1].ok();
    EXPECT_EQ(oks, 1) << outcome[0].ToString() << " / " << outcome[1].ToString();
    for (const Status& s : outcome) {
      if (!s.ok()) {
        EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
      }
    }
    std::string vx, vy;
    ASSERT_OK(engine_->Get("duty", x, &vx));
    ASSERT_OK(engine_->Get("duty", y, &vy));
    EXPECT_GE(std::stoi(vx) + std::stoi(vy), 1) << "the constraint broke";
    if (HasFailure()) return;
  }
}

// The keys a scan visits.
std::vector<std::string> ScanKeys(Txn& txn, std::string_view table, const KeyRange& range,
                                  size_t limit, ScanResult* result = nullptr) {
  std::vector<std::string> keys;
  EXPECT_OK(txn.Scan(
      table, range, limit,
      [&](std::string_view key, std::string_view) {
        keys.emplace_back(key);
        return true;
      },
      result));
  return keys;
}

class PhantomTest : public IsolationTest {
 protected:
  // A fresh table per case: order/1, order/3, order/5 inside the prefix "order/", and "order."
  // and "order0" just outside it (one byte below and above '/').
  std::string Seed() {
    const std::string table = "orders" + std::to_string(tables_++);
    for (const char* key : {"order.", "order/1", "order/3", "order/5", "order0"}) {
      Put(table, key, "v");
    }
    return table;
  }
  // `txn` (which scanned) writes a summary and commits.
  static Status Finish(Txn& txn) {
    Status s = txn.Put("summary", "orders", "n");
    return s.ok() ? txn.Commit() : s;
  }
  // Begins a transaction that scans "order/" in `table` whole, runs `interfere` (other commits),
  // then finishes it.
  Status ScanRacing(const std::string& table, const std::function<void()>& interfere) {
    Txn txn = engine_->Begin();
    EXPECT_EQ(ScanKeys(txn, table, KeyRange::Prefix("order/"), 100),
              (std::vector<std::string>{"order/1", "order/3", "order/5"}));
    interfere();
    return Finish(txn);
  }
  int tables_ = 0;
};

TEST_F(PhantomTest, InsertInsideScannedRangeIsRefused) {
  const std::string table = Seed();
  Status s = ScanRacing(table, [&] { Put(table, "order/4", "new"); });
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  // Nothing of the refused transaction was written.
  std::string value;
  EXPECT_TRUE(engine_->Get("summary", "orders", &value).IsNotFound());
  // The very first key of the prefix counts too.
  const std::string other = Seed();
  s = ScanRacing(other, [&] { Put(other, "order/", "new"); });
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
}

TEST_F(PhantomTest, ChangeOrDeleteInsideScannedRangeIsRefused) {
  std::string table = Seed();
  Status s = ScanRacing(table, [&] { Put(table, "order/5", "changed"); });
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  table = Seed();
  s = ScanRacing(table, [&] { Delete(table, "order/3"); });
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
}

TEST_F(PhantomTest, WritesOutsideScannedRangeAreNoConflict) {
  const std::string table = Seed();
  EXPECT_OK(ScanRacing(table, [&] {
    Put(table, "order.", "changed");     // just below the prefix
    Put(table, "order0", "changed");     // just above it
    Put(table, "order0/4", "new");       // above it
    Put(table, "orde", "new");           // below it
    Put("other", "order/4", "new");      // the same key in another table
    Put(table + "x", "order/4", "new");  // a table whose name extends this one's
  }));
}

// A scan stopped by its limit (or its callback) recorded the range up to its last row: a key
// after that row is outside what it read, a key before it is inside.
TEST_F(PhantomTest, ScanStoppedEarlyCoversOnlyWhatItVisited) {
  auto scan_two = [&](const std::string& table, Txn* txn) {
    ScanResult result;
    EXPECT_EQ(ScanKeys(*txn, table, KeyRange::Prefix("order/"), 2, &result),
              (std::vector<std::string>{"order/1", "order/3"}));
    EXPECT_TRUE(result.more);
    EXPECT_EQ(result.rows, 2u);
    EXPECT_EQ(result.resume_from, std::string("order/3\0", 8));
  };
  {
    const std::string table = Seed();
    Txn txn = engine_->Begin();
    scan_two(table, &txn);
    Put(table, "order/4", "after the last row seen");
    Put(table, "order/6", "after the last row seen");
    EXPECT_OK(Finish(txn));
  }
  {
    const std::string table = Seed();
    Txn txn = engine_->Begin();
    scan_two(table, &txn);
    Put(table, "order/2", "before the last row seen");
    Status s = Finish(txn);
    EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  }
  {
    const std::string table = Seed();
    Txn txn = engine_->Begin();
    scan_two(table, &txn);
    Put(table, "order/3", "the last row seen");
    Status s = Finish(txn);
    EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  }
  {  // Stopped by the callback after one row.
    const std::string table = Seed();
    Txn txn = engine_->Begin();
    ScanResult result;
    ASSERT_OK(txn.Scan(
        table, KeyRange::Prefix("order/"), 100,
        [](std::string_view, std::string_view) { return false; }, &result));
    EXPECT_EQ(result.rows, 1u);
    EXPECT_TRUE(result.more);
    Put(table, "order/2", "after the row seen");
    EXPECT_OK(Finish(txn));
  }
  {
    const std::string table = Seed();
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Scan(table, KeyRange::Prefix("order/"), 100,
                       [](std::string_view, std::string_view) { return false; }));
    Put(table, "order/0", "before the row seen");
    Status s = Finish(txn);
    EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  }
}

// Scans see the transaction's own writes and page through a table in key order.
TEST_F(PhantomTest, ScanOverlaysOwnWritesAndPages) {
  const std::string table = Seed();
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Put(table, "order/2", "mine"));
  ASSERT_OK(txn.Delete(table, "order/3"));
  EXPECT_EQ(ScanKeys(txn, table, KeyRange::Prefix("order/"), 100),
            (std::vector<std::string>{"order/1", "order/2", "order/5"}));
  ASSERT_OK(txn.Commit());
  // 250 rows, 100 a page.
  Txn fill = engine_->Begin();
  for (int i = 0; i < 250; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "k%03d", i);
    ASSERT_OK(fill.Put("pages", key, "v"));
  }
  ASSERT_OK(fill.Commit());
  KeyRange range = KeyRange::All();
  std::vector<std::string> keys;
  std::vector<size_t> pages;
  for (;;) {
    ScanResult result;
    ASSERT_OK(engine_->Scan(
        "pages", range, 100,
        [&](std::string_view key, std::string_view) {
          keys.emplace_back(key);
          return true;
        },
        &result));
    pages.push_back(result.rows);
    if (!result.more) break;
    range.from = result.resume_from;
    ASSERT_LT(pages.size(), 10u);
  }
  EXPECT_EQ(pages, (std::vector<size_t>{100, 100, 50}));
  ASSERT_EQ(keys.size(), 250u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 250u);
}

// Two reads in one transaction never see two different commits: a writer keeps x == y, moving
// both in each commit; readers read x, let the writer run, read y (and scan both).
TEST_F(IsolationTest, SnapshotReadsNeverMixCommits) {
  Put("pair", "x", "0");
  Put("pair", "y", "0");
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 1; !stop.load(); ++i) {
      Txn txn = engine_->Begin();
      EXPECT_OK(txn.Put("pair", "x", std::to_string(i)));
      EXPECT_OK(txn.Put("pair", "y", std::to_string(i)));
      EXPECT_OK(txn.Commit());
      written = i;
    }
  });
  ASSERT_TRUE(testing::WaitFor([&] { return written.load() > 0; }));
  const int transactions = kSanitized ? 100 : 400;
  std::atomic<int> mixed{0};
  std::set<std::string> seen;
  std::mutex seen_mutex;
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      for (int i = 0; i < transactions; ++i) {
        Txn txn = engine_->Begin();
        std::string x, y;
        ASSERT_OK(txn.Get("pair", "x", &x));
        const int before = written.load();
        // Let the writer commit at least once between the two reads.
        ASSERT_TRUE(testing::WaitFor([&] { return written.load() > before; }, 5000));
        ASSERT_OK(txn.Get("pair", "y", &y));
        std::vector<std::string> scanned;
        ASSERT_OK(
            txn.Scan("pair", KeyRange::All(), 10, [&](std::string_view, std::string_view value) {
              scanned.emplace_back(value);
              return true;
            }));
        if (x != y || scanned != std::vector<std::string>{x, x}) ++mixed;
        ASSERT_OK(txn.Commit());  // read only: nothing to refuse
        std::lock_guard lock(seen_mutex);
        seen.insert(x);
      }
    });
  }
  for (std::thread& reader : readers) reader.join();
  stop = true;
  writer.join();
  EXPECT_EQ(mixed.load(), 0) << "transactions saw x and y from different commits";
  EXPECT_GT(seen.size(), 10u) << "the readers did not overlap the writer";
}

// The resident set size of this process, in bytes.
size_t ResidentBytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  unsigned long long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(file, "%llu %llu", &pages_total, &pages_resident);
  std::fclose(file);
  return n == 2 ? pages_resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// A reader open while writers commit more distinct keys than conflict_window_bytes holds is
// refused ("snapshot too old") even though nobody wrote what it read; what the committer keeps
// does not grow with the writes.
TEST(IsolationWindowTest, SnapshotTooOldIsRefusedAndMemoryStaysBounded) {
  TempDir dir;
  EngineOptions options;
  options.conflict_window_bytes = 1u << 20;
  // The state family's memtable is then 1 MiB (1/32 of the bound): RocksDB's share of the
  // resident memory stops growing early, so what the window keeps shows.
  options.retention_max_bytes = 32u << 20;
  options.memtable_bytes = 1u << 20;
  std::unique_ptr<Engine> engine;
  ASSERT_OK(Engine::Open(dir.db(), options, &engine));
  ApplyReadValidationSwitch(*engine);
  // A reader whose snapshot is recent enough commits.
  {
    Txn reader = engine->Begin();
    std::string value;
    EXPECT_TRUE(reader.Get("readers", "r", &value).IsNotFound());
    Txn writer = engine->Begin();
    ASSERT_OK(writer.Put("written", "w", "v"));
    ASSERT_OK(writer.Commit());
    ASSERT_OK(reader.Put("readers", "r", "1"));
    EXPECT_OK(reader.Commit());
  }
  Txn reader = engine->Begin();
  std::string value;
  ASSERT_OK(reader.Get("readers", "r", &value));
  // A kept key costs its ~55 bytes plus ~72. The first 120,000 keys fill the 1 MiB window many
  // times over and let RocksDB's memory settle (its growth levels off within them: a few MiB);
  // the next 120,000 add ~20 MiB to a window that keeps everything (measured with a 1 GiB
  // window), under 3 MiB to the bounded one.
  constexpr int kKeysPerCommit = 1000;
  // Under the sanitizers (no memory check, writes ~8x slower) 30,000 keys overflow the window.
  const int commits[2] = {kSanitized ? 20 : 120, kSanitized ? 10 : 120};
  const std::string filler(40, 'f');
  size_t resident_bytes[2] = {};
  for (int phase = 0; phase < 2; ++phase) {
    for (int c = 0; c < commits[phase]; ++c) {
      Txn writer = engine->Begin();
      for (int k = 0; k < kKeysPerCommit; ++k) {
        ASSERT_OK(writer.Put("written",
                             "p" + std::to_string(phase) + "-" + std::to_string(c) + "-" +
                                 std::to_string(k) + filler,
                             "v"));
      }
      ASSERT_OK(writer.Commit());
    }
    resident_bytes[phase] = ResidentBytes();
  }
  ASSERT_OK(reader.Put("readers", "r", "2"));
  Status s = reader.Commit();
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("too old"), std::string::npos) << s.ToString();
  std::printf("resident: %zu KiB after %d keys, %zu KiB after %d more\n", resident_bytes[0] >> 10,
              commits[0] * kKeysPerCommit, resident_bytes[1] >> 10, commits[1] * kKeysPerCommit);
  if (!kSanitized) {  // the sanitizers' own bookkeeping grows with the writes
    EXPECT_LT(resident_bytes[1], resident_bytes[0] + (8u << 20))
        << "memory grew with the writes while a reader was open";
  }
}

// A projection reads a row and writes it plus one per fact while the application increments the
// same row through Transact: the projection's batches that raced an increment are refused (trace
// event read-conflict) and delivered again, so the row ends exactly at facts + increments. The
// first batch is made to race for sure: its handler waits, between its read and its write, for an
// increment to commit; the rest race as they come.
TEST_F(IsolationTest, ProjectionAndApplicationShareOneRowExactly) {
  const int facts = kSanitized ? 100 : 400, increments = kSanitized ? 100 : 400;
  std::atomic<int> read_conflicts{0}, other_warnings{0};
  RuntimeOptions runtime_options;
  runtime_options.workers = 2;
  runtime_options.backoff_initial_ms = 1;
  runtime_options.backoff_max_ms = 5;
  runtime_options.trace = [&](const TraceEvent& event) {
    if (event.name == "read-conflict") {
      ++read_conflicts;
    } else if (event.level != TraceEvent::Level::kInfo) {
      ++other_warnings;
      std::fprintf(stderr, "trace: %s %s\n", event.name.c_str(), event.reason.c_str());
    }
  };
  // 0: no handler ran yet; 1: the first one read the row and waits; 2: an increment committed.
  std::atomic<int> stage{0};
  Runtime runtime(engine_.get(), runtime_options);
  ASSERT_OK(runtime.Project("proj", {"Ev"}, [&](const Fact&, Effects& effects) {
    std::string text;
    Status s = effects.Get("rows", "r", &text);
    uint64_t row = 0;
    if (s.ok()) {
      row = std::stoull(text);
    } else if (!s.IsNotFound()) {
      return Outcome::kRetry;
    }
    int first = 0;
    if (stage.compare_exchange_strong(first, 1)) {
      EXPECT_TRUE(testing::WaitFor([&] { return stage.load() == 2; }, 30000));
    }
    return effects.Put("rows", "r", std::to_string(row + 1)).ok() ? Outcome::kHandled
                                                                  : Outcome::kRetry;
  }));
  ASSERT_OK(runtime.Start());
  auto increment = [&] {
    return engine_->Transact(
        [](Txn& txn) {
          std::string text;
          Status s = txn.Get("rows", "r", &text);
          if (!s.ok() && !s.IsNotFound()) return s;
          return txn.Put("rows", "r", std::to_string((s.ok() ? std::stoull(text) : 0) + 1));
        },
        nullptr, Patient());
  };
  std::thread emitter([&] {
    for (int i = 0; i < facts; ++i) {
      Txn txn = engine_->Begin();
      EXPECT_OK(txn.Emit("Ev", "k" + std::to_string(i % 8), std::to_string(i)));
      EXPECT_OK(txn.Commit());
    }
  });
  EXPECT_TRUE(testing::WaitFor([&] { return stage.load() == 1; }));
  EXPECT_OK(increment());  // between the first handler's read and its write
  stage = 2;
  std::thread incrementer([&] {
    for (int i = 1; i < increments; ++i) EXPECT_OK(increment());
  });
  emitter.join();
  incrementer.join();
  ASSERT_OK(runtime.Drain());
  ASSERT_OK(runtime.Stop());
  std::string row;
  ASSERT_OK(engine_->Get("rows", "r", &row));
  EXPECT_EQ(std::stoull(row), uint64_t(facts + increments))
      << "facts projected + application increments";
  EXPECT_GT(read_conflicts.load(), 0) << "no projection batch was refused";
  EXPECT_EQ(other_warnings.load(), 0);
  std::printf("%d read-conflict events\n", read_conflicts.load());
}

// A projection's Effects::Scan is validated as a transaction's: an order inserted into the range
// it scanned, between its scan and its commit, refuses the batch, which runs again and counts it.
TEST_F(IsolationTest, ProjectionScanSeesNoPhantom) {
  Put("orders", "order/1", "v");
  Put("orders", "order/2", "v");
  std::atomic<int> read_conflicts{0};
  RuntimeOptions runtime_options;
  runtime_options.backoff_initial_ms = 1;
  runtime_options.backoff_max_ms = 5;
  runtime_options.trace = [&](const TraceEvent& event) {
    if (event.name == "read-conflict") ++read_conflicts;
  };
  std::atomic<int> stage{0};  // as in ProjectionAndApplicationShareOneRowExactly
  Runtime runtime(engine_.get(), runtime_options);
  ASSERT_OK(runtime.Project("count", {"Ev"}, [&](const Fact&, Effects& effects) {
    size_t orders = 0;
    Status s = effects.Scan("orders", KeyRange::Prefix("order/"), 100,
                            [&](std::string_view, std::string_view) {
                              ++orders;
                              return true;
                            });
    if (!s.ok()) return Outcome::kRetry;
    int first = 0;
    if (stage.compare_exchange_strong(first, 1)) {
      EXPECT_TRUE(testing::WaitFor([&] { return stage.load() == 2; }, 30000));
    }
    return effects.Put("summary", "orders", std::to_string(orders)).ok() ? Outcome::kHandled
                                                                         : Outcome::kRetry;
  }));
  ASSERT_OK(runtime.Start());
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Emit("Ev", "k", "count the orders"));
  ASSERT_OK(txn.Commit());
  ASSERT_TRUE(testing::WaitFor([&] { return stage.load() == 1; }));
  Put("orders", "order/3", "v");  // between the handler's scan and its commit
  stage = 2;
  ASSERT_OK(runtime.Drain());
  ASSERT_OK(runtime.Stop());
  std::string orders;
  ASSERT_OK(engine_->Get("summary", "orders", &orders));
  EXPECT_EQ(orders, "3");
  EXPECT_GT(read_conflicts.load(), 0);
}

// Bad input: each a clear InvalidArgument naming the problem, through Txn::Scan and Engine::Scan.
TEST_F(IsolationTest, BadScansAndTransactOptionsAreRefusedClearly) {
  Put("t", "a", "1");
  const RowFn any_row = [](std::string_view, std::string_view) { return true; };
  struct Case {
    const char* what;
    std::string table;
    KeyRange range;
    size_t limit;
    RowFn row;
    const char* named;  // a word the message must hold
  };
  const std::vector<Case> cases = {
      {"reversed range", "t", KeyRange{"b", "a"}, 10, any_row, "range"},
      {"empty range", "t", KeyRange{"a", "a"}, 10, any_row, "range"},
      {"limit 0", "t", KeyRange::All(), 0, any_row, "limit"},
      {"limit too high", "t", KeyRange::All(), kScanLimitMax + 1, any_row, "limit"},
      {"NUL in table", std::string("t\0u", 3), KeyRange::All(), 10, any_row, "table"},
      {"empty table", "", KeyRange::All(), 10, any_row, "table"},
      {"null row function", "t", KeyRange::All(), 10, RowFn{}, "row"},
      // A resumed range may start one byte past the longest key, no further.
      {"bound too long", "t", KeyRange{std::string(kKeyBytesMax + 2, 'k'), ""}, 10, any_row,
       "bound"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Txn txn = engine_->Begin();
    ScanResult result;
    Status s = txn.Scan(c.table, c.range, c.limit, c.row, &result);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(c.named), std::string::npos) << s.ToString();
    EXPECT_EQ(result.rows, 0u);
    s = engine_->Scan(c.table, c.range, c.limit, c.row, &result);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(c.named), std::string::npos) << s.ToString();
  }
  // The largest limit is accepted.
  EXPECT_OK(engine_->Scan("t", KeyRange::All(), kScanLimitMax, any_row));
  // A committed transaction reads no more.
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Put("t", "b", "2"));
  ASSERT_OK(txn.Commit());
  std::string value;
  Status s = txn.Get("t", "a", &value);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("committed"), std::string::npos) << s.ToString();
  s = txn.Scan("t", KeyRange::All(), 10, any_row);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("committed"), std::string::npos) << s.ToString();
  // Transact needs at least one attempt, and never runs `fn` without one.
  TransactOptions none;
  none.attempts_max = 0;
  bool ran = false;
  s = engine_->Transact(
      [&](Txn&) {
        ran = true;
        return Status::OK();
      },
      nullptr, none);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("attempts_max"), std::string::npos) << s.ToString();
  EXPECT_FALSE(ran);
  TransactOptions inverted;
  inverted.backoff_min_ms = 50;
  inverted.backoff_max_ms = 10;
  s = engine_->Transact(
      [&](Txn&) {
        ran = true;
        return Status::OK();
      },
      nullptr, inverted);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("backoff_min_ms"), std::string::npos) << s.ToString();
  EXPECT_FALSE(ran);
  s = engine_->Transact(nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("function"), std::string::npos) << s.ToString();
  // An error `fn` returns ends Transact at once, as is.
  int runs = 0;
  s = engine_->Transact([&](Txn&) {
    ++runs;
    return Status::NotFound("mine");
  });
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_EQ(runs, 1);
}

// Transact gives up after attempts_max refusals and returns the last one.
TEST_F(IsolationTest, TransactReturnsTheLastConflictAfterAttemptsMax) {
  Put("t", "k", "0");
  TransactOptions three;
  three.attempts_max = 3;
  three.backoff_min_ms = 1;
  three.backoff_max_ms = 1;
  int runs = 0;
  Status s = engine_->Transact(
      [&](Txn& txn) {
        ++runs;
        std::string value;
        Status read = txn.Get("t", "k", &value);
        if (!read.ok()) return read;
        // Another commit changes what this attempt read: every attempt is refused.
        Txn other = engine_->Begin();
        Status put = other.Put("t", "k", std::to_string(runs));
        if (put.ok()) put = other.Commit();
        if (!put.ok()) return put;
        return txn.Put("t", "mine", "1");
      },
      nullptr, three);
  EXPECT_TRUE(IsReadConflict(s)) << s.ToString();
  EXPECT_EQ(runs, 3);
  std::string value;
  EXPECT_TRUE(engine_->Get("t", "mine", &value).IsNotFound());
}

}  // namespace
}  // namespace wharf
