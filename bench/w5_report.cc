#include "bench/w5_report.h"

namespace wharf::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

void PrintRestart(const char* name, const W5Restart& restart, std::FILE* out) {
  std::fprintf(out, "%-26s %9.1f %19.1f %14.1f %13.1f\n", name, restart.open_ms,
               restart.open_to_first_delivery_ms, restart.rss_after_open_bytes / kMiB,
               restart.rss_at_first_delivery_bytes / kMiB);
}

std::string RestartJson(const W5Restart& restart, bool known) {
  return "{\"open_ms\": " + JsonNumberOrNull(restart.open_ms, known) +
         ", \"open_to_first_delivery_ms\": " +
         JsonNumberOrNull(restart.open_to_first_delivery_ms, known) +
         ", \"rss_bytes\": " + JsonNumberOrNull(restart.rss_after_open_bytes, known, "%.0f") +
         ", \"rss_at_first_delivery_bytes\": " +
         JsonNumberOrNull(restart.rss_at_first_delivery_bytes, known, "%.0f") + "}";
}

}  // namespace

void PrintW5Table(const W5Row& row, std::FILE* out) {
  const W5Measurement& m = row.wharf;
  std::fprintf(out,
               "\n%s  %llu facts pre-committed (%.0f MiB on disk), %d projections (batch %u) with "
               "cursors at 0, 1/8, ..., 7/8 of them,\n  %d workers; each restart in a fresh "
               "process, cold = the database's files evicted from the page cache; median of %d "
               "run(s)\n",
               kW5Name, static_cast<unsigned long long>(row.facts), m.db_bytes / kMiB, kW5Consumers,
               kW5Batch, row.workers, row.runs);
  if (!m.error.empty()) {
    std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "%-26s %9s %19s %14s %13s\n", "restart", "open_ms", "to_first_delivery_ms",
               "rss_open_MiB", "rss_first_MiB");
  PrintRestart("wharf cold", m.cold, out);
  PrintRestart("wharf warm", m.warm, out);
  PrintRestart("rocksdb read-only, cold", m.rocksdb_cold, out);
  std::fprintf(out,
               "  rocksdb: rocksdb::DB::OpenForReadOnly of the same directory, then its first "
               "outbox record\n");
  std::fflush(out);
}

std::string W5Json(const W5Row& row, const MachineInfo& machine) {
  const W5Measurement& m = row.wharf;
  const bool known = m.error.empty();
  std::string json =
      Format(
          "{\"workload\": \"%s\", \"facts\": %llu, \"consumers\": %d, \"batch\": %u, "
          "\"workers\": %d, \"runs\": %d, ",
          kW5Name, static_cast<unsigned long long>(row.facts), kW5Consumers, kW5Batch, row.workers,
          row.runs) +
      "\"open_to_first_delivery_ms\": " +
      JsonNumberOrNull(m.cold.open_to_first_delivery_ms, known) +
      ", \"rss_bytes\": " + JsonNumberOrNull(m.cold.rss_after_open_bytes, known, "%.0f") +
      ", \"cold\": " + RestartJson(m.cold, known) + ", \"warm\": " + RestartJson(m.warm, known) +
      ", \"reference\": {\"rocksdb_readonly_cold\": " + RestartJson(m.rocksdb_cold, known) + "}" +
      ", \"db_bytes\": " + JsonNumberOrNull(m.db_bytes, known, "%.0f") +
      ", \"precommit_s\": " + JsonNumberOrNull(m.precommit_s, known, "%.3f");
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
