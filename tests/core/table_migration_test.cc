// State tables that evolve (Engine::DeclareTable, RegisterMigration, MigrateTable): rows record
// the version they were written at; reads lift older rows through the migrations; a transaction
// writes what it lifted back in its own commit, never over a newer write; MigrateTable walks the
// rest in batches; bad input is refused naming the problem.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "core/isolation_util.h"
#include "engine/core/engine_core.h"
#include "engine/core/engine_internal.h"
#include "engine/store/tables/meta.h"
#include "engine/store/tables/state.h"
#include "test_util.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

using testing::TempDir;

// Rows of this suite: "<version>|<count>", so that every row says which shape it has, and each
// migration checks the shape it is given (a row migrated twice, or skipped, fails the test).
std::string Row(int version, uint64_t count) {
  return std::to_string(version) + "|" + std::to_string(count);
}
uint64_t CountOf(std::string_view row, int version) {
  const std::string prefix = std::to_string(version) + "|";
  if (!row.starts_with(prefix)) {
    throw std::runtime_error("row '" + std::string(row) + "' is not of version " +
                             std::to_string(version));
  }
  return std::stoull(std::string(row.substr(prefix.size())));
}
// The migration from `from` to from + 1.
Migration Step(int from, std::atomic<int>* calls = nullptr) {
  return [from, calls](std::string_view row) {
    if (calls != nullptr) ++*calls;
    return Row(from + 1, CountOf(row, from));
  };
}

class TableMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Open()); }

  void Open() {
    EngineOptions options;
    options.partitions = 2;
    options.retention_interval_ms = 0;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({std::string(testing::kIncType)}));
    testing::ApplyReadValidationSwitch(*engine_);
  }
  void Reopen() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
    ASSERT_NO_FATAL_FAILURE(Open());
  }
  void Put(std::string_view key, std::string_view value) {
    Txn txn = engine_->Begin();
    ASSERT_OK(txn.Put("acct", key, value));
    ASSERT_OK(txn.Commit());
  }
  // The table version row `key` of "acct" is stored at (0: absent), read past every migration.
  uint32_t StoredVersion(std::string_view key) {
    internal::EngineCore* core = internal::EngineInternal::Core(*engine_).get();
    std::string body;
    uint8_t record_version = 0;
    Status s = core->store()->Get(internal::kState, tables::state::Key("acct", key), &body, nullptr,
                                  &record_version);
    if (s.IsNotFound()) return 0;
    EXPECT_OK(s);
    uint32_t version = 0;
    std::string_view value;
    EXPECT_OK(tables::state::DecodeBody(record_version, body, &version, &value));
    return version;
  }
  // Declares "acct" at version 3 with both steps (counting their calls).
  void RaiseToThree() {
    ASSERT_OK(engine_->DeclareTable("acct", 3));
    ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1, &calls_)));
    ASSERT_OK(engine_->RegisterMigration("acct", 2, Step(2, &calls_)));
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::atomic<int> calls_{0};
};

TEST_F(TableMigrationTest, OlderRowsAreReadLiftedAndWrittenBackByTheReadersCommit) {
  ASSERT_NO_FATAL_FAILURE(Put("a", Row(1, 7)));
  ASSERT_NO_FATAL_FAILURE(Put("b", Row(1, 8)));
  EXPECT_EQ(engine_->TableVersion("acct"), 1u);
  EXPECT_EQ(StoredVersion("a"), 1u);
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  EXPECT_EQ(engine_->TableVersion("acct"), 3u);
  EXPECT_EQ(engine_->TableVersion("other"), 1u);

  // Engine::Get lifts without writing.
  std::string value;
  ASSERT_OK(engine_->Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 7));
  EXPECT_EQ(StoredVersion("a"), 1u);
  EXPECT_EQ(calls_.load(), 2);

  // A transaction sees the lifted row, twice without lifting it twice, and writes it back.
  Txn txn = engine_->Begin();
  ASSERT_OK(txn.Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 7));
  ASSERT_OK(txn.Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 7));
  EXPECT_EQ(calls_.load(), 4);
  EXPECT_EQ(txn.write_count(), 1u);
  ASSERT_OK(txn.Commit());
  EXPECT_EQ(StoredVersion("a"), 3u);
  ASSERT_OK(engine_->Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 7));
  EXPECT_EQ(calls_.load(), 4) << "a row at the declared version is read as it is";

  // A transaction's own write of a row it lifted wins over the write-back.
  txn = engine_->Begin();
  ASSERT_OK(txn.Get("acct", "b", &value));
  EXPECT_EQ(value, Row(3, 8));
  ASSERT_OK(txn.Put("acct", "b", Row(3, 9)));
  ASSERT_OK(txn.Commit());
  EXPECT_EQ(StoredVersion("b"), 3u);
  ASSERT_OK(engine_->Get("acct", "b", &value));
  EXPECT_EQ(value, Row(3, 9));

  // Rows written now are written at the declared version.
  ASSERT_NO_FATAL_FAILURE(Put("c", Row(3, 1)));
  EXPECT_EQ(StoredVersion("c"), 3u);

  // A transaction that is not committed writes nothing back.
  ASSERT_NO_FATAL_FAILURE(Put("d", Row(3, 4)));
  {
    Txn abandoned = engine_->Begin();
    ASSERT_OK(abandoned.Get("acct", "b", &value));
  }
  EXPECT_EQ(StoredVersion("d"), 3u);
}

