// WalFileSystem (io/wal/wal_fs.h) on the real posix file system: which files it tracks as WALs,
// the sync plans it makes (one fdatasync per WAL with unsynced bytes, the directory after a new
// WAL), what a completed, failed or refused round does to the unsynced bytes, and that closed
// WALs stay planned until synced. The syncs are run here with the real syscalls; a recording
// DurabilityObserver (the interface the fault-injecting file system implements) sees the reports.
#include "io/wal/wal_fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace wharf::io {
namespace {

class RecordingObserver : public DurabilityObserver {
 public:
  rocksdb::IOStatus OnFileSynced(const std::string& path, uint64_t size_bytes) override {
    std::lock_guard lock(mutex);
    files.emplace_back(path, size_bytes);
    return refuse ? rocksdb::IOStatus::IOError("power is cut") : rocksdb::IOStatus::OK();
  }
  uint64_t BeforeDirSync(const std::string& dir) override {
    std::lock_guard lock(mutex);
    before_dirs.push_back(dir);
    return ++token;
  }
  rocksdb::IOStatus OnDirSynced(const std::string& dir, uint64_t dir_token) override {
    std::lock_guard lock(mutex);
    dirs.emplace_back(dir, dir_token);
    return rocksdb::IOStatus::OK();
  }

  std::mutex mutex;
  bool refuse = false;
  uint64_t token = 0;
  std::vector<std::pair<std::string, uint64_t>> files;
  std::vector<std::string> before_dirs;
  std::vector<std::pair<std::string, uint64_t>> dirs;
};

class WalFsTest : public ::testing::Test {
 protected:
  WalFsTest() : fs_(rocksdb::FileSystem::Default(), &observer_) {}

  std::unique_ptr<rocksdb::FSWritableFile> Create(const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    EXPECT_TRUE(
        fs_.NewWritableFile(dir_.path() + "/" + name, rocksdb::FileOptions(), &file, nullptr).ok());
    return file;
  }
  static void Append(rocksdb::FSWritableFile* file, size_t bytes) {
    const std::string data(bytes, 'w');
    ASSERT_TRUE(file->Append(data, rocksdb::IOOptions(), nullptr).ok());
    ASSERT_TRUE(file->Flush(rocksdb::IOOptions(), nullptr).ok());
  }
  // Runs a plan's syncs as a backend would: fdatasync for files, fsync for the directory.
  static int RunSyncs(const WalFileSystem::SyncPlan& plan) {
    for (const SyncOp& op : plan.ops) {
      EXPECT_GE(op.fd, 0);
      if ((op.data_only ? ::fdatasync(op.fd) : ::fsync(op.fd)) != 0) return errno;
    }
    return 0;
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  wharf::testing::TempDir dir_;
  RecordingObserver observer_;
  WalFileSystem fs_;
};

TEST(WalFileName, OnlyDigitsDotLog) {
  for (const char* name : {"000012.log", "1.log", "/db/000012.log", "rel/dir/42.log"}) {
    EXPECT_TRUE(IsWalFileName(name)) << name;
  }
  for (const char* name :
       {".log", "/db/.log", "LOG", "LOG.old.1", "MANIFEST-000001", "CURRENT", "000012.sst",
        "12.log.tmp", "1a.log", "a1.log", "12.LOG", "/db.log/x", "12 .log", "-1.log", ""}) {
    EXPECT_FALSE(IsWalFileName(name)) << name;
  }
}

// Files that are not WALs pass through untracked: nothing to plan, nothing unsynced.
TEST_F(WalFsTest, OtherFilesAreNotTracked) {
  auto manifest = Create("MANIFEST-000001");
  auto table = Create("000007.sst");
  Append(manifest.get(), 100);
  Append(table.get(), 100);
  EXPECT_EQ(fs_.unsynced_bytes(), 0u);
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);
  EXPECT_TRUE(plan.empty());
  EXPECT_FALSE(plan.syncs_dir);
  EXPECT_TRUE(observer_.before_dirs.empty());
}

// A new WAL: the first plan syncs its bytes and the directory (its name is not durable before);
// the completed round reports both to the observer and leaves nothing unsynced.
TEST_F(WalFsTest, NewWalPlansItsBytesAndTheDirectory) {
  auto wal = Create("000001.log");
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);  // created, nothing appended: only the directory
  ASSERT_EQ(plan.ops.size(), 1u);
  EXPECT_FALSE(plan.ops[0].data_only);
  EXPECT_TRUE(plan.syncs_dir);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));

  Append(wal.get(), 100);
  EXPECT_EQ(fs_.unsynced_bytes(), 100u);
  fs_.PlanSync(&plan);
  ASSERT_EQ(plan.ops.size(), 1u);
  EXPECT_TRUE(plan.ops[0].data_only);
  EXPECT_FALSE(plan.syncs_dir);
  ASSERT_EQ(plan.targets.size(), 1u);
  EXPECT_EQ(plan.targets[0].size_bytes, 100u);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(fs_.unsynced_bytes(), 0u);
  fs_.PlanSync(&plan);
  EXPECT_TRUE(plan.empty());

  EXPECT_EQ(observer_.files,
            (std::vector<std::pair<std::string, uint64_t>>{{Path("000001.log"), 100}}));
  EXPECT_EQ(observer_.before_dirs, std::vector<std::string>{dir_.path()});
  EXPECT_EQ(observer_.dirs,
            (std::vector<std::pair<std::string, uint64_t>>{{dir_.path(), observer_.token}}));
}

