// W1-append (see shared/WORKLOAD.md): the shape of the workload, what one run measured, and the
// transaction contents. Shared by Wharf and the reference systems so that every system commits
// exactly the same transactions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/latency_samples.h"

namespace wharf::bench {

inline constexpr char kW1Name[] = "W1-append";
inline constexpr char kW1FactType[] = "OrderCreated";
inline constexpr char kW1StateTable[] = "orders";
inline constexpr size_t kW1PayloadBytes = 100;
inline constexpr size_t kW1KeyBytes = 16;
inline constexpr int kW1DistinctKeys = 64;
inline constexpr size_t kW1StateKeyBytes = 16;
inline constexpr size_t kW1StateValueBytes = 32;
// The references place facts in as many partitions as the engine's default (EngineOptions).
inline constexpr uint32_t kW1Partitions = 16;

struct W1Shape {
  int producers = 1;      // P: threads committing concurrently
  int batch = 1;          // B: facts per transaction
  double duration_s = 3;  // how long the producers keep committing
};

// What one run of one system measured. A non-empty `error` means the numbers are meaningless.
struct W1Measurement {
  double facts_per_s = 0;
  double commits_per_s = 0;
  double facts_per_sync = 0;  // 0: the system does not tell
  LatencySummary latency;
  std::string error;
};

// Median of each field over runs (each field on its own: the runs are repeats of one experiment).
// Failed runs are left out; if every run failed, returns the first error.
W1Measurement MedianOf(const std::vector<W1Measurement>& runs);

// How the facts' partition keys are drawn: W1's, uniform over kW1DistinctKeys keys, or
// W2-skewed's, Zipf over kZipfKeyCount keys (zipf_keys.h). Both name key i "customer-%07d" of i.
enum class KeyDistribution { kUniform, kZipf };

// One producer's transaction contents: keys drawn from `keys` (16-byte partition keys), fresh
// random (incompressible) payloads, a unique 16-byte state key per transaction. Not
// thread-safe: one per producer thread. The same producer index draws the same sequence.
class W1TxnSource {
 public:
  explicit W1TxnSource(int producer_index, KeyDistribution keys = KeyDistribution::kUniform);

  // Index of the next fact's partition key: in [0, kW1DistinctKeys) for kUniform, in
  // [0, kZipfKeyCount) for kZipf.
  int NextKeyIndex();
  // The partition key with that index (< kZipfKeyCount); lives for the whole program.
  static std::string_view Key(int key_index);
  // kW1PayloadBytes random bytes, valid until the next call.
  std::string_view NextPayload();
  // A state key not used before by any producer, valid until the next call.
  std::string_view NextStateKey();
  // kW1StateValueBytes random bytes, valid until the next call.
  std::string_view NextStateValue();

 private:
  uint64_t NextRandom();
  void FillRandom(char* out, size_t bytes);

  uint64_t random_state_;
  KeyDistribution keys_;
  uint64_t producer_index_;
  uint64_t state_keys_issued_ = 0;
  std::array<char, kW1PayloadBytes> payload_{};
  std::array<char, kW1StateKeyBytes + 1> state_key_{};  // + 1: snprintf's terminator
  std::array<char, kW1StateValueBytes> state_value_{};
};

}  // namespace wharf::bench
