// VerifyDatabase and VerifyBackup (wharf/backup.h): a whole database verifies with every family's
// records counted; a damaged table file, a damaged record, a damaged backup file are named; a
// live database verifies while it commits; a backup of a newer format is refused.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/utilities/backup_engine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "engine/backup/backup_metadata.h"
#include "engine/core/engine_core.h"
#include "engine/store/codec.h"
#include "engine/store/store.h"
#include "engine/store/tables/cursors.h"
#include "engine/store/tables/dead_letters.h"
#include "engine/store/tables/leases.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/state.h"
#include "test_util.h"
#include "wharf/backup.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using internal::Cf;
using internal::EngineCore;
using internal::EngineInternal;
using internal::kCfCount;
using testing::TempDir;

constexpr uint32_t kPartitions = 4;
constexpr int kFacts = 200;
constexpr int kStates = 30;

// The largest file under `dir` whose name ends with `suffix`.
fs::path Largest(const fs::path& dir, const std::string& suffix) {
  fs::path best;
  uintmax_t best_size = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || !entry.path().filename().string().ends_with(suffix)) continue;
    if (entry.file_size() > best_size) best = entry.path(), best_size = entry.file_size();
  }
  return best;
}

// Every file under `dir` with its size and modification time.
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> Files(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[entry.path().string()] = {entry.file_size(), entry.last_write_time()};
    }
  }
  return files;
}

