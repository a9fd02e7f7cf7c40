// The frames of `wharf top` (top_frame.h).
#include "tools/cli/top_frame.h"

#include <fmt/format.h>

#include <algorithm>

#include "tools/cli/output.h"
#include "tools/cli/replication_view.h"

namespace wharf::cli {
namespace {

const char* ColorCode(Color color) {
  switch (color) {
    case Color::kBold:
      return "\x1b[1m";
    case Color::kGreen:
      return "\x1b[32m";
    case Color::kYellow:
      return "\x1b[33m";
    case Color::kRed:
      return "\x1b[31m";
    case Color::kNone:
      break;
  }
  return "";
}

// Bytes of `text` that hold its first `characters` code points.
size_t PrefixBytes(const std::string& text, size_t characters) {
  size_t bytes = 0;
  while (bytes < text.size()) {
    if ((static_cast<uint8_t>(text[bytes]) & 0xc0) != 0x80) {
      if (characters == 0) break;
      --characters;
    }
    ++bytes;
  }
  return bytes;
}

size_t Characters(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<uint8_t>(c) & 0xc0) != 0x80; });
}

std::string Seconds(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.0f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}

std::string PerSecond(const std::optional<double>& rate) {
  return rate ? fmt::format("{:.1f}", *rate) : "-";
}

// "10:39:58Z" of a wall-clock time (ms since the epoch).
std::string TimeOfDay(int64_t ms) {
  std::string full = FormatTimeMs(ms);  // 2024-05-01T12:00:00.123Z
  return full.size() >= 20 ? full.substr(11, 8) + "Z" : full;
}

std::string Ago(int64_t then_ms, int64_t now_ms) {
  const int64_t seconds = std::max<int64_t>(0, now_ms - then_ms) / 1000;
  if (seconds < 120) return fmt::format("{} s ago", seconds);
  if (seconds < 7200) return fmt::format("{} min ago", seconds / 60);
  return fmt::format("{} h ago", seconds / 3600);
}

uint64_t CursorSum(const ConsumerMetrics& consumer) {
  uint64_t sum = 0;
  for (const ConsumerPartitionMetrics& lane : consumer.partitions) sum += lane.cursor;
  return sum;
}

}  // namespace

std::string RenderLine(const Line& line, bool color, size_t width_max) {
  std::string out;
  size_t room = width_max == 0 ? SIZE_MAX : width_max;
  for (const Segment& segment : line) {
    if (room == 0) break;
    const size_t characters = Characters(segment.text);
    const std::string text =
        characters <= room ? segment.text : segment.text.substr(0, PrefixBytes(segment.text, room));
    room -= std::min(characters, room);
    if (color && segment.color != Color::kNone) {
      out.append(ColorCode(segment.color)).append(text).append("\x1b[0m");
    } else {
      out.append(text);
    }
  }
  return out;
}

std::optional<double> EstimateQuantile(const Histogram& before, const Histogram& now,
                                       double quantile, bool* above_last) {
  *above_last = false;
  const size_t buckets = now.upper_bounds.size();
  if (before.upper_bounds != now.upper_bounds || now.cumulative_counts.size() != buckets ||
      before.cumulative_counts.size() != buckets || now.count <= before.count || buckets == 0) {
    return std::nullopt;
  }
  std::vector<uint64_t> counts(buckets);
  for (size_t i = 0; i < buckets; ++i) {
    if (now.cumulative_counts[i] < before.cumulative_counts[i]) return std::nullopt;
    counts[i] = now.cumulative_counts[i] - before.cumulative_counts[i];
  }
  const double total = static_cast<double>(now.count - before.count);
  const double rank = quantile * total;
  for (size_t i = 0; i < buckets; ++i) {
    if (static_cast<double>(counts[i]) < rank || counts[i] == 0) continue;
    const double lower = i == 0 ? 0 : now.upper_bounds[i - 1];
    const double below = i == 0 ? 0 : static_cast<double>(counts[i - 1]);
    const double inside = static_cast<double>(counts[i]) - below;
    if (inside <= 0) return now.upper_bounds[i];
    return lower + (now.upper_bounds[i] - lower) * (rank - below) / inside;
  }
  *above_last = true;
  return now.upper_bounds.back();
}

