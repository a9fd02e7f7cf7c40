// Output of W7-relay: the human table and the JSON line (one per broker) of shared/WORKLOAD.md.
#pragma once

#include <cstdio>
#include <string>

#include "bench/report_text.h"
#include "bench/w7_shape.h"

namespace wharf::bench {

struct W7Row {
  W7Broker broker = W7Broker::kRedisStreams;
  uint64_t facts = 0;  // asked for (--facts)
  int workers = 2;
  int runs = 0;
  double precommit_s = 0;
  std::string relay_options;  // --relay-options ("": the relay's defaults)
  W7Measurement median;       // over the runs
};

void PrintW7Table(const W7Row& row, std::FILE* out);
std::string W7Json(const W7Row& row, const MachineInfo& machine);

}  // namespace wharf::bench
