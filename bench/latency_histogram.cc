#include "bench/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace wharf::bench {

size_t LatencyHistogram::BucketOf(uint64_t latency_us) {
  if (latency_us < 2 * kSubBuckets) return static_cast<size_t>(latency_us);
  // magnitude >= kSubBits + 1: the value's top kSubBits + 1 bits select the bucket.
  const int magnitude = std::bit_width(latency_us) - 1;
  const int shift = magnitude - kSubBits;
  const size_t group = static_cast<size_t>(magnitude - kSubBits - 1);
  if (group >= static_cast<size_t>(kMagnitudes)) return kBuckets - 1;  // beyond ~36 h: the last
  const uint64_t sub = (latency_us >> shift) - kSubBuckets;            // in [0, kSubBuckets)
  return 2 * kSubBuckets + group * kSubBuckets + static_cast<size_t>(sub);
}

uint64_t LatencyHistogram::UpperBoundUs(size_t bucket) {
  assert(bucket < kBuckets);
  if (bucket < 2 * kSubBuckets) return bucket;
  const size_t group = (bucket - 2 * kSubBuckets) / kSubBuckets;
  const uint64_t sub = (bucket - 2 * kSubBuckets) % kSubBuckets;
  const int shift = static_cast<int>(group) + 1;
  return ((kSubBuckets + sub + 1) << shift) - 1;
}

uint64_t LatencyHistogram::count() const {
  uint64_t total = 0;
  for (const std::atomic<uint64_t>& c : counts_) total += c.load(std::memory_order_relaxed);
  return total;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) {
    counts_[i].fetch_add(other.counts_[i].load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  }
}

double LatencyHistogram::PercentileUs(double quantile) const {
  return bench::PercentileUs({this}, quantile);
}

double PercentileUs(const std::vector<const LatencyHistogram*>& histograms, double quantile) {
  std::vector<uint64_t> counts(LatencyHistogram::kBuckets, 0);
  uint64_t total = 0;
  for (const LatencyHistogram* h : histograms) {
    for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
      const uint64_t c = h->counts_[i].load(std::memory_order_relaxed);
      counts[i] += c;
      total += c;
    }
  }
  if (total == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(quantile * static_cast<double>(total))));
  uint64_t seen = 0;
  for (size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    seen += counts[i];
    if (seen >= rank) return static_cast<double>(LatencyHistogram::UpperBoundUs(i));
  }
  return static_cast<double>(LatencyHistogram::UpperBoundUs(LatencyHistogram::kBuckets - 1));
}

}  // namespace wharf::bench
