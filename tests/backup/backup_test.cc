// Backup and Restore (wharf/backup.h) on real files: what a backup holds, taken while producers, a
// projection and a subscriber run; incremental copies and pruning; the restored database's
// incarnation; the failures (bad targets, a busy engine, a close during a copy, a damaged file).
#include "wharf/backup.h"

#include <gtest/gtest.h>
#include <rocksdb/utilities/backup_engine.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "engine/backup/backup_metadata.h"
#include "engine/store/store.h"
#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"
#include "wharf/metrics.h"
#include "wharf/runtime.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;

std::unique_ptr<Engine> OpenEngine(const std::string& path, uint32_t partitions = kPartitions) {
  EngineOptions options;
  options.partitions = partitions;
  options.admin_socket = "off";
  std::unique_ptr<Engine> engine;
  EXPECT_OK(Engine::Open(path, options, &engine));
  if (engine) {
    EXPECT_OK(engine->DeclareTypes({"A"}));
  }
  return engine;
}

// `count` facts and state rows, `per_txn` to a transaction.
void CommitFacts(Engine& engine, int count, const std::string& tag, int per_txn = 1) {
  for (int i = 0; i < count; i += per_txn) {
    Txn txn = engine.Begin();
    for (int j = i; j < std::min(count, i + per_txn); ++j) {
      ASSERT_OK(txn.Emit("A", "key-" + std::to_string(j % 8), tag + "-" + std::to_string(j)));
      ASSERT_OK(txn.Put("rows", tag + "-" + std::to_string(j), "v" + std::to_string(j)));
    }
    ASSERT_OK(txn.Commit());
  }
}

// Every fact of every partition, by id.
std::map<uint64_t, Fact> AllFacts(Engine& engine) {
  std::map<uint64_t, Fact> facts;
  for (uint32_t p = 0; p < engine.partitions(); ++p) {
    std::vector<Fact> read;
    EXPECT_OK(engine.ReadFacts(p, 0, SIZE_MAX, &read));
    for (Fact& fact : read) facts.emplace(fact.id, std::move(fact));
  }
  return facts;
}

TEST(BackupTest, RestoredDatabaseHoldsStateFactsCursorsAndTypes) {
  TempDir dir;
  const std::string target = dir.path() + "/backups", restored_path = dir.path() + "/restored";
  auto engine = OpenEngine(dir.db());
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 50, "a"));
  ASSERT_OK(SetCursor(*engine, "reader", 20));
  BackupInfo info;
  ASSERT_OK(engine->Backup(target, {}, &info));
  EXPECT_EQ(info.id, 1u);
  EXPECT_EQ(info.last_fact_id, engine->last_lsn());
  EXPECT_EQ(info.durable_lsn, info.last_fact_id);
  EXPECT_EQ(info.partitions, kPartitions);
  EXPECT_EQ(info.incarnation, 0u);
  EXPECT_GT(info.files, 0u);
  EXPECT_GT(info.size_bytes, 0u);
  EXPECT_EQ(info.copied_bytes, info.size_bytes) << "a first backup copies every file";
  // Written after the point: not in the backup.
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 5, "late"));
  StatSnapshot stat;
  ASSERT_OK(ReadStat(*engine, &stat));
  EXPECT_TRUE(stat.last_backup.exists);
  EXPECT_TRUE(stat.last_backup.ok);
  EXPECT_EQ(stat.last_backup.target, target);
  EXPECT_EQ(stat.last_backup.info.last_fact_id, info.last_fact_id);
  MetricsSnapshot metrics;
  ASSERT_OK(ReadMetrics(*engine, &metrics));
  EXPECT_EQ(metrics.backups.backups_total, 1u);
  EXPECT_TRUE(metrics.backups.last_ok);
  EXPECT_EQ(metrics.backups.last_fact_id, info.last_fact_id);
  const std::map<uint64_t, Fact> original = AllFacts(*engine);
  ASSERT_OK(engine->Close());

  RestoreReport report;
  ASSERT_OK(Restore(target, restored_path, {}, &report));
  EXPECT_EQ(report.backup.id, 1u);
  EXPECT_EQ(report.backup.last_fact_id, info.last_fact_id);
  EXPECT_NE(report.incarnation, 0u);
  auto restored = OpenEngine(restored_path);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(restored->incarnation(), report.incarnation);
  EXPECT_EQ(restored->last_lsn(), info.last_fact_id);
  EXPECT_TRUE(restored->IsDeclared("A"));
  const std::map<uint64_t, Fact> facts = AllFacts(*restored);
  EXPECT_EQ(facts.size(), 50u);
  for (const auto& [id, fact] : facts) {
    ASSERT_LE(id, info.last_fact_id);
    EXPECT_EQ(fact.payload, original.at(id).payload);
  }
  std::string value;
  ASSERT_OK(restored->Get("rows", "a-49", &value));
  EXPECT_EQ(value, "v49");
  EXPECT_TRUE(restored->Get("rows", "late-0", &value).IsNotFound());
  uint64_t cursor = 0;
  std::vector<CursorInfo> cursors;
  ASSERT_OK(ListCursors(*restored, &cursors));
  for (const CursorInfo& each : cursors) {
    if (each.consumer == "reader") cursor = std::max(cursor, each.fact_id);
  }
  EXPECT_EQ(cursor, 20u);
  // New facts get ids after the point, in the new incarnation.
  Txn txn = restored->Begin();
  ASSERT_OK(txn.Emit("A", "k", "after restore"));
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  EXPECT_EQ(result.first_fact_id, info.last_fact_id + 1);
  ASSERT_OK(ReadStat(*restored, &stat));
  EXPECT_EQ(stat.incarnation, report.incarnation);
  EXPECT_FALSE(stat.last_backup.exists) << "the restored database was never backed up itself";
}

