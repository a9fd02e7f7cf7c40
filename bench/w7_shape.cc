#include "bench/w7_shape.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/run_median.h"

namespace wharf::bench {

const char* ToString(W7Broker broker) {
  return broker == W7Broker::kRedisStreams ? "redis_streams" : "nats_jetstream";
}

const char* W7Durability(W7Broker broker) {
  return broker == W7Broker::kRedisStreams
             ? "AOF on, appendfsync always (fsynced before the replies of each event-loop round)"
             : "JetStream file store, server defaults (acknowledged once stored, not fsynced; "
               "nats-server 2.9 syncs its files every 2 min)";
}

uint64_t W7Facts::count() const {
  uint64_t n = 0;
  for (const std::vector<W7Entry>& partition : by_partition) n += partition.size();
  return n;
}

W7Measurement MedianOf(const std::vector<W7Measurement>& runs) {
  const SucceededRuns<W7Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  W7Measurement result;
  result.facts = ok.first().facts;
  for (W7Side W7Measurement::*side : {&W7Measurement::relay, &W7Measurement::reference}) {
    for (double W7Side::*field :
         {&W7Side::facts_per_s, &W7Side::seconds, &W7Side::client_cpu_s, &W7Side::broker_cpu_s}) {
      (result.*side).*field = ok.MedianBy([&](const W7Measurement& m) { return (m.*side).*field; });
    }
    (result.*side).stored = (ok.first().*side).stored;
  }
  result.ratio = ok.MedianOf(&W7Measurement::ratio);
  for (const W7Measurement* run : ok.runs()) {
    if (result.warning.empty()) result.warning = run->warning;
  }
  return result;
}

double ProcessCpuSecondsOf(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(file, line)) return -1;
  // Fields after the command name (which may hold spaces), which ends at the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int index = 3; fields >> field; ++index) {  // field 3 is the state
    if (index == 14) utime = std::stod(field);
    if (index == 15) {
      stime = std::stod(field);
      return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  return -1;
}

}  // namespace wharf::bench
