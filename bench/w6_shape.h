// W6-steady: an appliance's steady state. Producers commit at a fixed open-loop rate (half of what
// W1 P=16,B=10 reaches, measured in the same run) for ten minutes while two projections and one
// subscriber keep up and online retention runs at its default interval; every 10 s the run samples
// the database directory's disk use, the process's resident memory, the commit latency of the
// interval and each consumer's lag. W6-stuck adds a subscriber whose handler always asks for a
// retry, under a retention byte bound. The verdict (W6Verdict) checks that disk and memory stay
// flat and the commit tail does not grow.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/latency_histogram.h"

namespace wharf::bench {

inline constexpr char kW6SteadyName[] = "W6-steady";
inline constexpr char kW6StuckName[] = "W6-stuck";
inline constexpr double kW6DefaultDuration_s = 600;
inline constexpr double kW6SampleInterval_s = 10;
// The rate probe: W1 with these producers and batch, for this long; W6 runs at half its rate.
inline constexpr int kW6Producers = 16;
inline constexpr int kW6Batch = 10;
inline constexpr double kW6ProbeDuration_s = 5;
// Distinct `orders` rows the producers upsert (one per transaction): W1 writes a new row per
// transaction, which over ten minutes would grow the state by design rather than by a leak.
inline constexpr uint64_t kW6StateKeys = 65536;
// Facts per batch of the caught-up subscriber (the projections keep their default, 100).
inline constexpr uint32_t kW6SubscriberBatch = 100;
// W6-stuck's `retention_max_bytes` (unless --engine-options sets one).
inline constexpr uint64_t kW6StuckBoundBytes = uint64_t{256} << 20;
// The goals (over the window after the warm-up).
inline constexpr double kW6DiskBand = 0.25;          // every sample within ±25 % of the median
inline constexpr double kW6DiskTrendMax = 0.10;      // fitted rise over the window < 10 % of median
inline constexpr double kW6RssBand = 0.10;           // every sample within ±10 % of the median
inline constexpr double kW6P99GrowthMax = 1.5;       // window p99 <= 1.5 x the first minute's
inline constexpr double kW6StuckDiskBoundMax = 1.3;  // W6-stuck: disk < 1.3 x retention_max_bytes
// After the producers stop, how long the caught-up consumers may take to finish.
inline constexpr double kW6CatchUp_s = 120;

// Consumers, in the order of W6Measurement::consumers (the stuck one only in W6-stuck).
inline constexpr char kW6LatestProjection[] = "w6-projection-latest";
inline constexpr char kW6CountsProjection[] = "w6-projection-counts";
inline constexpr char kW6Subscriber[] = "w6-subscriber";
inline constexpr char kW6StuckSubscriber[] = "w6-stuck-subscriber";

enum class W6Variant { kSteady, kStuck };

struct W6Shape {
  W6Variant variant = W6Variant::kSteady;
  double duration_s = kW6DefaultDuration_s;
  double rate_commits_per_s = 0;  // of kW6Batch facts each, over all producers
  int producers = kW6Producers;
  int batch = kW6Batch;
  int workers = 2;  // runtime workers
  // Every figure scales with the duration, so a short run has the same shape (10 s samples, a
  // 2-min warm-up and a 1-min reference for the p99 at 600 s).
  double sample_interval_s() const;
  double warmup_s() const;        // excluded from the verdict's window
  double first_window_s() const;  // the reference p99's window
  const char* name() const { return variant == W6Variant::kStuck ? kW6StuckName : kW6SteadyName; }
};

// One sample, taken at the end of its interval.
struct W6Sample {
  double t_s = 0;           // since the producers started
  uint64_t disk_bytes = 0;  // the database directory, as du counts it
  uint64_t rss_bytes = 0;   // the process's resident set
  double load_1m = 0;       // the machine's load average (other work on the cores)
  uint64_t commits = 0;     // completed in the interval
  double p50_us = 0;        // of the commits completed in the interval, from their scheduled time
  double p99_us = 0;
  std::vector<uint64_t> lag_facts;  // per consumer (W6Measurement::consumers): committed - handled
};

// What one run measured. A non-empty `error` means the run failed (the series may still tell why).
struct W6Measurement {
  double probe_facts_per_s = 0;     // W1 P=16,B=10 in this run (0: --rate given)
  double target_commits_per_s = 0;  // asked for
  double achieved_commits_per_s = 0;
  uint64_t committed_facts = 0;
  uint64_t retention_max_bytes = 0;    // the bound in force (0: none)
  std::vector<std::string> consumers;  // the lag columns, in order
  std::vector<W6Sample> samples;
  // Latencies per sample interval (index as `samples`), kept to merge windows for the verdict.
  std::vector<std::unique_ptr<LatencyHistogram>> interval_latency;
  uint64_t final_disk_bytes = 0;          // after the consumers caught up
  std::vector<uint64_t> final_lag_facts;  // per consumer, after the catch-up wait
  uint64_t retention_dropped_events = 0;  // trace events `retention-dropped`
  std::string first_retention_dropped;    // its consumer and reason
  uint64_t stuck_lost_facts = 0;          // W6-stuck: ListRetentionLosses for the stuck one
  uint64_t other_lost_facts = 0;          // every other consumer's losses
  std::string other_losses;     // which consumers lost what (a caught-up consumer should not)
  uint64_t stuck_warnings = 0;  // the stuck subscriber's (subscriber-failed: expected)
  uint64_t warnings = 0;        // every other runtime warning and error
  std::string first_warning;
  std::string error;
};

// The goals, checked over the samples after the warm-up.
struct W6Verdict {
  std::string error;  // not enough samples to judge
  size_t window_samples = 0;
  double disk_median_bytes = 0;
  double disk_deviation = 0;  // max |sample - median| / median
  double disk_trend = 0;      // least-squares slope x window length / median
  double rss_median_bytes = 0;
  double rss_deviation = 0;
  double p99_first_us = 0;   // over the first minute (scaled)
  double p99_window_us = 0;  // over the window
  double p99_worst_interval_us = 0;
  double disk_max_bytes = 0;  // max over the window
  bool disk_ok = false, rss_ok = false, p99_ok = false;
  // W6-stuck only.
  bool bound_ok = false;   // disk_max_bytes < kW6StuckDiskBoundMax x retention_max_bytes
  bool losses_ok = false;  // the stuck subscriber's losses were reported (listed and traced)
  bool ok() const;
  bool stuck = false;
};

W6Verdict JudgeW6(const W6Shape& shape, const W6Measurement& m);

// Least-squares slope of y over x; 0 with fewer than two distinct x.
double LeastSquaresSlope(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace wharf::bench
