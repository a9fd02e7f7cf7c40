// W1-append on Wharf: P producer threads commit transactions of B facts plus one state row,
// Txn::Commit() blocking, with the engine's default options (durability=sync).
#pragma once

#include <memory>
#include <string>

#include "bench/producer_driver.h"
#include "bench/w1_shape.h"
#include "wharf/engine.h"

namespace wharf::bench {

// One W1 producer on `engine` (kW1FactType declared): per CommitOne, one Txn of `batch` facts and
// one state row, Txn::Commit() blocking.
std::unique_ptr<Producer> MakeWharfW1Producer(Engine* engine, int producer_index, int batch,
                                              KeyDistribution keys = KeyDistribution::kUniform);

// Opens a fresh engine in `dir` (which must be empty), runs W1 against it, closes it. The commit
// latency is that of Txn::Commit() alone (the facts were buffered in the Txn before).
W1Measurement RunW1Wharf(const W1Shape& shape, const std::string& dir);

}  // namespace wharf::bench
