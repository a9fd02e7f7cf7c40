// A fixed-size latency histogram for long runs: log-linear buckets (64 per power of two, so a
// reported percentile is within ~1.6 % of the true value) from 1 µs to ~36 hours. Unlike
// LatencySamples it never allocates while recording, so a ten-minute run's latencies do not grow
// the process's memory (W6-steady measures that memory). Recording is a relaxed atomic increment:
// any thread may record concurrently; reading while others record sees a count or two late.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace wharf::bench {

class LatencyHistogram;
// Percentile over several histograms together (e.g. the intervals of a window), as
// LatencyHistogram::PercentileUs.
double PercentileUs(const std::vector<const LatencyHistogram*>& histograms, double quantile);

class LatencyHistogram {
 public:
  // Values below 128 µs have a bucket each; above, each power of two has kSubBuckets.
  static constexpr int kSubBits = 6;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBits;  // 64
  static constexpr int kMagnitudes = 30;                            // 2^7 .. 2^37 µs
  static constexpr size_t kBuckets = 2 * kSubBuckets + kMagnitudes * kSubBuckets;

  LatencyHistogram() = default;
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  void Add(uint64_t latency_ns) {
    counts_[BucketOf(latency_ns / 1000)].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t count() const;
  // Nearest-rank percentile (quantile in [0, 1]) in µs: the upper bound of the bucket holding that
  // rank; 0 when empty.
  double PercentileUs(double quantile) const;
  // Adds every count of `other` to this one.
  void Merge(const LatencyHistogram& other);

  // Exposed for the bucket arithmetic's tests.
  static size_t BucketOf(uint64_t latency_us);
  static uint64_t UpperBoundUs(size_t bucket);

 private:
  friend double PercentileUs(const std::vector<const LatencyHistogram*>& histograms,
                             double quantile);
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

}  // namespace wharf::bench