// Producers, a projection (one effect row per fact) and a subscriber run during the backup. The
// restored database holds every commit acknowledged before Backup() was called and none after
// its point, and the projection's effects are exactly those of the facts its cursor passed.
TEST(BackupTest, BackupUnderLoadHoldsExactlyTheCommitsUpToItsPoint) {
  TempDir dir;
  const std::string target = dir.path() + "/backups", restored_path = dir.path() + "/restored";
  auto engine = OpenEngine(dir.db());
  Runtime runtime(engine.get(), RuntimeOptions{});
  ASSERT_OK(runtime.Project("effects", {"A"}, [](const Fact& fact, Effects& effects) {
    return effects.Put("effects", std::to_string(fact.id), fact.payload).ok() ? Outcome::kHandled
                                                                              : Outcome::kRetry;
  }));
  std::atomic<uint64_t> delivered{0};
  ASSERT_OK(runtime.Subscribe("sub", {"A"}, [&](const Fact&) {
    delivered.fetch_add(1);
    return Outcome::kHandled;
  }));
  ASSERT_OK(runtime.Start());
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::map<uint64_t, std::string> acked;  // every acknowledged fact
  std::vector<std::thread> producers;
  for (int t = 0; t < 2; ++t) {
    producers.emplace_back([&, t] {
      for (int n = 0; !stop.load(); ++n) {
        Txn txn = engine->Begin();
        const std::string payload = "p" + std::to_string(t) + "-" + std::to_string(n);
        EXPECT_OK(txn.Emit("A", "key-" + std::to_string(n % 16), payload));
        CommitResult result;
        if (!txn.Commit(&result).ok()) return;
        std::lock_guard lock(mutex);
        acked.emplace(result.first_fact_id, payload);
      }
    });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return delivered.load() > 500; }));
  uint64_t acked_before = 0;
  {
    std::lock_guard lock(mutex);
    acked_before = acked.rbegin()->first;
  }
  BackupInfo info;
  ASSERT_OK(engine->Backup(target, {}, &info));
  ASSERT_TRUE(testing::WaitFor([&] {
    std::lock_guard lock(mutex);
    return acked.rbegin()->first > info.last_fact_id + 100;
  })) << "producers were held up after the backup";
  stop = true;
  for (std::thread& producer : producers) producer.join();
  ASSERT_OK(runtime.Stop());
  ASSERT_OK(engine->Close());
  EXPECT_GE(info.last_fact_id, acked_before);

  RestoreReport report;
  ASSERT_OK(Restore(target, restored_path, {}, &report));
  auto restored = OpenEngine(restored_path);
  ASSERT_NE(restored, nullptr);
  const std::map<uint64_t, Fact> facts = AllFacts(*restored);
  for (const auto& [id, payload] : acked) {
    auto it = facts.find(id);
    if (id <= info.last_fact_id) {
      ASSERT_NE(it, facts.end()) << "fact " << id << " acknowledged before the point is missing";
      EXPECT_EQ(it->second.payload, payload);
    } else {
      EXPECT_EQ(it, facts.end()) << "fact " << id << " is after the point " << info.last_fact_id;
    }
  }
  EXPECT_EQ(facts.rbegin()->first, info.last_fact_id);
  // The projection's effects and its cursors come from one point: one row per fact passed.
  std::vector<CursorInfo> cursors;
  ASSERT_OK(ListCursors(*restored, &cursors));
  std::map<uint32_t, uint64_t> passed;
  for (const CursorInfo& cursor : cursors) {
    if (cursor.consumer == "effects") passed[cursor.partition] = cursor.fact_id;
  }
  size_t effect_rows = 0;
  ASSERT_OK(restored->Scan("effects", KeyRange::All(), kScanLimitMax,
                           [&](std::string_view, std::string_view) {
                             ++effect_rows;
                             return true;
                           }));
  size_t facts_passed = 0;
  for (const auto& [id, fact] : facts) {
    std::string value;
    const bool applied = restored->Get("effects", std::to_string(id), &value).ok();
    const bool passed_it = passed.count(fact.partition) && id <= passed[fact.partition];
    EXPECT_EQ(applied, passed_it) << "fact " << id << ": effect and cursor disagree";
    facts_passed += passed_it;
  }
  EXPECT_EQ(effect_rows, facts_passed);
}

