#include "bench/w6_shape.h"

#include <algorithm>
#include <cmath>

#include "bench/run_median.h"

namespace wharf::bench {

// 600 s (the standard run): 10 s samples, 2 min of warm-up, the first minute as the reference.
double W6Shape::sample_interval_s() const { return std::min(kW6SampleInterval_s, duration_s / 10); }
double W6Shape::warmup_s() const { return duration_s * 0.2; }
double W6Shape::first_window_s() const { return duration_s * 0.1; }

bool W6Verdict::ok() const {
  if (!error.empty()) return false;
  return stuck ? bound_ok && losses_ok : disk_ok && rss_ok && p99_ok;
}

double LeastSquaresSlope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return 0;
  double mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < n; ++i) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= static_cast<double>(n);
  mean_y /= static_cast<double>(n);
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

namespace {

// max |v - median| / median over `values`.
double Deviation(const std::vector<double>& values, double median) {
  double worst = 0;
  for (const double v : values) worst = std::max(worst, std::abs(v - median));
  return median > 0 ? worst / median : 0;
}

}  // namespace

W6Verdict JudgeW6(const W6Shape& shape, const W6Measurement& m) {
  W6Verdict v;
  v.stuck = shape.variant == W6Variant::kStuck;
  std::vector<double> t, disk, rss;
  std::vector<const LatencyHistogram*> first, window;
  for (size_t i = 0; i < m.samples.size(); ++i) {
    const W6Sample& s = m.samples[i];
    const LatencyHistogram* latency =
        i < m.interval_latency.size() ? m.interval_latency[i].get() : nullptr;
    // A sample at t covers (t - interval, t]: the first minute is the samples up to its end.
    if (latency != nullptr && s.t_s <= shape.first_window_s() + 1e-6) first.push_back(latency);
    if (s.t_s <= shape.warmup_s() + 1e-6) continue;
    t.push_back(s.t_s);
    disk.push_back(static_cast<double>(s.disk_bytes));
    rss.push_back(static_cast<double>(s.rss_bytes));
    if (latency != nullptr) {
      window.push_back(latency);
      v.p99_worst_interval_us = std::max(v.p99_worst_interval_us, s.p99_us);
    }
  }
  v.window_samples = t.size();
  if (t.size() < 3 || first.empty()) {
    v.error = "too few samples after the warm-up to judge (" + std::to_string(t.size()) + ")";
    return v;
  }
  v.disk_median_bytes = Median(disk);
  v.disk_deviation = Deviation(disk, v.disk_median_bytes);
  const double window_s = shape.duration_s - shape.warmup_s();
  v.disk_trend =
      v.disk_median_bytes > 0 ? LeastSquaresSlope(t, disk) * window_s / v.disk_median_bytes : 0;
  v.disk_max_bytes = *std::max_element(disk.begin(), disk.end());
  v.rss_median_bytes = Median(rss);
  v.rss_deviation = Deviation(rss, v.rss_median_bytes);
  v.p99_first_us = PercentileUs(first, 0.99);
  v.p99_window_us = PercentileUs(window, 0.99);
  v.disk_ok = v.disk_deviation <= kW6DiskBand && v.disk_trend < kW6DiskTrendMax;
  v.rss_ok = v.rss_deviation <= kW6RssBand;
  v.p99_ok = v.p99_first_us > 0 && v.p99_window_us <= kW6P99GrowthMax * v.p99_first_us;
  if (v.stuck) {
    v.bound_ok =
        m.retention_max_bytes > 0 &&
        v.disk_max_bytes < kW6StuckDiskBoundMax * static_cast<double>(m.retention_max_bytes);
    v.losses_ok = m.stuck_lost_facts > 0 && m.retention_dropped_events > 0;
  }
  return v;
}

}  // namespace wharf::bench
