// Output of W6-steady and W6-stuck: the series (a text table with bars for disk and memory, and a
// CSV file), the verdict against the goals, and the JSON line.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w6_shape.h"

namespace wharf::bench {

struct W6Row {
  W6Shape shape;
  uint32_t retention_interval_ms = 0;
  W6Measurement wharf;
  std::string csv_path;   // where the series was written ("" when it could not be)
  std::string csv_error;  // why not
};

// One progress line for stderr while the run goes on.
std::string FormatW6Progress(const W6Sample& sample, const std::vector<std::string>& consumers);

// Writes the series as CSV (header: t_s,disk_bytes,rss_bytes,commits,p50_us,p99_us,load_1m,
// lag_<consumer>...). Returns "" or why it could not.
std::string WriteW6Csv(const W6Measurement& m, const std::string& path);

void PrintW6Table(const W6Row& row, const W6Verdict& verdict, std::FILE* out);
std::string W6Json(const W6Row& row, const W6Verdict& verdict, const MachineInfo& machine);

}  // namespace wharf::bench
