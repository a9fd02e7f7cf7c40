// The engine's stat snapshot (wharf/admin.h ReadStat): the shared computation of
// engine/store/stat_reader.h over the engine's own store, counting durable facts only (those a
// consumer can see), under the read guard so the store stays open while it scans.
#include <algorithm>

#include "engine/core/engine_core.h"
#include "engine/store/stat_reader.h"
#include "wharf/admin.h"

namespace wharf {

Status ReadStat(Engine& engine, StatSnapshot* snapshot) {
  if (snapshot == nullptr) return Status::InvalidArgument("snapshot output pointer is null");
  internal::EngineCore& core = *internal::EngineInternal::Core(engine);
  auto guard = core.ReadGuard();
  Status s = core.CheckOpen();
  if (!s.ok()) return s;
  // Read before the scans: every fact up to it is in the store by now.
  const uint64_t durable_lsn = core.committer()->durable_lsn();
  internal::StoreView view;
  view.db = core.store()->db();
  for (int cf = 0; cf < internal::kCfCount; ++cf) {
    view.cfs[cf] = core.store()->cf(static_cast<internal::Cf>(cf));
  }
  view.partitions = core.store()->partitions();
  view.visible_lsn = durable_lsn;
  snapshot->durable_lsn_known = true;
  snapshot->durable_lsn = durable_lsn;
  snapshot->last_lsn = std::max(engine.last_lsn(), durable_lsn);
  return internal::ReadStatSnapshot(view, snapshot);
}

}  // namespace wharf
