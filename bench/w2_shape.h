// W2-project (see shared/WORKLOAD.md): facts pre-committed in W1's shape, then one projection
// consumer writes one state row per fact and commits its effects and its cursor per batch of 100.
// The shape, what one run measured, and what every system writes per fact.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/w1_shape.h"

namespace wharf::bench {

inline constexpr char kW2Name[] = "W2-project";
// W2 with partition keys drawn from a Zipf distribution (zipf_keys.h) instead of uniformly from 64.
inline constexpr char kW2SkewedName[] = "W2-skewed";
// W2-skewed is defined by its fullest partition holding at least this share of the facts.
inline constexpr double kW2SkewedFullestShareMin = 0.25;
inline constexpr char kW2StateTable[] = "orders_by_id";
inline constexpr char kW2ConsumerName[] = "w2-projection";
inline constexpr uint32_t kW2Batch = 100;
inline constexpr size_t kW2StateKeyBytes = 16;
inline constexpr size_t kW2StateValueBytes = 32;
// The references consume one batch per sync: on a slow disk 1 M facts would take minutes, so they
// stop after this long and report their rate over what they consumed (it is steady: one sync per
// batch, nothing else).
inline constexpr double kW2ReferenceBudget_s = 5;
// Wharf must catch up within this long, or the run fails.
inline constexpr double kW2WharfTimeout_s = 300;

struct W2Shape {
  uint64_t facts = 1000000;  // pre-committed (rounded up to whole pre-commit transactions)
  int workers = 2;           // runtime worker threads (Wharf only; the references use one thread)
};

// How a system loads the facts before the measurement (not timed).
struct W2Precommit {
  int producers = 16;
  int batch = 100;
  uint64_t Transactions(uint64_t facts) const { return (facts + batch - 1) / batch; }
};

// What one run of one system measured. A non-empty `error` means the numbers are meaningless.
struct W2Measurement {
  double facts_per_s = 0;       // facts_consumed / consume_s
  uint64_t facts_consumed = 0;  // all pre-committed facts, or what a reference did in its budget
  uint64_t facts_total = 0;     // pre-committed
  double consume_s = 0;         // Start() (first read) until the last batch committed
  double precommit_s = 0;       // loading, for information
  double batches_per_sync = 0;  // batch commits per fdatasync while consuming (0: unknown)
  double sync_ms_mean = 0;      // mean duration of those syncs (0: unknown)
  double cpu_s = 0;             // CPU time of the whole process while consuming (all threads)
  // Of the facts consumed, the share in the engine's fullest partition, counted in the handler
  // (0: not counted, the references).
  double fullest_partition_share = 0;
  // Set by MedianOf: half the range of facts_per_s over the runs, as a share of the median (0.1:
  // every run within +-10 %).
  double spread = 0;
  std::string error;
};

// CPU time (user + system) this process used so far, all threads, in seconds.
double ProcessCpuSeconds();

// Median of each field over the runs that succeeded; if every run failed, the first error.
W2Measurement MedianOf(const std::vector<W2Measurement>& runs);

// The state row a projection writes for the fact with id (or sequence) `id`: key "f" + 15 hex
// digits, value the first 32 bytes of the payload.
std::string_view W2StateKey(uint64_t id, char (&buffer)[kW2StateKeyBytes + 1]);
std::string_view W2StateValue(std::string_view payload);

}  // namespace wharf::bench
