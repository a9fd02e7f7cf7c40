#include "bench/w6_report.h"

#include <algorithm>
#include <cinttypes>
#include <fstream>

namespace wharf::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int kBarWidth = 24;

std::string Bar(double value, double max) {
  const int filled =
      max > 0 ? std::clamp(static_cast<int>(value / max * kBarWidth + 0.5), 0, kBarWidth) : 0;
  return std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(kBarWidth - filled), ' ');
}

const char* Verdict(bool ok) { return ok ? "met" : "NOT MET"; }

}  // namespace

std::string FormatW6Progress(const W6Sample& sample, const std::vector<std::string>& consumers) {
  std::string line = Format("  t=%.0fs disk %.1f MiB rss %.1f MiB commits %" PRIu64
                            " p50 %.0f us p99 %.0f us load %.1f lag",
                            sample.t_s, sample.disk_bytes / kMiB, sample.rss_bytes / kMiB,
                            sample.commits, sample.p50_us, sample.p99_us, sample.load_1m);
  for (size_t c = 0; c < sample.lag_facts.size() && c < consumers.size(); ++c) {
    line += Format(" %s=%" PRIu64, consumers[c].c_str(), sample.lag_facts[c]);
  }
  return line;
}

std::string WriteW6Csv(const W6Measurement& m, const std::string& path) {
  std::ofstream out(path);
  if (!out) return "cannot create " + path;
  out << "t_s,disk_bytes,rss_bytes,commits,p50_us,p99_us,load_1m";
  for (const std::string& consumer : m.consumers) out << ",lag_" << consumer;
  out << "\n";
  for (const W6Sample& s : m.samples) {
    out << Format("%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.0f,%.0f,%.2f", s.t_s, s.disk_bytes,
                  s.rss_bytes, s.commits, s.p50_us, s.p99_us, s.load_1m);
    for (const uint64_t lag : s.lag_facts) out << "," << lag;
    out << "\n";
  }
  out.close();
  return out ? "" : "cannot write " + path;
}