class VerifyTest : public ::testing::Test {
 protected:
  void Open() {
    EngineOptions options;
    options.partitions = kPartitions;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine_));
    ASSERT_OK(engine_->DeclareTypes({"A"}));
  }
  void Close() {
    ASSERT_OK(engine_->Close());
    engine_.reset();
  }
  EngineCore* core() { return EngineInternal::Core(*engine_).get(); }
  rocksdb::DB* db() { return core()->store()->db(); }
  rocksdb::ColumnFamilyHandle* cf(Cf family) { return core()->store()->cf(family); }

  // Commits `count` facts of `payload_bytes` each, up to 20 per transaction (each commit waits
  // for a sync).
  void CommitFacts(int count, size_t payload_bytes) {
    for (int first = 0; first < count; first += 20) {
      Txn txn = engine_->Begin();
      for (int i = first; i < std::min(count, first + 20); ++i) {
        ASSERT_OK(txn.Emit("A", "k" + std::to_string(i), std::string(payload_bytes, 'p')));
      }
      ASSERT_OK(txn.Commit());
    }
  }
  // Something in every family: kFacts facts, kStates state rows, a timer, a consumer's cursors
  // (one per partition), its lease, fence and an instance heartbeat, a dead letter.
  void Fill() {
    CommitFacts(kFacts, 1000);
    Txn txn = engine_->Begin();
    for (int i = 0; i < kStates; ++i) {
      ASSERT_OK(txn.Put("orders", "order-" + std::to_string(i), "value"));
    }
    EmitOptions later;
    later.deliver_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count() +
                          3'600'000;
    ASSERT_OK(txn.Emit("A", "timer", "t", later));
    ASSERT_OK(txn.Commit());

    internal::TxnRep rep;
    for (uint32_t p = 0; p < kPartitions; ++p) {
      rep.writes.push_back({internal::kCursors, false, tables::cursors::Key("c", p),
                            tables::cursors::EncodeValue(3, 1)});
    }
    tables::leases::Record lease{"instance-1", 1, 1'000'000, 1};
    rep.writes.push_back(
        {internal::kLeases, false, tables::leases::Key("c"), tables::leases::EncodeValue(lease)});
    rep.writes.push_back({internal::kLeases, false, tables::leases::FenceKey("c"),
                          tables::leases::EncodeFence("instance-1", 1)});
    rep.writes.push_back({internal::kLeases, false, tables::leases::HeartbeatKey("instance-1"),
                          tables::leases::EncodeValue(lease)});
    Fact dead;
    dead.type = "A";
    dead.payload = "gave up";
    rep.writes.push_back({internal::kDead, false, tables::dead_letters::Key("c", 5),
                          tables::dead_letters::EncodeValue("bad", codec::EncodeFact(dead), 2)});
    ASSERT_OK(core()->Commit(&rep));
  }
  // Every family's records and bytes as RocksDB holds them, read without Wharf's decoders.
  std::map<std::string, std::pair<uint64_t, uint64_t>> RawCounts() {
    std::map<std::string, std::pair<uint64_t, uint64_t>> counts;
    for (int family = 0; family < kCfCount; ++family) {
      auto& [records, bytes] = counts[internal::CfName(static_cast<Cf>(family))];
      std::unique_ptr<rocksdb::Iterator> it(
          db()->NewIterator(rocksdb::ReadOptions(), cf(static_cast<Cf>(family))));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ++records;
        bytes += it->key().size() + it->value().size();
      }
      EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    }
    return counts;
  }
  void FlushAll() {
    for (int family = 0; family < kCfCount; ++family) {
      ASSERT_TRUE(db()->Flush(rocksdb::FlushOptions(), cf(static_cast<Cf>(family))).ok());
    }
  }
  static std::map<std::string, std::pair<uint64_t, uint64_t>> Counts(const VerifyReport& report) {
    std::map<std::string, std::pair<uint64_t, uint64_t>> counts;
    for (const auto& family : report.families) counts[family.name] = {family.records, family.bytes};
    return counts;
  }
  // Backs the closed database up with RocksDB's BackupEngine (opened with Wharf's families),
  // with `held` as the backup's metadata text.
  void MakeBackup(const BackupInfo& held) {
    ASSERT_EQ(engine_, nullptr) << "close the engine first";
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
    for (int family = 0; family < kCfCount; ++family) {
      descriptors.emplace_back(internal::CfName(static_cast<Cf>(family)),
                               rocksdb::ColumnFamilyOptions());
    }
    rocksdb::DBOptions options;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw_db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir_.db(), descriptors, &handles, &raw_db).ok());
    std::unique_ptr<rocksdb::DB> raw(raw_db);
    rocksdb::BackupEngine* raw_engine = nullptr;
    ASSERT_TRUE(rocksdb::BackupEngine::Open(rocksdb::Env::Default(),
                                            rocksdb::BackupEngineOptions(target()), &raw_engine)
                    .ok());
    std::unique_ptr<rocksdb::BackupEngine> backups(raw_engine);
    rocksdb::IOStatus made = backups->CreateNewBackupWithMetadata(
        rocksdb::CreateBackupOptions(), raw.get(), internal::EncodeBackupMetadata(held));
    EXPECT_TRUE(made.ok()) << made.ToString();
    for (auto* handle : handles) ASSERT_TRUE(raw->DestroyColumnFamilyHandle(handle).ok());
    ASSERT_TRUE(raw->Close().ok());
  }
  static BackupInfo Held() {
    BackupInfo held;
    held.created_ms = 1764900000000;
    held.format_version = internal::kFormatVersion;
    held.partitions = kPartitions;
    return held;
  }
  std::string target() const { return (fs::path(dir_.path()) / "backups").string(); }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(VerifyTest, CleanDatabaseVerifiesWithEveryFamilyCounted) {
  Open();
  Fill();
  FlushAll();            // table files to check, and records in them
  CommitFacts(10, 100);  // and records only in the WAL
  const auto raw = RawCounts();
  Close();

  VerifyReport report;
  ASSERT_OK(VerifyDatabase(dir_.db(), &report));
  ASSERT_EQ(report.families.size(), size_t{kCfCount});
  const char* order[] = {"outbox", "cursors", "leases", "timers", "dead", "state", "meta"};
  for (int family = 0; family < kCfCount; ++family) {
    EXPECT_EQ(report.families[family].name, order[family]);
  }
  auto counts = Counts(report);
  EXPECT_EQ(counts, raw);
  EXPECT_EQ(counts["outbox"].first, uint64_t{kFacts + 10});
  EXPECT_GT(counts["outbox"].second, uint64_t{kFacts} * 1000);
  EXPECT_EQ(counts["cursors"].first, kPartitions);
  EXPECT_EQ(counts["leases"].first, 3u);
  EXPECT_EQ(counts["timers"].first, 1u);
  EXPECT_EQ(counts["dead"].first, 1u);
  EXPECT_EQ(counts["state"].first, uint64_t{kStates});
  EXPECT_GE(counts["meta"].first, 5u);  // format version, partitions, ordering, last lsn, type
  EXPECT_GE(report.files, size_t{kCfCount});
  EXPECT_GT(report.file_bytes, uint64_t{kFacts} * 1000);
  EXPECT_EQ(report.damage_count, 0u);
  EXPECT_TRUE(report.damage.empty());
  EXPECT_EQ(report.backup_id, 0u);

  EXPECT_TRUE(VerifyDatabase((fs::path(dir_.path()) / "none").string(), &report).IsNotFound());
  EXPECT_TRUE(VerifyDatabase(dir_.path(), &report).IsNotFound());  // a directory, no database
  EXPECT_TRUE(VerifyDatabase(dir_.db(), nullptr).IsInvalidArgument());
}

