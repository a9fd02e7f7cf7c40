// Worker assignment: which worker runs each lane (RuntimeOptions::assignment), evenly.
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/runtime/lane.h"
#include "wharf/runtime.h"

namespace wharf::internal {

// Sets each lane's worker in [0, worker_count): round robin in lane order, or consistent hashing
// with bounded loads (no worker gets more than ceil(lanes / workers)).
void AssignWorkers(Assignment assignment, const std::vector<std::unique_ptr<Lane>>& lanes,
                   uint32_t worker_count);

}  // namespace wharf::internal
