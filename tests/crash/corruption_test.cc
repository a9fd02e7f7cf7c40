// Damage to a closed database's files (issue 17): a byte flipped in the WAL, the MANIFEST,
// CURRENT or an SST is reported as Corruption naming the file, or the open recovers without
// losing an acknowledged commit; never a silent loss, never a fact id handed out twice.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "test_util.h"
#include "wharf/admin.h"
#include "wharf/engine.h"

namespace wharf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr int kCommits = 300;

class CorruptionTest : public ::testing::Test {
 protected:
  EngineOptions Options() const {
    EngineOptions options;
    options.partitions = 2;
    return options;
  }
  // Commits kCommits single-fact transactions (each acknowledged durable), then closes cleanly.
  void Build(bool flush_to_sst) {
    EngineOptions options = Options();
    if (flush_to_sst) options.memtable_bytes = 64u << 10;  // many small SSTs
    std::unique_ptr<Engine> engine;
    ASSERT_OK(Engine::Open(dir_.db(), options, &engine));
    ASSERT_OK(engine->DeclareTypes({"A"}));
    for (int i = 0; i < kCommits; ++i) {
      Txn txn = engine->Begin();
      // With SSTs wanted: ~600 KiB through 64 KiB memtables, so that flushes surely ran.
      ASSERT_OK(
          txn.Emit("A", "k" + std::to_string(i), std::string(flush_to_sst ? 2000 : 200, 'x')));
      CommitResult result;
      ASSERT_OK(txn.Commit(&result));
      acknowledged_.insert(result.first_fact_id);
    }
    ASSERT_OK(engine->Close());
  }
  // The largest file whose name ends with `suffix` (or is exactly it).
  fs::path Largest(const std::string& suffix) const {
    fs::path best;
    uintmax_t best_size = 0;
    for (const auto& entry : fs::directory_iterator(dir_.db())) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(suffix) || !entry.is_regular_file()) continue;
      if (entry.file_size() > best_size) best = entry.path(), best_size = entry.file_size();
    }
    return best;
  }
  // Opens after the damage: either Corruption naming `file`, or every acknowledged fact is there
  // and the next commit gets an id above every id handed out before.
  void ExpectReportedOrIntact(const fs::path& file) {
    std::unique_ptr<Engine> engine;
    Status s = Engine::Open(dir_.db(), Options(), &engine);
    if (!s.ok()) {
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_NE(s.message().find(file.filename().string()), std::string::npos) << s.ToString();
      return;
    }
    std::set<uint64_t> found;
    for (uint32_t p = 0; p < 2; ++p) {
      std::vector<Fact> facts;
      Status read = engine->ReadFacts(p, 0, 10 * kCommits, &facts);
      if (read.IsCorruption()) return;  // reported on read, naming the record
      ASSERT_OK(read);
      for (const Fact& fact : facts) found.insert(fact.id);
    }
    for (uint64_t id : acknowledged_) ASSERT_TRUE(found.contains(id)) << "lost fact " << id;
    Txn txn = engine->Begin();
    ASSERT_OK(txn.Emit("A", "after", "x"));
    CommitResult result;
    ASSERT_OK(txn.Commit(&result));
    EXPECT_GT(result.first_fact_id, *acknowledged_.rbegin()) << "a fact id was reused";
    ASSERT_OK(engine->Close());
  }

  TempDir dir_;
  std::set<uint64_t> acknowledged_;
};

// 17 failure 4: a flipped byte inside the synced WAL used to drop 204 acknowledged transactions
// silently and hand their ids out again.
TEST_F(CorruptionTest, FlippedWalByteIsReportedNamingTheFile) {
  Build(/*flush_to_sst=*/false);
  fs::path wal = Largest(".log");
  ASSERT_FALSE(wal.empty());
  for (uintmax_t offset : {fs::file_size(wal) / 2, fs::file_size(wal) / 4}) {
    testing::FlipByte(wal, offset);
    std::unique_ptr<Engine> engine;
    Status s = Engine::Open(dir_.db(), Options(), &engine);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.message().find(wal.filename().string()), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("offset"), std::string::npos) << s.ToString();
    testing::FlipByte(wal, offset);  // restore: the database opens whole again
    ExpectReportedOrIntact(wal);
    return;
  }
}

