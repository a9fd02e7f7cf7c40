// Output of W9-contended: the human table and one JSON line per K (shared/WORKLOAD.md).
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w9_shape.h"

namespace wharf::bench {

void PrintW9Table(const W9Row& row, std::FILE* out);
std::string W9Json(const W9Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
