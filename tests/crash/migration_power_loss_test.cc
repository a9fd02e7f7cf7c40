// Power cuts while Engine::MigrateTable migrates a table and transactions increment its rows:
// after each cut (the fault-injecting file system drops what was not synced) the reopened
// database must hold every row exactly once, at version 1 or 2 with the shape of that version,
// readable at version 2; no acknowledged increment lost (a stale write-back would take it back)
// and no row above the increments begun. After the cuts, one MigrateTable leaves every row at 2.
// WHARF_SEED=<n> replays the cut times of a run.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "crash/violations.h"
#include "engine/core/engine_core.h"
#include "engine/core/engine_internal.h"
#include "engine/open/open_engine.h"
#include "engine/store/tables/state.h"
#include "io/fault/fault_fs.h"
#include "test_util.h"

namespace wharf {
namespace {

using testing::kSanitized;
using testing::SeedFromEnv;
using testing::TempDir;

constexpr char kTable[] = "acct";

// A row is "<version>|<count>": each version's shape is checked by the migration and by the test.
std::string Row(int version, uint64_t count) {
  return std::to_string(version) + "|" + std::to_string(count);
}
bool ParseRow(std::string_view row, uint32_t version, uint64_t* count) {
  const std::string prefix = std::to_string(version) + "|";
  if (!row.starts_with(prefix)) return false;
  *count = std::stoull(std::string(row.substr(prefix.size())));
  return true;
}
std::string KeyOf(int i) {
  char key[16];
  std::snprintf(key, sizeof key, "r%05d", i);
  return key;
}

class MigrationPowerLossTest : public ::testing::Test {
 protected:
  void Open() {
    EngineOptions options;
    options.partitions = 2;
    options.retention_interval_ms = 0;
    options.memtable_bytes = 1u << 20;  // flushes happen under load
    internal::StoreHooks hooks{fs_, fs_.get()};
    ASSERT_OK(internal::OpenEngine(dir_.db(), options, hooks, &engine_));
    // Migrations are registered on every open; the declaration persists.
    if (engine_->TableVersion(kTable) == 2) {
      ASSERT_OK(engine_->RegisterMigration(kTable, 1, [](std::string_view row) {
        uint64_t count = 0;
        if (!ParseRow(row, 1, &count)) throw std::runtime_error("not a version-1 row");
        return Row(2, count);
      }));
    }
  }
  // Checks every row as stored and as read (see the file comment).
  void Verify(int rows, const std::map<std::string, uint64_t>& acked,
              const std::map<std::string, uint64_t>& begun, uint64_t* at_two) {
    testing::Violations violations;
    internal::EngineCore* core = internal::EngineInternal::Core(*engine_).get();
    *at_two = 0;
    for (int i = 0; i < rows; ++i) {
      const std::string key = KeyOf(i);
      std::string body;
      uint8_t record_version = 0;
      Status s = core->store()->Get(internal::kState, tables::state::Key(kTable, key), &body,
                                    nullptr, &record_version);
      if (!s.ok()) {
        violations.Add(key + ": " + s.ToString());
        continue;
      }
      uint32_t version = 0;
      std::string_view stored;
      uint64_t count = 0;
      s = tables::state::DecodeBody(record_version, body, &version, &stored);
      if (!s.ok() || (version != 1 && version != 2) || !ParseRow(stored, version, &count)) {
        violations.Add(key + ": stored row '" + std::string(stored) + "' at version " +
                       std::to_string(version) + " is not of that version's shape");
        continue;
      }
      *at_two += version == 2;
      std::string read;
      uint64_t read_count = 0;
      s = engine_->Get(kTable, key, &read);
      if (!s.ok() || !ParseRow(read, 2, &read_count) || read_count != count) {
        violations.Add(key + ": read as '" + read + "' (" + s.ToString() + ")");
      }
      auto it = acked.find(key);
      if (it != acked.end() && count < it->second) {
        violations.Add(key + ": acknowledged increment to " + std::to_string(it->second) +
                       " lost (row holds " + std::to_string(count) + ")");
      }
      auto b = begun.find(key);
      if (count > (b == begun.end() ? 0 : b->second)) {
        violations.Add(key + ": count " + std::to_string(count) + " above the increments begun");
      }
    }
    violations.Report("migration under power cuts");
  }

