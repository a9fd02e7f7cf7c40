// The one computation of a stat snapshot (wharf/admin.h StatSnapshot), over a RocksDB instance and
// its column families: the engine's ReadStat (engine/admin/stat.cc, over its own store) and the
// Inspector (engine/store/inspect.cc, over a secondary) both call it, so that `wharf stat`, C++,
// the C ABI and Python report the same numbers.
//
// Facts at or below a partition's retention floor (tables/retention.h) are removed, whether or
// not compaction has dropped them yet: they are not counted. Facts above `visible_lsn` are not
// counted either (the engine passes its durable LSN: facts written but not yet acknowledged).
//
// Thread safety: the functions keep no state; `db` must stay open while they run.
#pragma once

#include <rocksdb/db.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/store/store.h"
#include "wharf/admin.h"
#include "wharf/inspect.h"
#include "wharf/status.h"

namespace wharf::internal {

struct StoreView {
  rocksdb::DB* db = nullptr;
  std::array<rocksdb::ColumnFamilyHandle*, kCfCount> cfs{};  // indexed by Cf
  uint32_t partitions = 0;
  uint64_t visible_lsn = UINT64_MAX;  // facts with higher ids are not counted
};

// The lowest id still counted in each partition (above its retention floor).
Status ReadFirstVisible(const StoreView& view, std::vector<uint64_t>* first_ids);

// One entry per partition, in order (a scan of the outbox).
Status ReadPartitionStats(const StoreView& view, std::vector<PartitionStat>* stats);

// Facts of `partition` with id > after_id (and at or above first_id); with a filter, also those
// it takes. InvalidArgument for a partition out of range.
Status ReadBacklog(const StoreView& view, uint32_t partition, uint64_t after_id, uint64_t first_id,
                   const TakenFilter* filter, Backlog* backlog);

// The consumers with a cursor, a registration or a retention loss (only `consumer` when it is
// not empty), by consumer id, each with its position and lag in every partition.
Status ReadConsumerStats(const StoreView& view, std::string_view consumer,
                         std::vector<ConsumerStat>* consumers);

// Pending timers (count, and the due time of the next) and dead letters (count).
Status ReadTimerStat(const StoreView& view, TimerStat* timers);
Status CountDeadLetters(const StoreView& view, uint64_t* count);

// Everything but durable_lsn_known, durable_lsn and last_lsn, which the caller knows (the engine)
// or reads (the Inspector).
Status ReadStatSnapshot(const StoreView& view, StatSnapshot* snapshot);

}  // namespace wharf::internal
