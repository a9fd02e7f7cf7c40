#include "bench/paced_load.h"

#include <chrono>

namespace wharf::bench {

PacedLoad::PacedLoad(const std::vector<std::unique_ptr<Producer>>& producers, double commits_per_s)
    : samples_(producers.size(), LatencySamples(1'000'000)), start_ns_(NowNs()) {
  const auto interval = std::chrono::nanoseconds(
      static_cast<int64_t>(1e9 * static_cast<double>(producers.size()) / commits_per_s));
  for (size_t i = 0; i < producers.size(); ++i) {
    threads_.emplace_back([this, i, interval, producer = producers[i].get()] {
      auto next = std::chrono::steady_clock::now() + interval * i / samples_.size();
      while (!stop_.load()) {
        std::this_thread::sleep_until(next);
        next += interval;
        uint64_t latency_ns = 0;
        std::string error = producer->CommitOne(&latency_ns);
        if (!error.empty()) {
          std::lock_guard lock(error_mutex_);
          if (error_.empty()) error_ = error;
          return;
        }
        samples_[i].Add(latency_ns);
      }
    });
  }
}

PacedLoad::~PacedLoad() {
  LatencySummary ignored;
  if (!threads_.empty()) Stop(&ignored);
}

std::string PacedLoad::Stop(LatencySummary* summary, double* commits_per_s) {
  stop_ = true;
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  *summary = LatencySamples::Summarize(samples_);
  if (commits_per_s != nullptr) {
    size_t commits = 0;
    for (const LatencySamples& each : samples_) commits += each.count();
    *commits_per_s = static_cast<double>(commits) * 1e9 / static_cast<double>(NowNs() - start_ns_);
  }
  return error_;
}

}  // namespace wharf::bench
