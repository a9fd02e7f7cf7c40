#include "bench/w8_shape.h"

#include "bench/run_median.h"

namespace wharf::bench {

double W8BoundFactsPerS(int key_concurrency) {
  return static_cast<double>(kW8Partitions) * key_concurrency /
         (static_cast<double>(kW8HandlerDelayNs) / 1e9);
}

bool W8Clean(const W8Measurement& m) {
  return m.error.empty() && m.order_violations == 0 && m.overlaps == 0 && m.duplicates == 0;
}

W8Measurement MedianOf(const std::vector<W8Measurement>& runs) {
  const SucceededRuns<W8Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W8Measurement result;
  for (double W8Measurement::*field :
       {&W8Measurement::facts_per_s, &W8Measurement::facts_consumed, &W8Measurement::facts_total,
        &W8Measurement::consume_s, &W8Measurement::subset, &W8Measurement::most_in_handler,
        &W8Measurement::cpu_s, &W8Measurement::cpu_s_per_million,
        &W8Measurement::workers_us_per_fact, &W8Measurement::timer_us_per_fact,
        &W8Measurement::committer_us_per_fact, &W8Measurement::other_us_per_fact,
        &W8Measurement::handler_calls, &W8Measurement::timer_late_us_mean,
        &W8Measurement::timer_per_wakeup, &W8Measurement::precommit_s}) {
    result.*field = ok.MedianOf(field);
  }
  // Correctness counts are summed, not medians: one violation in any run is reported.
  for (const W8Measurement* run : ok.runs()) {
    result.order_violations += run->order_violations;
    result.overlaps += run->overlaps;
    result.duplicates += run->duplicates;
  }
  return result;
}

}  // namespace wharf::bench
