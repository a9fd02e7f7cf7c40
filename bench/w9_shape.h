// W9-contended (see shared/WORKLOAD.md): read-modify-write transactions under contention. 16
// threads; each transaction reads one of K counters (drawn uniformly), writes it plus one and
// emits a fact carrying the new value; every thread runs a fixed number of successful
// transactions. The shape, what one run measured, the driver every system runs under, and the
// check of the final state that every run ends with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW9Name[] = "W9-contended";
inline constexpr char kW9FactType[] = "CounterIncremented";
inline constexpr char kW9Table[] = "counters";
inline constexpr int kW9Threads = 16;
inline constexpr size_t kW9KeyBytes = 16;   // "counter-00000000"
inline constexpr size_t kW9ValueBytes = 8;  // the count, big-endian (the fact's payload too)
inline const std::vector<int> kW9DefaultCounters = {1, 64};
inline constexpr int kW9CountersMax = 4096;  // --counters
// Successful transactions per thread when --transactions does not say: a few seconds per run for
// the slowest system on the 2-core VM (K = 1 serializes every system on one key).
uint64_t W9DefaultTransactionsPerThread(int counters);

// The reference systems of W9, in the order they are reported (--systems names).
inline constexpr char kW9Sqlite[] = "sqlite_full";
inline constexpr char kW9RocksDbOptimistic[] = "rocksdb_optimistic";
inline constexpr char kW9RocksDbPessimistic[] = "rocksdb_pessimistic";

struct W9Shape {
  int threads = kW9Threads;
  int counters = 1;                      // K
  uint64_t transactions_per_thread = 0;  // successful ones
  uint64_t transactions() const { return static_cast<uint64_t>(threads) * transactions_per_thread; }
};

// Key of counter `index` (< kW9CountersMax): "counter-%08d", 16 bytes. Lives for the whole
// program.
std::string_view W9CounterKey(int index);
// The 8-byte big-endian encoding of a count, and back (false unless exactly 8 bytes).
std::string EncodeW9Count(uint64_t count);
bool DecodeW9Count(std::string_view bytes, uint64_t* count);

// What one run of one system measured. A non-empty `error` means the numbers are meaningless.
struct W9Measurement {
  double commits = 0;    // successful transactions (threads x transactions per thread)
  double elapsed_s = 0;  // from when every thread was ready until the last one finished
  double commits_per_s = 0;
  double conflicts = 0;  // attempts that were refused and run again (or waits that timed out)
  double conflicts_per_commit = 0;
  // One successful transaction from its first attempt's start until its commit returned, with
  // every retry (and backoff) between.
  LatencySummary latency;
  // Successful commits per WAL sync (group commit; 0 = the system does not tell), and Wharf's
  // mean sync round (0 = not told): with 16 threads each waiting for its commit, commits/s is
  // about commits_per_sync / the sync round.
  double commits_per_sync = 0;
  double sync_us_mean = 0;
  std::string error;
};

// Median of each field over the runs that succeeded; if every run failed, the first error.
W9Measurement MedianOf(const std::vector<W9Measurement>& runs);

// One thread's connection to the system under test.
class W9Client {
 public:
  virtual ~W9Client() = default;
  // Runs one transaction on counter `counter_index` until it commits: reads the count, writes it
  // plus one and emits the fact, in the system's own retry loop. Adds the attempts that were
  // refused (and run again) to *conflicts. Returns "" or an error that ends the run.
  virtual std::string Increment(int counter_index, uint64_t* conflicts) = 0;
};

// Runs shape.transactions_per_thread increments on each client's own thread (clients.size() ==
// shape.threads), counters drawn uniformly from [0, shape.counters) by a per-thread generator
// (the same sequence for every system), and measures. The first error stops every thread.
W9Measurement DriveW9(const std::vector<std::unique_ptr<W9Client>>& clients, const W9Shape& shape);

// The final state of a run: each counter's value, and the new values its facts carried in the
// system's order (the outbox order of that counter's key). Returns "" when exact — the counters
// add up to the committed transactions and each counter's facts carry 1, 2, ..., its value —
// or what is wrong.
std::string CheckW9Outcome(const W9Shape& shape, const std::vector<uint64_t>& counts,
                           const std::vector<std::vector<uint64_t>>& fact_values);

// The index of a counter key, or -1 when `key` is no counter key of a K = `counters` run.
int W9CounterIndex(std::string_view key, int counters);

// Machine-readable results: the system's name and its median.
struct W9SystemResult {
  std::string system;
  W9Measurement median;  // over the runs that succeeded
  int failed_runs = 0;
  std::string first_error;  // of the first run that failed (an inexact outcome fails a run)
};

// One K's results, every system measured in the same rounds.
struct W9Row {
  W9Shape shape;
  int runs = 0;
  std::vector<W9SystemResult> systems;  // Wharf first when measured, then the references
  double load_average_1m = 0;           // the machine's, when the last round ended
};

}  // namespace wharf::bench
