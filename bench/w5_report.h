// Output of W5-recover: the human table and the JSON line of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w5_shape.h"

namespace wharf::bench {

struct W5Row {
  uint64_t facts = 0;  // asked for (--facts)
  int workers = 2;
  int runs = 0;
  W5Measurement wharf;  // median over the runs
};

void PrintW5Table(const W5Row& row, std::FILE* out);
std::string W5Json(const W5Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
