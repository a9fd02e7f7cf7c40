// W4-fanout (see shared/WORKLOAD.md): facts pre-committed in W1's shape, then 8 projection
// consumers on 16 partitions delivered by 2 runtime instances sharing the consumers' leases; then
// the hand-over of one instance's consumers to the other while facts keep coming.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wharf::bench {

inline constexpr char kW4Name[] = "W4-fanout";
inline constexpr int kW4Consumers = 8;
inline constexpr int kW4Instances = 2;  // "a" and "b"
inline constexpr uint32_t kW4Batch = 100;
// Short leases so that the fair share settles (and a stopped instance's consumers move) fast.
inline constexpr uint32_t kW4LeaseMs = 3000;
inline constexpr uint32_t kW4RenewMs = 500;
// Facts committed in the background during the hand-over: facts / kW4BackgroundDivisor.
inline constexpr uint64_t kW4BackgroundDivisor = 10;
inline constexpr int kW4BackgroundBatch = 10;  // facts per background transaction
inline constexpr double kW4LagSampleMs = 50;
// Every phase must finish within this long, or the run fails.
inline constexpr double kW4Timeout_s = 300;

// What one run measured. A non-empty `error` means the numbers are meaningless.
struct W4Measurement {
  uint64_t facts = 0;                            // pre-committed
  double facts_per_s = 0;                        // consumers x facts / fanout_s
  double fanout_s = 0;                           // Start() of "a" until the last consumer caught up
  std::vector<double> per_consumer_facts_per_s;  // facts / (its own catch-up time)
  double max_lag = 0;           // fan-out: max over 50-ms samples of committed - handled
  double instance_a_share = 0;  // fan-out: fraction of the deliveries done by instance "a"
  double lease_settle_ms = 0;   // fan-out: last lease change after Start() of "a"
  double lease_changes = 0;     // fan-out: lease acquisitions + hand-overs, both instances
  double handover_ms = 0;       // Stop() of "a" returned -> "b" delivers all of a's consumers
  double stop_ms = 0;           // the Stop() call of "a"
  double handed_over = 0;       // consumers "a" held when stopped
  double handover_max_lag = 0;  // hand-over phase: max over 50-ms samples of committed - handled
  double background_facts = 0;  // committed during the hand-over phase
  double precommit_s = 0;       // loading, for information
  double duplicates = 0;        // handler calls beyond one per (consumer, fact)
  double warnings = 0;          // runtime warnings (lease-lost, refused-stale-epoch, ...)
  std::string first_warning;
  std::string error;
};

// Median of each field over the runs that succeeded (per consumer for the per-consumer rates); if
// every run failed, the first error.
W4Measurement MedianOf(const std::vector<W4Measurement>& runs);

}  // namespace wharf::bench
