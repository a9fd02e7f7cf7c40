// W4-fanout on Wharf: facts pre-committed like W2's, then 8 projections (one state row per fact,
// each its own table, batch 100) delivered by two Runtime instances "a" and "b" on one engine,
// sharing the consumers through leases; then instance "a" stops while facts keep coming, and
// instance "b" takes its consumers over.
#pragma once

#include <string>

#include "bench/w4_shape.h"

namespace wharf::bench {

// In `dir` (which must be empty): pre-commits `facts` facts (W2's loader), opens the engine, and
// measures the fan-out (`workers` workers per instance) and the hand-over.
W4Measurement RunW4Wharf(const std::string& dir, uint64_t facts, int workers);

}  // namespace wharf::bench
