#include "bench/w3_shape.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "bench/producer_driver.h"
#include "bench/run_median.h"

namespace wharf::bench {
namespace {

LatencySummary SummarizeNs(const std::vector<uint64_t>& samples_ns) {
  std::vector<LatencySamples> one;
  one.emplace_back(samples_ns.size());
  for (const uint64_t sample : samples_ns) one.front().Add(sample);
  return LatencySamples::Summarize(one);
}

}  // namespace

W3Measurement MedianOf(const std::vector<W3Measurement>& runs) {
  const SucceededRuns<W3Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  auto median_latency = [&](LatencySummary W3Measurement::*field) {
    return LatencySummary{ok.MedianBy([&](const W3Measurement& m) { return (m.*field).p50_us; }),
                          ok.MedianBy([&](const W3Measurement& m) { return (m.*field).p99_us; }),
                          ok.MedianBy([&](const W3Measurement& m) { return (m.*field).p999_us; })};
  };
  W3Measurement result;
  result.ack_to_seen = median_latency(&W3Measurement::ack_to_seen);
  result.start_to_seen = median_latency(&W3Measurement::start_to_seen);
  result.commit = median_latency(&W3Measurement::commit);
  result.commits_per_s = ok.MedianOf(&W3Measurement::commits_per_s);
  result.facts = static_cast<uint64_t>(ok.MedianOf(&W3Measurement::facts));
  result.early = static_cast<uint64_t>(ok.MedianOf(&W3Measurement::early));
  return result;
}

W3Recorder::W3Recorder(size_t capacity)
    : start_ns_(capacity, 0),
      ack_ns_(capacity, 0),
      seen_ns_(std::make_unique<std::atomic<uint64_t>[]>(capacity)) {
  for (size_t i = 0; i < capacity; ++i) seen_ns_[i].store(0, std::memory_order_relaxed);
}

bool W3Recorder::WaitSeen(size_t count, double timeout_s) const {
  const uint64_t deadline_ns = NowNs() + static_cast<uint64_t>(timeout_s * 1e9);
  while (seen_count_.load(std::memory_order_acquire) < count) {
    if (NowNs() >= deadline_ns) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

W3Measurement W3Recorder::Summarize(size_t committed, double elapsed_s) const {
  W3Measurement m;
  m.facts = committed;
  m.commits_per_s = elapsed_s > 0 ? static_cast<double>(committed) / elapsed_s : 0;
  std::vector<uint64_t> ack_to_seen, start_to_seen, commit;
  ack_to_seen.reserve(committed);
  start_to_seen.reserve(committed);
  commit.reserve(committed);
  size_t missing = 0;
  for (size_t i = 0; i < committed; ++i) {
    const uint64_t seen = seen_ns_[i].load(std::memory_order_relaxed);
    if (seen == 0) {
      ++missing;
      continue;
    }
    commit.push_back(ack_ns_[i] - start_ns_[i]);
    start_to_seen.push_back(seen > start_ns_[i] ? seen - start_ns_[i] : 0);
    if (seen < ack_ns_[i]) ++m.early;
    ack_to_seen.push_back(seen > ack_ns_[i] ? seen - ack_ns_[i] : 0);
  }
  if (missing > 0) {
    m.error = std::to_string(missing) + " of " + std::to_string(committed) +
              " committed facts never reached the consumer";
  }
  m.ack_to_seen = SummarizeNs(ack_to_seen);
  m.start_to_seen = SummarizeNs(start_to_seen);
  m.commit = SummarizeNs(commit);
  return m;
}

size_t W3Capacity(const W3Shape& shape) {
  return static_cast<size_t>(std::ceil(shape.rate_per_s * shape.duration_s)) + 1;
}

PacedResult DrivePaced(const W3Shape& shape, size_t capacity,
                       const std::function<std::string(size_t index)>& commit_one) {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration<double>(1.0 / shape.rate_per_s);
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(shape.duration_s));
  PacedResult result;
  for (size_t i = 0; i < capacity; ++i) {
    const Clock::time_point due =
        start + std::chrono::duration_cast<Clock::duration>(period * static_cast<double>(i));
    if (due >= end || Clock::now() >= end) break;
    std::this_thread::sleep_until(due);
    result.error = commit_one(i);
    if (!result.error.empty()) break;
    result.committed = i + 1;
  }
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace wharf::bench
