// What `wharf top` shows: from two metrics snapshots (wharf/metrics.h) taken an interval apart,
// the commit rate, sync-round latency (p50/p99 estimated from the histogram's growth, and the
// mean), queue depth and disk use; per consumer its delivery rate, lag and state, and its last
// error. Pure: the terminal is top_command.cc's.
//
// A consumer's state, first that applies:
//   retrying fact N (attempt K, since T)   a fact keeps failing (its runtime waits to retry it)
//   caught up                              no fact it takes is pending
//   stuck                                  behind, and none of its cursors moved for stuck_ms
//   behind                                 behind, and moving
//
// Thread safety: none needed (the CLI is single-threaded).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wharf/metrics.h"

namespace wharf::cli {

enum class Color { kNone, kBold, kGreen, kYellow, kRed };

struct Segment {
  std::string text;
  Color color = Color::kNone;
};
using Line = std::vector<Segment>;

// The line as text: with ANSI colors when `color`, cut to `width_max` characters (0: no limit).
std::string RenderLine(const Line& line, bool color, size_t width_max);

// The value below which `quantile` (0..1) of the observations fall, interpolated linearly inside
// its bucket as Prometheus' histogram_quantile does, over what `now` observed since `before`
// (same bounds). Empty when nothing was observed meanwhile, the bounds differ, or a count went
// down (the engine restarted). *above_last set when it falls past the last finite bound (the value
// is that bound then).
std::optional<double> EstimateQuantile(const Histogram& before, const Histogram& now,
                                       double quantile, bool* above_last);

class TopView {
 public:
  TopView(std::string db, int64_t stuck_ms) : db_(std::move(db)), stuck_ms_(stuck_ms) {}

  // A snapshot read at `steady_ms` (a monotonic clock), or the error that kept it from being read.
  void Observe(const MetricsSnapshot& snapshot, int64_t steady_ms);
  void ObserveError(const std::string& error);

  // The frame for the last two observations. `interval_ms` and `keys` (q quits) for the title.
  std::vector<Line> Frame(int64_t interval_ms, bool keys) const;

 private:
  struct Progress {
    uint64_t cursor_sum = 0;
    int64_t since_steady_ms = 0;  // when its cursors last moved (or when first seen)
  };
  static std::string KeyOf(const ConsumerMetrics& consumer);
  std::vector<Line> ConsumerLines() const;
  std::string ConsumerState(const ConsumerMetrics& consumer, Color* color) const;
  // Per second over the interval; empty when unknown (one snapshot, or the counter went down).
  std::optional<double> Rate(uint64_t before, uint64_t now) const;

  std::string db_;
  int64_t stuck_ms_;
  std::optional<MetricsSnapshot> previous_, current_;
  int64_t previous_steady_ms_ = 0, current_steady_ms_ = 0;
  std::string error_;  // the last read's error ("" when it succeeded)
  std::map<std::string, Progress> progress_;
};

}  // namespace wharf::cli