TEST(BackupTest, LaterBackupsCopyOnlyNewFilesAndKeepPrunes) {
  TempDir dir;
  const std::string target = dir.path() + "/backups";
  auto engine = OpenEngine(dir.db());
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 20000, "a", /*per_txn=*/100));
  BackupInfo first, second, third;
  ASSERT_OK(engine->Backup(target, {}, &first));
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 20, "b"));
  ASSERT_OK(engine->Backup(target, {}, &second));
  EXPECT_EQ(second.id, 2u);
  EXPECT_LT(second.copied_bytes, first.copied_bytes / 2)
      << "the second backup copied " << second.copied_bytes << " of " << second.size_bytes;
  EXPECT_GT(second.last_fact_id, first.last_fact_id);
  std::vector<BackupInfo> listed;
  ASSERT_OK(ListBackups(target, &listed));
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, 1u);
  EXPECT_EQ(listed[0].last_fact_id, first.last_fact_id);
  EXPECT_EQ(listed[1].last_fact_id, second.last_fact_id);
  BackupOptions keep_one;
  keep_one.keep = 1;
  uint64_t last_copied = 0, last_total = 0;
  keep_one.progress = [&](uint64_t copied, uint64_t total) {
    last_copied = copied;
    last_total = total;
  };
  ASSERT_OK(engine->Backup(target, keep_one, &third));
  EXPECT_EQ(last_copied, third.copied_bytes);
  EXPECT_GE(last_total, third.copied_bytes);
  ASSERT_OK(ListBackups(target, &listed));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, 3u);
  // An older backup is restored by id while it exists.
  ASSERT_OK(engine->Close());
  RestoreOptions by_id;
  by_id.backup_id = 1;
  EXPECT_TRUE(Restore(target, dir.path() + "/r1", by_id, nullptr).IsNotFound());
  by_id.backup_id = 3;
  RestoreReport report;
  ASSERT_OK(Restore(target, dir.path() + "/r3", by_id, &report));
  EXPECT_EQ(report.backup.last_fact_id, third.last_fact_id);
}