TEST_F(TableMigrationTest, ScansLiftEveryRowTheyVisitAndNoOther) {
  for (int i = 0; i < 10; ++i) ASSERT_NO_FATAL_FAILURE(Put("k" + std::to_string(i), Row(1, i)));
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  Txn txn = engine_->Begin();
  std::vector<std::string> seen;
  ScanResult result;
  ASSERT_OK(txn.Scan(
      "acct", KeyRange::All(), 4,
      [&](std::string_view key, std::string_view value) {
        seen.push_back(std::string(key) + "=" + std::string(value));
        return true;
      },
      &result));
  EXPECT_TRUE(result.more);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], "k0=" + Row(3, 0));
  EXPECT_EQ(seen[3], "k3=" + Row(3, 3));
  EXPECT_EQ(txn.write_count(), 4u);
  ASSERT_OK(txn.Commit());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(StoredVersion("k" + std::to_string(i)), i < 4 ? 3u : 1u) << i;
  }
  // Engine::Scan lifts without writing.
  seen.clear();
  ASSERT_OK(engine_->Scan("acct", KeyRange::All(), 100, [&](std::string_view, std::string_view v) {
    seen.emplace_back(v);
    return true;
  }));
  ASSERT_EQ(seen.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(seen[i], Row(3, i));
  EXPECT_EQ(StoredVersion("k9"), 1u);
}

TEST_F(TableMigrationTest, AReadOnlyTransactionsWriteBackNeverOverwritesANewerWrite) {
  ASSERT_NO_FATAL_FAILURE(Put("a", Row(1, 1)));
  ASSERT_NO_FATAL_FAILURE(Put("old", Row(1, 5)));
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  // Reads the old row (and so would write back 3|1), then another commit writes 3|50.
  Txn reader = engine_->Begin();
  std::string value;
  ASSERT_OK(reader.Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 1));
  ASSERT_NO_FATAL_FAILURE(Put("a", Row(3, 50)));
  // It wrote nothing itself: it commits as a read-only transaction, its write-back void.
  ASSERT_OK(reader.Commit());
  ASSERT_OK(engine_->Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 50));

  // A transaction that wrote something is refused instead (and Transact runs it again).
  EXPECT_EQ(StoredVersion("old"), 1u);
  Txn writer = engine_->Begin();
  ASSERT_OK(writer.Get("acct", "old", &value));
  EXPECT_EQ(value, Row(3, 5));
  ASSERT_OK(writer.Put("acct", "other", Row(3, 1)));
  ASSERT_NO_FATAL_FAILURE(Put("old", Row(3, 60)));
  Status s = writer.Commit();
  EXPECT_TRUE(s.IsConflict()) << s.ToString();
  ASSERT_OK(engine_->Get("acct", "old", &value));
  EXPECT_EQ(value, Row(3, 60));
}

