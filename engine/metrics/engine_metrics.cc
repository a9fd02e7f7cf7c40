// The engine's parts of a metrics snapshot (engine_metrics.h).
#include "engine/metrics/engine_metrics.h"

#include "engine/core/engine_core.h"

namespace wharf::internal {

Status ReadCommitMetrics(const EngineCore& core, CommitMetrics* metrics) {
  const Committer& committer = *core.committer();
  metrics->durable_lsn = committer.durable_lsn();
  metrics->last_lsn = std::max(committer.last_lsn(), metrics->durable_lsn);
  metrics->producers_waiting = committer.space_waiters();
  return Status::OK();
}

Status ReadRetentionMetrics(const EngineCore&, RetentionMetrics*) { return Status::OK(); }

Status ReadStoreMetrics(const EngineCore&, StoreMetrics*) { return Status::OK(); }

}  // namespace wharf::internal
