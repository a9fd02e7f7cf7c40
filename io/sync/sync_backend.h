// SyncBackend: issues a round of fsync/fdatasync calls and reports when all of them completed.
//
// Two implementations behind one interface:
//   - UringSyncBackend: submits IORING_OP_FSYNC entries to an io_uring; a reaper thread blocked on
//     the completion queue runs the round's callback as soon as the last one completes.
//   - PosixSyncBackend: a dedicated thread calls fdatasync/fsync for each entry.
// The committer keeps at most one round in flight and writes the next group meanwhile.
//
// Thread safety: Submit is called by one thread at a time (the committer). The callback runs on
// the backend's thread, never inside Submit.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "wharf/options.h"
#include "wharf/status.h"

namespace wharf::io {

struct SyncOp {
  int fd = -1;
  bool data_only = true;  // fdatasync (files) vs fsync (directories)
};

class SyncBackend {
 public:
  // `errno_value` is 0 when every op succeeded, else the errno of the first failure.
  using RoundCallback = std::function<void(int errno_value)>;

  virtual ~SyncBackend() = default;
  // Starts a round. `ops` may be empty (the callback then runs at once on the backend thread).
  // REQUIRES: the previous round's callback has run.
  virtual Status Submit(std::vector<SyncOp> ops, RoundCallback callback) = 0;
  virtual const char* name() const = 0;

  // kAuto picks uring when an io_uring can be set up and supports fsync, else posix.
  static Status Create(IoBackend kind, std::unique_ptr<SyncBackend>* backend);
};

// Runs `ops` on the calling thread (fdatasync/fsync, EINTR retried). Returns 0 or the errno of
// the first failure. For a lone commit with nothing queued behind it, where handing the round to
// another thread would only add two context switches.
int SyncInline(const std::vector<SyncOp>& ops);

}  // namespace wharf::io
