// Giving the space of removed facts back, soon after their floors rose.
//
// The filter drops removed facts whenever RocksDB rewrites them, but RocksDB rewrites a file only
// when its level fills up; an outbox that consumers keep up with could hold tens of MiB of removed
// facts for a long time. So after each pass:
//   1. table files entirely below the floors (outside level 0, whose files span every partition)
//      are deleted outright (DeleteFilesInRanges: no rewrite at all);
//   2. when what is left below the floors is a large share of the outbox's table files (at least
//      kCompactShare of them and kCompactBytesMin; under a byte bound, where it counts against
//      the facts kept, an outbox memtable's worth), each such partition range is compacted, which
//      rewrites level 0 with the live facts only. A stuck consumer keeps most of the outbox live;
//      its old facts leave by whole files, so this compaction is rare then.
// Compactions started here are cancelled by Stop() (engine close).

#include "engine/core/engine_core.h"
#include "engine/retention/plan.h"
#include "engine/retention/retention.h"
#include "engine/store/directory_use.h"
#include "engine/store/tables/outbox.h"
#include "engine/store/tables/scan.h"

namespace wharf::internal {

namespace {

constexpr uint64_t kCompactBytesMin = 4u << 20;
constexpr uint64_t kCompactShare = 4;  // compact when removed bytes >= 1/kCompactShare of files
constexpr uint64_t kWalMemtables = 2;  // flush every family when the WALs hold > 2 memtables

}  // namespace

Status Retention::Reclaim(const std::vector<uint64_t>& floors) {
  auto guard = core_->ReadGuard();
  Status s = core_->CheckOpen();
  if (!s.ok()) return s;
  Store* store = core_->store();
  std::vector<tables::KeyRange> ranges;
  for (uint32_t p = 0; p < floors.size(); ++p) {
    if (floors[p] > 0) ranges.push_back(tables::outbox::Range(p, 0, floors[p]));
  }
  if (ranges.empty()) return Status::OK();
  s = store->DeleteFilesInRanges(kOutbox, ranges, "delete outbox files below the retention floors");
  if (!s.ok()) return s;

  std::vector<uint64_t> removed;
  s = OutboxFileBytes(store, ranges, &removed);
  if (!s.ok()) return s;
  uint64_t removed_bytes = 0, file_bytes = 0;
  for (uint64_t bytes : removed) removed_bytes += bytes;
  file_bytes = store->LiveFileBytes(kOutbox);
  // Under a byte bound the removed bytes count against the facts kept (bounds.cc), and every
  // compaction is small (StoreSizes): they are compacted once they reach a memtable's worth.
  const uint64_t bound = core_->options().retention_max_bytes;
  const bool due =
      bound > 0 ? removed_bytes >= SizesFor(core_->options()).outbox_memtable_bytes
                : removed_bytes >= kCompactBytesMin && removed_bytes * kCompactShare >= file_bytes;
  if (!due) return Status::OK();
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (removed[i] == 0) continue;
    s = store->CompactRange(kOutbox, ranges[i], &cancel_compaction_);
    if (cancel_compaction_.load()) {  // closing: whatever RocksDB said, the pass ends here
      s.PermitUncheckedError();
      break;
    }
    if (!s.ok()) return s;
  }
  return Status::OK();
}

void Retention::FlushOldWals() {
  const EngineOptions& options = core_->options();
  const uint64_t wal_max = options.retention_max_bytes > 0 ? SizesFor(options).wal_total_max_bytes
                                                           : options.memtable_bytes * kWalMemtables;
  if (ReadDirectoryUse(core_->path()).wal_bytes <= wal_max) return;
  auto guard = core_->ReadGuard();
  if (!core_->CheckOpen().ok()) return;
  Store* store = core_->store();
  // Best effort, not waited for: the next pass sees the space back; a failed flush leaves the
  // WAL for it, and RocksDB's own error handling (the committer's next write) reports a real I/O
  // problem.
  store->StartFlushAll();
}

}  // namespace wharf::internal