void TopView::Observe(const MetricsSnapshot& snapshot, int64_t steady_ms) {
  previous_ = std::move(current_);
  previous_steady_ms_ = current_steady_ms_;
  current_ = snapshot;
  current_steady_ms_ = steady_ms;
  error_.clear();
  for (const ConsumerMetrics& consumer : snapshot.consumers) {
    const uint64_t sum = CursorSum(consumer);
    auto [it, inserted] = progress_.try_emplace(KeyOf(consumer), Progress{sum, steady_ms});
    if (!inserted && it->second.cursor_sum != sum) it->second = Progress{sum, steady_ms};
  }
}

void TopView::ObserveError(const std::string& error) { error_ = error; }

std::string TopView::KeyOf(const ConsumerMetrics& consumer) {
  return consumer.consumer + '\0' + consumer.instance;
}

std::optional<double> TopView::Rate(uint64_t before, uint64_t now) const {
  const int64_t elapsed_ms = current_steady_ms_ - previous_steady_ms_;
  if (!previous_ || now < before || elapsed_ms <= 0) return std::nullopt;
  return static_cast<double>(now - before) * 1000 / static_cast<double>(elapsed_ms);
}

std::string TopView::ConsumerState(const ConsumerMetrics& consumer, Color* color) const {
  if (consumer.retrying) {
    *color = Color::kRed;
    return fmt::format("retrying fact {} (attempt {}, since {})", consumer.retrying_fact_id,
                       consumer.retrying_attempt, TimeOfDay(consumer.retrying_since_ms));
  }
  if (consumer.lag_facts == 0) {
    *color = Color::kGreen;
    return "caught up";
  }
  auto it = progress_.find(KeyOf(consumer));
  if (it != progress_.end() && current_steady_ms_ - it->second.since_steady_ms >= stuck_ms_) {
    *color = Color::kRed;
    return "stuck";
  }
  *color = Color::kYellow;
  return "behind";
}