TEST_F(TableMigrationTest, AProjectionsReadsAreWrittenBackInItsBatchesCommits) {
  constexpr int kRows = 20;
  for (int i = 0; i < kRows; ++i) ASSERT_NO_FATAL_FAILURE(Put("a" + std::to_string(i), Row(1, i)));
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  {
    Txn txn = engine_->Begin();
    for (int i = 0; i < kRows; ++i) {
      ASSERT_OK(txn.Emit(testing::kIncType, "a" + std::to_string(i), "x"));
    }
    ASSERT_OK(txn.Commit());
  }
  std::mutex mutex;
  std::map<std::string, std::string> seen;
  {
    RuntimeOptions options;
    options.workers = 1;
    Runtime runtime(engine_.get(), options);
    // Reads the account (migrated) and writes only to another table.
    ASSERT_OK(runtime.Project(
        "audit", {std::string(testing::kIncType)}, [&](const Fact& fact, Effects& effects) {
          std::string row;
          Status s = effects.Get("acct", fact.key, &row);
          if (!s.ok()) return Outcome::kFailed;
          std::lock_guard lock(mutex);
          seen[fact.key] = row;
          return effects.Put("audit", fact.key, row).ok() ? Outcome::kHandled : Outcome::kFailed;
        }));
    ASSERT_OK(runtime.Start());
    ASSERT_OK(runtime.Drain());
    ASSERT_OK(runtime.Stop());
  }
  ASSERT_EQ(seen.size(), size_t{kRows});
  for (int i = 0; i < kRows; ++i) {
    const std::string key = "a" + std::to_string(i);
    EXPECT_EQ(seen[key], Row(3, i));
    EXPECT_EQ(StoredVersion(key), 3u) << key << ": written back with the batch's effects";
  }
}

TEST_F(TableMigrationTest, DeclarationsPersistAndMigrationsAreRegisteredOnEveryOpen) {
  ASSERT_NO_FATAL_FAILURE(Put("a", Row(1, 3)));
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(engine_->TableVersion("acct"), 3u);
  const std::vector<DeclaredTable> declared = engine_->DeclaredTables();
  ASSERT_EQ(declared.size(), 1u);
  EXPECT_EQ(declared[0].name, "acct");
  EXPECT_EQ(declared[0].version, 3u);
  // The database is at format 2 now: builds that cannot read version-3 rows refuse it.
  internal::EngineCore* core = internal::EngineInternal::Core(*engine_).get();
  std::string body;
  ASSERT_OK(core->store()->Get(internal::kMeta, tables::meta::kFormatVersion, &body));
  uint64_t format = 0;
  ASSERT_OK(tables::meta::DecodeU64(body, "format_version", &format));
  EXPECT_EQ(format, 2u);

  // Not registered on this open: the read names the missing step.
  std::string value;
  Status s = engine_->Get("acct", "a", &value);
  EXPECT_TRUE((s.code() == Status::Code::kNotSupported)) << s.ToString();
  EXPECT_NE(s.message().find("from version 1 to 2"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("RegisterMigration"), std::string::npos) << s.ToString();
  ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1)));
  Txn txn = engine_->Begin();
  s = txn.Get("acct", "a", &value);
  EXPECT_NE(s.message().find("from version 2 to 3"), std::string::npos) << s.ToString();
  EXPECT_EQ(txn.write_count(), 0u) << "nothing is written back for a row that failed";
  ASSERT_OK(engine_->RegisterMigration("acct", 2, Step(2)));
  ASSERT_OK(engine_->Get("acct", "a", &value));
  EXPECT_EQ(value, Row(3, 3));

  // Raised again: a row at 3 lifts through the new step only.
  ASSERT_OK(engine_->DeclareTable("acct", 4));
  ASSERT_OK(engine_->RegisterMigration("acct", 3, Step(3)));
  ASSERT_OK(engine_->Get("acct", "a", &value));
  EXPECT_EQ(value, Row(4, 3));
}

