// UringSyncBackend: issues a round's syncs as IORING_OP_FSYNC entries on a private io_uring, so all
// of them run concurrently in the kernel; a reaper thread blocked on the completion queue runs the
// round's callback when the last one completes.
//
// liburing.h is deliberately kept out of this header (behind Impl): it pulls in <linux/fs.h>, whose
// BLOCK_SIZE macro breaks headers included after it (moodycamel's concurrentqueue.h).
//
// Thread safety: Submit may be called from any thread, including from inside a round callback;
// rounds must not overlap (Submit while a round is in flight returns Internal). Callbacks run on
// the reaper thread, one at a time, never inside Submit; a Submit that returns an error never runs
// its callback.
//
// Invariants: at most one round is in flight and at most kDepth (64) of its syncs are in
// the kernel at once (the rest are issued as earlier ones complete), so the completion queue never
// overflows. The destructor lets the round in flight finish and run its callback, refuses new
// rounds (Closed) from then on, and returns only after the reaper has exited.
#pragma once

#include <memory>
#include <vector>

#include "io/sync/sync_backend.h"

namespace wharf::io {

class UringSyncBackend final : public SyncBackend {
 public:
  // Sets up a ring and checks that the kernel supports IORING_OP_FSYNC. NotSupported otherwise,
  // with the likely cause in the message (seccomp, sysctl kernel.io_uring_disabled, old kernel...).
  static Status Probe();
  static Status Create(std::unique_ptr<SyncBackend>* backend);

  ~UringSyncBackend() override;
  UringSyncBackend(const UringSyncBackend&) = delete;
  UringSyncBackend& operator=(const UringSyncBackend&) = delete;

  Status Submit(std::vector<SyncOp> ops, RoundCallback callback) override;
  const char* name() const override { return "uring"; }

 private:
  struct Impl;
  explicit UringSyncBackend(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace wharf::io
