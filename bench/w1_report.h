// Output of W1-append: the human table and the JSON line of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "bench/report_text.h"
#include "bench/w1_shape.h"

namespace wharf::bench {

// Medians of one W1 shape per system; nullopt: that system was not run (--systems).
struct W1Row {
  W1Shape shape;
  int runs = 0;
  std::optional<W1Measurement> wharf;
  std::optional<W1Measurement> rocksdb_sync;
  std::optional<W1Measurement> sqlite_full;
};

void PrintW1TableHeader(int runs, double duration_s, std::FILE* out);
// One line per system that ran.
void PrintW1TableRows(const W1Row& row, std::FILE* out);
// One JSON object on one line. Systems not run, and Wharf's facts_per_sync while the engine does
// not report syncs, are null.
std::string W1Json(const W1Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
