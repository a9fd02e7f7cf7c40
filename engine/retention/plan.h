// RetentionPlan: what one retention pass reads and decides (engine/retention/retention.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/retention/retention.h"
#include "engine/store/store.h"
#include "engine/store/tables/scan.h"
#include "wharf/admin.h"

namespace wharf::internal {

// Everything one pass reads and decides.
struct RetentionPlan {
  uint32_t partitions = 0;
  uint64_t durable_lsn = 0;
  int64_t now_ms = 0;
  std::vector<uint64_t> old_floors;
  std::vector<uint64_t> floors;              // the new ones; floors[p] >= old_floors[p]
  std::optional<std::string> stored_floors;  // the record as read, for the compare-and-set
  // Every consumer with cursors: its position per partition (0 where it has none).
  std::map<std::string, std::vector<uint64_t>> cursors;
  // The types each registered consumer takes; a consumer not in it counts every fact as its own.
  std::map<std::string, std::vector<std::string>> registered_types;
  // Results.
  std::vector<TrimPartition> removed;
  std::vector<RetentionDrop> drops;
};

// RocksDB's estimate of the bytes of each of `ranges` in the outbox's table files (memtables not
// counted), from its table indexes (bounds.cc; used by the bounds and by reclaim.cc).
Status OutboxFileBytes(Store* store, const std::vector<tables::KeyRange>& ranges,
                       std::vector<uint64_t>* sizes);

}  // namespace wharf::internal
