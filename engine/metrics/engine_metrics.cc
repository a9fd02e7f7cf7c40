// The engine's parts of a metrics snapshot (engine_metrics.h).
#include "engine/metrics/engine_metrics.h"

#include <rocksdb/db.h>
#include <rocksdb/statistics.h>

#include <charconv>
#include <map>
#include <string>

#include "engine/core/engine_core.h"
#include "engine/retention/retention.h"
#include "engine/store/directory_use.h"
#include "engine/store/tables/retention.h"
#include "io/wal/wal_fs.h"

namespace wharf::internal {
namespace {

// cfstats' map keys (rocksdb.cfstats, RocksDB 7.8 InternalStats::DumpCFMapStatsIOStalls): a
// column family's write stops and slowdowns, each cause added up.
constexpr const char* kStallKeys[] = {"io_stalls.total_stop", "io_stalls.total_slowdown"};

Status PropertyError(const std::string& property) {
  return Status::IOError("RocksDB property " + property + " could not be read");
}

}  // namespace

Status ReadCommitMetrics(const EngineCore& core, CommitMetrics* metrics) {
  core.committer()->ReadMetrics(metrics);
  const io::WalFileSystem* wal_fs = core.store()->wal_fs();
  metrics->wal_spare_ready = wal_fs->spare_ready();
  metrics->wal_spares_used_total = wal_fs->spare_wals();
  return Status::OK();
}

Status ReadRetentionMetrics(const EngineCore& core, RetentionMetrics* metrics) {
  RetentionOf(core)->ReadCounters(metrics);
  // The loss records ListRetentionLosses reads: over the database's life, not since the open.
  std::vector<RetentionLoss> losses;
  Status s = tables::retention::ListLosses(core.store()->db(), core.store()->cf(kMeta), &losses);
  if (!s.ok()) return s;
  metrics->dropped.clear();
  for (const RetentionLoss& loss : losses) {
    metrics->dropped.push_back(RetentionMetrics::Dropped{loss.consumer, loss.fact_count});
  }
  return Status::OK();
}

Status ReadStoreMetrics(const EngineCore& core, StoreMetrics* metrics) {
  const Store& store = *core.store();
  rocksdb::DB* db = store.db();
  using Properties = rocksdb::DB::Properties;
  // Per column family, summed over them.
  for (const auto& [property, value] :
       {std::pair{&Properties::kLiveSstFilesSize, &metrics->live_sst_bytes},
        std::pair{&Properties::kCurSizeAllMemTables, &metrics->memtable_bytes},
        std::pair{&Properties::kEstimatePendingCompactionBytes,
                  &metrics->pending_compaction_bytes}}) {
    if (!db->GetAggregatedIntProperty(*property, value)) return PropertyError(*property);
  }
  // The database's own: summing them over the families would count them once per family.
  uint64_t writes_stopped = 0;
  for (const auto& [property, value] :
       {std::pair{&Properties::kNumRunningFlushes, &metrics->flushes_running},
        std::pair{&Properties::kNumRunningCompactions, &metrics->compactions_running},
        std::pair{&Properties::kIsWriteStopped, &writes_stopped}}) {
    if (!db->GetIntProperty(*property, value)) return PropertyError(*property);
  }
  metrics->writes_stopped = writes_stopped != 0;
  metrics->compactions_pending = 0;
  metrics->write_stalls_total = 0;
  std::map<std::string, std::string> cf_stats;
  for (int cf = 0; cf < kCfCount; ++cf) {
    rocksdb::ColumnFamilyHandle* handle = store.cf(static_cast<Cf>(cf));
    uint64_t pending = 0;
    if (!db->GetIntProperty(handle, Properties::kCompactionPending, &pending)) {
      return PropertyError(Properties::kCompactionPending);
    }
    if (pending != 0) ++metrics->compactions_pending;
    cf_stats.clear();
    if (!db->GetMapProperty(handle, Properties::kCFStats, &cf_stats)) {
      return PropertyError(Properties::kCFStats);
    }
    for (const char* key : kStallKeys) {
      // Counts, printed as integers. A key missing or unreadable is a RocksDB this code does not
      // know, not a zero.
      auto it = cf_stats.find(key);
      uint64_t stalls = 0;
      if (it == cf_stats.end() ||
          std::from_chars(it->second.data(), it->second.data() + it->second.size(), stalls).ec !=
              std::errc()) {
        return PropertyError(Properties::kCFStats + " " + key);
      }
      metrics->write_stalls_total += stalls;
    }
  }
  const rocksdb::Statistics& stats = *store.statistics();
  metrics->write_stall_seconds_total =
      static_cast<double>(stats.getTickerCount(rocksdb::STALL_MICROS)) / 1e6;
  metrics->flush_bytes_total = stats.getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
  metrics->compaction_bytes_total = stats.getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  metrics->block_cache_hits_total = stats.getTickerCount(rocksdb::BLOCK_CACHE_HIT);
  metrics->block_cache_misses_total = stats.getTickerCount(rocksdb::BLOCK_CACHE_MISS);
  metrics->directory_bytes = ReadDirectoryUse(core.path()).total_bytes;
  return Status::OK();
}

}  // namespace wharf::internal
