// Output of W2-project: the human table and the JSON lines of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/report_text.h"
#include "bench/w2_shape.h"

namespace wharf::bench {

// Medians over the runs; nullopt / empty: that system was not run (--systems).
struct W2Result {
  const char* name = kW2Name;  // kW2Name or kW2SkewedName
  uint64_t facts = 0;          // asked for (--facts)
  int runs = 0;
  std::vector<std::pair<int, W2Measurement>> wharf;  // per runtime worker count
  std::optional<W2Measurement> rocksdb_sync;
  std::optional<W2Measurement> sqlite_full;
  // Of the facts, the share expected in Wharf's fullest partition, from the keys' distribution
  // (the measured one is in each Wharf measurement). One lane delivers each partition, so this
  // partition's lane bounds how fast Wharf catches up.
  double fullest_partition_share = 0;
};

void PrintW2Table(const W2Result& result, std::FILE* out);
// One JSON object per Wharf worker count (or one with nulls when Wharf was not run), each with the
// same references.
std::vector<std::string> W2Json(const W2Result& result, const MachineInfo& machine);

}  // namespace wharf::bench
