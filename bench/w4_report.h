// Output of W4-fanout: the human table and the JSON line of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w4_shape.h"

namespace wharf::bench {

struct W4Row {
  uint64_t facts = 0;  // asked for (--facts)
  int workers = 2;     // per runtime instance
  int runs = 0;
  W4Measurement wharf;  // median over the runs
};

void PrintW4Table(const W4Row& row, std::FILE* out);
std::string W4Json(const W4Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
