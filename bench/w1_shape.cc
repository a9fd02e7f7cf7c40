#include "bench/w1_shape.h"

#include <algorithm>
#include <cassert>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "bench/run_median.h"
#include "bench/zipf_keys.h"

namespace wharf::bench {

W1Measurement MedianOf(const std::vector<W1Measurement>& runs) {
  const SucceededRuns<W1Measurement> ok(runs);
  if (ok.empty()) return ok.Failed();
  auto median_latency = [&ok](double LatencySummary::*field) {
    return ok.MedianBy([field](const W1Measurement& run) { return run.latency.*field; });
  };
  W1Measurement result;
  result.facts_per_s = ok.MedianOf(&W1Measurement::facts_per_s);
  result.commits_per_s = ok.MedianOf(&W1Measurement::commits_per_s);
  result.facts_per_sync = ok.MedianOf(&W1Measurement::facts_per_sync);
  result.latency.p50_us = median_latency(&LatencySummary::p50_us);
  result.latency.p99_us = median_latency(&LatencySummary::p99_us);
  result.latency.p999_us = median_latency(&LatencySummary::p999_us);
  return result;
}

W1TxnSource::W1TxnSource(int producer_index, KeyDistribution keys)
    : random_state_(0x9e3779b97f4a7c15ull * static_cast<uint64_t>(producer_index + 1)),
      keys_(keys),
      producer_index_(static_cast<uint64_t>(producer_index)) {}

// splitmix64: cheap enough (a few ns per 8 bytes) that generating payloads does not show in the
// measurements, and its output does not compress.
uint64_t W1TxnSource::NextRandom() {
  uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void W1TxnSource::FillRandom(char* out, size_t bytes) {
  while (bytes > 0) {
    const uint64_t r = NextRandom();
    const size_t n = std::min(bytes, sizeof(r));
    std::memcpy(out, &r, n);
    out += n;
    bytes -= n;
  }
}

int W1TxnSource::NextKeyIndex() {
  if (keys_ == KeyDistribution::kZipf) return ZipfKeys::Skewed().Draw(NextRandom());
  return static_cast<int>(NextRandom() % kW1DistinctKeys);
}

std::string_view W1TxnSource::Key(int key_index) {
  // "customer-0000042": 16 bytes, built once (W1's 64 keys are the first of W2-skewed's).
  static_assert(kZipfKeyCount >= kW1DistinctKeys);
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> built(kZipfKeyCount);
    for (int i = 0; i < kZipfKeyCount; ++i) {
      char text[kW1KeyBytes + 1];
      std::snprintf(text, sizeof(text), "customer-%07d", i);
      built[i] = text;
    }
    return built;
  }();
  assert(key_index >= 0 && key_index < kZipfKeyCount);
  return keys[key_index];
}

std::string_view W1TxnSource::NextPayload() {
  FillRandom(payload_.data(), payload_.size());
  return {payload_.data(), payload_.size()};
}

std::string_view W1TxnSource::NextStateKey() {
  // "o" + 15 hex digits: producer index in the top 5 digits, a counter in the low 40 bits.
  const uint64_t id = (producer_index_ << 40) | (state_keys_issued_++ & ((1ull << 40) - 1));
  std::snprintf(state_key_.data(), state_key_.size(), "o%015" PRIx64, id);
  return {state_key_.data(), kW1StateKeyBytes};
}

std::string_view W1TxnSource::NextStateValue() {
  FillRandom(state_value_.data(), state_value_.size());
  return {state_value_.data(), state_value_.size()};
}

}  // namespace wharf::bench
