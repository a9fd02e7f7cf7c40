#include "bench/w2_shape.h"

#include <sys/resource.h>

#include <algorithm>

#include "bench/run_median.h"

namespace wharf::bench {

W2Measurement MedianOf(const std::vector<W2Measurement>& runs) {
  const SucceededRuns<W2Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W2Measurement result;
  result.facts_per_s = ok.MedianOf(&W2Measurement::facts_per_s);
  result.facts_consumed = static_cast<uint64_t>(ok.MedianOf(&W2Measurement::facts_consumed));
  result.facts_total = static_cast<uint64_t>(ok.MedianOf(&W2Measurement::facts_total));
  result.consume_s = ok.MedianOf(&W2Measurement::consume_s);
  result.precommit_s = ok.MedianOf(&W2Measurement::precommit_s);
  result.batches_per_sync = ok.MedianOf(&W2Measurement::batches_per_sync);
  result.sync_ms_mean = ok.MedianOf(&W2Measurement::sync_ms_mean);
  result.cpu_s = ok.MedianOf(&W2Measurement::cpu_s);
  result.fullest_partition_share = ok.MedianOf(&W2Measurement::fullest_partition_share);
  double low = result.facts_per_s, high = result.facts_per_s;
  for (const W2Measurement& run : runs) {
    if (!run.error.empty()) continue;
    low = std::min(low, run.facts_per_s);
    high = std::max(high, run.facts_per_s);
  }
  if (result.facts_per_s > 0) result.spread = (high - low) / 2 / result.facts_per_s;
  return result;
}

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string_view W2StateKey(uint64_t id, char (&buffer)[kW2StateKeyBytes + 1]) {
  // "f" and 15 lowercase hex digits (what "f%015" PRIx64 prints for a 60-bit id), without
  // snprintf: every system's handler formats one key per fact, and snprintf cost ~3 % of a run.
  static constexpr char kHex[] = "0123456789abcdef";
  buffer[0] = 'f';
  for (size_t i = kW2StateKeyBytes - 1; i >= 1; --i, id >>= 4) buffer[i] = kHex[id & 0xf];
  buffer[kW2StateKeyBytes] = '\0';
  return {buffer, kW2StateKeyBytes};
}

std::string_view W2StateValue(std::string_view payload) {
  return payload.substr(0, std::min(payload.size(), kW2StateValueBytes));
}

}  // namespace wharf::bench
