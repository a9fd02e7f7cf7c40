#include "bench/w2_report.h"

#include <string_view>

#include "bench/w2_fresh.h"
#include "bench/zipf_keys.h"

namespace wharf::bench {
namespace {

// The fields of one measurement, without the enclosing braces.
std::string MeasurementJsonFields(const W2Measurement* m) {
  const bool known = m != nullptr && m->error.empty();
  std::string json =
      "\"facts_per_s\": " + JsonNumberOrNull(known ? m->facts_per_s : 0, known) +
      ", \"facts_consumed\": " +
      JsonNumberOrNull(known ? static_cast<double>(m->facts_consumed) : 0, known, "%.0f") +
      ", \"consume_s\": " + JsonNumberOrNull(known ? m->consume_s : 0, known, "%.3f") +
      ", \"precommit_s\": " + JsonNumberOrNull(known ? m->precommit_s : 0, known, "%.3f") +
      ", \"cpu_s\": " + JsonNumberOrNull(known ? m->cpu_s : 0, known, "%.3f") +
      ", \"batches_per_sync\": " +
      JsonNumberOrNull(known ? m->batches_per_sync : 0, known && m->batches_per_sync > 0, "%.2f") +
      ", \"sync_ms_mean\": " +
      JsonNumberOrNull(known ? m->sync_ms_mean : 0, known && m->sync_ms_mean > 0, "%.3f") +
      ", \"spread\": " + JsonNumberOrNull(known ? m->spread : 0, known, "%.3f") +
      ", \"measured_fullest_partition_share\": " +
      JsonNumberOrNull(known ? m->fullest_partition_share : 0,
                       known && m->fullest_partition_share > 0, "%.4f");
  if (m != nullptr && !m->error.empty()) json += ", \"error\": \"" + JsonEscape(m->error) + "\"";
  return json;
}

std::string ReferenceJson(const std::optional<W2Measurement>& m) {
  // (Appending rather than "{" + ...: GCC 12's -Wrestrict misfires on literal + temporary.)
  std::string json = "{";
  json += MeasurementJsonFields(m ? &*m : nullptr);
  json += "}";
  return json;
}

void PrintRow(const char* system, const std::string& workers, const W2Measurement& m,
              std::FILE* out) {
  if (!m.error.empty()) {
    std::fprintf(out, "%-13s %7s  FAILED: %s\n", system, workers.c_str(), m.error.c_str());
    return;
  }
  const bool partial = m.facts_consumed < m.facts_total;
  const std::string per_sync =
      m.batches_per_sync > 0 ? Format("%.2f", m.batches_per_sync) : std::string("-");
  const std::string sync_ms =
      m.sync_ms_mean > 0 ? Format("%.2f", m.sync_ms_mean) : std::string("-");
  const std::string fullest = m.fullest_partition_share > 0
                                  ? Format("%.1f%%", 100 * m.fullest_partition_share)
                                  : std::string("-");
  std::fprintf(out, "%-13s %7s %11.0f %5.0f%% %10llu %10.2f%s %11.2f %12s %9s %6.2f %8s\n", system,
               workers.c_str(), m.facts_per_s, 100 * m.spread,
               static_cast<unsigned long long>(m.facts_consumed), m.consume_s, partial ? "*" : " ",
               m.precommit_s, per_sync.c_str(), sync_ms.c_str(), m.cpu_s, fullest.c_str());
}

}  // namespace

void PrintW2Table(const W2Result& result, std::FILE* out) {
  std::fprintf(out,
               "\n%s  %llu facts pre-committed, one projection (batch %u, one %zu-byte state row "
               "per fact,\n  effects + cursor committed per batch), durability=sync; median of %d "
               "run(s)\n",
               result.name, static_cast<unsigned long long>(result.facts), kW2Batch,
               kW2StateValueBytes, result.runs);
  if (std::string_view(result.name) == kW2SkewedName) {
    std::fprintf(out, "  partition keys: Zipf, s = %.1f, over %d keys\n", kZipfExponent,
                 kZipfKeyCount);
  }
  if (std::string_view(result.name) == kW2FreshName) {
    std::fprintf(out,
                 "  Wharf: committed just before by one producer (transactions of %u facts + one "
                 "state row),\n  keys partition-000000..%06d, consumed by a C projection through "
                 "the C ABI (one %zu-byte effect row per fact)\n",
                 kW2FreshTxnFacts, kW2FreshDistinctKeys - 1, kW2FreshEffectValueBytes);
  }
  std::fprintf(out, "%-13s %7s %11s %6s %10s %11s %11s %12s %9s %6s %8s\n", "system", "workers",
               "facts/s", "+-", "consumed", "consume_s", "precommit_s", "batches/sync", "sync_ms",
               "cpu_s", "fullest");
  for (const auto& [workers, m] : result.wharf) {
    PrintRow("wharf", std::to_string(workers), m, out);
  }
  if (result.rocksdb_sync) PrintRow("rocksdb_sync", "1 thr", *result.rocksdb_sync, out);
  if (result.sqlite_full) PrintRow("sqlite_full", "1 thr", *result.sqlite_full, out);
  bool any_partial = false;
  for (const std::optional<W2Measurement>* m : {&result.rocksdb_sync, &result.sqlite_full}) {
    if (*m && (*m)->error.empty() && (*m)->facts_consumed < (*m)->facts_total) any_partial = true;
  }
  if (any_partial) {
    std::fprintf(out, "  * stopped after its %.0f-s budget; the rate is over what it consumed\n",
                 kW2ReferenceBudget_s);
  }
  if (result.fullest_partition_share > 0) {
    std::fprintf(out,
                 "  wharf's fullest partition holds %.1f %% of the facts (expected from the keys; "
                 "`fullest` counts them): its lane commits %.0f batches one after another\n",
                 result.fullest_partition_share * 100,
                 static_cast<double>(result.facts) * result.fullest_partition_share / kW2Batch);
  }
  if (result.rocksdb_sync && result.rocksdb_sync->error.empty() &&
      result.rocksdb_sync->facts_per_s > 0) {
    for (const auto& [workers, m] : result.wharf) {
      if (!m.error.empty()) continue;
      std::fprintf(out, "  wharf (%d workers) / rocksdb_sync: %.1fx\n", workers,
                   m.facts_per_s / result.rocksdb_sync->facts_per_s);
    }
  }
  std::fflush(out);
}

std::vector<std::string> W2Json(const W2Result& result, const MachineInfo& machine) {
  std::vector<std::pair<int, const W2Measurement*>> rows;
  for (const auto& [workers, m] : result.wharf) rows.emplace_back(workers, &m);
  if (rows.empty()) rows.emplace_back(0, nullptr);
  std::vector<std::string> lines;
  for (const auto& [workers, m] : rows) {
    std::string json =
        Format("{\"workload\": \"%s\", \"facts\": %llu, \"batch\": %u, \"workers\": ", result.name,
               static_cast<unsigned long long>(result.facts), kW2Batch) +
        JsonNumberOrNull(workers, m != nullptr, "%.0f") +
        Format(", \"durability\": \"sync\", \"runs\": %d, ", result.runs) +
        "\"fullest_partition_share\": " +
        JsonNumberOrNull(result.fullest_partition_share, result.fullest_partition_share > 0,
                         "%.4f") +
        ", " + MeasurementJsonFields(m) +
        ", \"reference\": {\"rocksdb_sync\": " + ReferenceJson(result.rocksdb_sync) +
        ", \"sqlite_full\": " + ReferenceJson(result.sqlite_full) +
        Format("}, \"reference_budget_s\": %.1f", kW2ReferenceBudget_s) +
        ", \"machine\": " + MachineJson(machine) + "}";
    lines.push_back(std::move(json));
  }
  return lines;
}

}  // namespace wharf::bench
