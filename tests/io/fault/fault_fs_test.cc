// Tests for FaultInjectionFileSystem: that it keeps exactly the bytes and names a power loss would
// keep, refuses everything after the cut, simulates a full disk, and drives a real RocksDB.
#include "io/fault/fault_fs.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace wharf::io {
namespace {

namespace fs = std::filesystem;
using rocksdb::FileOptions;
using rocksdb::FSDirectory;
using rocksdb::FSWritableFile;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

// A fresh directory, removed with its contents at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = testing::TempDir() + "/wharf_fault_fs_" + std::to_string(getpid()) + "_" +
            std::to_string(counter++);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  // Deliberately unnormalised when TempDir() ends in '/': the FS must cope with "//".
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::shared_ptr<FaultInjectionFileSystem> NewFaultFs() {
  return std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
}

std::unique_ptr<FSWritableFile> Create(FaultInjectionFileSystem& ffs, const std::string& path) {
  std::unique_ptr<FSWritableFile> file;
  EXPECT_TRUE(ffs.NewWritableFile(path, FileOptions(), &file, nullptr).ok()) << path;
  return file;
}

IOStatus Append(FSWritableFile& file, size_t n, char c = 'x') {
  return file.Append(std::string(n, c), IOOptions(), nullptr);
}

uint64_t DiskSize(const std::string& path) { return fs::file_size(path); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Goal: after a power loss each file keeps exactly its synced prefix (whether synced by the file
// object or reported through the observer), and only files whose directory entry was fsynced
// survive; files that predate the FS are untouched.
TEST(FaultFsTest, DropKeepsSyncedBytesAndDurableNames) {
  ScratchDir dir;
  { std::ofstream(dir.file("old"), std::ios::binary) << "preexisting"; }
  auto ffs = NewFaultFs();
  std::unique_ptr<FSDirectory> dir_handle;
  ASSERT_TRUE(ffs->NewDirectory(dir.path(), IOOptions(), &dir_handle, nullptr).ok());

  auto a = Create(*ffs, dir.file("a"));
  ASSERT_TRUE(Append(*a, 100).ok());
  ASSERT_TRUE(a->Sync(IOOptions(), nullptr).ok());
  ASSERT_TRUE(Append(*a, 50).ok());
  EXPECT_EQ(ffs->unsynced_bytes(), 50u);
  EXPECT_EQ(ffs->syncs_observed(), 1u);
  ASSERT_TRUE(dir_handle->Fsync(IOOptions(), nullptr).ok());  // makes the name "a" durable

  // "c" is covered by the observer-reported directory sync, "b" is created after it started.
  auto c = Create(*ffs, dir.file("c"));
  ASSERT_TRUE(Append(*c, 30).ok());
  const uint64_t token = ffs->BeforeDirSync(dir.path() + "/");
  auto b = Create(*ffs, dir.file("b"));
  ASSERT_TRUE(Append(*b, 10).ok());
  ASSERT_TRUE(b->Sync(IOOptions(), nullptr).ok());  // data durable, name is not
  ASSERT_TRUE(ffs->OnDirSynced(dir.path(), token).ok());
  // The engine reports its own fdatasync with a differently spelled path.
  ASSERT_TRUE(ffs->OnFileSynced(dir.path() + "//c", 20).ok());
  EXPECT_EQ(ffs->syncs_observed(), 3u);
  EXPECT_EQ(ffs->unsynced_bytes(), 50u + 10u);

  ffs->Cut();
  EXPECT_EQ(ffs->cuts(), 1u);
  EXPECT_TRUE(ffs->OnFileSynced(dir.file("c"), 30).IsIOError());
  EXPECT_TRUE(ffs->OnDirSynced(dir.path(), ffs->BeforeDirSync(dir.path())).IsIOError());
  EXPECT_EQ(ffs->syncs_observed(), 3u);
  EXPECT_EQ(ffs->unsynced_bytes(), 60u);
  a.reset();
  b.reset();
  c.reset();

  ASSERT_TRUE(ffs->DropUnsyncedData().ok());
  EXPECT_EQ(DiskSize(dir.file("a")), 100u);
  EXPECT_FALSE(fs::exists(dir.file("b")));
  EXPECT_EQ(DiskSize(dir.file("c")), 20u);  // not 30: the post-cut report was refused
  EXPECT_EQ(ReadAll(dir.file("old")), "preexisting");

  // The survivors are the new baseline and the FS works again.
  EXPECT_FALSE(ffs->IsCut());
  EXPECT_EQ(ffs->unsynced_bytes(), 0u);
  auto d = Create(*ffs, dir.file("d"));
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(Append(*d, 5).ok());
}

// Goal: renames carry tracked state (as for RocksDB's CURRENT), deletions forget it, and a rename
// of a not-yet-durable name still needs a directory sync.
TEST(FaultFsTest, RenameAndDeleteFollowTrackedState) {
  ScratchDir dir;
  auto ffs = NewFaultFs();
  std::unique_ptr<FSDirectory> dir_handle;
  ASSERT_TRUE(ffs->NewDirectory(dir.path(), IOOptions(), &dir_handle, nullptr).ok());

  auto tmp = Create(*ffs, dir.file("CURRENT.tmp"));
  ASSERT_TRUE(Append(*tmp, 16).ok());
  ASSERT_TRUE(tmp->Sync(IOOptions(), nullptr).ok());
  ASSERT_TRUE(tmp->Close(IOOptions(), nullptr).ok());
  ASSERT_TRUE(
      ffs->RenameFile(dir.file("CURRENT.tmp"), dir.file("CURRENT"), IOOptions(), nullptr).ok());
  auto lost = Create(*ffs, dir.file("lost"));
  ASSERT_TRUE(Append(*lost, 8).ok());
  ASSERT_TRUE(lost->Close(IOOptions(), nullptr).ok());
  ASSERT_TRUE(ffs->RenameFile(dir.file("lost"), dir.file("lost2"), IOOptions(), nullptr).ok());
  EXPECT_EQ(ffs->unsynced_bytes(), 8u);
  ASSERT_TRUE(ffs->DeleteFile(dir.file("lost2"), IOOptions(), nullptr).ok());
  EXPECT_EQ(ffs->unsynced_bytes(), 0u);
  auto kept = Create(*ffs, dir.file("kept"));
  ASSERT_TRUE(kept->Close(IOOptions(), nullptr).ok());

  ASSERT_TRUE(dir_handle->Fsync(IOOptions(), nullptr).ok());
  // After the sync: renaming a durable name is durable at once; a new name is not.
  ASSERT_TRUE(ffs->RenameFile(dir.file("kept"), dir.file("kept2"), IOOptions(), nullptr).ok());
  auto fresh = Create(*ffs, dir.file("fresh"));
  ASSERT_TRUE(fresh->Close(IOOptions(), nullptr).ok());
  ASSERT_TRUE(ffs->RenameFile(dir.file("fresh"), dir.file("fresh2"), IOOptions(), nullptr).ok());
  ffs->Cut();
  ASSERT_TRUE(ffs->DropUnsyncedData().ok());
  EXPECT_EQ(DiskSize(dir.file("CURRENT")), 16u);
  EXPECT_FALSE(fs::exists(dir.file("CURRENT.tmp")));
  EXPECT_TRUE(fs::exists(dir.file("kept2")));
  EXPECT_FALSE(fs::exists(dir.file("kept")));
  EXPECT_FALSE(fs::exists(dir.file("fresh2")));
}

// Goal: after Cut() every mutating operation fails and records nothing, while reads still work
// and writable files can still be closed.
TEST(FaultFsTest, MutationsFailAfterCut) {
  ScratchDir dir;
  auto ffs = NewFaultFs();
  std::unique_ptr<FSDirectory> dir_handle;
  ASSERT_TRUE(ffs->NewDirectory(dir.path(), IOOptions(), &dir_handle, nullptr).ok());
  auto file = Create(*ffs, dir.file("f"));
  ASSERT_TRUE(Append(*file, 4, 'a').ok());
  ASSERT_TRUE(file->Flush(IOOptions(), nullptr).ok());

  ffs->Cut();
  ffs->Cut();  // idempotent: still one power loss
  EXPECT_EQ(ffs->cuts(), 1u);
  EXPECT_TRUE(Append(*file, 4, 'b').IsIOError());
  EXPECT_TRUE(file->Flush(IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(file->Sync(IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(file->Fsync(IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(file->Truncate(1, IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(file->Close(IOOptions(), nullptr).IsIOError());
  EXPECT_EQ(ffs->syncs_observed(), 0u);

  std::unique_ptr<FSWritableFile> other;
  EXPECT_TRUE(ffs->NewWritableFile(dir.file("g"), FileOptions(), &other, nullptr).IsIOError());
  EXPECT_FALSE(fs::exists(dir.file("g")));
  EXPECT_TRUE(ffs->RenameFile(dir.file("f"), dir.file("h"), IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(ffs->DeleteFile(dir.file("f"), IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(ffs->CreateDir(dir.file("sub"), IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(dir_handle->Fsync(IOOptions(), nullptr).IsIOError());

  std::string contents;
  ASSERT_TRUE(rocksdb::ReadFileToString(ffs.get(), dir.file("f"), &contents).ok());
  EXPECT_EQ(contents, "aaaa");

  ASSERT_TRUE(ffs->DropUnsyncedData().ok());
  EXPECT_FALSE(fs::exists(dir.file("f")));  // neither data nor name was ever synced
}

// Goal: a full disk fails appends with a retryable NoSpace error without writing a byte, and
// appends work again once space is back.
TEST(FaultFsTest, NoSpaceFailsAppendsWithoutWriting) {
  ScratchDir dir;
  auto ffs = NewFaultFs();
  auto file = Create(*ffs, dir.file("f"));
  ASSERT_TRUE(Append(*file, 3, 'a').ok());

  ffs->SetNoSpace(true);
  const IOStatus s = Append(*file, 4, 'b');
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_TRUE(s.GetRetryable());
  EXPECT_TRUE(file->PositionedAppend(rocksdb::Slice("bb"), 3, IOOptions(), nullptr).IsNoSpace());
  EXPECT_TRUE(file->Sync(IOOptions(), nullptr).ok());  // only appends are affected
  EXPECT_EQ(ffs->unsynced_bytes(), 0u);

  ffs->SetNoSpace(false);
  ASSERT_TRUE(Append(*file, 2, 'c').ok());
  EXPECT_EQ(ffs->unsynced_bytes(), 2u);
  ASSERT_TRUE(file->Close(IOOptions(), nullptr).ok());
  EXPECT_EQ(ReadAll(dir.file("f")), "aaacc");
}

// Goal: a sync racing with Cut() is either recorded and acknowledged, or refused; so after the
// drop every file holds exactly the bytes its writer saw acknowledged as synced.
TEST(FaultFsTest, SyncRacingWithCutIsRecordedOrRefused) {
  ScratchDir dir;
  auto ffs = NewFaultFs();
  constexpr int kWriters = 4;
  std::vector<std::unique_ptr<FSWritableFile>> files;
  for (int i = 0; i < kWriters; ++i) files.push_back(Create(*ffs, dir.file(std::to_string(i))));
  std::unique_ptr<FSDirectory> dir_handle;
  ASSERT_TRUE(ffs->NewDirectory(dir.path(), IOOptions(), &dir_handle, nullptr).ok());
  ASSERT_TRUE(dir_handle->Fsync(IOOptions(), nullptr).ok());

  std::vector<std::atomic<uint64_t>> acked(kWriters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      for (uint64_t size = 0;;) {
        if (!Append(*files[i], 100).ok()) return;
        size += 100;
        if (!files[i]->Sync(IOOptions(), nullptr).ok()) return;
        acked[i].store(size);
      }
    });
  }
  // Cut only once every writer is in its append/sync loop, so each one races with the cut.
  for (auto& a : acked) {
    while (a.load() < 500) std::this_thread::yield();
  }
  ffs->Cut();
  for (auto& t : threads) t.join();
  files.clear();

  ASSERT_TRUE(ffs->DropUnsyncedData().ok());
  for (int i = 0; i < kWriters; ++i) {
    EXPECT_EQ(DiskSize(dir.file(std::to_string(i))), acked[i].load()) << i;
  }
}

struct DbHandle {
  std::unique_ptr<rocksdb::Env> env;
  std::unique_ptr<rocksdb::DB> db;
};

rocksdb::Options DbOptions(rocksdb::Env* env, bool manual_wal_flush) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.env = env;
  options.manual_wal_flush = manual_wal_flush;
  return options;
}

void OpenDb(const std::shared_ptr<FaultInjectionFileSystem>& ffs, const std::string& path,
            bool manual_wal_flush, DbHandle* h) {
  h->env = rocksdb::NewCompositeEnv(ffs);
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::Open(DbOptions(h->env.get(), manual_wal_flush), path, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  h->db.reset(raw);
}

// Simulates the crash: power off, then the process dies (close errors are expected and ignored).
void CrashAndRecover(FaultInjectionFileSystem& ffs, DbHandle* h) {
  ffs.Cut();
  h->db->Close().PermitUncheckedError();
  h->db.reset();
  const IOStatus s = ffs.DropUnsyncedData();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

bool HasKey(rocksdb::DB& db, const std::string& key) {
  std::string value;
  return db.Get(rocksdb::ReadOptions(), key, &value).ok();
}

// Goal: with a real RocksDB, every write acknowledged with sync=true survives a power cut, and
// unsynced writes really are dropped (proving the simulation is not a no-op).
TEST(FaultFsTest, RocksDbSyncedWritesSurvivePowerLoss) {
  ScratchDir dir;
  const std::string db_path = dir.file("db");
  auto ffs = NewFaultFs();
  DbHandle h;
  ASSERT_NO_FATAL_FAILURE(OpenDb(ffs, db_path, /*manual_wal_flush=*/false, &h));
  rocksdb::WriteOptions sync_write;
  sync_write.sync = true;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(h.db->Put(sync_write, "synced" + std::to_string(i), "v").ok());
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(h.db->Put(rocksdb::WriteOptions(), "unsynced" + std::to_string(i), "v").ok());
  }
  // RocksDB hands each unsynced WAL record to the file right away; none of it is durable.
  EXPECT_GT(ffs->unsynced_bytes(), 0u);
  ffs->Cut();
  EXPECT_FALSE(h.db->Put(sync_write, "after_cut", "v").ok());
  ASSERT_NO_FATAL_FAILURE(CrashAndRecover(*ffs, &h));

  ASSERT_NO_FATAL_FAILURE(OpenDb(ffs, db_path, false, &h));
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(HasKey(*h.db, "synced" + std::to_string(i))) << i;
    // Nothing synced the WAL after the last sync=true write, so these are certainly gone.
    EXPECT_FALSE(HasKey(*h.db, "unsynced" + std::to_string(i))) << i;
  }
  EXPECT_FALSE(HasKey(*h.db, "after_cut"));
}

// Goal: with manual_wal_flush, FlushWAL(true) is what makes writes durable.
TEST(FaultFsTest, RocksDbFlushWalSyncSurvivesPowerLoss) {
  ScratchDir dir;
  const std::string db_path = dir.file("db");
  auto ffs = NewFaultFs();
  DbHandle h;
  ASSERT_NO_FATAL_FAILURE(OpenDb(ffs, db_path, /*manual_wal_flush=*/true, &h));
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(h.db->Put(rocksdb::WriteOptions(), "flushed" + std::to_string(i), "v").ok());
  }
  ASSERT_TRUE(h.db->FlushWAL(/*sync=*/true).ok());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(h.db->Put(rocksdb::WriteOptions(), "buffered" + std::to_string(i), "v").ok());
  }
  ASSERT_NO_FATAL_FAILURE(CrashAndRecover(*ffs, &h));

  ASSERT_NO_FATAL_FAILURE(OpenDb(ffs, db_path, true, &h));
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(HasKey(*h.db, "flushed" + std::to_string(i))) << i;
    // Still in RocksDB's WAL buffer at the cut: never reached the file, let alone the disk.
    EXPECT_FALSE(HasKey(*h.db, "buffered" + std::to_string(i))) << i;
  }
}

}  // namespace
}  // namespace wharf::io
