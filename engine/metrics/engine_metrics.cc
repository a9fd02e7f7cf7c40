// The engine's parts of a metrics snapshot (engine_metrics.h).
#include "engine/metrics/engine_metrics.h"

#include "engine/core/engine_core.h"
#include "io/wal/wal_fs.h"

namespace wharf::internal {

Status ReadCommitMetrics(const EngineCore& core, CommitMetrics* metrics) {
  core.committer()->ReadMetrics(metrics);
  const io::WalFileSystem* wal_fs = core.store()->wal_fs();
  metrics->wal_spare_ready = wal_fs->spare_ready();
  metrics->wal_spares_used_total = wal_fs->spare_wals();
  return Status::OK();
}

Status ReadRetentionMetrics(const EngineCore&, RetentionMetrics*) { return Status::OK(); }

Status ReadStoreMetrics(const EngineCore&, StoreMetrics*) { return Status::OK(); }

}  // namespace wharf::internal
