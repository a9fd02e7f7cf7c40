// Drives P producer threads that commit transactions back to back for a fixed time, and turns what
// they did into a W1Measurement. Every system (Wharf and the references) runs under this one
// driver, so that start, stop and timing are identical for all.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/w1_shape.h"

namespace wharf::bench {

// One producer thread's connection to the system under test.
class Producer {
 public:
  virtual ~Producer() = default;
  // Builds and commits one transaction of `batch` facts, blocking until it is durable. Stores the
  // latency of the commit step in *commit_latency_ns. Returns "" or an error message.
  virtual std::string CommitOne(uint64_t* commit_latency_ns) = 0;
};

// Runs producers[i]->CommitOne() on thread i until `duration_s` has passed (each thread finishes
// the transaction in flight), then reports rates over the time until the last thread finished.
// facts_per_sync is left 0 for the caller to fill in. The first error stops all threads.
W1Measurement DriveProducers(const std::vector<std::unique_ptr<Producer>>& producers, int batch,
                             double duration_s);

// Runs producers[i]->CommitOne() on thread i until `transactions` transactions were committed in
// all (threads claim them one at a time, so exactly that many commit). For loading a database
// before a measurement. Returns "" or the first error (which stops all threads).
std::string CommitTransactions(const std::vector<std::unique_ptr<Producer>>& producers,
                               uint64_t transactions);

// Monotonic clock in nanoseconds.
uint64_t NowNs();

}  // namespace wharf::bench
