// W3-latency (see shared/WORKLOAD.md): one producer commits single-fact transactions (W1's shape:
// one fact and one state row) paced at a fixed rate; one consumer. Measured per fact: commit
// acknowledged (the commit call returned to the producer) -> consumer entered (handler called, or
// the reference's consumer saw it), and commit started -> consumer entered.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW3Name[] = "W3-latency";
inline constexpr char kW3ConsumerName[] = "w3-subscriber";
// After the producer stops, how long the consumer may take to see the last facts.
inline constexpr double kW3CatchUp_s = 10;

struct W3Shape {
  double rate_per_s = 1000;  // commits per second asked for
  double duration_s = 10;
  int workers = 2;  // Wharf's runtime workers
};

// What one run of one system measured. A non-empty `error` means the numbers are meaningless.
struct W3Measurement {
  LatencySummary ack_to_seen;    // commit acknowledged -> consumer entered; clamped at 0
  LatencySummary start_to_seen;  // commit started -> consumer entered
  LatencySummary commit;         // the commit call
  double commits_per_s = 0;      // achieved (a blocking producer cannot beat 1 / commit latency)
  uint64_t facts = 0;            // committed
  uint64_t early = 0;            // consumer entered before the commit call returned (clamped)
  std::string error;
};

// Median of each field over the runs that succeeded; if every run failed, the first error.
W3Measurement MedianOf(const std::vector<W3Measurement>& runs);

// One run's timestamps, one slot per fact (its index in commit order). The producer thread fills
// start and ack; any thread marks a fact seen (the first time counts).
class W3Recorder {
 public:
  explicit W3Recorder(size_t capacity);
  size_t capacity() const { return start_ns_.size(); }

  void Committed(size_t index, uint64_t start_ns, uint64_t ack_ns) {
    start_ns_[index] = start_ns;
    ack_ns_[index] = ack_ns;
  }
  // Out-of-range indexes are ignored (they are not ours).
  void Seen(size_t index, uint64_t now_ns) {
    if (index >= capacity()) return;
    uint64_t expected = 0;
    if (seen_ns_[index].compare_exchange_strong(expected, now_ns, std::memory_order_relaxed)) {
      seen_count_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Waits until `count` facts were seen or `timeout_s` passed; returns whether they were.
  bool WaitSeen(size_t count, double timeout_s) const;
  // Latencies of facts [0, committed) after the producer finished; an error when some were never
  // seen.
  W3Measurement Summarize(size_t committed, double elapsed_s) const;

 private:
  std::vector<uint64_t> start_ns_;
  std::vector<uint64_t> ack_ns_;
  std::unique_ptr<std::atomic<uint64_t>[]> seen_ns_;
  std::atomic<size_t> seen_count_{0};
};

struct PacedResult {
  size_t committed = 0;
  double elapsed_s = 0;
  std::string error;
};

// Calls commit_one(i) for i = 0, 1, ... at start + i / rate (std::this_thread::sleep_until; when
// behind schedule, at once) until duration_s has passed or the recorder is full. commit_one
// returns "" or an error (which stops the run) and records its own timestamps.
PacedResult DrivePaced(const W3Shape& shape, size_t capacity,
                       const std::function<std::string(size_t index)>& commit_one);

// Slots a run needs: every paced commit fits.
size_t W3Capacity(const W3Shape& shape);

}  // namespace wharf::bench