TEST_F(TableMigrationTest, ARefusingMigrationFailsTheReadAndWritesNothing) {
  ASSERT_NO_FATAL_FAILURE(Put("a", Row(1, 1)));
  ASSERT_NO_FATAL_FAILURE(Put("b", "garbage"));
  ASSERT_OK(engine_->DeclareTable("acct", 2));
  ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1)));
  std::string value;
  Status s = engine_->Get("acct", "b", &value);
  EXPECT_TRUE((s.code() == Status::Code::kNotSupported)) << s.ToString();
  EXPECT_NE(s.message().find("is not of version 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.ToString();
  // A scan stops at the row and returns the error; the row before it is lifted and, as it was
  // read, written back (its range is recorded), the refused one is not.
  Txn txn = engine_->Begin();
  int rows = 0;
  s = txn.Scan("acct", KeyRange::All(), 10, [&](std::string_view, std::string_view) {
    ++rows;
    return true;
  });
  EXPECT_TRUE((s.code() == Status::Code::kNotSupported)) << s.ToString();
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(txn.write_count(), 1u);
  MigrateReport report;
  s = engine_->MigrateTable("acct", {}, &report);
  EXPECT_TRUE((s.code() == Status::Code::kNotSupported)) << s.ToString();
  EXPECT_FALSE(report.done);
  EXPECT_EQ(StoredVersion("b"), 1u);
}

TEST_F(TableMigrationTest, MigrateTableWalksEveryRowInBatchesAndResumes) {
  constexpr int kRows = 1000;
  {
    Txn txn = engine_->Begin();
    for (int i = 0; i < kRows; ++i) {
      char key[16];
      std::snprintf(key, sizeof key, "r%05d", i);
      ASSERT_OK(txn.Put("acct", key, Row(1, i)));
    }
    ASSERT_OK(txn.Commit());
  }
  ASSERT_NO_FATAL_FAILURE(Put("r00500", Row(1, 500)));
  ASSERT_NO_FATAL_FAILURE(RaiseToThree());
  // A row written at the declared version is not migrated.
  ASSERT_NO_FATAL_FAILURE(Put("r00500", Row(3, 500)));

  // A dry run counts and changes nothing.
  MigrateOptions options;
  options.batch_rows = 100;
  options.dry_run = true;
  MigrateReport report;
  ASSERT_OK(engine_->MigrateTable("acct", options, &report));
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.version, 3u);
  EXPECT_EQ(report.rows, uint64_t{kRows});
  EXPECT_EQ(report.migrated, uint64_t{kRows - 1});
  EXPECT_EQ(StoredVersion("r00000"), 1u);

  // Stopped after three batches by its progress callback, then resumed.
  options.dry_run = false;
  std::vector<uint64_t> progress;
  options.progress = [&](const MigrateReport& so_far) {
    progress.push_back(so_far.rows);
    return progress.size() < 3;
  };
  ASSERT_OK(engine_->MigrateTable("acct", options, &report));
  EXPECT_FALSE(report.done);
  EXPECT_EQ(report.rows, 300u);
  EXPECT_EQ(report.batches, 3u);
  EXPECT_EQ(progress, (std::vector<uint64_t>{100, 200, 300}));
  EXPECT_EQ(StoredVersion("r00299"), 3u);
  EXPECT_EQ(StoredVersion("r00300"), 1u);
  options.from = report.resume_from;
  options.progress = nullptr;
  ASSERT_OK(engine_->MigrateTable("acct", options, &report));
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.rows, 700u);
  EXPECT_EQ(report.migrated, 699u);
  EXPECT_EQ(report.batches, 7u);
  for (int i = 0; i < kRows; i += 37) {
    char key[16];
    std::snprintf(key, sizeof key, "r%05d", i);
    EXPECT_EQ(StoredVersion(key), 3u) << key;
    std::string value;
    ASSERT_OK(engine_->Get("acct", key, &value));
    EXPECT_EQ(value, Row(3, i));
  }
  // Nothing is left: a second run migrates nothing.
  options.from.clear();
  ASSERT_OK(engine_->MigrateTable("acct", options, &report));
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.migrated, 0u);

  // A table at version 1 has nothing to migrate.
  ASSERT_OK(engine_->MigrateTable("plain", {}, &report));
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.rows, 0u);
}

TEST_F(TableMigrationTest, ClosingTheEngineEndsAPacedMigrationAtOnce) {
  {
    Txn txn = engine_->Begin();
    for (int i = 0; i < 300; ++i) ASSERT_OK(txn.Put("acct", "k" + std::to_string(i), Row(1, i)));
    ASSERT_OK(txn.Commit());
  }
  ASSERT_OK(engine_->DeclareTable("acct", 2));
  ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1)));
  MigrateOptions options;
  options.batch_rows = 100;
  options.rows_per_second = 1;  // 100 s before the second batch
  std::atomic<bool> first_batch{false};
  options.progress = [&](const MigrateReport&) {
    first_batch = true;
    return true;
  };
  Status migrated;
  std::thread migrator([&] { migrated = engine_->MigrateTable("acct", options); });
  ASSERT_TRUE(testing::WaitFor([&] { return first_batch.load(); }));
  const auto closing = std::chrono::steady_clock::now();
  ASSERT_OK(engine_->Close());
  migrator.join();
  EXPECT_TRUE(migrated.IsClosed()) << migrated.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - closing, std::chrono::seconds(10));
}

