// RetentionPlan: what one retention pass reads and decides (engine/retention/retention.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/retention/retention.h"
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

}  // namespace wharf::internal
