// W1 (P producers, B facts + 1 row per transaction) beside a piece of online work (W11's backup,
// W12's migration): the producers' rate found unpaced first, then their commit latency paced at
// half of it (open loop, PacedLoad) without the work and during it.
//
// Thread safety: one owner thread; the producers run on threads of their own while measuring.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/latency_samples.h"
#include "bench/producer_driver.h"
#include "wharf/engine.h"

namespace wharf::bench {

class HalfRateW1 {
 public:
  // Makes `producers` W1 producers of `batch` facts on `engine` (kW1FactType declared) and drives
  // them unpaced for `probe_s` seconds: the rate they are then paced at half of. error() says
  // why not.
  HalfRateW1(Engine* engine, int producers, int batch, double probe_s = 3);

  const std::string& error() const { return error_; }
  // Commits per second found unpaced; half of it is the paced rate.
  double unpaced_commits_per_s() const { return unpaced_commits_per_s_; }
  // The producers, for loading more transactions through them (CommitTransactions).
  const std::vector<std::unique_ptr<Producer>>& producers() const { return producers_; }

  // Paced at half the unpaced rate for `seconds`: their commit latency and (may be null) the rate
  // achieved. "" or the first commit's error.
  std::string Measure(double seconds, LatencySummary* latency, double* commits_per_s = nullptr);
  // Paced at half the unpaced rate while `work` runs on the calling thread, stopped when it
  // returns: as Measure.
  std::string MeasureDuring(const std::function<void()>& work, LatencySummary* latency,
                            double* commits_per_s = nullptr);

 private:
  std::vector<std::unique_ptr<Producer>> producers_;
  double unpaced_commits_per_s_ = 0;
  std::string error_;
};

}  // namespace wharf::bench
