#include "bench/w9_report.h"

namespace wharf::bench {
namespace {

bool Usable(const W9SystemResult& result) {
  return result.failed_runs == 0 && result.median.error.empty();
}

// The best reference's commits/s in this row (0: none measured, or none usable).
double BestReference(const W9Row& row, std::string* name) {
  double best = 0;
  for (const W9SystemResult& result : row.systems) {
    if (result.system == "wharf" || !Usable(result)) continue;
    if (result.median.commits_per_s > best) {
      best = result.median.commits_per_s;
      *name = result.system;
    }
  }
  return best;
}

std::string SystemJson(const W9SystemResult& result) {
  const W9Measurement& m = result.median;
  const bool known = Usable(result);
  std::string json =
      "\"commits_per_s\": " + JsonNumberOrNull(m.commits_per_s, known) +
      ", \"conflicts_per_commit\": " + JsonNumberOrNull(m.conflicts_per_commit, known, "%.3f") +
      ", \"latency_us\": " + LatencyJson(m.latency, known) +
      ", \"elapsed_s\": " + JsonNumberOrNull(m.elapsed_s, known, "%.3f") +
      ", \"commits_per_sync\": " +
      JsonNumberOrNull(m.commits_per_sync, known && m.commits_per_sync > 0) +
      ", \"sync_us_mean\": " +
      JsonNumberOrNull(m.sync_us_mean, known && m.sync_us_mean > 0, "%.0f") +
      ", \"exact\": " + (known ? "true" : "false");
  if (!known) {
    json += Format(", \"failed_runs\": %d, \"error\": \"", result.failed_runs) +
            JsonEscape(result.first_error.empty() ? m.error : result.first_error) + "\"";
  }
  return json;
}

}  // namespace

void PrintW9Table(const W9Row& row, std::FILE* out) {
  std::fprintf(out,
               "\n%s  %d threads, K = %d counter(s) drawn uniformly; %llu successful "
               "transactions per thread (%llu in all);\n  median of %d run(s), the systems "
               "alternating within each round; load average %.1f at the end\n",
               kW9Name, row.shape.threads, row.shape.counters,
               static_cast<unsigned long long>(row.shape.transactions_per_thread),
               static_cast<unsigned long long>(row.shape.transactions()), row.runs,
               row.load_average_1m);
  std::fprintf(out, "%-20s %11s %10s %10s %10s %10s %9s %8s %8s %9s\n", "system", "commits/s",
               "conflicts", "p50_us", "p99_us", "p999_us", "elapsed_s", "c/sync", "sync_us",
               "vs_best");
  std::string best_name;
  const double best = BestReference(row, &best_name);
  for (const W9SystemResult& result : row.systems) {
    if (!Usable(result)) {
      std::fprintf(out, "%-20s FAILED in %d of %d run(s): %s\n", result.system.c_str(),
                   result.failed_runs, row.runs,
                   (result.first_error.empty() ? result.median.error : result.first_error).c_str());
      continue;
    }
    const W9Measurement& m = result.median;
    const std::string ratio = best > 0 ? Format("%.2fx", m.commits_per_s / best) : std::string("-");
    const std::string per_sync =
        m.commits_per_sync > 0 ? Format("%.1f", m.commits_per_sync) : std::string("-");
    const std::string sync_us =
        m.sync_us_mean > 0 ? Format("%.0f", m.sync_us_mean) : std::string("-");
    std::fprintf(out, "%-20s %11.0f %10.3f %10.0f %10.0f %10.0f %9.2f %8s %8s %9s\n",
                 result.system.c_str(), m.commits_per_s, m.conflicts_per_commit, m.latency.p50_us,
                 m.latency.p99_us, m.latency.p999_us, m.elapsed_s, per_sync.c_str(),
                 sync_us.c_str(), ratio.c_str());
  }
  std::fprintf(out,
               "  conflicts: attempts refused and run again, per commit; latency: one successful "
               "transaction with its retries;\n  c/sync: commits per WAL sync (RocksDB's "
               "WAL_FILE_SYNCED ticker, "
               "Wharf's committer); sync_us: Wharf's mean sync round;\n  vs_best: commits/s "
               "against the best reference "
               "(%s); every run checked exact (counters add up to\n  the commits, each "
               "counter's facts carry 1, 2, ..., its value), else FAILED\n",
               best > 0 ? best_name.c_str() : "none");
  std::fflush(out);
}

std::string W9Json(const W9Row& row, const MachineInfo& machine) {
  std::string json = Format(
      "{\"workload\": \"%s\", \"threads\": %d, \"counters\": %d, \"transactions_per_thread\": "
      "%llu, \"runs\": %d, \"durability\": \"sync\", \"load_average_1m\": %.2f",
      kW9Name, row.shape.threads, row.shape.counters,
      static_cast<unsigned long long>(row.shape.transactions_per_thread), row.runs,
      row.load_average_1m);
  std::string references;
  const W9SystemResult* wharf = nullptr;
  for (const W9SystemResult& result : row.systems) {
    if (result.system == "wharf") {
      wharf = &result;
      continue;
    }
    references += (references.empty() ? "" : ", ") + ("\"" + result.system + "\": {") +
                  SystemJson(result) + "}";
  }
  if (wharf != nullptr) json += ", " + SystemJson(*wharf);
  json += ", \"reference\": {" + references + "}";
  std::string best_name;
  const double best = BestReference(row, &best_name);
  const bool ratio_known = wharf != nullptr && Usable(*wharf) && best > 0;
  json +=
      ", \"ratio_to_best_reference\": " +
      JsonNumberOrNull(ratio_known ? wharf->median.commits_per_s / best : 0, ratio_known, "%.3f");
  if (best > 0) json += ", \"best_reference\": \"" + best_name + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
