#include "bench/w7_report.h"

#include "bench/reference_broker_ingest.h"

namespace wharf::bench {
namespace {

constexpr double kMillion = 1e6;

// CPU seconds per million facts of `cpu_s` spent on `facts` facts.
double PerMillion(double cpu_s, uint64_t facts) {
  return facts == 0 ? 0 : cpu_s * kMillion / static_cast<double>(facts);
}

void PrintSide(const char* name, const W7Side& side, uint64_t facts, std::FILE* out) {
  std::fprintf(out, "%-26s %11.0f %9.2f %16.2f %16.2f\n", name, side.facts_per_s, side.seconds,
               PerMillion(side.client_cpu_s, facts), PerMillion(side.broker_cpu_s, facts));
}

std::string SideJson(const W7Side& side, uint64_t facts, bool known) {
  return "{\"facts_per_s\": " + JsonNumberOrNull(side.facts_per_s, known) +
         ", \"seconds\": " + JsonNumberOrNull(side.seconds, known, "%.3f") +
         ", \"client_cpu_s_per_million_facts\": " +
         JsonNumberOrNull(PerMillion(side.client_cpu_s, facts), known, "%.3f") +
         ", \"broker_cpu_s_per_million_facts\": " +
         JsonNumberOrNull(PerMillion(side.broker_cpu_s, facts), known, "%.3f") + "}";
}

}  // namespace

void PrintW7Table(const W7Row& row, std::FILE* out) {
  const W7Measurement& m = row.median;
  std::fprintf(out,
               "\n%s  %s: %llu facts pre-committed (W1's shape, 100-byte payloads, one "
               "stream/subject per partition),\n  relay options: %s, %d workers; each side into "
               "a fresh broker; median of %d run(s)\n  durability: %s; Wharf: sync (cursor "
               "commits)\n",
               kW7Name, ToString(row.broker), static_cast<unsigned long long>(row.facts),
               row.relay_options.empty() ? "the defaults (batch_facts 256, in_flight 1024)"
                                         : row.relay_options.c_str(),
               row.workers, row.runs, W7Durability(row.broker));
  if (!m.error.empty()) {
    std::fprintf(out, "FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  std::fprintf(out, "%-26s %11s %9s %16s %16s\n", "publisher", "facts/s", "seconds",
               "client_cpu_s/M", "broker_cpu_s/M");
  PrintSide("wharf relay", m.relay, m.facts, out);
  PrintSide("reference (broker's own)", m.reference, m.facts, out);
  std::fprintf(out, "  relay / reference: %.2f (goal >= 0.80)%s\n", m.ratio,
               m.ratio >= 0.8 ? "" : "  NOT MET");
  std::fprintf(out, "  reference: %s\n", DescribeW7Reference(row.broker).c_str());
  if (!m.warning.empty()) std::fprintf(out, "  first runtime warning: %s\n", m.warning.c_str());
  std::fflush(out);
}

std::string W7Json(const W7Row& row, const MachineInfo& machine) {
  const W7Measurement& m = row.median;
  const bool known = m.error.empty();
  const char* reference = row.broker == W7Broker::kRedisStreams ? "redis_pipelined" : "nats_async";
  std::string json =
      Format(
          "{\"workload\": \"%s\", \"broker\": \"%s\", \"facts\": %llu, \"workers\": %d, "
          "\"runs\": %d, ",
          kW7Name, ToString(row.broker), static_cast<unsigned long long>(row.facts), row.workers,
          row.runs) +
      "\"relay_options\": \"" + JsonEscape(row.relay_options) +
      "\", \"durability\": \"sync\", \"broker_durability\": \"" +
      JsonEscape(W7Durability(row.broker)) +
      "\", \"facts_per_s\": " + JsonNumberOrNull(m.relay.facts_per_s, known) +
      ", \"relay\": " + SideJson(m.relay, m.facts, known) + ", \"reference\": {\"" + reference +
      "\": " + SideJson(m.reference, m.facts, known) +
      "}, \"ratio\": " + JsonNumberOrNull(m.ratio, known, "%.3f") +
      ", \"precommit_s\": " + JsonNumberOrNull(row.precommit_s, true, "%.3f");
  if (!m.warning.empty()) json += ", \"warning\": \"" + JsonEscape(m.warning) + "\"";
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
