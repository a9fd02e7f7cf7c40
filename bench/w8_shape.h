// W8-slow-subscriber (see shared/WORKLOAD.md): facts pre-committed with 10 000 distinct keys on 16
// partitions, then one asynchronous subscriber whose handler waits 5 ms per fact (a timer, as a
// network call would) — once per key_concurrency 1, 16, 64, 256. The shape, what one run measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wharf::bench {

inline constexpr char kW8Name[] = "W8-slow-subscriber";
inline constexpr uint64_t kW8DefaultFacts = 200000;
// W1TxnSource::Key's first 10 000 keys ("customer-0000000" ...), drawn uniformly.
inline constexpr int kW8DistinctKeys = 10000;
inline constexpr uint32_t kW8Partitions = 16;
inline constexpr uint64_t kW8HandlerDelayNs = 5'000'000;
inline const std::vector<int> kW8DefaultKeyConcurrency = {1, 16, 64, 256};
// Each consumption stops after this long (--seconds), and its rate is over what it consumed by
// then: key_concurrency 1 does 16 lanes x 200 facts/s, a minute for 200 000 facts.
inline constexpr double kW8DefaultBudget_s = 5;
// The timer's capacity probe: this many dummy deliveries due at once.
inline constexpr uint64_t kW8TimerProbeItems = 300000;
// Facts/s that 16 lanes x k facts in flight x 5 ms allow: the bound of key_concurrency k.
double W8BoundFactsPerS(int key_concurrency);

// What one consumption (one key_concurrency) measured. A non-empty `error` means the numbers are
// meaningless.
struct W8Measurement {
  double facts_per_s = 0;        // facts_consumed / consume_s
  double facts_consumed = 0;     // facts done (first delivery finished) within the budget
  double facts_total = 0;        // pre-committed
  double consume_s = 0;          // Start() until the last fact was done, or the budget
  double subset = 0;             // 1: the budget ended the consumption before every fact was done
  double most_in_handler = 0;    // most deliveries started and not yet done at one moment
  double cpu_s = 0;              // CPU of the whole process over consume_s (all threads)
  double cpu_s_per_million = 0;  // cpu_s per million facts consumed
  // The same CPU by thread, microseconds per fact consumed: the runtime's workers (dispatch,
  // reads, the window, the handler), the timer thread (completions, Delivery::Done), the
  // committer (cursor commits), everything else (io_uring, RocksDB, the runner).
  double workers_us_per_fact = 0;
  double timer_us_per_fact = 0;
  double committer_us_per_fact = 0;
  double other_us_per_fact = 0;
  double order_violations = 0;    // a fact started after a later fact of its key had started
  double overlaps = 0;            // a fact started while another fact of its key was running
  double duplicates = 0;          // handler calls beyond one per fact
  double handler_calls = 0;       // all handler calls within the budget
  double timer_late_us_mean = 0;  // how late the timer completed deliveries, on average
  double timer_per_wakeup = 0;    // deliveries the timer completed per wake-up
  double precommit_s = 0;         // loading, for information
  std::string error;
};

// The run succeeded and the engine kept its promises: no per-key order violation, no overlap,
// no duplicate. (The runner exits 1 otherwise.)
bool W8Clean(const W8Measurement& m);

// Median of each field over the runs that succeeded; if every run failed, the first error.
W8Measurement MedianOf(const std::vector<W8Measurement>& runs);

// Every key_concurrency's runs, and the timer's own capacity.
struct W8Row {
  uint64_t facts = 0;  // asked for (--facts)
  int workers = 2;
  int runs = 0;
  double budget_s = 0;
  std::vector<int> key_concurrency;
  std::vector<W8Measurement> wharf;  // median per key_concurrency, same order
  double timer_capacity_per_s = 0;   // dummy deliveries completed per second by the timer thread
  std::string timer_error;
};

}  // namespace wharf::bench
