// AtomicHistogram: a distribution over fixed buckets that any number of threads add to without a
// lock (one relaxed fetch_add for the bucket, one for the sum), read as a wharf::Histogram
// (cumulative, as Prometheus wants it).
//
// Observations are integers in a fine unit (nanoseconds, facts) so that the sum stays an exact
// integer atomic; Snapshot() scales them to the exported unit (seconds). The bounds are constexpr
// arrays below, shared by every histogram of a kind so that two engines' series line up.
//
// Thread safety: Observe and Snapshot may run concurrently on any threads. A snapshot reads the
// buckets one after another: its count is the sum of the buckets it read (so the cumulative
// counts always agree with it), and its sum may be a few observations ahead or behind.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "wharf/metrics.h"

namespace wharf::internal {

// Latencies in nanoseconds: 25 µs to 10 s, 1-2.5-5 per decade (a WAL sync on an SSD takes about
// 100 µs, a commit under load a few ms, a disk in trouble seconds).
inline constexpr std::array<uint64_t, 18> kLatencyBoundsNs = {
    25'000,      50'000,      100'000,      250'000,      500'000,      1'000'000,
    2'500'000,   5'000'000,   10'000'000,   25'000'000,   50'000'000,   100'000'000,
    250'000'000, 500'000'000, 1000'000'000, 2500'000'000, 5000'000'000, 10000'000'000};
inline constexpr double kNsPerSecond = 1e9;

// Facts made durable by one sync round: powers of 4 from 1 to 16384 (group_facts_max's range).
inline constexpr std::array<uint64_t, 8> kRoundFactsBounds = {1, 4, 16, 64, 256, 1024, 4096, 16384};

template <size_t N>
class AtomicHistogram {
 public:
  // `bounds` ascending (the arrays above); `unit` the observations per exported unit.
  constexpr AtomicHistogram(const std::array<uint64_t, N>& bounds, double unit)
      : bounds_(bounds), unit_(unit) {}
  AtomicHistogram(const AtomicHistogram&) = delete;
  AtomicHistogram& operator=(const AtomicHistogram&) = delete;

  void Observe(uint64_t value) {
    // The first bound >= value: Prometheus' buckets are `le` (less or equal); past the last
    // bound, the +Inf bucket (index N).
    const size_t bucket = static_cast<size_t>(
        std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    counts_[bucket].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
  }

  Histogram Snapshot() const {
    Histogram out;
    out.upper_bounds.reserve(N);
    out.cumulative_counts.reserve(N);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < N; ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      out.upper_bounds.push_back(static_cast<double>(bounds_[i]) / unit_);
      out.cumulative_counts.push_back(cumulative);
    }
    out.count = cumulative + counts_[N].load(std::memory_order_relaxed);
    out.sum = static_cast<double>(sum_.load(std::memory_order_relaxed)) / unit_;
    return out;
  }

  // The observations so far and their sum, in the observation's unit (for tests and benches).
  uint64_t count() const {
    uint64_t total = 0;
    for (const auto& count : counts_) total += count.load(std::memory_order_relaxed);
    return total;
  }
  uint64_t sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::array<uint64_t, N>& bounds_;
  const double unit_;
  std::array<std::atomic<uint64_t>, N + 1> counts_{};  // per bucket, not cumulative; [N]: +Inf
  std::atomic<uint64_t> sum_{0};
};

using LatencyHistogram = AtomicHistogram<kLatencyBoundsNs.size()>;
using RoundFactsHistogram = AtomicHistogram<kRoundFactsBounds.size()>;

}  // namespace wharf::internal
