// ReadMetrics (wharf/metrics.h): the engine's parts (engine_metrics.h), then the consumers of
// every runtime attached to the engine (EngineCore::CollectConsumerMetrics).
#include <algorithm>
#include <chrono>

#include "engine/core/engine_core.h"
#include "engine/metrics/engine_metrics.h"
#include "wharf/metrics.h"

namespace wharf {

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
  core.CollectConsumerMetrics(&snapshot->consumers);
  std::sort(snapshot->consumers.begin(), snapshot->consumers.end(),
            [](const ConsumerMetrics& a, const ConsumerMetrics& b) {
              return std::tie(a.consumer, a.instance) < std::tie(b.consumer, b.instance);
            });
  return Status::OK();
}

}  // namespace wharf
