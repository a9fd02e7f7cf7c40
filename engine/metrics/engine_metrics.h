// The engine's own parts of a metrics snapshot (wharf/metrics.h): the committer's, retention's and
// RocksDB's. Each reads atomic or per-thread cells and RocksDB properties: never a lock that the
// commit path takes.
//
// Thread safety: thread-safe. REQUIRES: the caller holds the engine's read guard and checked that
// it is open.
#pragma once

#include "wharf/metrics.h"

namespace wharf::internal {

class EngineCore;

Status ReadCommitMetrics(const EngineCore& core, CommitMetrics* metrics);
Status ReadRetentionMetrics(const EngineCore& core, RetentionMetrics* metrics);
Status ReadStoreMetrics(const EngineCore& core, StoreMetrics* metrics);

}  // namespace wharf::internal
