#include "bench/w4_report.h"

namespace wharf::bench {

void PrintW4Table(const W4Row& row, std::FILE* out) {
  std::fprintf(out,
               "\n%s  %llu facts pre-committed, %d projections (batch %u, one state row per fact, "
               "own table),\n  %d runtime instances x %d workers sharing leases (lease %u ms, "
               "renew %u ms), 16 partitions, durability=sync; median of %d run(s)\n",
               kW4Name, static_cast<unsigned long long>(row.facts), kW4Consumers, kW4Batch,
               kW4Instances, row.workers, kW4LeaseMs, kW4RenewMs, row.runs);
  const W4Measurement& m = row.wharf;
  if (!m.error.empty()) {
    std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "%-7s %7s %11s %9s %8s %9s %8s %12s %8s %9s %9s %11s\n", "system", "workers",
               "facts/s", "fanout_s", "max_lag", "a_share", "settle_ms", "handover_ms", "stop_ms",
               "handed", "ho_lag", "warnings");
  std::fprintf(out, "%-7s %7d %11.0f %9.2f %8.0f %8.0f%% %9.0f %12.0f %8.0f %9.0f %9.0f %11.0f\n",
               "wharf", row.workers, m.facts_per_s, m.fanout_s, m.max_lag, 100 * m.instance_a_share,
               m.lease_settle_ms, m.handover_ms, m.stop_ms, m.handed_over, m.handover_max_lag,
               m.warnings);
  std::fprintf(out, "  per consumer facts/s:");
  for (const double rate : m.per_consumer_facts_per_s) std::fprintf(out, " %.0f", rate);
  std::fprintf(out, "\n");
  std::fprintf(out,
               "  hand-over: %.0f facts committed in the background; %.0f consumer(s) moved from a "
               "to b; duplicates %.0f\n",
               m.background_facts, m.handed_over, m.duplicates);
  if (!m.first_warning.empty()) std::fprintf(out, "  first warning: %s\n", m.first_warning.c_str());
  std::fflush(out);
}

std::string W4Json(const W4Row& row, const MachineInfo& machine) {
  const W4Measurement& m = row.wharf;
  const bool known = m.error.empty();
  std::string per_consumer = "[";
  for (size_t c = 0; c < m.per_consumer_facts_per_s.size(); ++c) {
    if (c > 0) per_consumer += ", ";
    per_consumer += Format("%.1f", m.per_consumer_facts_per_s[c]);
  }
  per_consumer += "]";
  std::string json =
      Format(
          "{\"workload\": \"%s\", \"facts\": %llu, \"consumers\": %d, \"partitions\": 16, "
          "\"instances\": %d, \"workers\": %d, \"batch\": %u, \"lease_ms\": %u, \"renew_ms\": "
          "%u, \"durability\": \"sync\", \"runs\": %d, ",
          kW4Name, static_cast<unsigned long long>(row.facts), kW4Consumers, kW4Instances,
          row.workers, kW4Batch, kW4LeaseMs, kW4RenewMs, row.runs) +
      "\"facts_per_s\": " + JsonNumberOrNull(m.facts_per_s, known) +
      ", \"per_consumer_facts_per_s\": " + (known ? per_consumer : std::string("null")) +
      ", \"max_lag\": " + JsonNumberOrNull(m.max_lag, known, "%.0f") +
      ", \"handover_ms\": " + JsonNumberOrNull(m.handover_ms, known) +
      ", \"fanout_s\": " + JsonNumberOrNull(m.fanout_s, known, "%.3f") +
      ", \"instance_a_share\": " + JsonNumberOrNull(m.instance_a_share, known, "%.3f") +
      ", \"lease_settle_ms\": " + JsonNumberOrNull(m.lease_settle_ms, known) +
      ", \"lease_changes\": " + JsonNumberOrNull(m.lease_changes, known, "%.0f") +
      ", \"stop_ms\": " + JsonNumberOrNull(m.stop_ms, known) +
      ", \"handed_over_consumers\": " + JsonNumberOrNull(m.handed_over, known, "%.0f") +
      ", \"handover_max_lag\": " + JsonNumberOrNull(m.handover_max_lag, known, "%.0f") +
      ", \"background_facts\": " + JsonNumberOrNull(m.background_facts, known, "%.0f") +
      ", \"precommit_s\": " + JsonNumberOrNull(m.precommit_s, known, "%.3f") +
      ", \"duplicates\": " + JsonNumberOrNull(m.duplicates, known, "%.0f") +
      ", \"warnings\": " + JsonNumberOrNull(m.warnings, known, "%.0f");
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
