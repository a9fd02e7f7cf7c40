#include "io/sync/sync_backend.h"

#include <unistd.h>

#include <cerrno>

#include "engine/base/assert.h"
#include "io/sync/posix_sync_backend.h"
#include "io/sync/uring_sync_backend.h"

namespace wharf::io {

Status SyncBackend::Create(IoBackend kind, std::unique_ptr<SyncBackend>* backend) {
  WHARF_ASSERT(backend != nullptr);
  switch (kind) {
    case IoBackend::kPosix:
      *backend = std::make_unique<PosixSyncBackend>();
      return Status::OK();
    case IoBackend::kUring:
      // NotSupported, naming the likely cause, when the kernel will not give us a ring.
      return UringSyncBackend::Create(backend);
    case IoBackend::kAuto:
      if (UringSyncBackend::Create(backend).ok()) return Status::OK();
      *backend = std::make_unique<PosixSyncBackend>();
      return Status::OK();
  }
  return Status::InvalidArgument("unknown IoBackend");
}

}  // namespace wharf::io

namespace wharf::io {

int SyncInline(const std::vector<SyncOp>& ops) {
  int first_errno = 0;
  for (const SyncOp& op : ops) {
    WHARF_ASSERT(op.fd >= 0);  // a closed slot would sync nothing and report EBADF as the disk's
    int result = 0;
    do {
      result = op.data_only ? ::fdatasync(op.fd) : ::fsync(op.fd);
    } while (result != 0 && errno == EINTR);
    if (result != 0 && first_errno == 0) first_errno = errno;
  }
  WHARF_DASSERT(first_errno >= 0);  // 0 or an errno: the callers' contract
  return first_errno;
}

}  // namespace wharf::io
