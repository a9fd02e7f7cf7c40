// Tests of the sync backends behind io/sync/sync_backend.h. Every case runs on both
// implementations; the io_uring one is skipped where the kernel refuses a ring (seccomp, sysctl,
// old kernel).
#include "io/sync/sync_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/sync/posix_sync_backend.h"
#include "io/sync/uring_sync_backend.h"

namespace wharf::io {
namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

// A fresh directory for one test's files, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = testing::TempDir() + "wharf_sync_backend_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    for (int fd : fds_) ::close(fd);
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Creates `name` with `bytes` bytes written through write(2) (so they are dirty in the page
  // cache) and returns a descriptor that stays open until the TempDir goes away.
  int WriteFile(const std::string& name, size_t bytes) {
    const int fd = ::open((path_ + "/" + name).c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    EXPECT_GE(fd, 0) << "open " << name << ": errno " << errno;
    if (fd < 0) return fd;
    fds_.push_back(fd);
    const std::string chunk(64 << 10, 'w');
    while (bytes > 0) {
      const size_t n = std::min(bytes, chunk.size());
      EXPECT_EQ(::write(fd, chunk.data(), n), static_cast<ssize_t>(n));
      bytes -= n;
    }
    return fd;
  }

  int OpenSelf() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY);
    EXPECT_GE(fd, 0) << "open dir: errno " << errno;
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }

 private:
  std::string path_;
  std::vector<int> fds_;
};

// Collects round completions from the backend thread.
class Rounds {
 public:
  SyncBackend::RoundCallback Callback() {
    return [this](int errno_value) {
      std::lock_guard lock(mu_);
      errors_.push_back(errno_value);
      threads_.push_back(std::this_thread::get_id());
      cv_.notify_all();
    };
  }
  // Waits until `n` callbacks ran in total.
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return errors_.size() >= n; });
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return errors_.size();
  }
  int error(size_t i) {
    std::lock_guard lock(mu_);
    return errors_.at(i);
  }
  std::thread::id thread(size_t i) {
    std::lock_guard lock(mu_);
    return threads_.at(i);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> errors_;
  std::vector<std::thread::id> threads_;
};

class SyncBackendTest : public testing::TestWithParam<IoBackend> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    if (GetParam() == IoBackend::kUring) {
      Status probe = UringSyncBackend::Probe();
      if (!probe.ok()) GTEST_SKIP() << "io_uring unavailable: " << probe.message();
    }
    ASSERT_TRUE(SyncBackend::Create(GetParam(), &backend_).ok());
    ASSERT_NE(backend_, nullptr);
  }

  TempDir dir_;  // outlives backend_ (declared first): no sync targets a closed descriptor
  std::unique_ptr<SyncBackend> backend_;
};

