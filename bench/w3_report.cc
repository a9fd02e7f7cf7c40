#include "bench/w3_report.h"

#include "bench/reference_sqlite_consume.h"

namespace wharf::bench {
namespace {

// The fields of one measurement, without the enclosing braces.
std::string MeasurementJsonFields(const std::optional<W3Measurement>& m) {
  const bool known = m && m->error.empty();
  const W3Measurement empty;
  const W3Measurement& v = known ? *m : empty;
  std::string json =
      "\"latency_us\": " + LatencyJson(v.ack_to_seen, known) +
      ", \"commit_start_latency_us\": " + LatencyJson(v.start_to_seen, known) +
      ", \"commit_latency_us\": " + LatencyJson(v.commit, known) +
      ", \"commits_per_s\": " + JsonNumberOrNull(v.commits_per_s, known) +
      ", \"facts\": " + JsonNumberOrNull(static_cast<double>(v.facts), known, "%.0f") +
      ", \"early\": " + JsonNumberOrNull(static_cast<double>(v.early), known, "%.0f");
  if (m && !m->error.empty()) json += ", \"error\": \"" + JsonEscape(m->error) + "\"";
  return json;
}

std::string ReferenceJson(const std::optional<W3Measurement>& m) {
  // (Appending rather than "{" + ...: GCC 12's -Wrestrict misfires on literal + temporary.)
  std::string json = "{";
  json += MeasurementJsonFields(m);
  json += "}";
  return json;
}

void PrintRow(const char* system, const W3Measurement& m, std::FILE* out) {
  if (!m.error.empty()) {
    std::fprintf(out, "%-13s FAILED: %s\n", system, m.error.c_str());
    return;
  }
  std::fprintf(out, "%-13s %9.1f %6llu  %7.0f %7.0f %7.0f  %7.0f %7.0f %7.0f  %7.0f %7.0f\n",
               system, m.commits_per_s, static_cast<unsigned long long>(m.early),
               m.ack_to_seen.p50_us, m.ack_to_seen.p99_us, m.ack_to_seen.p999_us,
               m.start_to_seen.p50_us, m.start_to_seen.p99_us, m.start_to_seen.p999_us,
               m.commit.p50_us, m.commit.p99_us);
}

}  // namespace

void PrintW3Table(const W3Row& row, const MachineInfo& machine, std::FILE* out) {
  std::fprintf(out,
               "\n%s  single-fact transactions paced at %.0f/s for %.1f s (blocking commit), one "
               "consumer\n  (wharf: subscriber, %d workers); durability=sync; median of %d "
               "run(s); fdatasync p50 %.0f us\n",
               kW3Name, row.shape.rate_per_s, row.shape.duration_s, row.shape.workers, row.runs,
               machine.disk.fdatasync_us_p50);
  std::fprintf(out, "%-13s %9s %6s  %-23s  %-23s  %-15s\n", "", "", "", "commit-ack -> handler",
               "commit-start -> handler", "commit call");
  std::fprintf(out, "%-13s %9s %6s  %7s %7s %7s  %7s %7s %7s  %7s %7s\n", "system", "commits/s",
               "early", "p50_us", "p99_us", "p999_us", "p50_us", "p99_us", "p999_us", "p50_us",
               "p99_us");
  if (row.wharf) PrintRow("wharf", *row.wharf, out);
  if (row.rocksdb_sync) PrintRow("rocksdb_sync", *row.rocksdb_sync, out);
  if (row.sqlite_full) PrintRow("sqlite_full", *row.sqlite_full, out);
  std::fprintf(out,
               "  early: the consumer entered before the commit call returned to the producer "
               "(latency counted as 0)\n  rocksdb_sync: consumer woken by a condition variable "
               "after Write(sync); sqlite_full: consumer polling every %d us\n",
               kW3SqlitePoll_us);
  std::fflush(out);
}

std::string W3Json(const W3Row& row, const MachineInfo& machine) {
  std::string json = Format(
      "{\"workload\": \"%s\", \"rate_per_s\": %.1f, \"duration_s\": %.2f, \"workers\": %d, "
      "\"durability\": \"sync\", \"runs\": %d, ",
      kW3Name, row.shape.rate_per_s, row.shape.duration_s, row.shape.workers, row.runs);
  json += MeasurementJsonFields(row.wharf);
  json += ", \"reference\": {\"rocksdb_sync\": " + ReferenceJson(row.rocksdb_sync) +
          ", \"sqlite_full\": " + ReferenceJson(row.sqlite_full) + "}";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
