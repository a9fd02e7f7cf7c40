#include "engine/commit/read_snapshots.h"

#include "engine/base/assert.h"

namespace wharf::internal {

std::shared_ptr<const ReadSnapshot> ReadSnapshots::Take(bool validated, bool may_lock) {
  auto snapshot = std::make_unique<ReadSnapshot>();
  snapshot->validated = validated;
  // Counted before the snapshot is taken, so that the committer cannot stop tracking between the
  // two; when tracking was off, it starts under the write mutex (see the header).
  if (validated && (word_.fetch_add(kOneReader, std::memory_order_acq_rel) & kTracking) == 0) {
    // Two branches rather than one conditional lock, which the analysis cannot follow.
    if (may_lock) {
      MutexLock write_lock(write_mu_);
      StartTracking();
    } else {
      StartTracking();
    }
  }
  // Counted while it lives: the committer cannot stop tracking under it.
  WHARF_DASSERT(!validated || word_.load(std::memory_order_acquire) >= kOneReader);
  {
    MutexLock lock(&mu_);
    if (closed_) {
      if (validated) word_.fetch_sub(kOneReader, std::memory_order_acq_rel);
      return nullptr;
    }
    snapshot->handle = store_->TakeSnapshot();
    snapshot->seq = Store::SnapshotSequence(snapshot->handle);
    // After the snapshot: every group it sees is numbered at most this (groups are numbered before
    // they reach RocksDB).
    snapshot->write_seq = write_seq_->load(std::memory_order_seq_cst);
    open_.insert(snapshot.get());
  }
  return std::shared_ptr<const ReadSnapshot>(snapshot.release(), [this](const ReadSnapshot* done) {
    Release(const_cast<ReadSnapshot*>(done));
  });
}

void ReadSnapshots::Release(ReadSnapshot* snapshot) {
  {
    MutexLock lock(&mu_);
    if (snapshot->handle != nullptr) store_->ReleaseSnapshot(snapshot->handle);
    open_.erase(snapshot);
  }
  if (snapshot->validated) {
    const uint64_t before = word_.fetch_sub(kOneReader, std::memory_order_acq_rel);
    WHARF_ASSERT(before >= kOneReader);
  }
  delete snapshot;
}

void ReadSnapshots::CloseAll() {
  MutexLock lock(&mu_);
  closed_ = true;
  for (ReadSnapshot* snapshot : open_) {
    store_->ReleaseSnapshot(snapshot->handle);
    snapshot->handle = nullptr;
  }
  open_.clear();
}

}  // namespace wharf::internal
