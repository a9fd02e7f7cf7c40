// PacedLoad: W1's producers, each paced to `commits_per_s` / producers (open loop, evenly
// staggered), until Stop(): the load W6, W10 and W11 measure beside.
//
// Thread safety: one owner thread; the producers run on threads of their own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/latency_samples.h"
#include "bench/producer_driver.h"

namespace wharf::bench {

class PacedLoad {
 public:
  // Starts one thread per producer; `producers` must outlive this object.
  PacedLoad(const std::vector<std::unique_ptr<Producer>>& producers, double commits_per_s);
  PacedLoad(const PacedLoad&) = delete;
  PacedLoad& operator=(const PacedLoad&) = delete;
  ~PacedLoad();

  // Stops the producers: "" or the first commit's error. `*summary`: their commit latencies;
  // `*commits_per_s` (may be null): the rate they achieved (below the asked one when commits take
  // longer than their interval).
  std::string Stop(LatencySummary* summary, double* commits_per_s = nullptr);

 private:
  std::vector<LatencySamples> samples_;
  uint64_t start_ns_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  std::string error_;
};

}  // namespace wharf::bench
