#include "io/wal/wal_spare.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

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

uint64_t RoundUpToMiB(uint64_t bytes) { return (bytes + kMiB - 1) / kMiB * kMiB; }

// The I/O of this thread goes after everyone else's where the block scheduler has classes
// (mq-deadline, bfq): WAL syncs first. Best effort; lowering one's own priority needs no rights.
void LowerThisThreadsIoPriority() {
  constexpr int kWhoProcess = 1, kClassIdle = 3, kClassShift = 13;  // <linux/ioprio.h>
  static_cast<void>(::syscall(SYS_ioprio_set, kWhoProcess, 0, kClassIdle << kClassShift));
}

}  // namespace

WalSpare::WalSpare(rocksdb::FileSystem* fs, const std::string& dir, uint64_t bytes_max)
    : fs_(fs),
      dir_(dir),
      paths_{dir + "/WHARF-WAL-SPARE-0", dir + "/WHARF-WAL-SPARE-1"},
      bytes_max_(RoundUpToMiB(std::max<uint64_t>(bytes_max, 1))),
      next_bytes_(bytes_max_),
      thread_([this] {
        NameThisThread("wharf-walspare");
        LowerThisThreadsIoPriority();
        for (const std::string& path : paths_) {
          fs_->DeleteFile(path, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
        }
        Run();
      }) {}

WalSpare::~WalSpare() { Stop(); }

void WalSpare::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  // A half-built spare was removed by Build; an unused one is only zeros nobody refers to.
  if (ready_) {
    fs_->DeleteFile(paths_[next_path_], rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  }
  ready_ = false;
  ready_flag_.store(false, std::memory_order_relaxed);
}

void WalSpare::SetOnSwitch(std::function<bool()> on_switch) {
  {
    std::lock_guard lock(mu_);
    on_switch_ = std::move(on_switch);
  }
  cv_.notify_all();  // a switch may be waiting for it
}

std::string WalSpare::Take(uint64_t* bytes) {
  std::lock_guard lock(mu_);
  wanted_ = true;  // a WAL was created: the engine writes, so the next one will want a spare too
  cv_.notify_all();
  if (!ready_) return {};
  ready_ = false;
  ready_flag_.store(false, std::memory_order_relaxed);
  switch_wanted_ = false;  // the new WAL is this spare
  *bytes = ready_bytes_;
  const int taken = next_path_;
  next_path_ = 1 - next_path_;
  return paths_[taken];
}

void WalSpare::ObserveWal(uint64_t wal_bytes, bool outgrew) {
  const uint64_t wanted = outgrew ? wal_bytes * 2 : wal_bytes / 4 * 5;
  std::lock_guard lock(mu_);
  next_bytes_ = std::clamp(RoundUpToMiB(wanted), kMiB, bytes_max_);
}

void WalSpare::WantSwitch() {
  std::lock_guard lock(mu_);
  wanted_ = true;
  switch_wanted_ = true;
  cv_.notify_all();
}

void WalSpare::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (wanted_ && !ready_) {
      const uint64_t bytes = next_bytes_;
      const std::string& path = paths_[next_path_];
      lock.unlock();
      const bool built = Build(path, bytes);
      lock.lock();
      if (built) {
        ready_ = true;
        ready_flag_.store(true, std::memory_order_relaxed);
        ready_bytes_ = bytes;
        wanted_ = false;
      } else if (!stop_) {
        cv_.wait_for(lock, kRetryDelay, [this] { return stop_; });
      }
      continue;
    }
    if (ready_ && switch_wanted_ && on_switch_) {
      switch_wanted_ = false;
      std::function<bool()> on_switch = on_switch_;
      lock.unlock();
      const bool switched = on_switch();
      lock.lock();
      if (!switched) {
        // Ask again shortly, unless the spare was taken meanwhile (the WAL switched on its own).
        cv_.wait_for(lock, kSwitchRetryDelay, [this] { return stop_ || !ready_; });
        if (ready_) switch_wanted_ = true;
      }
      continue;
    }
    cv_.wait(lock);
  }
}

bool WalSpare::Build(const std::string& path, uint64_t bytes) {
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
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, due, [this] { return stop_; });
      if (stop_) s = rocksdb::IOStatus::Aborted("stopping");
    }
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
