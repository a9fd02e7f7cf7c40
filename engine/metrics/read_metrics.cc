// ReadMetrics (wharf/metrics.h): the engine's parts (engine_metrics.h), then the consumers of
// every runtime attached to the engine (EngineCore::CollectConsumerMetrics), then replication's
// (the committer's ShipTracker and the Replicator).
#include <algorithm>
#include <chrono>

#include "engine/commit/committer.h"
#include "engine/core/engine_core.h"
#include "engine/metrics/engine_metrics.h"
#include "engine/replicate/replicator.h"
#include "wharf/metrics.h"

namespace wharf {
namespace {

// Reads atomics and the tracker's and replicator's own locks, never one the commit path waits on
// for long (the tracker's is held for a few field reads).
void ReadReplicationMetrics(const internal::EngineCore& core, ReplicationMetrics* metrics) {
  const internal::Replicator* replicator = ReplicatorOf(core);
  const internal::Committer* committer = core.committer();
  if (replicator == nullptr || committer == nullptr) return;  // enabled=false
  const EngineOptions& options = core.options();
  metrics->enabled = true;
  // replicate_mode unset follows durability (ReplicateConfigOf refused a mode against it).
  const bool sync = options.replicate_mode ? *options.replicate_mode == ReplicateMode::kSync
                                           : options.durability == Durability::kReplicated;
  metrics->mode = sync ? "sync" : "async";
  const internal::Replicator::State state = replicator->state();
  metrics->stream = state.stream;
  metrics->term = state.term;
  metrics->last_group = committer->last_group();
  const internal::ShipLag lag = committer->ReplicationLag();
  metrics->shipped_group = lag.shipped_group;
  metrics->shipped_bytes_total = lag.shipped_bytes;
  metrics->lag_groups = lag.groups;
  metrics->lag_facts = lag.facts;
  metrics->lag_bytes = lag.bytes;
  metrics->lag_ms = lag.age_ms;
  metrics->fenced = !committer->ReplicationFenced().ok();
  metrics->snapshots_total = state.snapshots;
  metrics->snapshot_failures_total = state.snapshot_failures;
  metrics->last_snapshot_group = state.last_snapshot_group;
  metrics->last_snapshot_ms = state.last_snapshot_ms;
  metrics->last_snapshot_error = state.last_snapshot_error;
}

}  // namespace

Status ReadMetrics(Engine& engine, MetricsSnapshot* snapshot) {
  if (snapshot == nullptr) return Status::InvalidArgument("metrics snapshot pointer is null");
  internal::EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  *snapshot = MetricsSnapshot();
  snapshot->live = true;
  snapshot->taken_ms = core.NowMs();
  snapshot->io_backend = core.io_backend();
  snapshot->partitions = core.options().partitions;
  s = internal::ReadCommitMetrics(core, &snapshot->commits);
  if (s.ok()) s = internal::ReadRetentionMetrics(core, &snapshot->retention);
  if (s.ok()) s = internal::ReadStoreMetrics(core, &snapshot->store);
  if (!s.ok()) return s;
  snapshot->backups = core.backup_metrics();
  ReadReplicationMetrics(core, &snapshot->replication);
  core.CollectConsumerMetrics(&snapshot->consumers);
  std::sort(snapshot->consumers.begin(), snapshot->consumers.end(),
            [](const ConsumerMetrics& a, const ConsumerMetrics& b) {
              return std::tie(a.consumer, a.instance) < std::tie(b.consumer, b.instance);
            });
  return Status::OK();
}

}  // namespace wharf
