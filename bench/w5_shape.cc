#include "bench/w5_shape.h"

#include <algorithm>
#include <cstdio>

namespace wharf::bench {
namespace {

double MedianOfField(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

constexpr double W5Restart::*kRestartFields[] = {
    &W5Restart::open_ms, &W5Restart::open_to_first_delivery_ms, &W5Restart::rss_after_open_bytes,
    &W5Restart::rss_at_first_delivery_bytes};

}  // namespace

W5Measurement MedianOf(const std::vector<W5Measurement>& runs) {
  std::vector<const W5Measurement*> ok;
  for (const W5Measurement& run : runs) {
    if (run.error.empty()) ok.push_back(&run);
  }
  if (ok.empty()) {
    W5Measurement failed;
    failed.error = runs.empty() ? "no runs" : runs.front().error;
    return failed;
  }
  auto median = [&ok](auto&& field_of) {
    std::vector<double> values;
    for (const W5Measurement* run : ok) values.push_back(field_of(*run));
    return MedianOfField(std::move(values));
  };
  W5Measurement result;
  result.facts = ok.front()->facts;
  result.precommit_s = median([](const W5Measurement& m) { return m.precommit_s; });
  result.db_bytes = median([](const W5Measurement& m) { return m.db_bytes; });
  for (W5Restart W5Measurement::*restart :
       {&W5Measurement::cold, &W5Measurement::warm, &W5Measurement::rocksdb_cold}) {
    for (double W5Restart::*field : kRestartFields) {
      (result.*restart).*field =
          median([&](const W5Measurement& m) { return (m.*restart).*field; });
    }
  }
  return result;
}

std::string FormatW5Restart(const W5Restart& restart) {
  if (!restart.error.empty()) return "error: " + restart.error;
  char line[256];
  std::snprintf(line, sizeof line, "%.3f %.3f %.0f %.0f", restart.open_ms,
                restart.open_to_first_delivery_ms, restart.rss_after_open_bytes,
                restart.rss_at_first_delivery_bytes);
  return line;
}

W5Restart ParseW5Restart(const std::string& line) {
  W5Restart restart;
  if (line.starts_with("error: ")) {
    restart.error = line.substr(7);
  } else if (std::sscanf(line.c_str(), "%lf %lf %lf %lf", &restart.open_ms,
                         &restart.open_to_first_delivery_ms, &restart.rss_after_open_bytes,
                         &restart.rss_at_first_delivery_bytes) != 4) {
    restart.error = "restart process answered \"" + line + "\"";
  }
  return restart;
}

}  // namespace wharf::bench
