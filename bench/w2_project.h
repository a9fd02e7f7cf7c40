// W2-project on Wharf: facts pre-committed by W1 producers, then a Runtime with one projection
// consumer (batch 100) that writes one state row per fact; effects and cursor commit per batch.
#pragma once

#include <functional>
#include <string>

#include "bench/w2_shape.h"
#include "wharf/engine.h"

namespace wharf::bench {

// Wharf loads with 16 producer threads x transactions of 100 facts (durability=sync).
inline constexpr W2Precommit kW2WharfPrecommit{16, 100};

// Opens a fresh engine in `dir` (which must be empty), commits `facts` facts (rounded up to whole
// transactions), their keys drawn from `keys`, and closes it. Sets *committed and *seconds.
// Returns "" or an error.
std::string PrecommitW2Wharf(const std::string& dir, uint64_t facts, KeyDistribution keys,
                             uint64_t* committed, double* seconds);

// Opens the engine in `dir` (loaded by PrecommitW2Wharf with `committed` facts), runs the
// projection with `workers` workers from Start() until every fact was handled, then Stop() (which
// waits for the last batches' commits), and checks the first and last state rows. Counts the
// facts handled per partition (fullest_partition_share).
// `prepare` (may be empty) runs on the open engine before the runtime is made (W2-upcast declares
// versions and registers upcasters there); an error it returns fails the run.
W2Measurement ConsumeW2Wharf(const std::string& dir, uint64_t committed, int workers,
                             const std::function<std::string(Engine&)>& prepare = {});

// The expected share of the facts in the fullest of the engine's kW1Partitions partitions when
// key i of `key_count` (`key`) is drawn with `probability` (the engine's hash places them).
double FullestPartitionShare(int key_count, const std::function<std::string(int)>& key,
                             const std::function<double(int)>& probability);
// ... when their keys are drawn from `keys`.
double W2FullestPartitionShare(KeyDistribution keys);

}  // namespace wharf::bench
