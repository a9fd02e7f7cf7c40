// WalSpare's switch requests: one the store cannot serve now is asked again, until it succeeds or
// the spare is taken by a WAL that switched on its own.
#include "io/wal/wal_spare.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace wharf::io {
namespace {

constexpr uint64_t kSpareBytes = 1u << 20;
constexpr auto kPatience = std::chrono::seconds(30);  // a hang fails, not a slow machine

// Counts the switch requests and answers them from a script.
class SwitchRecorder {
 public:
  explicit SwitchRecorder(int refusals) : refusals_(refusals) {}

  bool OnSwitch() {
    std::lock_guard lock(mu_);
    ++calls_;
    cv_.notify_all();
    return calls_ > refusals_;
  }
  bool WaitForCalls(int calls) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return calls_ >= calls; });
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  const int refusals_;
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
};

// A spare builder in `dir` whose WAL wants a switch at once; `recorder` must outlive it.
std::unique_ptr<WalSpare> SpareWantingASwitch(const testing::TempDir& dir,
                                              SwitchRecorder* recorder) {
  auto spare =
      std::make_unique<WalSpare>(rocksdb::FileSystem::Default().get(), dir.path(), kSpareBytes);
  spare->SetOnSwitch([recorder] { return recorder->OnSwitch(); });
  spare->WantSwitch();
  return spare;
}

TEST(WalSpareTest, AsksAgainAfterASwitchThatCouldNotHappen) {
  testing::TempDir dir;
  SwitchRecorder recorder(/*refusals=*/2);
  std::unique_ptr<WalSpare> spare = SpareWantingASwitch(dir, &recorder);
  ASSERT_TRUE(recorder.WaitForCalls(3));
  // Served on the third request: no fourth, and the spare is still there for the new WAL.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(recorder.calls(), 3);
  uint64_t bytes = 0;
  const std::string path = spare->Take(&bytes);
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(bytes, kSpareBytes);
  EXPECT_EQ(std::filesystem::file_size(path), kSpareBytes);
}

TEST(WalSpareTest, StopsAskingOnceTheSpareIsTaken) {
  testing::TempDir dir;
  SwitchRecorder recorder(/*refusals=*/1000000);
  std::unique_ptr<WalSpare> spare = SpareWantingASwitch(dir, &recorder);
  ASSERT_TRUE(recorder.WaitForCalls(1));
  // The WAL switched on its own (a memtable filled): it took the spare, the wish is void.
  uint64_t bytes = 0;
  const std::string taken = spare->Take(&bytes);
  ASSERT_FALSE(taken.empty());
  // Taking starts the next spare; once it is whole, nothing asks for a switch on its behalf.
  ASSERT_EQ(taken, dir.path() + "/WHARF-WAL-SPARE-0");
  const std::filesystem::path next = dir.path() + "/WHARF-WAL-SPARE-1";
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  std::error_code error;
  while (std::filesystem::file_size(next, error) != kSpareBytes || error) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no next spare at " << next;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // (Counted only now: a request in progress while Take ran may still have been counting.)
  const int calls_before_ready = recorder.calls();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ten retry periods
  EXPECT_EQ(recorder.calls(), calls_before_ready);
}

// Reports a chosen amount of free space, and counts the space checks and the files created.
class SpaceReportingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  SpaceReportingFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  const char* Name() const override { return "SpaceReportingFileSystem"; }
  rocksdb::IOStatus GetFreeSpace(const std::string& /*path*/, const rocksdb::IOOptions& /*options*/,
                                 uint64_t* free_bytes, rocksdb::IODebugContext* /*dbg*/) override {
    *free_bytes = free_bytes_.load();
    space_checks_.fetch_add(1);
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    files_created_.fetch_add(1);
    return target()->NewWritableFile(fname, options, result, dbg);
  }

  std::atomic<uint64_t> free_bytes_{0};
  std::atomic<int> space_checks_{0};
  std::atomic<int> files_created_{0};
};

// Goal: no spare is written while the disk has less than four spares' worth free (the database's
// own files need the room: a full disk must not be filled further by zeros), and one is built once
// the space is back.
TEST(WalSpareTest, BuildsNoSpareWhileSpaceIsShort) {
  testing::TempDir dir;
  SpaceReportingFileSystem fs;
  fs.free_bytes_ = 4 * kSpareBytes - 1;
  SwitchRecorder recorder(/*refusals=*/0);
  WalSpare spare(&fs, dir.path(), kSpareBytes);
  spare.SetOnSwitch([&recorder] { return recorder.OnSwitch(); });
  spare.WantSwitch();
  // A second space check means the first attempt ended (and its retry began).
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (fs.space_checks_.load() < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the builder never retried";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(fs.files_created_.load(), 0) << "a spare was started with too little space free";
  EXPECT_EQ(recorder.calls(), 0);
  uint64_t bytes = 0;
  EXPECT_TRUE(spare.Take(&bytes).empty());

  fs.free_bytes_ = 4 * kSpareBytes;
  ASSERT_TRUE(recorder.WaitForCalls(1)) << "no spare once the space was back";
  EXPECT_EQ(fs.files_created_.load(), 1);
}

}  // namespace
}  // namespace wharf::io
