// W9-contended on Wharf: Engine::Transact (default TransactOptions, durability=sync) reading the
// counter with Txn::Get, writing it + 1 with Txn::Put and emitting the fact with Txn::Emit.
#pragma once

#include <string>

#include "bench/w9_shape.h"
#include "wharf/engine.h"

namespace wharf::bench {

// Opens a fresh engine in `dir` (the runner's engine options), declares the fact type and runs
// W9 with `transact` (default: the API's defaults; --backoff-ms measures others). A Transact that
// gives up after its attempts (Conflict, kReadConflict) is called again, as the application's own
// loop would: every attempt refused counts as a conflict. Ends by reading the counters
// (Engine::Get) and every partition's facts (Engine::ReadFacts) and checking them (CheckW9Outcome).
W9Measurement RunW9Wharf(const W9Shape& shape, const std::string& dir,
                         const TransactOptions& transact = {});

}  // namespace wharf::bench
