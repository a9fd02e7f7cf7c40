#include "bench/latency_samples.h"

#include <algorithm>
#include <cmath>

namespace wharf::bench {
namespace {

// Up-front reservation: a 3-s run at 300 k commits/s is ~1 M samples in all, so most runs never
// reallocate while measuring.
constexpr size_t kReservedSamples = 1 << 18;

double PercentileUs(const std::vector<uint64_t>& sorted_ns, double quantile) {
  if (sorted_ns.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(quantile * sorted_ns.size()));
  const size_t index = std::min(sorted_ns.size() - 1, rank == 0 ? 0 : rank - 1);
  return static_cast<double>(sorted_ns[index]) / 1000.0;
}

}  // namespace

LatencySamples::LatencySamples(size_t samples_max) : samples_max_(samples_max) {
  samples_ns_.reserve(std::min(samples_max, kReservedSamples));
}

LatencySummary LatencySamples::Summarize(const std::vector<LatencySamples>& threads) {
  std::vector<uint64_t> all_ns;
  size_t total = 0;
  for (const LatencySamples& thread : threads) total += thread.samples_ns_.size();
  all_ns.reserve(total);
  for (const LatencySamples& thread : threads) {
    all_ns.insert(all_ns.end(), thread.samples_ns_.begin(), thread.samples_ns_.end());
  }
  std::sort(all_ns.begin(), all_ns.end());
  return {PercentileUs(all_ns, 0.50), PercentileUs(all_ns, 0.99), PercentileUs(all_ns, 0.999)};
}

}  // namespace wharf::bench