void PrintW6Table(const W6Row& row, const W6Verdict& v, std::FILE* out) {
  const W6Shape& shape = row.shape;
  const W6Measurement& m = row.wharf;
  std::fprintf(out,
               "\n%s  %.0f s at %.0f commits/s of %d facts (open loop: %d paced producers, "
               "latency from the scheduled time),\n  2 projections (one state row per fact) + 1 "
               "subscriber%s on %d workers, retention every %u ms",
               shape.name(), shape.duration_s, m.target_commits_per_s, shape.batch, shape.producers,
               shape.variant == W6Variant::kStuck ? " + 1 stuck subscriber" : "", shape.workers,
               row.retention_interval_ms);
  if (m.retention_max_bytes > 0) {
    std::fprintf(out, ", retention_max_bytes %.0f MiB", m.retention_max_bytes / kMiB);
  }
  std::fprintf(out, "\n");
  if (m.probe_facts_per_s > 0) {
    std::fprintf(out, "  rate: half of W1 P=%d,B=%d measured in this run: %.0f facts/s\n",
                 kW6Producers, kW6Batch, m.probe_facts_per_s);
  }
  if (!m.error.empty()) std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
  std::fprintf(out, "  achieved %.0f commits/s (%" PRIu64 " facts); disk after catch-up %.1f MiB\n",
               m.achieved_commits_per_s, m.committed_facts, m.final_disk_bytes / kMiB);
  double disk_max = 0, rss_max = 0;
  for (const W6Sample& s : m.samples) {
    disk_max = std::max(disk_max, static_cast<double>(s.disk_bytes));
    rss_max = std::max(rss_max, static_cast<double>(s.rss_bytes));
  }
  std::fprintf(out, "%7s %9s %-*s %8s %-*s %8s %8s %9s %5s  lag (facts):", "t_s", "disk_MiB",
               kBarWidth, "", "rss_MiB", kBarWidth, "", "commits", "p50_us", "p99_us", "load");
  for (const std::string& consumer : m.consumers) std::fprintf(out, " %s", consumer.c_str());
  std::fprintf(out, "\n");
  for (const W6Sample& s : m.samples) {
    std::fprintf(out, "%7.0f %9.1f %s %8.1f %s %8" PRIu64 " %8.0f %9.0f %5.1f ", s.t_s,
                 s.disk_bytes / kMiB, Bar(static_cast<double>(s.disk_bytes), disk_max).c_str(),
                 s.rss_bytes / kMiB, Bar(static_cast<double>(s.rss_bytes), rss_max).c_str(),
                 s.commits, s.p50_us, s.p99_us, s.load_1m);
    for (const uint64_t lag : s.lag_facts) std::fprintf(out, " %" PRIu64, lag);
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "  lag after catch-up:");
  for (size_t c = 0; c < m.final_lag_facts.size() && c < m.consumers.size(); ++c) {
    std::fprintf(out, " %s=%" PRIu64, m.consumers[c].c_str(), m.final_lag_facts[c]);
  }
  std::fprintf(
      out, "\n  series: %s\n",
      row.csv_path.empty() ? ("not written: " + row.csv_error).c_str() : row.csv_path.c_str());
  std::fprintf(out,
               "  retention-dropped events %" PRIu64 "%s%s; losses listed: %s %" PRIu64
               ", others %" PRIu64 "; stuck subscriber's warnings %" PRIu64
               "; other warnings %" PRIu64 "%s%s\n",
               m.retention_dropped_events, m.first_retention_dropped.empty() ? "" : " (first: ",
               m.first_retention_dropped.empty() ? "" : (m.first_retention_dropped + ")").c_str(),
               kW6StuckSubscriber, m.stuck_lost_facts, m.other_lost_facts, m.stuck_warnings,
               m.warnings, m.first_warning.empty() ? "" : "; first: ", m.first_warning.c_str());
  if (!m.other_losses.empty()) std::fprintf(out, "  losses: %s\n", m.other_losses.c_str());
  if (!v.error.empty()) {
    std::fprintf(out, "verdict: cannot judge: %s\n", v.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "verdict over t > %.0f s (%zu samples):\n", shape.warmup_s(), v.window_samples);
  std::fprintf(out,
               "  disk  median %.1f MiB, max deviation %.1f %% (goal <= %.0f %%), fitted trend "
               "%+.1f %% of the median over the window (goal < %.0f %%): %s\n",
               v.disk_median_bytes / kMiB, 100 * v.disk_deviation, 100 * kW6DiskBand,
               100 * v.disk_trend, 100 * kW6DiskTrendMax, Verdict(v.disk_ok));
  std::fprintf(out, "  rss   median %.1f MiB, max deviation %.1f %% (goal <= %.0f %%): %s\n",
               v.rss_median_bytes / kMiB, 100 * v.rss_deviation, 100 * kW6RssBand,
               Verdict(v.rss_ok));
  std::fprintf(out,
               "  p99   %.0f us over the window vs %.0f us over the first %.0f s: %.2fx (goal <= "
               "%.1fx; worst interval %.0f us): %s\n",
               v.p99_window_us, v.p99_first_us, shape.first_window_s(),
               v.p99_first_us > 0 ? v.p99_window_us / v.p99_first_us : 0, kW6P99GrowthMax,
               v.p99_worst_interval_us, Verdict(v.p99_ok));
  if (v.stuck) {
    std::fprintf(out, "  bound disk max %.1f MiB = %.2fx retention_max_bytes (goal < %.1fx): %s\n",
                 v.disk_max_bytes / kMiB,
                 m.retention_max_bytes > 0 ? v.disk_max_bytes / m.retention_max_bytes : 0,
                 kW6StuckDiskBoundMax, Verdict(v.bound_ok));
    std::fprintf(out,
                 "  losses of the stuck subscriber reported (listed %" PRIu64 " facts, %" PRIu64
                 " retention-dropped events): %s\n",
                 m.stuck_lost_facts, m.retention_dropped_events, Verdict(v.losses_ok));
  }
  std::fprintf(out, "  => %s: %s\n", shape.name(), v.ok() ? "goals met" : "goals NOT met");
  std::fflush(out);
}

std::string W6Json(const W6Row& row, const W6Verdict& v, const MachineInfo& machine) {
  const W6Measurement& m = row.wharf;
  const bool judged = v.error.empty();
  std::string json = Format(
      "{\"workload\": \"%s\", \"seconds\": %.1f, \"producers\": %d, \"batch\": %d, \"workers\": "
      "%d, \"retention_interval_ms\": %u, \"retention_max_bytes\": %" PRIu64
      ", \"probe_facts_per_s\": %.1f, \"target_commits_per_s\": %.1f, \"commits_per_s\": %.1f, "
      "\"facts\": %" PRIu64 ", \"final_disk_bytes\": %" PRIu64,
      row.shape.name(), row.shape.duration_s, row.shape.producers, row.shape.batch,
      row.shape.workers, row.retention_interval_ms, m.retention_max_bytes, m.probe_facts_per_s,
      m.target_commits_per_s, m.achieved_commits_per_s, m.committed_facts, m.final_disk_bytes);
  json += ", \"disk_median_bytes\": " + JsonNumberOrNull(v.disk_median_bytes, judged, "%.0f") +
          ", \"disk_deviation\": " + JsonNumberOrNull(v.disk_deviation, judged, "%.4f") +
          ", \"disk_trend\": " + JsonNumberOrNull(v.disk_trend, judged, "%.4f") +
          ", \"disk_max_bytes\": " + JsonNumberOrNull(v.disk_max_bytes, judged, "%.0f") +
          ", \"rss_median_bytes\": " + JsonNumberOrNull(v.rss_median_bytes, judged, "%.0f") +
          ", \"rss_deviation\": " + JsonNumberOrNull(v.rss_deviation, judged, "%.4f") +
          ", \"p99_first_us\": " + JsonNumberOrNull(v.p99_first_us, judged, "%.0f") +
          ", \"p99_window_us\": " + JsonNumberOrNull(v.p99_window_us, judged, "%.0f") +
          Format(", \"retention_dropped_events\": %" PRIu64 ", \"stuck_lost_facts\": %" PRIu64
                 ", \"other_lost_facts\": %" PRIu64 ", \"stuck_warnings\": %" PRIu64
                 ", \"warnings\": %" PRIu64,
                 m.retention_dropped_events, m.stuck_lost_facts, m.other_lost_facts,
                 m.stuck_warnings, m.warnings) +
          ", \"goals_met\": " + (v.ok() ? "true" : "false");
  if (!row.csv_path.empty()) json += ", \"series_csv\": \"" + JsonEscape(row.csv_path) + "\"";
  json += ", \"series\": [";
  for (size_t i = 0; i < m.samples.size(); ++i) {
    const W6Sample& s = m.samples[i];
    json += Format("%s[%.1f, %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %.0f, %.0f", i > 0 ? ", " : "",
                   s.t_s, s.disk_bytes, s.rss_bytes, s.commits, s.p50_us, s.p99_us);
    for (const uint64_t lag : s.lag_facts) json += Format(", %" PRIu64, lag);
    json += "]";
  }
  json += "]";
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  if (!v.error.empty()) json += ", \"verdict_error\": \"" + JsonEscape(v.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
