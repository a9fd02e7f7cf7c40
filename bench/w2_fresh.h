// W2-fresh on Wharf: catch-up on a backlog committed moments before, in the same process and
// engine (no reopen, no sync in between: the kernel is still writing it back, RocksDB still
// flushing and compacting it), through the C ABI as an application linking libwharf would:
//   - one producer commits the facts in transactions of kW2FreshTxnFacts facts plus one state
//     upsert; keys "partition-000000" ... "partition-000063" drawn uniformly (on 16 partitions the
//     fullest holds ~14 % of the facts, one none); payload 100 random bytes;
//   - then a runtime (the given options) with one projection, a C function reading the fact through
//     the accessors and writing one effect row per fact (8-byte big-endian fact id -> 16 bytes of
//     the payload) with wharf_txn_put, is timed from wharf_runtime_start until every fact was
//     handled and wharf_runtime_stop returned (the last batches' effects and cursors committed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bench/w2_shape.h"

namespace wharf::bench {

inline constexpr char kW2FreshName[] = "W2-fresh";
inline constexpr uint32_t kW2FreshTxnFacts = 1000;
inline constexpr int kW2FreshDistinctKeys = 64;
inline constexpr size_t kW2FreshEffectValueBytes = 16;

// Key i of W2-fresh: "partition-%06d", 16 bytes.
std::string W2FreshKey(int index);

// One run in `dir` (empty): opens an engine with `engine_options` ("key=value;..."), commits
// `facts` facts (rounded up to whole transactions), consumes them with a runtime created with
// "workers=<workers>;" + `runtime_options`, checks the first and last effect rows and closes.
// fullest_partition_share is counted by the handler; batches_per_sync is not known (0).
W2Measurement RunW2FreshWharf(const std::string& dir, uint64_t facts, int workers,
                              std::string_view engine_options, std::string_view runtime_options);

// The expected share of the facts in the fullest of the engine's kW1Partitions partitions.
double W2FreshFullestPartitionShare();

}  // namespace wharf::bench
