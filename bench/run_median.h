// Every workload reports the median of its runs (shared/WORKLOAD.md): the runs that succeeded, and
// the median of any figure over them.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

// The median of `values` (the mean of the middle two for an even count). REQUIRES: not empty.
inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The runs without an error among `runs` (a Measurement has a std::string `error`, empty when it
// succeeded). Keeps pointers into `runs`, which must outlive it.
template <typename Measurement>
class SucceededRuns {
 public:
  explicit SucceededRuns(const std::vector<Measurement>& runs) {
    for (const Measurement& run : runs) {
      if (run.error.empty()) ok_.push_back(&run);
    }
    if (ok_.empty()) first_error_ = runs.empty() ? "no runs" : runs.front().error;
  }

  bool empty() const { return ok_.empty(); }
  const Measurement& first() const { return *ok_.front(); }
  const std::vector<const Measurement*>& runs() const { return ok_; }
  // What to report when every run failed: no figures, the first run's error.
  Measurement Failed() const {
    Measurement failed;
    failed.error = first_error_;
    return failed;
  }

  // The median of `get(run)` over the runs. REQUIRES: !empty().
  template <typename Get>
  double MedianBy(Get&& get) const {
    std::vector<double> values;
    values.reserve(ok_.size());
    for (const Measurement* run : ok_) values.push_back(static_cast<double>(get(*run)));
    return Median(std::move(values));
  }
  // Each percentile's median of `get(run)`, a LatencySummary, over the runs. REQUIRES: !empty().
  template <typename Get>
  LatencySummary MedianLatencyBy(Get&& get) const {
    return {MedianBy([&](const Measurement& run) { return get(run).p50_us; }),
            MedianBy([&](const Measurement& run) { return get(run).p99_us; }),
            MedianBy([&](const Measurement& run) { return get(run).p999_us; })};
  }
  // The median of a numeric member. REQUIRES: !empty().
  template <typename T>
  double MedianOf(T Measurement::*field) const {
    return MedianBy([field](const Measurement& run) { return run.*field; });
  }

 private:
  std::vector<const Measurement*> ok_;
  std::string first_error_;
};

}  // namespace wharf::bench