TEST_F(TableMigrationTest, LazyMigrationUnderConcurrentTransactionsLosesNothing) {
  // 8 counters at version 1, raised to 2; 4 threads increment them through Transact while a
  // fifth migrates the table in batches of 2 rows, repeatedly. Every increment must count once
  // and every row must end at version 2 (a stale write-back would lose increments; a row lifted
  // twice would fail its migration's shape check).
  constexpr int kCounters = 8;
  const int increments = testing::kSanitized ? 100 : 400;
  for (int c = 0; c < kCounters; ++c)
    ASSERT_NO_FATAL_FAILURE(Put(testing::CounterKey(c), Row(1, 0)));
  ASSERT_OK(engine_->DeclareTable("acct", 2));
  ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1)));
  TransactOptions patient;
  patient.attempts_max = 1000;
  patient.backoff_max_ms = 5;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < increments; ++i) {
        const std::string key = testing::CounterKey((t + i) % kCounters);
        Status s = engine_->Transact(
            [&](Txn& txn) {
              std::string value;
              Status read = txn.Get("acct", key, &value);
              if (!read.ok()) return read;
              return txn.Put("acct", key, Row(2, CountOf(value, 2) + 1));
            },
            nullptr, patient);
        if (!s.ok()) {
          ADD_FAILURE() << s.ToString();
          ++failures;
          return;
        }
      }
    });
  }
  std::thread migrator([&] {
    MigrateOptions options;
    options.batch_rows = 2;
    options.retry = patient;
    while (!stop.load()) {
      Status s = engine_->MigrateTable("acct", options);
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        return;
      }
    }
  });
  for (std::thread& thread : threads) thread.join();
  stop = true;
  migrator.join();
  ASSERT_EQ(failures.load(), 0);
  uint64_t total = 0;
  for (int c = 0; c < kCounters; ++c) {
    std::string value;
    ASSERT_OK(engine_->Get("acct", testing::CounterKey(c), &value));
    total += CountOf(value, 2);
    EXPECT_EQ(StoredVersion(testing::CounterKey(c)), 2u);
  }
  EXPECT_EQ(total, uint64_t{4} * increments);
}

TEST_F(TableMigrationTest, BadInputIsRefusedNamingTheProblem) {
  auto expect_invalid = [](const Status& s, std::string_view words) {
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.ToString();
  };
  expect_invalid(engine_->DeclareTable("acct", 0), "version 0");
  expect_invalid(engine_->DeclareTable("", 2), "table name");
  expect_invalid(engine_->DeclareTable(std::string("a\0b", 3), 2), "table name");
  expect_invalid(engine_->RegisterMigration("acct", 1, Step(1)), "declare its new version first");
  ASSERT_OK(engine_->DeclareTable("acct", 1));  // a no-op: every table is at 1
  EXPECT_TRUE(engine_->DeclaredTables().empty());
  ASSERT_OK(engine_->DeclareTable("acct", 3));
  ASSERT_OK(engine_->DeclareTable("acct", 3));  // the version it has: a no-op
  expect_invalid(engine_->DeclareTable("acct", 2), "never goes back");
  expect_invalid(engine_->RegisterMigration("acct", 0, Step(0)), "versions 1 to 2");
  expect_invalid(engine_->RegisterMigration("acct", 3, Step(3)), "versions 1 to 2");
  expect_invalid(engine_->RegisterMigration("acct", 1, nullptr), "empty function");
  ASSERT_OK(engine_->RegisterMigration("acct", 1, Step(1)));
  expect_invalid(engine_->RegisterMigration("acct", 1, Step(1)), "already registered");
  MigrateOptions options;
  options.batch_rows = 0;
  expect_invalid(engine_->MigrateTable("acct", options), "batch_rows 0");
  options.batch_rows = kScanLimitMax + 1;
  expect_invalid(engine_->MigrateTable("acct", options), "batch_rows");
  expect_invalid(engine_->MigrateTable("", {}), "table name");
  ASSERT_OK(engine_->Close());
  EXPECT_TRUE(engine_->DeclareTable("acct", 4).IsClosed());
  EXPECT_TRUE(engine_->RegisterMigration("acct", 2, Step(2)).IsClosed());
  EXPECT_TRUE(engine_->MigrateTable("acct", {}).IsClosed());
}

}  // namespace
}  // namespace wharf
