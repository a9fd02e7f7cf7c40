// Commit latencies: each producer thread appends to its own vector (no sharing while measuring),
// the vectors are merged and sorted once at the end. Simple and exact; bounded by a sample cap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wharf::bench {

struct LatencySummary {
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
};

// Aligned to a cache line: producer threads append to adjacent elements of one vector.
class alignas(64) LatencySamples {
 public:
  // Keeps at most `samples_max` samples; later ones are counted but dropped, so that a long or
  // unexpectedly fast run cannot exhaust memory.
  explicit LatencySamples(size_t samples_max);

  void Add(uint64_t latency_ns) {
    if (samples_ns_.size() < samples_max_) {
      samples_ns_.push_back(latency_ns);
    } else {
      ++dropped_;
    }
  }
  size_t dropped() const { return dropped_; }
  // Samples added, kept or not.
  size_t count() const { return samples_ns_.size() + dropped_; }

  // Nearest-rank percentiles over all samples of `threads`.
  static LatencySummary Summarize(const std::vector<LatencySamples>& threads);

 private:
  size_t samples_max_;
  size_t dropped_ = 0;
  std::vector<uint64_t> samples_ns_;
};

}  // namespace wharf::bench
