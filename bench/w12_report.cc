#include "bench/w12_report.h"

namespace wharf::bench {
namespace {

bool GoalMet(const W12Setting& s) { return s.p99_ratio > 0 && s.p99_ratio <= kW12GoalP99Ratio; }

std::string SettingName(const W12Setting& s) {
  return s.rows_per_second > 0 ? Format("rows_per_second=%.0f", s.rows_per_second)
                               : std::string("unpaced");
}

void PrintSetting(const W12Setting& s, std::FILE* out) {
  std::fprintf(out,
               "%-22s %9.0f %8.2f %8.0f %7.0f/%-7.0f %6.0f/%-6.0f %6.0f/%-6.0f %6.0f/%-6.0f %6.2f  "
               "%s\n",
               SettingName(s).c_str(), s.migrated, s.migrate_s, s.rows_per_s,
               s.commits_per_s_without, s.commits_per_s_during, s.without.p50_us, s.during.p50_us,
               s.without.p99_us, s.during.p99_us, s.without.p999_us, s.during.p999_us, s.p99_ratio,
               GoalMet(s) ? "met" : "missed");
}

std::string SettingJson(const W12Setting& s, bool known) {
  return "{\"rows_per_second\": " + JsonNumberOrNull(s.rows_per_second, known, "%.0f") +
         ", \"migrated\": " + JsonNumberOrNull(s.migrated, known, "%.0f") +
         ", \"batches\": " + JsonNumberOrNull(s.batches, known, "%.0f") +
         ", \"migrate_s\": " + JsonNumberOrNull(s.migrate_s, known, "%.3f") +
         ", \"rows_per_s\": " + JsonNumberOrNull(s.rows_per_s, known, "%.0f") +
         ", \"producer_commits_per_s\": " + JsonNumberOrNull(s.producer_commits_per_s, known) +
         ", \"commits_per_s_without\": " + JsonNumberOrNull(s.commits_per_s_without, known) +
         ", \"commits_per_s_during\": " + JsonNumberOrNull(s.commits_per_s_during, known) +
         ", \"latency_us\": " + LatencyJson(s.during, known) +
         ", \"latency_us_without\": " + LatencyJson(s.without, known) +
         ", \"p99_ratio\": " + JsonNumberOrNull(s.p99_ratio, known, "%.3f") +
         ", \"goal_met\": " + (known ? (GoalMet(s) ? "true" : "false") : "null") +
         ", \"commits_per_sync_without\": " +
         JsonNumberOrNull(s.commits_per_sync_without, known, "%.2f") +
         ", \"commits_per_sync_during\": " +
         JsonNumberOrNull(s.commits_per_sync_during, known, "%.2f") +
         ", \"sync_us_without\": " + JsonNumberOrNull(s.sync_us_without, known, "%.0f") +
         ", \"sync_us_during\": " + JsonNumberOrNull(s.sync_us_during, known, "%.0f") +
         ", \"batch_us\": " + LatencyJson(s.batch, known) +
         ", \"verified_rows\": " + JsonNumberOrNull(s.verified_rows, known, "%.0f") +
         ", \"load_s\": " + JsonNumberOrNull(s.load_s, known, "%.3f") + "}";
}

}  // namespace

void PrintW12Table(const W12Row& row, std::FILE* out) {
  const W12Measurement& m = row.wharf;
  std::fprintf(out,
               "\n%s  %llu rows of \"%s\" migrated 1 -> 2 by MigrateTable (batch_rows %zu) while "
               "W1 P=%d B=%d runs at half its rate; median of %d run(s)\n",
               kW12Name, static_cast<unsigned long long>(row.facts), kW12Table, kW12BatchRows,
               kW12Producers, kW12Batch, row.runs);
  if (!m.error.empty()) {
    std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "%-22s %9s %8s %8s %15s %13s %13s %13s %6s  %s\n", "migration", "migrated",
               "seconds", "rows/s", "commits/s", "p50_us", "p99_us", "p999_us", "p99_x", "goal");
  std::fprintf(out, "%-22s %9s %8s %8s %15s %13s %13s %13s\n", "", "", "", "", "without/during",
               "without/dur.", "without/dur.", "without/dur.");
  PrintSetting(m.unpaced, out);
  PrintSetting(m.paced, out);
  std::fprintf(out,
               "  goal: producers' p99 during the migration <= %.2f x without (%.0f s); W1 "
               "unpaced %.0f and %.0f commits/s, run at half\n",
               kW12GoalP99Ratio, m.seconds, m.unpaced.producer_commits_per_s,
               m.paced.producer_commits_per_s);
  std::fprintf(out,
               "  sync rounds, commits per round / mean us: unpaced %.1f / %.0f without, %.1f / "
               "%.0f during; paced %.1f / %.0f without, %.1f / %.0f during\n",
               m.unpaced.commits_per_sync_without, m.unpaced.sync_us_without,
               m.unpaced.commits_per_sync_during, m.unpaced.sync_us_during,
               m.paced.commits_per_sync_without, m.paced.sync_us_without,
               m.paced.commits_per_sync_during, m.paced.sync_us_during);
  std::fprintf(out,
               "  one migration batch (scan, lifts, commit), p50/p99/p999 us: unpaced "
               "%.0f/%.0f/%.0f, paced %.0f/%.0f/%.0f (including its pause)\n",
               m.unpaced.batch.p50_us, m.unpaced.batch.p99_us, m.unpaced.batch.p999_us,
               m.paced.batch.p50_us, m.paced.batch.p99_us, m.paced.batch.p999_us);
  std::fprintf(out,
               "  after each migration a dry run visited %.0f rows and found none at version 1; "
               "sampled rows read balance_cents\n",
               m.unpaced.verified_rows);
  std::fflush(out);
}

std::string W12Json(const W12Row& row, const MachineInfo& machine) {
  const W12Measurement& m = row.wharf;
  const bool known = m.error.empty();
  std::string json = Format(
                         "{\"workload\": \"%s\", \"rows\": %llu, \"producers\": %d, \"batch\": %d, "
                         "\"batch_rows\": %zu, \"runs\": %d, \"goal_p99_ratio\": %.2f, ",
                         kW12Name, static_cast<unsigned long long>(row.facts), kW12Producers,
                         kW12Batch, kW12BatchRows, row.runs, kW12GoalP99Ratio) +
                     "\"seconds\": " + JsonNumberOrNull(m.seconds, known, "%.1f") +
                     ", \"unpaced\": " + SettingJson(m.unpaced, known) +
                     ", \"paced\": " + SettingJson(m.paced, known);
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