TEST_P(SyncBackendTest, SyncsFilesAndDirectory) {
  std::vector<SyncOp> ops;
  for (int i = 0; i < 3; ++i) ops.push_back({dir_.WriteFile("f" + std::to_string(i), 4096)});
  ops.push_back({dir_.OpenSelf(), /*data_only=*/false});
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit(ops, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_EQ(rounds.error(0), 0);
}

TEST_P(SyncBackendTest, CallbackRunsOffTheSubmittingThread) {
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit({{dir_.WriteFile("f", 4096)}}, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_NE(rounds.thread(0), std::this_thread::get_id());
}

TEST_P(SyncBackendTest, EmptyRoundCompletesOnTheBackendThread) {
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit({}, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_EQ(rounds.error(0), 0);
  EXPECT_NE(rounds.thread(0), std::this_thread::get_id());
}

// More ops than the io_uring backend keeps in the kernel at once.
TEST_P(SyncBackendTest, LargeRoundCompletes) {
  std::vector<int> fds;
  for (int i = 0; i < 8; ++i) fds.push_back(dir_.WriteFile("f" + std::to_string(i), 4096));
  std::vector<SyncOp> ops;
  for (int i = 0; i < 300; ++i) ops.push_back({fds[i % fds.size()], i % 2 == 0});
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit(ops, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_EQ(rounds.error(0), 0);
}

TEST_P(SyncBackendTest, ClosedDescriptorReportsEbadf) {
  const int good = dir_.WriteFile("good", 4096);
  const int closed = ::open((dir_.path() + "/closed").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(closed, 0);
  ASSERT_EQ(::close(closed), 0);  // nothing else in this process opens files meanwhile
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit({{good}, {closed}, {good, false}}, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_EQ(rounds.error(0), EBADF);
  // The backend keeps working after a failed round.
  ASSERT_TRUE(backend_->Submit({{good}}, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(2));
  EXPECT_EQ(rounds.error(1), 0);
}

TEST_P(SyncBackendTest, SequentialRoundsFromTheSubmitterCompleteOnceInOrder) {
  const int fd = dir_.WriteFile("f", 4096);
  Rounds rounds;
  constexpr size_t kRounds = 2000;
  for (size_t i = 0; i < kRounds; ++i) {
    // Alternate data and full syncs, and sometimes an empty round.
    std::vector<SyncOp> ops;
    if (i % 7 != 0) ops.push_back({fd, i % 2 == 0});
    ASSERT_TRUE(backend_->Submit(std::move(ops), rounds.Callback()).ok()) << "round " << i;
    ASSERT_TRUE(rounds.WaitFor(i + 1)) << "round " << i;
    ASSERT_EQ(rounds.count(), i + 1) << "a callback ran twice";
    ASSERT_EQ(rounds.error(i), 0);
  }
}

// Each callback submits the next round from the backend thread, as the committer does.
class Chain {
 public:
  Chain(SyncBackend* backend, std::vector<SyncOp> ops, size_t limit)
      : backend_(backend), ops_(std::move(ops)), limit_(limit) {}

  // Returns whether the first Submit was accepted.
  bool Start() { return SubmitRound(0); }

  // Waits until the chain stopped (limit reached or a Submit refused).
  bool WaitStopped() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return stopped_; });
  }
  // Waits until at least `n` rounds completed.
  bool WaitCompleted(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return completed_.size() >= n; });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> completed_;  // round indexes in completion order
  size_t accepted_ = 0;            // Submits that returned OK
  int errors_ = 0;                 // callbacks with a non-zero errno
  bool stopped_ = false;
  Status refusal_;  // the Submit that stopped the chain, if any

 private:
  bool SubmitRound(size_t i) {
    Status status = backend_->Submit(ops_, [this, i](int errno_value) { OnDone(i, errno_value); });
    std::lock_guard lock(mu_);
    if (status.ok()) {
      ++accepted_;
    } else {
      refusal_ = status;
      stopped_ = true;
      cv_.notify_all();
    }
    return status.ok();
  }

  void OnDone(size_t i, int errno_value) {
    {
      std::lock_guard lock(mu_);
      completed_.push_back(i);
      if (errno_value != 0) ++errors_;
      cv_.notify_all();
      if (i + 1 == limit_) {
        stopped_ = true;
        return;
      }
    }
    SubmitRound(i + 1);
  }

  SyncBackend* backend_;
  const std::vector<SyncOp> ops_;
  const size_t limit_;
};

TEST_P(SyncBackendTest, SequentialRoundsFromCallbacksCompleteOnceInOrder) {
  constexpr size_t kRounds = 2000;
  Chain chain(backend_.get(), {{dir_.WriteFile("a", 4096)}, {dir_.WriteFile("b", 4096)}}, kRounds);
  ASSERT_TRUE(chain.Start());
  ASSERT_TRUE(chain.WaitStopped());
  std::lock_guard lock(chain.mu_);
  EXPECT_TRUE(chain.refusal_.ok()) << chain.refusal_.message();
  EXPECT_EQ(chain.errors_, 0);
  ASSERT_EQ(chain.completed_.size(), kRounds);
  for (size_t i = 0; i < kRounds; ++i) ASSERT_EQ(chain.completed_[i], i);
}

TEST_P(SyncBackendTest, DestructorFinishesTheRoundInFlight) {
  // Enough dirty data that the sync is likely still running when the destructor starts.
  const int fd = dir_.WriteFile("big", 16 << 20);
  Rounds rounds;
  ASSERT_TRUE(backend_->Submit({{fd}}, rounds.Callback()).ok());
  backend_.reset();
  ASSERT_EQ(rounds.count(), 1u);  // ran before the destructor returned
  EXPECT_EQ(rounds.error(0), 0);
}

TEST_P(SyncBackendTest, DestructorStopsACallbackChain) {
  Chain chain(backend_.get(), {{dir_.WriteFile("f", 4096)}}, SIZE_MAX);
  ASSERT_TRUE(chain.Start());
  ASSERT_TRUE(chain.WaitCompleted(10));
  backend_.reset();  // must not wait for an endless chain
  std::lock_guard lock(chain.mu_);
  EXPECT_TRUE(chain.stopped_);
  EXPECT_EQ(chain.refusal_.code(), Status::Code::kClosed);
  EXPECT_EQ(chain.completed_.size(), chain.accepted_);  // no accepted round lost its callback
  EXPECT_EQ(chain.errors_, 0);
}

TEST_P(SyncBackendTest, EmptyCallbackIsRefused) {
  EXPECT_TRUE(backend_->Submit({}, nullptr).IsInvalidArgument());
}

INSTANTIATE_TEST_SUITE_P(Backends, SyncBackendTest,
                         testing::Values(IoBackend::kPosix, IoBackend::kUring),
                         [](const testing::TestParamInfo<IoBackend>& param_info) {
                           return param_info.param == IoBackend::kPosix ? "Posix" : "Uring";
                         });

TEST(SyncBackendCreateTest, AutoGivesAWorkingBackend) {
  std::unique_ptr<SyncBackend> backend;
  ASSERT_TRUE(SyncBackend::Create(IoBackend::kAuto, &backend).ok());
  const std::string name = backend->name();
  EXPECT_TRUE(name == "uring" || name == "posix") << name;
  EXPECT_EQ(name == "uring", UringSyncBackend::Probe().ok());
  TempDir dir;
  Rounds rounds;
  ASSERT_TRUE(backend->Submit({{dir.WriteFile("f", 4096)}}, rounds.Callback()).ok());
  ASSERT_TRUE(rounds.WaitFor(1));
  EXPECT_EQ(rounds.error(0), 0);
}

TEST(SyncBackendCreateTest, ExplicitKinds) {
  std::unique_ptr<SyncBackend> backend;
  ASSERT_TRUE(SyncBackend::Create(IoBackend::kPosix, &backend).ok());
  EXPECT_STREQ(backend->name(), "posix");

  const Status probe = UringSyncBackend::Probe();
  const Status status = SyncBackend::Create(IoBackend::kUring, &backend);
  if (probe.ok()) {
    ASSERT_TRUE(status.ok());
    EXPECT_STREQ(backend->name(), "uring");
  } else {
    EXPECT_EQ(status.code(), Status::Code::kNotSupported);
    EXPECT_NE(status.message().find("io_uring"), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace wharf::io
