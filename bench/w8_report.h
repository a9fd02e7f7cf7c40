// Output of W8-slow-subscriber: the human table and one JSON line per key_concurrency
// (shared/WORKLOAD.md).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench/report_text.h"
#include "bench/w8_shape.h"

namespace wharf::bench {

void PrintW8Table(const W8Row& row, std::FILE* out);
std::vector<std::string> W8Json(const W8Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