TEST_F(VerifyTest, FlippedTableByteNamesTheFile) {
  Open();
  CommitFacts(kFacts, 1000);
  ASSERT_TRUE(db()->Flush(rocksdb::FlushOptions(), cf(internal::kOutbox)).ok());
  Close();
  const fs::path table = Largest(dir_.db(), ".sst");
  ASSERT_FALSE(table.empty());
  ASSERT_GT(fs::file_size(table), uintmax_t{kFacts} * 1000);
  testing::FlipByte(table,
                    fs::file_size(table) / 3);  // in a data block (they come before the index)

  VerifyReport report;
  Status s = VerifyDatabase(dir_.db(), &report);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  const std::string name = table.filename().string();
  EXPECT_NE(s.message().find(name), std::string::npos) << s.ToString();
  ASSERT_FALSE(report.damage.empty());
  EXPECT_EQ(report.damage[0].place, "table file " + name + " (outbox)");
  EXPECT_NE(report.damage[0].problem.find("Corruption"), std::string::npos);
  EXPECT_EQ(report.damage_count, report.damage.size());
  // Reading the outbox stopped at the damaged block; the families after it were read.
  ASSERT_EQ(report.families.size(), size_t{kCfCount});
  EXPECT_LT(report.families[0].records, uint64_t{kFacts});
  EXPECT_EQ(report.damage.back().place, "outbox family");
  EXPECT_GT(report.families[internal::kMeta].records, 0u);

  testing::FlipByte(table, fs::file_size(table) / 3);  // undone: the same database verifies
  EXPECT_OK(VerifyDatabase(dir_.db(), &report));
}

