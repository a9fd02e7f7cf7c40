// W8-slow-subscriber on Wharf: facts pre-committed with keys drawn uniformly from 10 000 (16
// partitions, W1's facts otherwise), then, for each key_concurrency, one asynchronous subscriber
// (Runtime::SubscribeAsync) whose handler checks the per-key order and hands the Delivery to a
// DelayTimer that completes it 5 ms later.
#pragma once

#include <string>
#include <vector>

#include "bench/w8_shape.h"

namespace wharf::bench {

struct W8Config {
  uint64_t facts = kW8DefaultFacts;
  std::vector<int> key_concurrency = kW8DefaultKeyConcurrency;
  int workers = 2;  // runtime workers
  int runs = 3;
  double budget_s = kW8DefaultBudget_s;  // per consumption
};

// Measures the timer's capacity, then `runs` times: loads a fresh database under `scratch_root`
// and consumes it once per key_concurrency (each its own consumer, from the start). Progress goes
// to stderr. The row holds the medians.
W8Row RunW8Wharf(const W8Config& config, const std::string& scratch_root);

}  // namespace wharf::bench
