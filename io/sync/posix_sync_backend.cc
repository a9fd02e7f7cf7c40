#include "io/sync/posix_sync_backend.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include "engine/base/thread_name.h"

namespace wharf::io {
namespace {

// Returns 0 or the errno of the sync. EINTR is retried: a signal says nothing about the disk.
int SyncOne(const SyncOp& op) {
  for (;;) {
    const int rc = op.data_only ? ::fdatasync(op.fd) : ::fsync(op.fd);
    if (rc == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

}  // namespace

PosixSyncBackend::PosixSyncBackend()
    : thread_([this] {
        NameThisThread("wharf-sync");
        Run();
      }) {}

PosixSyncBackend::~PosixSyncBackend() {
  {
    std::unique_lock lock(mu_);
    // Refuse new rounds first, so a callback that keeps resubmitting cannot delay shutdown forever.
    stopping_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !in_flight_; });
  }
  // The last callback may still be running on the thread; join waits for it.
  thread_.join();
}

Status PosixSyncBackend::Submit(std::vector<SyncOp> ops, RoundCallback callback) {
  if (!callback) return Status::InvalidArgument("SyncBackend::Submit: empty callback");
  std::lock_guard lock(mu_);
  if (stopping_) return Status::Closed("posix sync backend is shutting down");
  if (in_flight_) return Status::Internal("SyncBackend::Submit while a round is in flight");
  ops_ = std::move(ops);
  callback_ = std::move(callback);
  pending_ = true;
  in_flight_ = true;
  cv_.notify_all();
  return Status::OK();
}

void PosixSyncBackend::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    // A round submitted before stopping_ was set still runs: pending_ is checked first.
    cv_.wait(lock, [this] { return pending_ || (stopping_ && !in_flight_); });
    if (!pending_) return;
    pending_ = false;
    std::vector<SyncOp> ops = std::move(ops_);
    RoundCallback callback = std::move(callback_);
    lock.unlock();

    // Every op is attempted even after a failure: the caller learns the first error, and the other
    // files still get their chance to become durable.
    int first_error = 0;
    for (const SyncOp& op : ops) {
      const int error = SyncOne(op);
      if (first_error == 0) first_error = error;
    }

    lock.lock();
    // Cleared before the callback runs so that the callback may submit the next round.
    in_flight_ = false;
    cv_.notify_all();
    lock.unlock();
    callback(first_error);
    lock.lock();
  }
}

}  // namespace wharf::io
