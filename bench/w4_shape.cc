#include "bench/w4_shape.h"

#include <algorithm>

namespace wharf::bench {
namespace {

double MedianOfField(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

W4Measurement MedianOf(const std::vector<W4Measurement>& runs) {
  std::vector<const W4Measurement*> ok;
  for (const W4Measurement& run : runs) {
    if (run.error.empty()) ok.push_back(&run);
  }
  if (ok.empty()) {
    W4Measurement failed;
    failed.error = runs.empty() ? "no runs" : runs.front().error;
    return failed;
  }
  auto median = [&ok](double W4Measurement::*field) {
    std::vector<double> values;
    for (const W4Measurement* run : ok) values.push_back(run->*field);
    return MedianOfField(std::move(values));
  };
  W4Measurement result;
  result.facts = ok.front()->facts;
  for (double W4Measurement::*field :
       {&W4Measurement::facts_per_s, &W4Measurement::fanout_s, &W4Measurement::max_lag,
        &W4Measurement::instance_a_share, &W4Measurement::lease_settle_ms,
        &W4Measurement::lease_changes, &W4Measurement::handover_ms, &W4Measurement::stop_ms,
        &W4Measurement::handed_over, &W4Measurement::handover_max_lag,
        &W4Measurement::background_facts, &W4Measurement::precommit_s, &W4Measurement::duplicates,
        &W4Measurement::warnings}) {
    result.*field = median(field);
  }
  for (size_t c = 0; c < ok.front()->per_consumer_facts_per_s.size(); ++c) {
    std::vector<double> values;
    for (const W4Measurement* run : ok) {
      if (c < run->per_consumer_facts_per_s.size()) {
        values.push_back(run->per_consumer_facts_per_s[c]);
      }
    }
    result.per_consumer_facts_per_s.push_back(MedianOfField(std::move(values)));
  }
  for (const W4Measurement* run : ok) {
    if (!run->first_warning.empty()) {
      result.first_warning = run->first_warning;
      break;
    }
  }
  return result;
}

}  // namespace wharf::bench
