// Output of W3-latency: the human table and the JSON line of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "bench/report_text.h"
#include "bench/w3_shape.h"

namespace wharf::bench {

// Medians over the runs; nullopt: that system was not run (--systems).
struct W3Row {
  W3Shape shape;
  int runs = 0;
  std::optional<W3Measurement> wharf;
  std::optional<W3Measurement> rocksdb_sync;
  std::optional<W3Measurement> sqlite_full;
};

void PrintW3Table(const W3Row& row, const MachineInfo& machine, std::FILE* out);
// One JSON object on one line; latency_us is commit-acknowledged -> handler-entered.
std::string W3Json(const W3Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