TEST(BackupTest, BadTargetsAndDestinationsAreRefusedNamingThem) {
  TempDir dir;
  auto engine = OpenEngine(dir.db());
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 5, "a"));
  Status s = engine->Backup(dir.db(), {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("inside the database directory"), std::string::npos) << s.ToString();
  s = engine->Backup(dir.db() + "/backups", {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = engine->Backup("", {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  const std::string foreign = dir.path() + "/foreign";
  fs::create_directories(foreign);
  std::ofstream(foreign + "/notes.txt") << "mine";
  s = engine->Backup(foreign, {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("notes.txt"), std::string::npos) << s.ToString();
  EXPECT_TRUE(fs::exists(foreign + "/notes.txt"));
  // A target that cannot be a directory (a file; as root, permissions are no test).
  std::ofstream(dir.path() + "/a-file") << "x";
  s = engine->Backup(dir.path() + "/a-file", {}, nullptr);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(dir.path() + "/a-file"), std::string::npos) << s.ToString();
  s = engine->Backup(foreign, {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // A failed attempt is recorded too.
  StatSnapshot stat;
  ASSERT_OK(ReadStat(*engine, &stat));
  EXPECT_TRUE(stat.last_backup.exists);
  EXPECT_FALSE(stat.last_backup.ok);
  EXPECT_NE(stat.last_backup.error.find("notes.txt"), std::string::npos);

  const std::string target = dir.path() + "/backups";
  ASSERT_OK(engine->Backup(target, {}, nullptr));
  // Restore: not into the open database, not into a non-empty directory without force, not
  // into or around the target, and not a backup that is not there.
  s = Restore(target, dir.db(), {}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.subcode(), Status::SubCode::kDatabaseLocked) << s.ToString();
  s = Restore(target, foreign, {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("not empty"), std::string::npos) << s.ToString();
  s = Restore(target, target + "/inside", {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  RestoreOptions missing;
  missing.backup_id = 7;
  s = Restore(target, dir.path() + "/r", missing, nullptr);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("holds 1"), std::string::npos) << s.ToString();
  s = Restore(dir.path() + "/nothing", dir.path() + "/r", {}, nullptr);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  RestoreOptions force;
  force.force = true;
  ASSERT_OK(Restore(target, foreign, force, nullptr));
  EXPECT_FALSE(fs::exists(foreign + "/notes.txt"));
  auto restored = OpenEngine(foreign);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(restored->last_lsn(), 5u);
}

TEST(BackupTest, OneBackupAtATimeAndCloseStopsACopy) {
  TempDir dir;
  auto engine = OpenEngine(dir.db());
  // Enough bytes that a copy at 1 MiB/s lasts seconds.
  for (int i = 0; i < 40; ++i) {
    Txn txn = engine->Begin();
    ASSERT_OK(
        txn.Put("big", std::to_string(i), std::string(100'000, static_cast<char>('a' + i % 26))));
    ASSERT_OK(txn.Commit());
  }
  const std::string target = dir.path() + "/backups";
  BackupOptions slow;
  slow.rate_limit_bytes_per_s = 1 << 20;
  std::atomic<bool> copying{false};
  slow.progress = [&](uint64_t, uint64_t) { copying = true; };
  Status first;
  std::thread backup([&] { first = engine->Backup(target, slow, nullptr); });
  ASSERT_TRUE(testing::WaitFor([&] { return copying.load(); }));
  Status second = engine->Backup(dir.path() + "/other", {}, nullptr);
  EXPECT_EQ(second.code(), Status::Code::kBusy) << second.ToString();
  const auto closing = std::chrono::steady_clock::now();
  ASSERT_OK(engine->Close());
  backup.join();
  EXPECT_LT(std::chrono::steady_clock::now() - closing, std::chrono::seconds(3))
      << "Close waited for the copy";
  EXPECT_TRUE(first.IsClosed()) << first.ToString();
  std::vector<BackupInfo> listed;
  Status s = ListBackups(target, &listed);
  EXPECT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(listed.empty()) << "a stopped backup is listed";
  // The next backup into the target succeeds and restores.
  engine = OpenEngine(dir.db());
  BackupInfo info;
  ASSERT_OK(engine->Backup(target, {}, &info));
  ASSERT_OK(engine->Close());
  ASSERT_OK(Restore(target, dir.path() + "/restored", {}, nullptr));
}

// Flips one byte in the middle of the largest file of the backup.
std::string FlipAByte(const std::string& target) {
  std::string largest;
  uint64_t largest_size = 0;
  for (const auto& entry : fs::recursive_directory_iterator(target)) {
    if (entry.is_regular_file() && entry.file_size() > largest_size &&
        entry.path().string().find("/meta/") == std::string::npos) {
      largest = entry.path().string();
      largest_size = entry.file_size();
    }
  }
  testing::FlipByte(largest, largest_size / 2);
  return largest;
}

TEST(BackupTest, RestoreOfADamagedBackupNamesTheFileAndLeavesNothing) {
  TempDir dir;
  const std::string target = dir.path() + "/backups", restored_path = dir.path() + "/restored";
  auto engine = OpenEngine(dir.db());
  ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 500, "a", /*per_txn=*/50));
  ASSERT_OK(engine->Backup(target, {}, nullptr));
  ASSERT_OK(engine->Close());
  const std::string damaged = FlipAByte(target);
  Status s = Restore(target, restored_path, {}, nullptr);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(fs::path(damaged).filename().string()), std::string::npos)
      << s.ToString() << " does not name " << damaged;
  for (const auto& entry : fs::directory_iterator(restored_path)) {
    ADD_FAILURE() << "a damaged restore left " << entry.path();
  }
}

TEST(BackupTest, ABackupOfANewerFormatVersionIsNotRestored) {
  TempDir dir;
  const std::string target = dir.path() + "/backups";
  {
    auto engine = OpenEngine(dir.db());
    ASSERT_NO_FATAL_FAILURE(CommitFacts(*engine, 3, "a"));
    ASSERT_OK(engine->Close());
  }
  // A backup made by a later version: RocksDB's BackupEngine with metadata naming format 99.
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir.db(), &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir.db(), families, &handles, &raw).ok());
  rocksdb::BackupEngine* backups = nullptr;
  ASSERT_TRUE(rocksdb::BackupEngine::Open(rocksdb::BackupEngineOptions(target),
                                          rocksdb::Env::Default(), &backups)
                  .ok());
  BackupInfo later;
  later.format_version = internal::kFormatVersion + 98;
  later.partitions = kPartitions;
  ASSERT_TRUE(
      backups->CreateNewBackupWithMetadata(raw, internal::EncodeBackupMetadata(later)).ok());
  delete backups;
  for (auto* handle : handles) delete handle;
  delete raw;
  Status s = Restore(target, dir.path() + "/restored", {}, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("format version " + std::to_string(internal::kFormatVersion + 98)),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace wharf
