#include "io/sync/posix_sync_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "engine/base/assert.h"
#include "engine/base/thread_name.h"

namespace wharf::io {
namespace {

// Returns 0 or the errno of the sync. EINTR is retried: a signal says nothing about the disk.
int SyncOne(const SyncOp& op) {
  WHARF_ASSERT(op.fd >= 0);  // a closed slot would sync nothing and report EBADF as the disk's
  for (;;) {
    const int rc = op.data_only ? ::fdatasync(op.fd) : ::fsync(op.fd);
    if (rc == 0) return 0;
    WHARF_DASSERT(rc == -1 && errno > 0);  // 0 means success to the round's callback
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
    internal::MutexLock lock(&mu_);
    WHARF_ASSERT(!stopping_);  // destroyed once
    // Refuse new rounds first, so a callback that keeps resubmitting cannot delay shutdown forever.
    stopping_ = true;
    cv_.SignalAll();
    cv_.Wait(&mu_, [this]() WHARF_REQUIRES(mu_) { return !in_flight_; });
    WHARF_ASSERT(!pending_);  // a pending round is in flight until the thread took it
  }
  // The last callback may still be running on the thread; join waits for it.
  thread_.join();
}

Status PosixSyncBackend::Submit(std::vector<SyncOp> ops, RoundCallback callback) {
  if (!callback) return Status::InvalidArgument("SyncBackend::Submit: empty callback");
  WHARF_DASSERT(std::all_of(ops.begin(), ops.end(), [](const SyncOp& op) { return op.fd >= 0; }));
  internal::MutexLock lock(&mu_);
  if (stopping_) return Status::Closed("posix sync backend is shutting down");
  if (in_flight_) return Status::Internal("SyncBackend::Submit while a round is in flight");
  WHARF_ASSERT(!pending_);  // pending implies in flight
  ops_ = std::move(ops);
  callback_ = std::move(callback);
  pending_ = true;
  in_flight_ = true;
  cv_.SignalAll();
  return Status::OK();
}

void PosixSyncBackend::Run() {
  for (;;) {
    std::vector<SyncOp> ops;
    RoundCallback callback;
    {
      internal::MutexLock lock(&mu_);
      // A round submitted before stopping_ was set still runs: pending_ is checked first.
      cv_.Wait(&mu_,
               [this]() WHARF_REQUIRES(mu_) { return pending_ || (stopping_ && !in_flight_); });
      if (!pending_) return;
      WHARF_ASSERT(in_flight_);  // the round's callback has not run
      pending_ = false;
      ops = std::move(ops_);
      callback = std::move(callback_);
    }
    WHARF_ASSERT(callback);  // Submit refuses an empty one

    // Every op is attempted even after a failure: the caller learns the first error, and the other
    // files still get their chance to become durable.
    int first_error = 0;
    for (const SyncOp& op : ops) {
      const int error = SyncOne(op);
      if (first_error == 0) first_error = error;
    }
    WHARF_DASSERT(first_error >= 0);

    {
      internal::MutexLock lock(&mu_);
      WHARF_ASSERT(in_flight_ && !pending_);  // no round was submitted over this one
      // Cleared before the callback runs so that the callback may submit the next round.
      in_flight_ = false;
      cv_.SignalAll();
    }
    callback(first_error);
  }
}

}  // namespace wharf::io
