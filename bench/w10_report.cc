#include "bench/w10_report.h"

namespace wharf::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The goals: replicated throughput at least half of local (a); a replicated commit's p50 at most
// the local one plus two JetStream round trips (b); the async lag's p99 at most 100 ms (c).
constexpr double kThroughputRatioGoal = 0.5;
constexpr double kLagP99GoalMs = 100;

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }
const char* Verdict(bool met) { return met ? "met" : "MISSED"; }

// The (b) goal's bound: local p50 + 2 x JetStream p50, in us.
double ReplicatedP50BoundUs(const W10Measurement& m) {
  return m.local_p1.p50_us + 2 * m.jetstream_publish.p50_us;
}

}  // namespace

void PrintW10Table(const W10Row& row, std::FILE* out) {
  const W10Measurement& m = row.wharf;
  std::fprintf(out,
               "\n%s  3-node JetStream cluster on loopback, streams of 3 replicas; "
               "local = durability=sync, replicated = durability=replicated; median of %d run(s)\n",
               kW10Name, row.runs);
  if (!m.error.empty()) {
    std::fprintf(out, "wharf  FAILED: %s\n", m.error.c_str());
    std::fflush(out);
    return;
  }
  const double ratio = Ratio(m.replicated_facts_per_s, m.local_facts_per_s);
  std::fprintf(out, "%-30s %12s %12s %12s  %s\n", "", "local", "replicated", "jetstream", "goal");
  std::fprintf(out, "%-30s %12.0f %12.0f %12s  replicated/local %.0f %% >= %.0f %%: %s\n",
               "(a) P=16 B=10 facts/s", m.local_facts_per_s, m.replicated_facts_per_s, "",
               100 * ratio, 100 * kThroughputRatioGoal, Verdict(ratio >= kThroughputRatioGoal));
  auto latency_row = [&](const char* label, const LatencySummary& local,
                         const LatencySummary& replicated, const std::string& jetstream,
                         const std::string& goal) {
    std::fprintf(out, "%-30s %12s %12s %12s  %s\n", label,
                 Format("%.0f/%.0f", local.p50_us, local.p99_us).c_str(),
                 Format("%.0f/%.0f", replicated.p50_us, replicated.p99_us).c_str(),
                 jetstream.c_str(), goal.c_str());
  };
  latency_row("    commit p50/p99 us", m.local_p16, m.replicated_p16, "", "");
  const double bound_us = ReplicatedP50BoundUs(m);
  latency_row(
      "(b) P=1 B=1 commit p50/p99 us", m.local_p1, m.replicated_p1,
      Format("%.0f/%.0f", m.jetstream_publish.p50_us, m.jetstream_publish.p99_us),
      Format("replicated p50 %.0f <= local + 2 x jetstream = %.0f us: %s", m.replicated_p1.p50_us,
             bound_us, Verdict(m.replicated_p1.p50_us <= bound_us)));
  std::fprintf(out,
               "(c) async (durability=sync + replicate), P=16 B=10 paced at %.0f commits/s "
               "(half of local; did %.0f): commit p50/p99 %.0f/%.0f us\n"
               "    replication lag p50/p99/max %.0f/%.0f/%.0f ms (%.0f samples, every %d ms): "
               "p99 <= %.0f ms: %s\n",
               m.async_commits_per_s, m.async_achieved_commits_per_s, m.async_commit.p50_us,
               m.async_commit.p99_us, m.lag_p50_ms, m.lag_p99_ms, m.lag_max_ms, m.lag_samples,
               kW10LagSampleMs, kLagP99GoalMs, Verdict(m.lag_p99_ms <= kLagP99GoalMs));
  std::fprintf(out,
               "(d) %.0f facts committed under replicated in %.2f s (%d producers, %d facts per "
               "transaction); RestoreFromStream %.2f s (%.0f facts/s): snapshot %.2f MiB in "
               "%.2f s, then %.0f groups applied in %.2f s\n",
               m.restore_facts, m.load_s, kW10RestoreProducers, kW10RestoreBatch, m.restore_s,
               Ratio(m.restore_facts, m.restore_s), m.snapshot_bytes / kMiB, m.restore_snapshot_s,
               m.groups_applied, m.restore_s - m.restore_snapshot_s);
  std::fprintf(out,
               "  jetstream = nats.c js_Publish alone, synchronous, %zu-byte messages, an R3 file "
               "stream (%d publishes); every NATS node on this machine\n",
               kW10JetStreamMessageBytes, kW10JetStreamPublishes);
  std::fflush(out);
}

std::string W10Json(const W10Row& row, const MachineInfo& machine) {
  const W10Measurement& m = row.wharf;
  const bool known = m.error.empty();
  std::string json =
      Format(
          "{\"workload\": \"%s\", \"facts\": %llu, \"producers\": %d, \"batch\": %d, "
          "\"runs\": %d, ",
          kW10Name, static_cast<unsigned long long>(row.facts), kW10Producers, kW10Batch,
          row.runs) +
      "\"local_facts_per_s\": " + JsonNumberOrNull(m.local_facts_per_s, known) +
      ", \"replicated_facts_per_s\": " + JsonNumberOrNull(m.replicated_facts_per_s, known) +
      ", \"replicated_ratio\": " +
      JsonNumberOrNull(Ratio(m.replicated_facts_per_s, m.local_facts_per_s), known, "%.3f") +
      ", \"latency_us_p16\": {\"local\": " + LatencyJson(m.local_p16, known) +
      ", \"replicated\": " + LatencyJson(m.replicated_p16, known) + "}" +
      ", \"latency_us_p1\": {\"local\": " + LatencyJson(m.local_p1, known) +
      ", \"replicated\": " + LatencyJson(m.replicated_p1, known) +
      ", \"jetstream_publish\": " + LatencyJson(m.jetstream_publish, known) + "}" +
      ", \"async\": {\"commits_per_s\": " + JsonNumberOrNull(m.async_commits_per_s, known) +
      ", \"achieved_commits_per_s\": " + JsonNumberOrNull(m.async_achieved_commits_per_s, known) +
      ", \"latency_us\": " + LatencyJson(m.async_commit, known) +
      ", \"lag_ms_p50\": " + JsonNumberOrNull(m.lag_p50_ms, known, "%.0f") +
      ", \"lag_ms_p99\": " + JsonNumberOrNull(m.lag_p99_ms, known, "%.0f") +
      ", \"lag_ms_max\": " + JsonNumberOrNull(m.lag_max_ms, known, "%.0f") +
      ", \"lag_samples\": " + JsonNumberOrNull(m.lag_samples, known, "%.0f") + "}" +
      ", \"restore\": {\"facts\": " + JsonNumberOrNull(m.restore_facts, known, "%.0f") +
      ", \"load_s\": " + JsonNumberOrNull(m.load_s, known, "%.3f") +
      ", \"restore_s\": " + JsonNumberOrNull(m.restore_s, known, "%.3f") +
      ", \"snapshot_s\": " + JsonNumberOrNull(m.restore_snapshot_s, known, "%.3f") +
      ", \"snapshot_bytes\": " + JsonNumberOrNull(m.snapshot_bytes, known, "%.0f") +
      ", \"groups_applied\": " + JsonNumberOrNull(m.groups_applied, known, "%.0f") + "}";
  if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
  json += ", \"machine\": " + MachineJson(machine) + "}";
  return json;
}

}  // namespace wharf::bench
