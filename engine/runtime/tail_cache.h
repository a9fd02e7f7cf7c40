// TailCache: the most recent durable facts of every partition, decoded, in memory, so that
// caught-up consumers never read RocksDB. Fed by the committer's durable notifications.
//
// Per partition it holds a window of consecutive facts [valid_from, announced]: every fact of the
// partition with an id in that range is in the window. Reads starting below valid_from (a lane
// that fell behind, or facts that became durable through recovery, see OnGap) are answered
// "not covered" and the caller reads RocksDB with a bounded iterator.
//
// Thread safety: thread-safe. Writers are the committer's notification thread; readers are
// runtime workers. A reader loads `announced_` before locking a partition (see Read).
// Memory: at most capacity_per_partition facts per partition.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/base/fact_ptr.h"
#include "engine/base/mutex.h"
#include "wharf/fact.h"

namespace wharf::internal {

class TailCache {
 public:
  TailCache(uint32_t partitions, uint32_t capacity_per_partition);

  // Starts the window after `durable_lsn`: facts at or below it are not covered.
  void Reset(uint64_t durable_lsn);
  // Appends newly durable facts (ids increasing within each partition) and announces
  // `durable_lsn`: the windows are complete up to it.
  void Append(uint64_t durable_lsn, const std::vector<FactPtr>& facts);

  // Facts of `partition` with ids in [from_id, to_id], at most count_max, if the window covers
  // from_id. *covered_to is then the highest id the answer is complete up to (<= to_id).
  // Returns false when the window does not cover from_id.
  bool Read(uint32_t partition, uint64_t from_id, uint64_t to_id, size_t count_max,
            std::vector<FactPtr>* out, uint64_t* covered_to) const;

  // Highest id announced in `partition` (a lower bound on where its pending work ends).
  uint64_t high(uint32_t partition) const { return parts_[partition].high.load(); }

 private:
  struct Partition {
    mutable Mutex mutex;
    std::deque<FactPtr> facts WHARF_GUARDED_BY(mutex);  // ids increasing
    uint64_t valid_from WHARF_GUARDED_BY(mutex) = 1;
    std::atomic<uint64_t> high{0};
  };

  const uint32_t capacity_;
  std::vector<Partition> parts_;
  std::atomic<uint64_t> announced_{0};
};

}  // namespace wharf::internal
