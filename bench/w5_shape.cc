#include "bench/w5_shape.h"

#include <cstdio>

#include "bench/run_median.h"

namespace wharf::bench {
namespace {

constexpr double W5Restart::*kRestartFields[] = {
    &W5Restart::open_ms, &W5Restart::open_to_first_delivery_ms, &W5Restart::rss_after_open_bytes,
    &W5Restart::rss_at_first_delivery_bytes};

}  // namespace

W5Measurement MedianOf(const std::vector<W5Measurement>& runs) {
  const SucceededRuns<W5Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W5Measurement result;
  result.facts = ok.first().facts;
  result.precommit_s = ok.MedianOf(&W5Measurement::precommit_s);
  result.db_bytes = ok.MedianOf(&W5Measurement::db_bytes);
  for (W5Restart W5Measurement::*restart :
       {&W5Measurement::cold, &W5Measurement::warm, &W5Measurement::rocksdb_cold}) {
    for (double W5Restart::*field : kRestartFields) {
      (result.*restart).*field =
          ok.MedianBy([&](const W5Measurement& m) { return (m.*restart).*field; });
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
