// W5-recover (see shared/WORKLOAD.md): the cost of a restart. A database holding many facts (W1's
// shape, loaded like W2's) and 8 projection consumers whose cursors sit at mixed positions
// (consumer c at c/8 of the facts); then, in a fresh process, the time from Engine::Open until a
// handler is entered, and the resident memory after the open.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wharf::bench {

inline constexpr char kW5Name[] = "W5-recover";
inline constexpr int kW5Consumers = 8;
inline constexpr uint64_t kW5DefaultFacts = 10000000;
inline constexpr uint32_t kW5Batch = 100;
// A restart must deliver its first fact within this long, or the run fails.
inline constexpr double kW5Timeout_s = 120;

// One restart, measured in a process of its own (so that its memory is the restart's alone).
struct W5Restart {
  double open_ms = 0;                    // Engine::Open (reference: rocksdb::DB::Open read-only)
  double open_to_first_delivery_ms = 0;  // Open called -> first handler entered (first fact read)
  double rss_after_open_bytes = 0;       // VmRSS right after the open
  double rss_at_first_delivery_bytes = 0;
  std::string error;
};

// What one run measured. A non-empty `error` means the numbers are meaningless.
struct W5Measurement {
  uint64_t facts = 0;
  double precommit_s = 0;  // loading and positioning the cursors, for information
  double db_bytes = 0;     // the database directory's files
  W5Restart cold;          // the database's files evicted from the page cache before the open
  W5Restart warm;          // right after the cold one, its files cached as it left them
  W5Restart rocksdb_cold;  // reference: raw RocksDB opening the same directory read-only, cold
  std::string error;
};

// Median of each field over the runs that succeeded; if every run failed, the first error.
W5Measurement MedianOf(const std::vector<W5Measurement>& runs);

// The child process's answer: one line of numbers, or "error: ..." (ParseW5Restart's input).
std::string FormatW5Restart(const W5Restart& restart);
W5Restart ParseW5Restart(const std::string& line);

}  // namespace wharf::bench