// Bytes appended while a round is in flight are not covered by it: they stay unsynced and the
// next plan covers everything appended by then.
TEST_F(WalFsTest, BytesAppendedDuringARoundWaitForTheNext) {
  auto wal = Create("000001.log");
  Append(wal.get(), 100);
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);
  Append(wal.get(), 50);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(fs_.unsynced_bytes(), 50u);
  fs_.PlanSync(&plan);
  ASSERT_EQ(plan.targets.size(), 1u);
  EXPECT_EQ(plan.targets[0].size_bytes, 150u);
  EXPECT_FALSE(plan.syncs_dir);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(fs_.unsynced_bytes(), 0u);
}

// A failed round acknowledges nothing: the bytes stay unsynced and the directory sync is planned
// again. ENOSPC and EDQUOT are retryable (space may come back), EIO is not.
TEST_F(WalFsTest, AFailedRoundKeepsEverythingUnsynced) {
  auto wal = Create("000001.log");
  Append(wal.get(), 64);
  for (int errno_value : {EIO, ENOSPC, EDQUOT}) {
    SCOPED_TRACE(errno_value);
    WalFileSystem::SyncPlan plan;
    fs_.PlanSync(&plan);
    EXPECT_EQ(plan.ops.size(), 2u);
    EXPECT_TRUE(plan.syncs_dir);
    Status s = fs_.CompleteSync(plan, errno_value);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_EQ(s.retryable(), errno_value != EIO) << s.ToString();
    EXPECT_NE(s.message().find("fdatasync of the WAL failed"), std::string::npos) << s.ToString();
    EXPECT_EQ(fs_.unsynced_bytes(), 64u);
  }
  EXPECT_TRUE(observer_.files.empty());
  EXPECT_TRUE(observer_.dirs.empty());
}

// An observer that refuses a sync (power already cut in a simulation) fails the round, naming the
// file; its bytes count as unsynced.
TEST_F(WalFsTest, ARefusedSyncFailsTheRound) {
  auto wal = Create("000001.log");
  Append(wal.get(), 10);
  observer_.refuse = true;
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);
  Status s = fs_.CompleteSync(plan, RunSyncs(plan));
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find(Path("000001.log")), std::string::npos) << s.ToString();
  EXPECT_EQ(fs_.unsynced_bytes(), 10u);
  observer_.refuse = false;
  fs_.PlanSync(&plan);
  EXPECT_TRUE(plan.syncs_dir);  // the directory sync was not counted either
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(fs_.unsynced_bytes(), 0u);
}

// After a switch, the old WAL (closed by RocksDB) is still synced while it has unsynced bytes, and
// forgotten once it has none; the new one makes the directory pending again.
TEST_F(WalFsTest, ClosedWalsStayPlannedUntilSynced) {
  auto old_wal = Create("000001.log");
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  Append(old_wal.get(), 30);
  ASSERT_TRUE(old_wal->Close(rocksdb::IOOptions(), nullptr).ok());
  old_wal.reset();
  auto new_wal = Create("000002.log");
  Append(new_wal.get(), 20);
  EXPECT_EQ(fs_.unsynced_bytes(), 50u);

  fs_.PlanSync(&plan);
  ASSERT_EQ(plan.targets.size(), 2u);
  EXPECT_EQ(plan.targets[0].size_bytes, 30u);
  EXPECT_EQ(plan.targets[1].size_bytes, 20u);
  EXPECT_TRUE(plan.syncs_dir);
  ASSERT_EQ(plan.ops.size(), 3u);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(fs_.unsynced_bytes(), 0u);

  Append(new_wal.get(), 5);
  fs_.PlanSync(&plan);
  ASSERT_EQ(plan.targets.size(), 1u);  // the closed, synced WAL is gone
  EXPECT_EQ(plan.targets[0].size_bytes, 25u);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  EXPECT_EQ(observer_.files,
            (std::vector<std::pair<std::string, uint64_t>>{
                {Path("000001.log"), 30}, {Path("000002.log"), 20}, {Path("000002.log"), 25}}));
}

// A WAL reopened for appending (RocksDB's recycle or reopen path) is tracked like a new one.
TEST_F(WalFsTest, ReopenedWalIsTracked) {
  Create("000003.log").reset();
  WalFileSystem::SyncPlan plan;
  fs_.PlanSync(&plan);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
  std::unique_ptr<rocksdb::FSWritableFile> file;
  ASSERT_TRUE(
      fs_.ReopenWritableFile(Path("000003.log"), rocksdb::FileOptions(), &file, nullptr).ok());
  Append(file.get(), 7);
  EXPECT_EQ(fs_.unsynced_bytes(), 7u);
  fs_.PlanSync(&plan);
  ASSERT_EQ(plan.targets.size(), 1u);
  EXPECT_EQ(plan.targets[0].size_bytes, 7u);
  ASSERT_OK(fs_.CompleteSync(plan, RunSyncs(plan)));
}

}  // namespace
}  // namespace wharf::io
