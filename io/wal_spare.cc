#include "io/wal_spare.h"

#include <chrono>
#include <utility>

#include "io/thread_name.h"

namespace wharf::io {
namespace {

constexpr uint64_t kChunkBytes = 1u << 20;
// After a failed build (disk full, I/O error), the next attempt waits this long.
constexpr auto kRetryDelay = std::chrono::seconds(1);

}  // namespace

WalSpare::WalSpare(rocksdb::FileSystem* fs, std::string dir, uint64_t bytes)
    : fs_(fs),
      path_(std::move(dir) + "/WHARF-WAL-SPARE"),
      bytes_((bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes),
      thread_([this] {
        NameThisThread("wharf-walspare");
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
  if (ready_) fs_->DeleteFile(path_, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  ready_ = false;
}

void WalSpare::SetOnSwitch(std::function<void()> on_switch) {
  {
    std::lock_guard lock(mu_);
    on_switch_ = std::move(on_switch);
  }
  cv_.notify_all();  // a switch may be waiting for it
}

std::string WalSpare::Take() {
  std::lock_guard lock(mu_);
  wanted_ = true;  // a WAL was created: the engine writes, so the next one will want a spare too
  cv_.notify_all();
  if (!ready_) return {};
  ready_ = false;
  switch_wanted_ = false;  // the new WAL is this spare
  return path_;
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
      lock.unlock();
      const bool built = Build();
      lock.lock();
      if (built) {
        ready_ = true;
        wanted_ = false;
      } else if (!stop_) {
        cv_.wait_for(lock, kRetryDelay, [this] { return stop_; });
      }
      continue;
    }
    if (ready_ && switch_wanted_ && on_switch_) {
      switch_wanted_ = false;
      std::function<void()> on_switch = on_switch_;
      lock.unlock();
      on_switch();
      lock.lock();
      continue;
    }
    cv_.wait(lock);
  }
}

bool WalSpare::Build() {
  const rocksdb::IOOptions io_options;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs_->NewWritableFile(path_, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return false;
  const std::string zeros(kChunkBytes, '\0');
  auto stopped = [this] {
    std::lock_guard lock(mu_);
    return stop_;
  };
  for (uint64_t offset = 0; s.ok() && offset < bytes_; offset += kChunkBytes) {
    if (stopped()) s = rocksdb::IOStatus::Aborted("stopping");
    if (s.ok()) s = file->Append(zeros, io_options, nullptr);
    // Start writing each chunk back now, so the final sync does not send the whole file at once
    // (a WAL sync queued behind it would wait for all of it).
    if (s.ok()) s = file->RangeSync(offset, kChunkBytes, io_options, nullptr);
  }
  if (s.ok()) s = file->Sync(io_options, nullptr);
  rocksdb::IOStatus closed = file->Close(io_options, nullptr);
  if (s.ok()) s = closed;
  if (s.ok()) return true;
  fs_->DeleteFile(path_, io_options, nullptr).PermitUncheckedError();
  return false;
}

}  // namespace wharf::io
