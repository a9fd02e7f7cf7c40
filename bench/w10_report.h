// Output of W10-replicated: the human table (with each goal met or missed) and the JSON line.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w10_replicated.h"

namespace wharf::bench {

struct W10Row {
  uint64_t facts = 0;  // (d), asked for (--facts)
  int workers = 0;     // unused (ReportWharfRow's shape)
  int runs = 0;
  W10Measurement wharf;  // median over the runs
};

void PrintW10Table(const W10Row& row, std::FILE* out);
std::string W10Json(const W10Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
