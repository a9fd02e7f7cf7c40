#include "bench/w8_report.h"

namespace wharf::bench {
namespace {

// The rate of key_concurrency 1 in this row (0: not measured, or failed).
double RateOfK1(const W8Row& row) {
  for (size_t i = 0; i < row.key_concurrency.size(); ++i) {
    if (row.key_concurrency[i] == 1 && row.wharf[i].error.empty()) return row.wharf[i].facts_per_s;
  }
  return 0;
}

}  // namespace

void PrintW8Table(const W8Row& row, std::FILE* out) {
  std::fprintf(out,
               "\n%s  %llu facts pre-committed, %d keys (uniform), %u partitions; one "
               "asynchronous subscriber,\n  each fact done by a timer %.0f ms after its handler "
               "started it; %d workers; each consumption stops\n  after %.1f s (* = the rate is "
               "over the facts done by then); median of %d run(s)\n",
               kW8Name, static_cast<unsigned long long>(row.facts), kW8DistinctKeys, kW8Partitions,
               static_cast<double>(kW8HandlerDelayNs) / 1e6, row.workers, row.budget_s, row.runs);
  if (row.timer_error.empty()) {
    std::fprintf(out, "  timer thread alone: %.0f dummy deliveries/s (%llu due at once)\n",
                 row.timer_capacity_per_s, static_cast<unsigned long long>(kW8TimerProbeItems));
  } else {
    std::fprintf(out, "  timer thread alone: FAILED: %s\n", row.timer_error.c_str());
  }
  std::fprintf(out, "%-6s %11s %9s %10s %9s %9s %10s %10s %7s %9s %9s\n", "k", "facts/s", "bound",
               "consumed", "consume_s", "in_hndlr", "cpu_s/M", "order_viol", "dups", "vs_k1",
               "late_us");
  const double k1 = RateOfK1(row);
  for (size_t i = 0; i < row.key_concurrency.size(); ++i) {
    const int k = row.key_concurrency[i];
    const W8Measurement& m = row.wharf[i];
    if (!m.error.empty()) {
      std::fprintf(out, "%-6d  FAILED: %s\n", k, m.error.c_str());
      continue;
    }
    const std::string ratio = k1 > 0 ? Format("%.1fx", m.facts_per_s / k1) : std::string("-");
    std::fprintf(out, "%-6d %11.0f %9.0f %10.0f %8.2f%s %9.0f %10.2f %10.0f %7.0f %9s %9.0f\n", k,
                 m.facts_per_s, W8BoundFactsPerS(k), m.facts_consumed, m.consume_s,
                 m.subset > 0 ? "*" : " ", m.most_in_handler, m.cpu_s_per_million,
                 m.order_violations + m.overlaps, m.duplicates, ratio.c_str(),
                 m.timer_late_us_mean);
  }
  std::fprintf(out, "  cpu us per fact by thread (workers / timer / committer / other):");
  for (size_t i = 0; i < row.key_concurrency.size(); ++i) {
    const W8Measurement& m = row.wharf[i];
    if (!m.error.empty()) continue;
    std::fprintf(out, "%s k=%d %.2f / %.2f / %.2f / %.2f", i == 0 ? "" : ";",
                 row.key_concurrency[i], m.workers_us_per_fact, m.timer_us_per_fact,
                 m.committer_us_per_fact, m.other_us_per_fact);
  }
  std::fprintf(out, "\n");
  for (size_t i = 0; i < row.key_concurrency.size(); ++i) {
    const W8Measurement& m = row.wharf[i];
    if (m.error.empty() && !W8Clean(m)) {
      std::fprintf(out,
                   "  k=%d: PER-KEY ORDER BROKEN: %.0f facts started after a later one of their "
                   "key, %.0f while one of their key ran, %.0f duplicate deliveries\n",
                   row.key_concurrency[i], m.order_violations, m.overlaps, m.duplicates);
    }
  }
  std::fprintf(out,
               "  bound: 16 lanes x k / 5 ms; in_hndlr: most deliveries started and not done at "
               "once; order_viol: a fact\n  started before an older one of its key, or while "
               "one of its key ran (summed over the runs, as dups)\n");
  std::fflush(out);
}

std::vector<std::string> W8Json(const W8Row& row, const MachineInfo& machine) {
  std::vector<std::string> lines;
  const double k1 = RateOfK1(row);
  for (size_t i = 0; i < row.key_concurrency.size(); ++i) {
    const int k = row.key_concurrency[i];
    const W8Measurement& m = row.wharf[i];
    const bool known = m.error.empty();
    std::string json =
        Format(
            "{\"workload\": \"%s\", \"facts\": %llu, \"keys\": %d, \"partitions\": %u, "
            "\"handler_delay_ms\": %.0f, \"key_concurrency\": %d, \"workers\": %d, \"runs\": %d, "
            "\"budget_s\": %.3f, \"bound_facts_per_s\": %.0f, ",
            kW8Name, static_cast<unsigned long long>(row.facts), kW8DistinctKeys, kW8Partitions,
            static_cast<double>(kW8HandlerDelayNs) / 1e6, k, row.workers, row.runs, row.budget_s,
            W8BoundFactsPerS(k)) +
        "\"facts_per_s\": " + JsonNumberOrNull(m.facts_per_s, known) +
        ", \"facts_consumed\": " + JsonNumberOrNull(m.facts_consumed, known, "%.0f") +
        ", \"subset\": " + (known ? (m.subset > 0 ? "true" : "false") : "null") +
        ", \"consume_s\": " + JsonNumberOrNull(m.consume_s, known, "%.3f") +
        ", \"max_in_handler\": " + JsonNumberOrNull(m.most_in_handler, known, "%.0f") +
        ", \"cpu_s\": " + JsonNumberOrNull(m.cpu_s, known, "%.3f") +
        ", \"cpu_s_per_million_facts\": " + JsonNumberOrNull(m.cpu_s_per_million, known, "%.3f") +
        ", \"cpu_us_per_fact_by_thread\": {\"workers\": " +
        JsonNumberOrNull(m.workers_us_per_fact, known, "%.3f") +
        ", \"timer\": " + JsonNumberOrNull(m.timer_us_per_fact, known, "%.3f") +
        ", \"committer\": " + JsonNumberOrNull(m.committer_us_per_fact, known, "%.3f") +
        ", \"other\": " + JsonNumberOrNull(m.other_us_per_fact, known, "%.3f") + "}" +
        ", \"order_violations\": " + JsonNumberOrNull(m.order_violations, known, "%.0f") +
        ", \"overlaps\": " + JsonNumberOrNull(m.overlaps, known, "%.0f") +
        ", \"duplicates\": " + JsonNumberOrNull(m.duplicates, known, "%.0f") +
        ", \"handler_calls\": " + JsonNumberOrNull(m.handler_calls, known, "%.0f") +
        ", \"ratio_to_k1\": " +
        JsonNumberOrNull(k1 > 0 ? m.facts_per_s / k1 : 0, known && k1 > 0, "%.2f") +
        ", \"timer_late_us_mean\": " + JsonNumberOrNull(m.timer_late_us_mean, known) +
        ", \"timer_per_wakeup\": " + JsonNumberOrNull(m.timer_per_wakeup, known) +
        ", \"timer_capacity_per_s\": " +
        JsonNumberOrNull(row.timer_capacity_per_s, row.timer_error.empty(), "%.0f") +
        ", \"precommit_s\": " + JsonNumberOrNull(m.precommit_s, known, "%.3f");
    if (!m.error.empty()) json += ", \"error\": \"" + JsonEscape(m.error) + "\"";
    json += ", \"machine\": " + MachineJson(machine) + "}";
    lines.push_back(std::move(json));
  }
  return lines;
}

}  // namespace wharf::bench
