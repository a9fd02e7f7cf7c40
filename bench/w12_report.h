// Output of W12-migrate: the human table and the JSON line.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w12_migrate.h"

namespace wharf::bench {

struct W12Row {
  uint64_t facts = 0;  // rows in the table (--facts)
  int workers = 0;     // unused (ReportWharfRow's shape)
  int runs = 0;
  W12Measurement wharf;  // median over the runs
};

void PrintW12Table(const W12Row& row, std::FILE* out);
std::string W12Json(const W12Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