std::vector<Line> TopView::ConsumerLines() const {
  const MetricsSnapshot& now = *current_;
  if (now.consumers.empty()) return {{{"no durable consumers attached to this engine"}}};
  // Columns: consumer, kind, rate, lag facts, lag seconds, state, last error (left unpadded).
  std::vector<std::vector<std::string>> rows;
  std::vector<Color> colors;
  rows.push_back({"CONSUMER", "KIND", "RATE/S", "LAG_FACTS", "LAG_S", "STATE", "LAST_ERROR"});
  colors.push_back(Color::kBold);
  // The same consumer attached by several runtimes: its rows name the instance.
  std::map<std::string, int> instances;
  for (const ConsumerMetrics& consumer : now.consumers) ++instances[consumer.consumer];
  for (const ConsumerMetrics& consumer : now.consumers) {
    std::optional<double> rate;
    if (previous_) {
      for (const ConsumerMetrics& before : previous_->consumers) {
        if (KeyOf(before) == KeyOf(consumer)) {
          rate = Rate(before.delivered_total, consumer.delivered_total);
        }
      }
    }
    Color color = Color::kNone;
    std::string state = ConsumerState(consumer, &color);
    std::string error = "-";
    if (!consumer.last_error.empty()) {
      error = Display(consumer.last_error, 120) + " (" + Ago(consumer.last_error_ms, now.taken_ms) +
              ")";
    }
    std::string name = Display(consumer.consumer);
    if (instances[consumer.consumer] > 1) name += "@" + Display(consumer.instance, 12);
    rows.push_back({name, consumer.kind, PerSecond(rate), std::to_string(consumer.lag_facts),
                    fmt::format("{:.1f}", consumer.lag_seconds), state, error});
    colors.push_back(color);
  }
  const std::vector<bool> right = {false, false, true, true, true, false, false};
  std::vector<size_t> widths(right.size(), 0);
  for (const auto& row : rows) {
    for (size_t column = 0; column < row.size(); ++column) {
      widths[column] = std::max(widths[column], Characters(row[column]));
    }
  }
  std::vector<Line> lines;
  for (size_t r = 0; r < rows.size(); ++r) {
    Line line;
    for (size_t column = 0; column < rows[r].size(); ++column) {
      const std::string& cell = rows[r][column];
      const bool last = column + 1 == rows[r].size();
      const std::string pad(last ? 0 : widths[column] - Characters(cell), ' ');
      // The header is bold; in the rows only the state is colored (not the padding).
      const Color color = r == 0 || column == 5 ? colors[r] : Color::kNone;
      if (right[column]) line.push_back({pad});
      line.push_back({cell, color});
      std::string after = right[column] ? "" : pad;
      if (!last) after += "  ";
      if (!after.empty()) line.push_back({after});
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<Line> TopView::Frame(int64_t interval_ms, bool keys) const {
  std::vector<Line> lines;
  std::string title = "wharf top  " + db_;
  if (current_) {
    title += fmt::format("  ({}, {} partitions)  {}", current_->io_backend, current_->partitions,
                         FormatTimeMs(current_->taken_ms));
  }
  title += fmt::format("  every {:.1f} s", static_cast<double>(interval_ms) / 1000);
  if (keys) title += "  q quits";
  lines.push_back({{title, Color::kBold}});
  if (!error_.empty()) {
    lines.push_back({{"engine: " + error_ + " (asking again every interval)", Color::kRed}});
  }
  if (!current_) return lines;
  const MetricsSnapshot& now = *current_;
  const CommitMetrics& c = now.commits;
  const CommitMetrics* b = previous_ ? &previous_->commits : nullptr;
  auto rate = [&](uint64_t CommitMetrics::*field) {
    return b ? Rate(b->*field, c.*field) : std::nullopt;
  };
  lines.push_back({{fmt::format(
      "commits   {} txn/s   {} facts/s   queue {}   producers waiting {}"
      "   busy {}/s   last lsn {}   durable lsn {}",
      PerSecond(rate(&CommitMetrics::transactions_total)),
      PerSecond(rate(&CommitMetrics::facts_total)), c.queue_depth, c.producers_waiting,
      PerSecond(rate(&CommitMetrics::busy_total)), c.last_lsn, c.durable_lsn)}});
  std::string sync = "sync      ";
  bool above_p50 = false, above_p99 = false;
  std::optional<double> p50, p99;
  if (b) {
    p50 = EstimateQuantile(b->sync_seconds, c.sync_seconds, 0.5, &above_p50);
    p99 = EstimateQuantile(b->sync_seconds, c.sync_seconds, 0.99, &above_p99);
  }
  if (p50 && p99) {
    const double rounds = static_cast<double>(c.sync_seconds.count - b->sync_seconds.count);
    const double mean = (c.sync_seconds.sum - b->sync_seconds.sum) / rounds;
    sync += fmt::format("p50 {}{}   p99 {}{}   mean {}   {} rounds/s", above_p50 ? ">" : "",
                        Seconds(*p50), above_p99 ? ">" : "", Seconds(*p99), Seconds(mean),
                        PerSecond(rate(&CommitMetrics::sync_rounds_total)));
    if (c.sync_facts.count > b->sync_facts.count) {
      sync += fmt::format("   {:.1f} facts/round",
                          (c.sync_facts.sum - b->sync_facts.sum) /
                              static_cast<double>(c.sync_facts.count - b->sync_facts.count));
    }
  } else if (b) {
    sync += "no sync rounds in the interval";
  } else {
    sync += "-";
  }
  lines.push_back({{sync}});
  const StoreMetrics& s = now.store;
  Line disk = {{fmt::format("disk      {}   sst {}   memtables {}   compactions pending {}",
                            FormatBytes(s.directory_bytes), FormatBytes(s.live_sst_bytes),
                            FormatBytes(s.memtable_bytes), s.compactions_pending)}};
  if (s.writes_stopped) disk.push_back({"   WRITES STOPPED", Color::kRed});
  lines.push_back(std::move(disk));
  if (now.replication.enabled) {
    bool fenced = false;
    const std::string text = ReplicationText(now.replication, &fenced);
    // Red when fenced; yellow when the stream is more than a second behind.
    const Color color = fenced                          ? Color::kRed
                        : now.replication.lag_ms > 1000 ? Color::kYellow
                                                        : Color::kNone;
    lines.push_back({{"replicate "}, {text, color}});
  }
  lines.push_back({});
  for (Line& line : ConsumerLines()) lines.push_back(std::move(line));
  return lines;
}

}  // namespace wharf::cli
