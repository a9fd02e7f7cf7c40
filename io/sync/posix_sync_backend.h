// PosixSyncBackend: runs each round's fdatasync/fsync calls on one dedicated thread.
//
// The fallback when io_uring is unavailable: the syncs of a round run one after the other, so a
// round costs the sum of its syncs rather than the slowest one, but the committer still writes the
// next group while they run.
//
// Thread safety: Submit may be called from any thread, including from inside a round callback;
// rounds must not overlap (Submit while a round is in flight returns Internal). Callbacks run on
// the backend thread, one at a time, never inside Submit; a Submit that returns an error never runs
// its callback.
//
// Invariants: at most one round is in flight; the destructor lets it finish and run
// its callback, refuses new rounds (Closed) from then on, and returns only after the thread has
// exited.
#pragma once

#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "io/sync/sync_backend.h"

namespace wharf::io {

class PosixSyncBackend final : public SyncBackend {
 public:
  PosixSyncBackend();
  ~PosixSyncBackend() override;
  PosixSyncBackend(const PosixSyncBackend&) = delete;
  PosixSyncBackend& operator=(const PosixSyncBackend&) = delete;

  Status Submit(std::vector<SyncOp> ops, RoundCallback callback) override;
  const char* name() const override { return "posix"; }

 private:
  void Run();

  internal::Mutex mu_;
  internal::CondVar cv_;  // signals a submitted round, a finished round, and stopping_
  // A round is waiting for the thread (ops_, callback_ hold it).
  bool pending_ WHARF_GUARDED_BY(mu_) = false;
  // A round was submitted and its callback has not started yet.
  bool in_flight_ WHARF_GUARDED_BY(mu_) = false;
  bool stopping_ WHARF_GUARDED_BY(mu_) = false;  // the destructor runs: no new rounds
  std::vector<SyncOp> ops_ WHARF_GUARDED_BY(mu_);
  RoundCallback callback_ WHARF_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace wharf::io
