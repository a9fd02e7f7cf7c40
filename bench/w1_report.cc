#include "bench/w1_report.h"

#include <cinttypes>

namespace wharf::bench {
namespace {

std::string MeasurementLatencyJson(const W1Measurement* m) {
  const bool known = m != nullptr && m->error.empty();
  return LatencyJson(known ? m->latency : LatencySummary(), known);
}

// The fields of one system's measurement, without the enclosing braces.
std::string MeasurementJsonFields(const std::optional<W1Measurement>& m) {
  const W1Measurement* p = m ? &*m : nullptr;
  const bool known = p != nullptr && p->error.empty();
  std::string json =
      "\"facts_per_s\": " + JsonNumberOrNull(known ? p->facts_per_s : 0, known) +
      ", \"commits_per_s\": " + JsonNumberOrNull(known ? p->commits_per_s : 0, known) +
      ", \"facts_per_sync\": " +
      JsonNumberOrNull(known ? p->facts_per_sync : 0, known && p->facts_per_sync > 0, "%.2f") +
      ", \"latency_us\": " + MeasurementLatencyJson(p);
  if (p != nullptr && !p->error.empty()) json += ", \"error\": \"" + JsonEscape(p->error) + "\"";
  return json;
}

void PrintRow(const W1Shape& shape, const char* system, const W1Measurement& m, std::FILE* out) {
  if (!m.error.empty()) {
    std::fprintf(out, "%3d %4d  %-13s FAILED: %s\n", shape.producers, shape.batch, system,
                 m.error.c_str());
    return;
  }
  const std::string facts_per_sync =
      m.facts_per_sync > 0 ? Format("%.1f", m.facts_per_sync) : std::string("-");
  std::fprintf(out, "%3d %4d  %-13s %11.0f %11.0f %9.0f %9.0f %9.0f %10s\n", shape.producers,
               shape.batch, system, m.facts_per_s, m.commits_per_s, m.latency.p50_us,
               m.latency.p99_us, m.latency.p999_us, facts_per_sync.c_str());
}

}  // namespace

void PrintW1TableHeader(int runs, double duration_s, std::FILE* out) {
  std::fprintf(out, "\n%s  durability=sync, median of %d run(s) x %.1f s; latency = commit call\n",
               kW1Name, runs, duration_s);
  std::fprintf(out, "%3s %4s  %-13s %11s %11s %9s %9s %9s %10s\n", "P", "B", "system", "facts/s",
               "commits/s", "p50_us", "p99_us", "p999_us", "facts/sync");
}

void PrintW1TableRows(const W1Row& row, std::FILE* out) {
  if (row.wharf) PrintRow(row.shape, "wharf", *row.wharf, out);
  if (row.rocksdb_sync) PrintRow(row.shape, "rocksdb_sync", *row.rocksdb_sync, out);
  if (row.sqlite_full) PrintRow(row.shape, "sqlite_full", *row.sqlite_full, out);
  std::fflush(out);
}

std::string W1Json(const W1Row& row, const MachineInfo& machine) {
  std::string json = Format(
      "{\"workload\": \"%s\", \"producers\": %d, \"batch\": %d, \"durability\": \"sync\", "
      "\"runs\": %d, \"duration_s\": %.2f, ",
      kW1Name, row.shape.producers, row.shape.batch, row.runs, row.shape.duration_s);
  json += MeasurementJsonFields(row.wharf);
  json += ", \"reference\": {\"rocksdb_sync\": {" + MeasurementJsonFields(row.rocksdb_sync) +
          "}, \"sqlite_full\": {" + MeasurementJsonFields(row.sqlite_full) + "}}";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
