// Text helpers shared by the workloads' reports: printf-style formatting, JSON fragments, and the
// machine line every workload prints (the disk's own limits next to the figures).
#pragma once

#include <cstdio>
#include <string>

#include "bench/latency_samples.h"
#include "bench/reference_disk.h"

namespace wharf::bench {

struct MachineInfo {
  int cores = 0;
  std::string filesystem;  // of the scratch directory
  DiskReference disk;
};

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// JSON string contents: error messages may hold quotes, backslashes or control bytes.
std::string JsonEscape(const std::string& text);

// `value` formatted with `format`, or null when not known.
std::string JsonNumberOrNull(double value, bool known, const char* format = "%.1f");

// {"p50": .., "p99": .., "p999": ..}, nulls when not known.
std::string LatencyJson(const LatencySummary& latency, bool known);

// The "machine" object of every JSON line (without a key).
std::string MachineJson(const MachineInfo& machine);

void PrintMachineLine(const MachineInfo& machine, const std::string& dir, std::FILE* out);

}  // namespace wharf::bench