TEST_F(VerifyTest, RecordWithABadChecksumIsNamed) {
  Open();
  CommitFacts(20, 100);
  Fact fact;
  fact.type = "A";
  fact.payload = "payload";
  std::string record = codec::EncodeFact(fact);
  record.back() ^= 0x01;  // the payload's last byte: the record's checksum no longer matches
  ASSERT_TRUE(db()->Put(rocksdb::WriteOptions(), cf(internal::kOutbox),
                        tables::outbox::Key(1, 1'000'000), record)
                  .ok());
  std::string value = codec::Seal("value");
  value.back() ^= 0x01;
  ASSERT_TRUE(db()->Put(rocksdb::WriteOptions(), cf(internal::kState),
                        tables::state::Key("orders", std::string("\x01k", 2)), value)
                  .ok());
  ASSERT_TRUE(db()->Put(rocksdb::WriteOptions(), cf(internal::kCursors), "no separator",
                        tables::cursors::EncodeValue(1, 1))
                  .ok());
  Close();

  VerifyReport report;
  Status s = VerifyDatabase(dir_.db(), &report);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  ASSERT_EQ(report.damage_count, 3u);
  ASSERT_EQ(report.damage.size(), 3u);
  EXPECT_EQ(report.damage[0].place, "outbox record of fact 1000000 (partition 1)");
  EXPECT_EQ(report.damage[0].problem, "record checksum mismatch");
  EXPECT_EQ(report.damage[1].place, "cursors key 'no separator'");
  EXPECT_EQ(report.damage[2].place, "state record of table 'orders', key 0x016b");
  EXPECT_EQ(report.damage[2].problem, "record checksum mismatch");
  EXPECT_NE(s.message().find("fact 1000000"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("and 2 more"), std::string::npos) << s.ToString();
  // Damaged records are counted all the same: the report says what was read.
  EXPECT_EQ(report.families[internal::kOutbox].records, 21u);
}

// A WAL RocksDB cannot replay stops the open; the report names the file, not only the database.
TEST_F(VerifyTest, FlippedWalByteNamesTheWal) {
  Open();
  CommitFacts(300, 200);
  Close();
  const fs::path wal = Largest(dir_.db(), ".log");
  ASSERT_FALSE(wal.empty());
  testing::FlipByte(wal, fs::file_size(wal) / 2);
  VerifyReport report;
  Status s = VerifyDatabase(dir_.db(), &report);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  ASSERT_FALSE(report.damage.empty());
  EXPECT_EQ(report.damage[0].place, "WAL file " + wal.filename().string());
  EXPECT_NE(report.damage[0].problem.find("offset"), std::string::npos) << s.ToString();
}

TEST_F(VerifyTest, DamageBeyondTheLimitIsCountedNotKept) {
  Open();
  for (uint64_t id = 1; id <= kVerifyDamageMax + 5; ++id) {
    ASSERT_TRUE(db()->Put(rocksdb::WriteOptions(), cf(internal::kTimers),
                          std::string(3, static_cast<char>(id)), "x")
                    .ok());
  }
  Close();
  VerifyReport report;
  ASSERT_TRUE(VerifyDatabase(dir_.db(), &report).IsCorruption());
  EXPECT_EQ(report.damage_count, kVerifyDamageMax + 5);
  EXPECT_EQ(report.damage.size(), kVerifyDamageMax);
}

// A running engine keeps committing (flushing and compacting) while the database is verified.
TEST_F(VerifyTest, LiveDatabaseVerifiesWhileItCommits) {
  Open();
  Fill();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> committed{0};
  std::thread producer([&] {
    for (int i = 0; !stop.load(); ++i) {
      Txn txn = engine_->Begin();
      if (!txn.Emit("A", "live" + std::to_string(i), std::string(500, 'l')).ok()) return;
      if (!txn.Put("orders", "live" + std::to_string(i % 50), "v").ok()) return;
      if (!txn.Commit().ok()) return;
      committed.fetch_add(1);
      if (i % 50 == 49) {
        // New table files, and compactions that delete table files the verification may have
        // listed already.
        db()->Flush(rocksdb::FlushOptions(), cf(internal::kOutbox)).PermitUncheckedError();
        db()->CompactRange(rocksdb::CompactRangeOptions(), cf(internal::kOutbox), nullptr, nullptr)
            .PermitUncheckedError();
      }
    }
  });
  const int rounds = testing::kSanitized ? 2 : 4;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_TRUE(testing::WaitFor([&] { return committed.load() >= uint64_t(round + 1) * 100; }));
    const uint64_t before = committed.load();
    VerifyReport report;
    Status s = VerifyDatabase(dir_.db(), &report);
    EXPECT_OK(s);
    if (!s.ok()) break;
    EXPECT_GE(report.families[internal::kOutbox].records, uint64_t{kFacts} + before);
    EXPECT_EQ(report.families[internal::kCursors].records, kPartitions);
  }
  stop.store(true);
  producer.join();
  Close();
}

