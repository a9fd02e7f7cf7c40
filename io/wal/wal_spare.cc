#include "io/wal/wal_spare.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"

namespace wharf::io {
namespace {

constexpr uint64_t kMiB = 1u << 20;
// Each step of zeros is written and pushed to the disk before the next.
constexpr uint64_t kStepBytes = 64u << 10;
// The most a spare is written at: a 64 MiB spare takes half a second, less than W1's 16
// producers took to fill a WAL of that size here (about a second at P=16, B=100).
constexpr uint64_t kZeroMiBPerSecond = 128;
// A spare is built only while the file system has this many times its size free.
constexpr uint64_t kFreeSpaceFactor = 4;
// After a failed build (disk full, I/O error), the next attempt waits this long.
constexpr auto kRetryDelay = std::chrono::seconds(1);
// How long until a switch that could not happen (the store's last one still flushing) is retried.
constexpr auto kSwitchRetryDelay = std::chrono::milliseconds(5);

uint64_t RoundUpToMiB(uint64_t bytes) {
  WHARF_ASSERT(bytes <= UINT64_MAX - kMiB);  // the sum below must not wrap to a tiny spare
  const uint64_t rounded = (bytes + kMiB - 1) / kMiB * kMiB;
  WHARF_DASSERT(rounded >= bytes && rounded - bytes < kMiB && rounded % kMiB == 0);
  return rounded;
}
static_assert(kMiB % kStepBytes == 0, "a spare of whole MiB is written in whole steps");

// The I/O of this thread goes after everyone else's where the block scheduler has classes
// (mq-deadline, bfq): WAL syncs first. Best effort; lowering one's own priority needs no rights.
void LowerThisThreadsIoPriority() {
  constexpr int kWhoProcess = 1, kClassIdle = 3, kClassShift = 13;  // <linux/ioprio.h>
  static_assert(kClassIdle < 8, "the class is 3 bits above the 13-bit level");
  // Who 0 with IOPRIO_WHO_PROCESS is the calling thread: never another one's priority.
  [[maybe_unused]] const long rc =
      ::syscall(SYS_ioprio_set, kWhoProcess, 0, kClassIdle << kClassShift);
  WHARF_DASSERT(rc == 0 || rc == -1);
}

bool IsSparePath(const std::string& path, const std::string (&paths)[2]) {
  return path == paths[0] || path == paths[1];
}

}  // namespace

WalSpare::WalSpare(rocksdb::FileSystem* fs, const std::string& dir, uint64_t bytes_max)
    : fs_(fs),
      dir_(dir),
      paths_{dir + "/WHARF-WAL-SPARE-0", dir + "/WHARF-WAL-SPARE-1"},
      bytes_max_(RoundUpToMiB(std::max<uint64_t>(bytes_max, 1))),
      next_bytes_(bytes_max_),
      thread_([this] {
        WHARF_ASSERT(fs_ != nullptr);
        NameThisThread("wharf-walspare");
        LowerThisThreadsIoPriority();
        for (const std::string& path : paths_) {
          fs_->DeleteFile(path, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
        }
        Run();
      }) {
  WHARF_ASSERT(!dir.empty());
  WHARF_ASSERT(bytes_max_ >= kMiB && bytes_max_ % kMiB == 0);  // whole MiB, whole steps
}

WalSpare::~WalSpare() { Stop(); }

void WalSpare::Stop() {
  // The builder thread would join itself (on_switch must not call back in).
  WHARF_ASSERT(std::this_thread::get_id() != thread_.get_id());
  {
    internal::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  internal::MutexLock lock(&mu_);
  WHARF_ASSERT(next_path_ == 0 || next_path_ == 1);
  // A half-built spare was removed by Build; an unused one is only zeros nobody refers to.
  if (ready_) {
    fs_->DeleteFile(paths_[next_path_], rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  }
  ready_ = false;
  ready_flag_.store(false, std::memory_order_relaxed);
}

void WalSpare::SetOnSwitch(std::function<bool()> on_switch) {
  WHARF_ASSERT(on_switch);  // an empty one would leave a wanted switch waiting forever
  {
    internal::MutexLock lock(&mu_);
    WHARF_DASSERT(!on_switch_);  // set once, before the first WantSwitch
    on_switch_ = std::move(on_switch);
  }
  cv_.SignalAll();  // a switch may be waiting for it
}

std::string WalSpare::Take(uint64_t* bytes) {
  WHARF_ASSERT(bytes != nullptr);
  internal::MutexLock lock(&mu_);
  wanted_ = true;  // a WAL was created: the engine writes, so the next one will want a spare too
  cv_.SignalAll();
  if (!ready_) return {};
  WHARF_ASSERT(next_path_ == 0 || next_path_ == 1);
  // A ready spare was built whole: whole MiB, within the bound.
  WHARF_ASSERT(ready_bytes_ >= kMiB && ready_bytes_ <= bytes_max_ && ready_bytes_ % kMiB == 0);
  ready_ = false;
  ready_flag_.store(false, std::memory_order_relaxed);
  switch_wanted_ = false;  // the new WAL is this spare
  *bytes = ready_bytes_;
  const int taken = next_path_;
  next_path_ = 1 - next_path_;
  return paths_[taken];
}

void WalSpare::ObserveWal(uint64_t wal_bytes, bool outgrew) {
  WHARF_ASSERT(wal_bytes <= UINT64_MAX / 4);  // the products below must not wrap
  const uint64_t wanted = outgrew ? wal_bytes * 2 : wal_bytes / 4 * 5;
  internal::MutexLock lock(&mu_);
  next_bytes_ = std::clamp(RoundUpToMiB(wanted), kMiB, bytes_max_);
  WHARF_DASSERT(next_bytes_ % kMiB == 0);  // both bounds are whole MiB
}

void WalSpare::WantSwitch() {
  internal::MutexLock lock(&mu_);
  // ready() reads the flag without the lock; under it the two agree.
  WHARF_DASSERT(ready_flag_.load(std::memory_order_relaxed) == ready_);
  wanted_ = true;
  switch_wanted_ = true;
  cv_.SignalAll();
}

void WalSpare::Run() {
  // Held except across a build and on_switch (explicit Lock/Unlock: the analysis checks that
  // they pair up on every path).
  mu_.Lock();
  while (!stop_) {
    WHARF_ASSERT(next_path_ == 0 || next_path_ == 1);
    WHARF_DASSERT(ready_flag_.load(std::memory_order_relaxed) == ready_);
    if (wanted_ && !ready_) {
      const uint64_t bytes = next_bytes_;
      const std::string& path = paths_[next_path_];
      mu_.Unlock();
      const bool built = Build(path, bytes);
      mu_.Lock();
      if (built) {
        ready_ = true;
        ready_flag_.store(true, std::memory_order_relaxed);
        ready_bytes_ = bytes;
        wanted_ = false;
      } else if (!stop_) {
        cv_.WaitFor(&mu_, kRetryDelay, [this]() WHARF_REQUIRES(mu_) { return stop_; });
      }
      continue;
    }
    if (ready_ && switch_wanted_ && on_switch_) {
      switch_wanted_ = false;
      std::function<bool()> on_switch = on_switch_;
      mu_.Unlock();
      const bool switched = on_switch();
      mu_.Lock();
      if (!switched) {
        // Ask again shortly, unless the spare was taken meanwhile (the WAL switched on its own).
        cv_.WaitFor(&mu_, kSwitchRetryDelay,
                    [this]() WHARF_REQUIRES(mu_) { return stop_ || !ready_; });
        if (ready_) switch_wanted_ = true;
      }
      continue;
    }
    cv_.Wait(&mu_);
  }
  mu_.Unlock();
}

bool WalSpare::Build(const std::string& path, uint64_t bytes) {
  WHARF_ASSERT(IsSparePath(path, paths_));  // never anything but a spare is zeroed
  // Whole MiB within the bound, so whole steps: the RangeSync below never passes the end.
  WHARF_ASSERT(bytes >= kMiB && bytes <= bytes_max_ && bytes % kStepBytes == 0);
  const rocksdb::IOOptions io_options;
  uint64_t free_bytes = 0;
  // A file system that cannot tell (NotSupported) gets its spare.
  if (fs_->GetFreeSpace(dir_, io_options, &free_bytes, nullptr).ok() &&
      free_bytes / kFreeSpaceFactor < bytes) {
    return false;
  }
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs_->NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return false;
  const std::string zeros(kStepBytes, '\0');
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t offset = 0; s.ok() && offset < bytes; offset += kStepBytes) {
    // Keep to the rate; stop at once when asked.
    const auto due =
        start + std::chrono::microseconds(offset * 1'000'000 / (kZeroMiBPerSecond * kMiB));
    {
      internal::MutexLock lock(&mu_);
      cv_.WaitUntil(&mu_, due, [this]() WHARF_REQUIRES(mu_) { return stop_; });
      if (stop_) s = rocksdb::IOStatus::Aborted("stopping");
    }
    WHARF_DASSERT(offset + kStepBytes <= bytes);
    if (s.ok()) s = file->Append(zeros, io_options, nullptr);
    // Start writing the step back now: the final sync then has little left to send, and a WAL
    // sync queues behind one step at most.
    if (s.ok()) s = file->RangeSync(offset, kStepBytes, io_options, nullptr);
  }
  if (s.ok()) s = file->Sync(io_options, nullptr);
  rocksdb::IOStatus closed = file->Close(io_options, nullptr);
  if (s.ok()) s = closed;
  if (s.ok()) return true;
  fs_->DeleteFile(path, io_options, nullptr).PermitUncheckedError();
  return false;
}

}  // namespace wharf::io
