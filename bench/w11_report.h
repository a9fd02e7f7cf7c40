// Output of W11-backup: the human table and the JSON line.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w11_backup.h"

namespace wharf::bench {

struct W11Row {
  uint64_t facts = 0;  // asked for (--facts)
  int workers = 0;     // unused (ReportWharfRow's shape)
  int runs = 0;
  W11Measurement wharf;  // median over the runs
};

void PrintW11Table(const W11Row& row, std::FILE* out);
std::string W11Json(const W11Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