  TempDir dir_;
  std::shared_ptr<io::FaultInjectionFileSystem> fs_ =
      std::make_shared<io::FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
  std::unique_ptr<Engine> engine_;
};

TEST_F(MigrationPowerLossTest, EveryRowIsAtOneVersionAndReadableAfterEachCut) {
  const uint64_t seed = SeedFromEnv();
  SCOPED_TRACE("WHARF_SEED=" + std::to_string(seed));
  std::mt19937_64 random(seed);
  const int rows = kSanitized ? 2000 : 20000;
  const int cuts = kSanitized ? 3 : 8;
  ASSERT_NO_FATAL_FAILURE(Open());
  for (int i = 0; i < rows;) {
    Txn txn = engine_->Begin();
    for (int end = std::min(rows, i + 1000); i < end; ++i)
      ASSERT_OK(txn.Put(kTable, KeyOf(i), Row(1, 0)));
    ASSERT_OK(txn.Commit());
  }
  ASSERT_OK(engine_->DeclareTable(kTable, 2));
  ASSERT_OK(engine_->Close());
  engine_.reset();
  ASSERT_NO_FATAL_FAILURE(Open());  // registers the migration

  std::map<std::string, uint64_t> acked, begun;  // key -> highest count acknowledged / begun
  uint64_t migrated_rows = 0, at_two = 0;
  for (int cut = 0; cut < cuts; ++cut) {
    SCOPED_TRACE("cut " + std::to_string(cut));
    std::mutex mutex;  // guards acked, begun
    std::atomic<uint64_t> batches{0};
    std::thread migrator([&] {
      MigrateOptions options;
      options.batch_rows = 64;
      options.retry.attempts_max = 1000;
      options.progress = [&](const MigrateReport&) {
        ++batches;
        return true;
      };
      engine_->MigrateTable(kTable, options).PermitUncheckedError();  // ends with the power
    });
    std::thread writer([&, thread_seed = random()] {
      std::mt19937 local(static_cast<uint32_t>(thread_seed));
      TransactOptions patient;
      patient.attempts_max = 1000;
      patient.backoff_max_ms = 5;
      for (;;) {
        const std::string key = KeyOf(static_cast<int>(local() % rows));
        {
          std::lock_guard lock(mutex);
          ++begun[key];
        }
        uint64_t value = 0;
        Status s = engine_->Transact(
            [&](Txn& txn) {
              std::string row;
              Status read = txn.Get(kTable, key, &row);
              if (!read.ok()) return read;
              if (!ParseRow(row, 2, &value)) return Status::Internal("read '" + row + "'");
              return txn.Put(kTable, key, Row(2, ++value));
            },
            nullptr, patient);
        if (!s.ok()) return;  // the power is gone
        std::lock_guard lock(mutex);
        acked[key] = std::max(acked[key], value);
      }
    });
    // Cut once the migration committed a batch, at a random moment within 100 ms.
    ASSERT_TRUE(testing::WaitFor([&] { return batches.load() > 0; }));
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 100'000));
    fs_->Cut();
    migrator.join();
    writer.join();
    engine_->Close().PermitUncheckedError();  // may report the simulated power loss
    engine_.reset();
    ASSERT_TRUE(fs_->DropUnsyncedData().ok());
    ASSERT_NO_FATAL_FAILURE(Open());
    ASSERT_NO_FATAL_FAILURE(Verify(rows, acked, begun, &at_two));
    if (HasFailure()) return;
    migrated_rows = at_two;
  }
  // Without cuts, one run finishes the table.
  MigrateReport report;
  ASSERT_OK(engine_->MigrateTable(kTable, {}, &report));
  EXPECT_TRUE(report.done);
  EXPECT_EQ(report.rows, static_cast<uint64_t>(rows));
  ASSERT_NO_FATAL_FAILURE(Verify(rows, acked, begun, &at_two));
  EXPECT_EQ(at_two, static_cast<uint64_t>(rows));
  std::printf("%d cuts, %llu rows at version 2 before the last run, %zu keys incremented\n", cuts,
              static_cast<unsigned long long>(migrated_rows), acked.size());
  EXPECT_GE(fs_->cuts(), static_cast<uint64_t>(cuts));
  EXPECT_GT(migrated_rows, 0u);
}

}  // namespace
}  // namespace wharf
