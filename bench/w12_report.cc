#include "bench/w12_report.h"

namespace wharf::bench {
namespace {

bool GoalMet(const W12Setting& s) { return s.p99_ratio > 0 && s.p99_ratio <= kW12GoalP99Ratio; }

std::string SettingName(const W12Setting& s) {
  return s.rows_per_second > 0 ? Format("rows_per_second=%.0f", s.rows_per_second)
                               : std::string("unpaced");
}

void PrintSetting(const W12Setting& s, std::FILE* out) {
  const LatencySummary &without = s.without.latency, &during = s.during.latency;
  std::fprintf(out,
               "%-22s %9.0f %8.2f %8.0f %7.0f/%-7.0f %6.0f/%-6.0f %6.0f/%-6.0f %6.0f/%-6.0f %6.2f  "
               "%s\n",
               SettingName(s).c_str(), s.migrated, s.migrate_s, s.rows_per_s,
               s.without.commits_per_s, s.during.commits_per_s, without.p50_us, during.p50_us,
               without.p99_us, during.p99_us, without.p999_us, during.p999_us, s.p99_ratio,
               GoalMet(s) ? "met" : "missed");
}

// "w/o -> during" of one figure of the phases.
std::string Change(const char* format, double without, double during) {
  return Format(format, without) + " -> " + Format(format, during);
}

void PrintPhases(const W12Setting& s, std::FILE* out) {
  const W12Cpu &a = s.without.cpu, &b = s.during.cpu;
  std::fprintf(out, "  %s: sync rounds %s commits, %s us; one batch p50/p99 %.0f/%.0f us\n",
               SettingName(s).c_str(),
               Change("%.1f", s.without.commits_per_sync, s.during.commits_per_sync).c_str(),
               Change("%.0f", s.without.sync_us, s.during.sync_us).c_str(), s.batch.p50_us,
               s.batch.p99_us);
  std::fprintf(
      out,
      "    W1 alone again after the migration: %.0f commits/s, p50/p99/p999 "
      "%.0f/%.0f/%.0f us (p99 x%.2f of before)\n",
      s.after.commits_per_s, s.after.latency.p50_us, s.after.latency.p99_us,
      s.after.latency.p999_us,
      s.without.latency.p99_us > 0 ? s.after.latency.p99_us / s.without.latency.p99_us : 0);
  std::fprintf(
      out, "    RocksDB flushes and compactions %s ended, writing %s MB/s\n",
      Change("%.0f", s.without.rocksdb_jobs, s.during.rocksdb_jobs).c_str(),
      Change("%.1f", s.without.rocksdb_write_mb_per_s, s.during.rocksdb_write_mb_per_s).c_str());
  std::fprintf(out,
               "    CPU cores: migration %s, committer %s, sync %s, rocksdb %s, producers and "
               "rest %s\n",
               Change("%.2f", a.migration, b.migration).c_str(),
               Change("%.2f", a.committer, b.committer).c_str(),
               Change("%.2f", a.sync, b.sync).c_str(), Change("%.2f", a.rocksdb, b.rocksdb).c_str(),
               Change("%.2f", a.rest, b.rest).c_str());
}

std::string CpuJson(const W12Cpu& c, bool known) {
  return "{\"migration\": " + JsonNumberOrNull(c.migration, known, "%.3f") +
         ", \"committer\": " + JsonNumberOrNull(c.committer, known, "%.3f") +
         ", \"sync\": " + JsonNumberOrNull(c.sync, known, "%.3f") +
         ", \"rocksdb\": " + JsonNumberOrNull(c.rocksdb, known, "%.3f") +
         ", \"rest\": " + JsonNumberOrNull(c.rest, known, "%.3f") + "}";
}

std::string PhaseJson(const W12Phase& p, bool known) {
  return "{\"seconds\": " + JsonNumberOrNull(p.seconds, known, "%.2f") +
         ", \"commits_per_s\": " + JsonNumberOrNull(p.commits_per_s, known) +
         ", \"latency_us\": " + LatencyJson(p.latency, known) +
         ", \"commits_per_sync\": " + JsonNumberOrNull(p.commits_per_sync, known, "%.2f") +
         ", \"sync_us\": " + JsonNumberOrNull(p.sync_us, known, "%.0f") +
         ", \"cpu_cores\": " + CpuJson(p.cpu, known) +
         ", \"rocksdb_jobs\": " + JsonNumberOrNull(p.rocksdb_jobs, known, "%.0f") +
         ", \"rocksdb_write_mb_per_s\": " +
         JsonNumberOrNull(p.rocksdb_write_mb_per_s, known, "%.1f") + "}";
}

std::string SettingJson(const W12Setting& s, bool known) {
  return "{\"rows_per_second\": " + JsonNumberOrNull(s.rows_per_second, known, "%.0f") +
         ", \"migrated\": " + JsonNumberOrNull(s.migrated, known, "%.0f") +
         ", \"batches\": " + JsonNumberOrNull(s.batches, known, "%.0f") +
         ", \"migrate_s\": " + JsonNumberOrNull(s.migrate_s, known, "%.3f") +
         ", \"rows_per_s\": " + JsonNumberOrNull(s.rows_per_s, known, "%.0f") +
         ", \"producer_commits_per_s\": " + JsonNumberOrNull(s.producer_commits_per_s, known) +
         ", \"without\": " + PhaseJson(s.without, known) +
         ", \"during\": " + PhaseJson(s.during, known) +
         ", \"after\": " + PhaseJson(s.after, known) +
         ", \"p99_ratio\": " + JsonNumberOrNull(s.p99_ratio, known, "%.3f") +
         ", \"goal_met\": " + (known ? (GoalMet(s) ? "true" : "false") : "null") +
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
               "  goal: the producers' p99 during the migration <= %.2f x without (%.0f s); W1 "
               "unpaced %.0f and %.0f commits/s, run at half\n",
               kW12GoalP99Ratio, m.unpaced.without.seconds, m.unpaced.producer_commits_per_s,
               m.paced.producer_commits_per_s);
  PrintPhases(m.unpaced, out);
  PrintPhases(m.paced, out);
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
                     "\"unpaced\": " + SettingJson(m.unpaced, known) +
                     ", \"paced\": " + SettingJson(m.paced, known);
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
