#include "bench/half_rate_w1.h"

#include <chrono>
#include <thread>

#include "bench/paced_load.h"
#include "bench/w1_append.h"

namespace wharf::bench {

HalfRateW1::HalfRateW1(Engine* engine, int producers, int batch, double probe_s) {
  for (int i = 0; i < producers; ++i) {
    producers_.push_back(MakeWharfW1Producer(engine, i, batch));
  }
  const W1Measurement unpaced = DriveProducers(producers_, batch, probe_s);
  error_ = unpaced.error;
  unpaced_commits_per_s_ = unpaced.commits_per_s;
}

std::string HalfRateW1::Measure(double seconds, LatencySummary* latency, double* commits_per_s) {
  return MeasureDuring(
      [seconds] { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }, latency,
      commits_per_s);
}

std::string HalfRateW1::MeasureDuring(const std::function<void()>& work, LatencySummary* latency,
                                      double* commits_per_s) {
  PacedLoad load(producers_, unpaced_commits_per_s_ / 2);
  work();
  return load.Stop(latency, commits_per_s);
}

}  // namespace wharf::bench
