#include "bench/w11_report.h"

namespace wharf::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

void PrintW11Table(const W11Row& row, std::FILE* out) {
  const W11Measurement& m = row.wharf;
  std::fprintf(out,
               "\n%s  %llu facts pre-committed (%.0f MiB on disk); W1 P=%d B=%d at half its rate "
               "during the full backup; median of %d run(s)\n",
               kW11Name, static_cast<unsigned long long>(row.facts), m.db_bytes / kMiB,
               kW11Producers, kW11Batch, row.runs);
  if (!m.error.empty()) {
    std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "%-34s %10s %12s %10s\n", "step", "seconds", "copied_MiB", "ratio");
  std::fprintf(out, "%-34s %10.2f %12.0f %10s\n", "cp -a of the stopped directory", m.cp_s,
               m.db_bytes / kMiB, "1.00");
  std::fprintf(out, "%-34s %10.2f %12.0f %10.2f\n", "full backup, producers running", m.full_s,
               m.full_bytes / kMiB, Ratio(m.full_s, m.cp_s));
  std::fprintf(out, "%-34s %10.2f %12.1f %10.3f\n", "incremental backup after +1 %",
               m.incremental_s, m.incremental_bytes / kMiB, Ratio(m.incremental_s, m.full_s));
  std::fprintf(out, "%-34s %10.2f %12s %10s\n", "cp -a of the backup's files", m.copy_backup_s, "",
               "1.00");
  std::fprintf(out, "%-34s %10.2f %12s %10.2f\n", "restore until it commits", m.restore_s, "",
               Ratio(m.restore_s, m.copy_backup_s));
  std::fprintf(out,
               "  producers (%.0f commits/s unpaced, run at half): commit p50/p99 %.0f/%.0f us "
               "without a backup, %.0f/%.0f us during it (p99 x%.2f)\n",
               m.producer_commits_per_s, m.without_backup.p50_us, m.without_backup.p99_us,
               m.during_backup.p50_us, m.during_backup.p99_us,
               Ratio(m.during_backup.p99_us, m.without_backup.p99_us));
  std::fprintf(out, "  every copy (cp -a and the backups) ends with its data synced (syncfs)\n");
  std::fflush(out);
}

std::string W11Json(const W11Row& row, const MachineInfo& machine) {
  const W11Measurement& m = row.wharf;
  const bool known = m.error.empty();
  std::string json =
      Format(
          "{\"workload\": \"%s\", \"facts\": %llu, \"producers\": %d, \"batch\": %d, "
          "\"runs\": %d, ",
          kW11Name, static_cast<unsigned long long>(row.facts), kW11Producers, kW11Batch,
          row.runs) +
      "\"full_backup_s\": " + JsonNumberOrNull(m.full_s, known, "%.3f") +
      ", \"full_backup_bytes\": " + JsonNumberOrNull(m.full_bytes, known, "%.0f") +
      ", \"incremental_backup_s\": " + JsonNumberOrNull(m.incremental_s, known, "%.3f") +
      ", \"incremental_backup_bytes\": " + JsonNumberOrNull(m.incremental_bytes, known, "%.0f") +
      ", \"restore_s\": " + JsonNumberOrNull(m.restore_s, known, "%.3f") +
      ", \"latency_us\": " + LatencyJson(m.during_backup, known) +
      ", \"reference\": {\"cp_a_s\": " + JsonNumberOrNull(m.cp_s, known, "%.3f") +
      ", \"cp_a_backup_s\": " + JsonNumberOrNull(m.copy_backup_s, known, "%.3f") +
      ", \"latency_us_without_backup\": " + LatencyJson(m.without_backup, known) + "}" +
      ", \"producer_commits_per_s\": " + JsonNumberOrNull(m.producer_commits_per_s, known) +
      ", \"db_bytes\": " + JsonNumberOrNull(m.db_bytes, known, "%.0f") +
      ", \"precommit_s\": " + JsonNumberOrNull(m.precommit_s, known, "%.3f");
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
