// WalSpare's switch requests: one the store cannot serve now is asked again, until it succeeds or
// the spare is taken by a WAL that switched on its own.
#include "io/wal_spare.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace wharf::io
