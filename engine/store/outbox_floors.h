// OutboxFloors: each partition's retention floor in memory, and the outbox's compaction filter that
// drops the facts at or below it (engine/retention/retention.h decides the floors).
//
// Why a filter and no deletions: removing facts costs no write at all. RocksDB drops them when it
// next rewrites them — in a flush (facts consumed before their memtable is flushed never reach an
// SST) or a compaction — and whole files below every floor are deleted by the retention pass.
// Range tombstones would need exclusive use under RocksDB 7.8 (their memtable insert hints are
// shared with the facts' point keys; see store.cc), and point tombstones would write as much as the
// facts did.
//
// Invariant: a floor only rises, and rises only after the record holding it is durable in the
// meta family (retention_floor). So after any crash the stored floor is at least every floor the
// filter ever used, and readers (which start at floor + 1, never below it) never see a partition
// half-removed.
//
// Thread safety: Get/Raise are lock-free (one atomic per partition); the filter runs on RocksDB's
// flush and compaction threads.
#pragma once

#include <rocksdb/compaction_filter.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace wharf::internal {

class OutboxFloors {
 public:
  // Sized for any partition count (kPartitionsMax): the filter exists before the database's count
  // is read from its meta family.
  OutboxFloors();

  uint64_t Get(uint32_t partition) const {
    return floors_[partition].load(std::memory_order_acquire);
  }
  std::vector<uint64_t> GetAll(uint32_t partitions) const;
  // Raises each floor to at least `floors[p]`. REQUIRES: the record holding them is durable.
  void Raise(const std::vector<uint64_t>& floors);

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> floors_;
};

// The filter factory for the outbox family: applies to flushes as well as compactions.
std::shared_ptr<rocksdb::CompactionFilterFactory> NewOutboxFloorFilterFactory(
    std::shared_ptr<const OutboxFloors> floors);

}  // namespace wharf::internal