// The operator's salvage: after a refused open, RecoverDamagedWal keeps the intact records, drops
// the damaged one, and no id is ever handed out twice.
TEST_F(CorruptionTest, RecoverSalvagesAndNeverReusesIds) {
  Build(/*flush_to_sst=*/false);
  fs::path wal = Largest(".log");
  ASSERT_FALSE(wal.empty());
  testing::FlipByte(wal, fs::file_size(wal) / 2);
  std::unique_ptr<Engine> engine;
  ASSERT_TRUE(Engine::Open(dir_.db(), Options(), &engine).IsCorruption());
  RecoverReport report;
  ASSERT_OK(RecoverDamagedWal(dir_.db(), Options(), &report));
  EXPECT_TRUE(report.damaged);
  EXPECT_NE(report.damage.find(wal.filename().string()), std::string::npos) << report.damage;
  EXPECT_GT(report.facts_after, 0u);
  EXPECT_GE(report.id_floor, *acknowledged_.rbegin());
  ASSERT_OK(Engine::Open(dir_.db(), Options(), &engine));
  std::set<uint64_t> found;
  for (uint32_t p = 0; p < 2; ++p) {
    std::vector<Fact> facts;
    ASSERT_OK(engine->ReadFacts(p, 0, 10 * kCommits, &facts));
    for (const Fact& fact : facts) found.insert(fact.id);
  }
  // Only the damaged part is gone (the reader skips the rest of the damaged record's 32 KiB WAL
  // block), not the half of the log after it that point-in-time recovery would drop.
  EXPECT_GT(found.size(), acknowledged_.size() * 3 / 4);
  EXPECT_LT(found.size(), acknowledged_.size());
  Txn txn = engine->Begin();
  ASSERT_OK(txn.Emit("A", "after", "x"));
  CommitResult result;
  ASSERT_OK(txn.Commit(&result));
  EXPECT_GT(result.first_fact_id, report.id_floor);
  EXPECT_GT(result.first_fact_id, *acknowledged_.rbegin()) << "a fact id was reused";
  ASSERT_OK(engine->Close());
  // The salvage is done: a second one finds nothing to do.
  ASSERT_OK(RecoverDamagedWal(dir_.db(), Options(), &report));
  EXPECT_FALSE(report.damaged);
}

TEST_F(CorruptionTest, FlippedManifestByteIsReported) {
  Build(/*flush_to_sst=*/true);
  fs::path manifest;
  for (const auto& entry : fs::directory_iterator(dir_.db())) {
    if (entry.path().filename().string().starts_with("MANIFEST-")) manifest = entry.path();
  }
  ASSERT_FALSE(manifest.empty());
  testing::FlipByte(manifest, fs::file_size(manifest) / 2);
  ExpectReportedOrIntact(manifest);
}

TEST_F(CorruptionTest, GarbledCurrentIsReported) {
  Build(/*flush_to_sst=*/false);
  fs::path current = fs::path(dir_.db()) / "CURRENT";
  testing::FlipByte(current, 3);
  std::unique_ptr<Engine> engine;
  Status s = Engine::Open(dir_.db(), Options(), &engine);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("CURRENT"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find("not a Wharf database"), std::string::npos) << s.ToString();
}

TEST_F(CorruptionTest, FlippedSstByteIsReportedOrHarmless) {
  Build(/*flush_to_sst=*/true);
  fs::path sst = Largest(".sst");
  ASSERT_FALSE(sst.empty());
  testing::FlipByte(sst, fs::file_size(sst) / 3);
  ExpectReportedOrIntact(sst);
}

}  // namespace
}  // namespace wharf
