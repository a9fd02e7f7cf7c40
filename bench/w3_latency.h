// W3-latency on Wharf: a Runtime (shape.workers workers) with one subscriber; one producer thread
// commits single-fact transactions (Txn::Commit() blocking) paced at shape.rate_per_s. The fact's
// sample index rides in the first 8 bytes of its payload, so the handler needs no shared map.
#pragma once

#include <string>

#include "bench/w3_shape.h"

namespace wharf::bench {

// Opens a fresh engine in `dir` (which must be empty), runs W3 against it, closes it.
W3Measurement RunW3Wharf(const W3Shape& shape, const std::string& dir);

}  // namespace wharf::bench