TEST_F(VerifyTest, BackupVerifiesWithTheDatabasesCounts) {
  Open();
  Fill();
  FlushAll();
  Close();
  VerifyReport database;
  ASSERT_OK(VerifyDatabase(dir_.db(), &database));
  MakeBackup(Held());

  const auto files_before = Files(target());
  VerifyReport report;
  ASSERT_OK(VerifyBackup(target(), 0, &report));
  EXPECT_EQ(Files(target()), files_before);  // verification writes nothing
  EXPECT_EQ(report.backup_id, 1u);
  EXPECT_EQ(Counts(report), Counts(database));
  EXPECT_GT(report.files, database.files);  // table files and the rest (MANIFEST, CURRENT, ...)
  EXPECT_GT(report.file_bytes, database.file_bytes);
  EXPECT_EQ(report.damage_count, 0u);

  Open();
  CommitFacts(5, 100);
  Close();
  MakeBackup(Held());
  ASSERT_OK(VerifyBackup(target(), 0, &report));
  EXPECT_EQ(report.backup_id, 2u);  // 0: the newest
  EXPECT_EQ(report.families[internal::kOutbox].records, uint64_t{kFacts} + 5);
  ASSERT_OK(VerifyBackup(target(), 1, &report));
  EXPECT_EQ(report.backup_id, 1u);
  EXPECT_EQ(report.families[internal::kOutbox].records, uint64_t{kFacts});

  EXPECT_TRUE(VerifyBackup(target(), 7, &report).IsNotFound());
  EXPECT_TRUE(VerifyBackup(dir_.db(), 0, &report).IsNotFound());  // no backup directory
  EXPECT_TRUE(VerifyBackup(target(), 0, nullptr).IsInvalidArgument());
}

// A backup taken online by wharf::Backup while the engine commits holds exactly the facts up to
// its point, and verifies.
TEST_F(VerifyTest, OnlineBackupVerifiesUpToItsPoint) {
  Open();
  Fill();
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    for (int i = 0; !stop.load(); ++i) {
      Txn txn = engine_->Begin();
      if (!txn.Emit("A", "live" + std::to_string(i), std::string(300, 'l')).ok()) return;
      if (!txn.Commit().ok()) return;
    }
  });
  BackupInfo info;
  Status backed_up = engine_->Backup(target(), {}, &info);
  stop.store(true);
  producer.join();
  ASSERT_OK(backed_up);
  Close();

  VerifyReport report;
  ASSERT_OK(VerifyBackup(target(), 0, &report));
  EXPECT_EQ(report.backup_id, info.id);
  EXPECT_EQ(report.files, info.files);
  EXPECT_EQ(report.file_bytes, info.size_bytes);
  // Every id up to the point went to a fact (or the timer), none after it.
  EXPECT_EQ(report.families[internal::kOutbox].records + report.families[internal::kTimers].records,
            info.last_fact_id);
  EXPECT_EQ(report.families[internal::kCursors].records, kPartitions);
  EXPECT_EQ(report.families[internal::kState].records, uint64_t{kStates});

  // Restored (with its incarnation record), the database verifies with the same records.
  const std::string restored_path = (fs::path(dir_.path()) / "restored").string();
  RestoreReport restored;
  ASSERT_OK(Restore(target(), restored_path, {}, &restored));
  VerifyReport database;
  ASSERT_OK(VerifyDatabase(restored_path, &database));
  for (int family = 0; family < internal::kMeta; ++family) {
    EXPECT_EQ(database.families[family].records, report.families[family].records) << family;
  }
}

TEST_F(VerifyTest, FlippedBackupFileIsNamed) {
  Open();
  Fill();
  FlushAll();
  Close();
  MakeBackup(Held());
  const fs::path file = Largest(fs::path(target()) / "shared_checksum", ".sst");
  ASSERT_FALSE(file.empty());
  testing::FlipByte(file, fs::file_size(file) / 3);

  VerifyReport report;
  Status s = VerifyBackup(target(), 0, &report);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(file.filename().string()), std::string::npos) << s.ToString();
  ASSERT_FALSE(report.damage.empty());
  EXPECT_EQ(report.damage[0].place, "backup 1's files");
  EXPECT_NE(report.damage[0].problem.find(file.filename().string()), std::string::npos);
  EXPECT_EQ(report.backup_id, 1u);
}

TEST_F(VerifyTest, BackupOfANewerFormatIsNotSupported) {
  Open();
  CommitFacts(5, 100);
  Close();
  BackupInfo held = Held();
  held.format_version = internal::kFormatVersion + 1;
  MakeBackup(held);
  VerifyReport report;
  Status s = VerifyBackup(target(), 0, &report);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  EXPECT_NE(s.message().find("format version " + std::to_string(internal::kFormatVersion + 1)),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(report.backup_id, 1u);
}

}  // namespace
}  // namespace wharf
