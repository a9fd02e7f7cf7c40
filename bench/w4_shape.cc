#include "bench/w4_shape.h"

#include "bench/run_median.h"

namespace wharf::bench {

W4Measurement MedianOf(const std::vector<W4Measurement>& runs) {
  const SucceededRuns<W4Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W4Measurement result;
  result.facts = ok.first().facts;
  for (double W4Measurement::*field :
       {&W4Measurement::facts_per_s, &W4Measurement::fanout_s, &W4Measurement::max_lag,
        &W4Measurement::instance_a_share, &W4Measurement::lease_settle_ms,
        &W4Measurement::lease_changes, &W4Measurement::handover_ms, &W4Measurement::stop_ms,
        &W4Measurement::handed_over, &W4Measurement::handover_max_lag,
        &W4Measurement::background_facts, &W4Measurement::precommit_s, &W4Measurement::duplicates,
        &W4Measurement::warnings}) {
    result.*field = ok.MedianOf(field);
  }
  for (size_t c = 0; c < ok.first().per_consumer_facts_per_s.size(); ++c) {
    std::vector<double> values;
    for (const W4Measurement* run : ok.runs()) {
      if (c < run->per_consumer_facts_per_s.size()) {
        values.push_back(run->per_consumer_facts_per_s[c]);
      }
    }
    result.per_consumer_facts_per_s.push_back(Median(std::move(values)));
  }
  for (const W4Measurement* run : ok.runs()) {
    if (!run->first_warning.empty()) {
      result.first_warning = run->first_warning;
      break;
    }
  }
  return result;
}

}  // namespace wharf::bench
